//! CPU tests of `gemm.pack_weight` (layout v3): every format round-trips exactly, the scales are
//! in the swizzled 128×4 layout of b12x-quant (block FP8: padded f32 rows), FP4 codes are the
//! checkpoint's words bit-permuted in place (every other format's codes untouched), and
//! malformed weights (also NaN codes or scales, UE4M3 scale bytes with bit 7) are typed errors
//! naming the bad part.

use b12x_core::Error;
use b12x_gemm::blockscaled::pack::{
    block_scale_ld, mx_live_scale_range, pack_host, sm90_permute_word, unpack_host, WeightFormat, OP,
};
use b12x_gemm::blockscaled::Weight;
use b12x_quant::block::{
    quantize_block_fp8, quantize_mx, quantize_nvfp4, quantize_tensor_fp8, Fp8ScaleKind, Mx, MxOptions, Nvfp4,
};
use b12x_quant::codec::Element;
use b12x_quant::layout::{swizzled_len, swizzled_offset};

fn values(n: usize, k: usize) -> Vec<f32> {
    (0..n * k).map(|i| ((i * 7919 % 113) as f32 - 56.0) / 9.0).collect()
}

fn weights(n: usize, k: usize) -> Vec<(Weight, WeightFormat)> {
    let w = values(n, k);
    vec![
        (Weight::Nvfp4(quantize_nvfp4(&w, n, k, Some(7.5)).unwrap()), WeightFormat::Nvfp4),
        (Weight::Mx(quantize_mx(&w, n, k, Element::E2M1, MxOptions::default()).unwrap()), WeightFormat::Mxfp4),
        (Weight::Mx(quantize_mx(&w, n, k, Element::E4M3, MxOptions::default()).unwrap()), WeightFormat::Mxfp8),
        (
            Weight::BlockFp8(quantize_block_fp8(&w, n, k, (128, 128), Fp8ScaleKind::F32).unwrap()),
            WeightFormat::BlockFp8 { tile: 128, scale: Fp8ScaleKind::F32 },
        ),
        (
            Weight::BlockFp8(quantize_block_fp8(&w, n, k, (32, 32), Fp8ScaleKind::Ue8m0).unwrap()),
            WeightFormat::BlockFp8 { tile: 32, scale: Fp8ScaleKind::Ue8m0 },
        ),
        (
            Weight::BlockFp8(quantize_block_fp8(&w, n, k, (32, 32), Fp8ScaleKind::F32).unwrap()),
            WeightFormat::BlockFp8 { tile: 32, scale: Fp8ScaleKind::F32 },
        ),
        (
            Weight::BlockFp8(quantize_block_fp8(&w, n, k, (128, 128), Fp8ScaleKind::Ue8m0).unwrap()),
            WeightFormat::BlockFp8 { tile: 128, scale: Fp8ScaleKind::Ue8m0 },
        ),
        (Weight::TensorFp8 { n, k, q: quantize_tensor_fp8(&w, None).unwrap() }, WeightFormat::TensorFp8),
    ]
}

/// The checkpoint's FP4 codes with every little-endian 32-bit word permuted (layouts v2 and v3).
fn permuted(codes: &[u8]) -> Vec<u8> {
    codes
        .chunks_exact(4)
        .flat_map(|b| sm90_permute_word(u32::from_le_bytes([b[0], b[1], b[2], b[3]])).to_le_bytes())
        .collect()
}

#[test]
fn the_fp4_permutation_is_a_bijection_on_bits() {
    for bit in 0..32 {
        let o = sm90_permute_word(1 << bit);
        assert_eq!(o.count_ones(), 1, "bit {bit}");
    }
    let all: u32 = (0..32).map(|b| sm90_permute_word(1 << b)).fold(0, |a, o| a | o);
    assert_eq!(all, u32::MAX);
}

#[test]
fn every_format_round_trips_and_keeps_its_codes() {
    // N = 200: two 128-row scale tiles, the second partial; K = 320: K/16 = 20, K/32 = 10 (a
    // partial 4-column tile); block FP8 edge tiles partial in both dimensions.
    let (n, k) = (200, 320);
    for (w, format) in weights(n, k) {
        let p = pack_host(&w).unwrap();
        assert_eq!(p.format, format);
        assert_eq!((p.n, p.k), (n, k));
        assert_eq!(w.format().unwrap(), format);
        assert_eq!(unpack_host(&p), w, "{format:?}");
        assert_eq!(p.codes.len(), n * format.code_bytes(k));
        match &w {
            Weight::Nvfp4(q) => {
                assert_eq!(p.codes, permuted(&q.codes));
                assert_eq!(p.global, q.enc);
                assert_eq!(p.scales.len(), swizzled_len(n, k / 16));
            }
            Weight::Mx(q) => {
                let want = if format == WeightFormat::Mxfp4 { permuted(&q.codes) } else { q.codes.clone() };
                assert_eq!(p.codes, want);
                assert_eq!(p.scales.len(), swizzled_len(n, k / 32));
            }
            Weight::BlockFp8(q) => {
                assert_eq!(p.codes, q.codes);
                // f32 rows of ⌈K/G⌉ scales padded with zeros to a multiple of 4.
                let (g, gc) = (q.tile.0, k.div_ceil(q.tile.0));
                let ld = block_scale_ld(k, g);
                assert_eq!(ld % 4, 0);
                assert_eq!(p.scales.len(), 4 * n.div_ceil(g) * ld);
                let at = |r: usize, c: usize| {
                    let b = &p.scales[4 * (r * ld + c)..][..4];
                    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
                };
                for r in 0..n.div_ceil(g) {
                    for c in 0..ld {
                        let want = if c < gc { q.scales.value(r * gc + c) } else { 0.0 };
                        assert_eq!(at(r, c).to_bits(), want.to_bits(), "{format:?} ({r}, {c})");
                    }
                }
            }
            Weight::TensorFp8 { q, .. } => {
                assert!(p.scales.is_empty());
                assert_eq!(p.global, q.scale);
            }
        }
    }
}

#[test]
fn block_scales_are_in_the_swizzled_layout() {
    let (n, k) = (200, 320);
    let Weight::Nvfp4(q) = weights(n, k).remove(0).0 else { unreachable!() };
    let p = pack_host(&Weight::Nvfp4(q.clone())).unwrap();
    let cols = k / 16;
    for (r, c) in [(0, 0), (1, 0), (31, 3), (32, 0), (127, 19), (130, 5), (199, 19)] {
        assert_eq!(p.scales[swizzled_offset(r, c, cols)], q.scales[r * cols + c], "({r}, {c})");
    }
    // Row 0's first four scales are the first four bytes; rows 32 apart interleave by 4 bytes.
    assert_eq!(&p.scales[..4], &q.scales[..4]);
    assert_eq!(p.scales[4], q.scales[32 * cols]);
    // Padding (rows 200..255, column 20..23 of the last tile) is zero.
    assert_eq!(p.scales[swizzled_offset(255, 0, cols)], 0);
}

fn field_of(r: b12x_core::Result<b12x_gemm::blockscaled::pack::PackedHost>) -> String {
    match r {
        Err(Error::InvalidQuery { op, field, .. }) => {
            assert_eq!(op, OP);
            field.to_string()
        }
        Err(Error::Shape { tensor, .. }) => format!("shape:{tensor}"),
        other => panic!("expected a typed error, got {other:?}"),
    }
}

#[test]
fn malformed_weights_are_typed_errors() {
    let nv = |k: usize, codes: usize, scales: usize, enc: f32| {
        Weight::Nvfp4(Nvfp4 { rows: 2, k, codes: vec![0; codes], scales: vec![0x38; scales], enc })
    };
    assert!(pack_host(&nv(32, 32, 4, 1.0)).is_ok());
    assert_eq!(field_of(pack_host(&nv(24, 24, 2, 1.0))), "k"); // K not a multiple of 16
    assert_eq!(field_of(pack_host(&nv(32, 30, 4, 1.0))), "shape:codes");
    assert_eq!(field_of(pack_host(&nv(32, 32, 3, 1.0))), "shape:scales");
    assert_eq!(field_of(pack_host(&nv(32, 32, 4, 0.0))), "enc");
    assert_eq!(field_of(pack_host(&nv(32, 32, 4, f32::NAN))), "enc");
    assert_eq!(field_of(pack_host(&nv(0, 0, 0, 1.0))), "shape");
    let mx = |element, k: usize| Weight::Mx(Mx { element, rows: 1, k, codes: vec![0; k], scales: vec![127; k / 32] });
    assert_eq!(field_of(pack_host(&mx(Element::E5M2, 32))), "element");
    assert_eq!(field_of(pack_host(&mx(Element::E4M3, 48))), "k");
    // Activation tiles are not weight tiles.
    let act = quantize_block_fp8(&values(2, 128), 2, 128, (1, 128), Fp8ScaleKind::F32).unwrap();
    assert_eq!(field_of(pack_host(&Weight::BlockFp8(act))), "tile");
    // Per-tensor FP8 with a zero scale or the wrong number of codes.
    let mut t = quantize_tensor_fp8(&values(2, 8), None).unwrap();
    t.scale = 0.0;
    assert_eq!(field_of(pack_host(&Weight::TensorFp8 { n: 2, k: 8, q: t })), "scale");
    let t = quantize_tensor_fp8(&values(2, 8), None).unwrap();
    assert_eq!(field_of(pack_host(&Weight::TensorFp8 { n: 3, k: 8, q: t })), "shape:codes");
}

#[test]
fn nan_codes_and_scales_are_refused() {
    let (n, k) = (40, 64);
    for (w, format) in weights(n, k) {
        // An E4M3 NaN code (either sign) in an FP8 weight.
        for nan in [0x7Fu8, 0xFF] {
            let mut bad = w.clone();
            match &mut bad {
                Weight::Mx(q) if format == WeightFormat::Mxfp8 => q.codes[77] = nan,
                Weight::BlockFp8(q) => q.codes[77] = nan,
                Weight::TensorFp8 { q, .. } => q.codes[77] = nan,
                _ => continue,
            }
            assert_eq!(field_of(pack_host(&bad)), "codes", "{format:?} {nan:#x}");
        }
        // NVFP4: UE4M3 0x7F (NaN) and any byte with bit 7 (no sign in an unsigned scale).
        if let Weight::Nvfp4(q) = &w {
            for byte in [0x7Fu8, 0x80, 0xFF] {
                let mut bad = q.clone();
                bad.scales[3] = byte;
                assert_eq!(field_of(pack_host(&Weight::Nvfp4(bad))), "scales", "UE4M3 {byte:#x}");
            }
            let mut ok = q.clone();
            ok.scales[3] = 0x7E; // 448, the largest finite UE4M3
            assert!(pack_host(&Weight::Nvfp4(ok)).is_ok());
        }
        // A NaN block scale: UE8M0 0xFF, a non-finite f32.
        let mut bad = w.clone();
        match &mut bad {
            Weight::Mx(q) => q.scales[1] = 0xFF,
            Weight::BlockFp8(q) => match &mut q.scales {
                b12x_quant::block::Fp8Scales::F32(v) => v[0] = f32::INFINITY,
                b12x_quant::block::Fp8Scales::Ue8m0(v) => v[0] = 0xFF,
            },
            _ => continue,
        }
        assert_eq!(field_of(pack_host(&bad)), "scales", "{format:?}");
    }
}

#[test]
fn mx_scale_range_skips_blocks_of_zeros() {
    // Rows of 64 k: two 32-k blocks per row, 3 rows; zero blocks (±0 codes) get scale byte 0 from
    // the quantizers and must not narrow the range the kernels hold exactly.
    let (n, k) = (3, 64);
    let mut x = values(n, k);
    x[32..64].iter_mut().for_each(|v| *v = 0.0); // row 0, block 1
    x[128..160].iter_mut().for_each(|v| *v = -0.0); // row 2, block 0
    for element in [Element::E2M1, Element::E4M3] {
        let q = quantize_mx(&x, n, k, element, MxOptions::default()).unwrap();
        assert_eq!((q.scales[1], q.scales[4]), (0, 0), "{element:?}: zero blocks take scale byte 0");
        let live: Vec<u8> = [0, 2, 3, 5].iter().map(|&i| q.scales[i]).collect();
        let want = (*live.iter().min().unwrap(), *live.iter().max().unwrap());
        assert!(want.0 > 100, "{element:?}: {want:?}");
        assert_eq!(mx_live_scale_range(&q), want, "{element:?}");
        // A tiny non-zero value in a block brings its scale into the range.
        let mut y = x.clone();
        y[40] = 1e-30;
        let q = quantize_mx(&y, n, k, element, MxOptions::default()).unwrap();
        assert_eq!(mx_live_scale_range(&q).0, q.scales[1], "{element:?}");
        // All zeros: any range will do.
        let z = quantize_mx(&vec![0.0; n * k], n, k, element, MxOptions::default()).unwrap();
        assert_eq!(mx_live_scale_range(&z), (127, 127));
    }
}
