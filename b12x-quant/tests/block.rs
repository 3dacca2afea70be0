//! CPU tests of the block formats and the scale layouts: error bounds that a wrong but
//! self-consistent codec cannot meet, special-value blocks, shapes and typed errors.
//!
//! Round-trip bounds (x̂ = dequantize(quantize(x)); "scaled" = x divided by its block scale):
//! - MXFP8 / block FP8 / per-tensor FP8 (E4M3): |x̂ − x| ≤ 2^-4·|x| where |scaled| ≥ 2^-6 (E4M3
//!   normal range), ≤ s·2^-10 below it (half the subnormal step), plus 2^-20·|x| for the f32
//!   scale arithmetic of the non-power-of-two scales.
//! - MXFP4 (E2M1): |x̂ − x| ≤ 2^-2·|x| where |scaled| ≥ 1, ≤ s·2^-2 below it.
//! - NVFP4, blocks whose UE4M3 scale is in its normal range: |x̂ − x| ≤ max(|x|/4, fs/(4·enc))
//!   plus 2^-20·|x|. The E2M1 rounding error is at most |y|/4 or 1/4 of the scaled y; a
//!   saturated element overshoots by at most 6·2^-4/(1 − 2^-4), also under |y|/4, because the
//!   UE4M3 scale rounds by at most 2^-4.

use b12x_quant::block::*;
use b12x_quant::codec::{ue4m3_decode, ue8m0_decode, Element};
use b12x_quant::layout::*;
use rstest::rstest;

/// Seeded xorshift64*: values whose magnitude varies by 2^±8 from block to block.
fn data(n: usize, block: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut out = Vec::with_capacity(n);
    let mut mag = 1.0f32;
    for i in 0..n {
        if i % block == 0 {
            mag = 2f32.powf(next() * 16.0 - 8.0);
        }
        let u = next() + next() + next() - 1.5; // roughly normal, |u| ≤ 1.5
        out.push(u * mag);
    }
    out
}

fn check_e4m3_bound(x: f32, xh: f32, s: f32, what: &str) {
    let err = (xh - x).abs();
    let bound = if (x / s).abs() >= 2f32.powi(-6) { x.abs() / 16.0 } else { s * 2f32.powi(-10) };
    assert!(err <= bound + x.abs() * 2f32.powi(-20), "{what}: x {x:e} -> {xh:e} (s {s:e}), err {err:e} > {bound:e}");
}

#[rstest]
#[case::ceil_pow2(ScaleRule::CeilPow2)]
#[case::ocp_floor(ScaleRule::OcpFloor)]
fn mxfp8_round_trip_is_within_the_e4m3_bound(#[case] rule: ScaleRule) {
    let (rows, k) = (7, 4096);
    let x = data(rows * k, 32, 1);
    let q = quantize_mx(&x, rows, k, Element::E4M3, MxOptions { rule, amax_floor: None }).unwrap();
    assert_eq!((q.codes.len(), q.scales.len()), (rows * k, rows * k / 32));
    let xh = dequantize_mx(&q);
    for (i, (&v, &vh)) in x.iter().zip(&xh).enumerate() {
        let s = ue8m0_decode(q.scales[i / 32]);
        if rule == ScaleRule::OcpFloor && (v / s).abs() > 448.0 {
            assert_eq!(vh.abs(), 448.0 * s, "saturated element {i}");
            continue;
        }
        check_e4m3_bound(v, vh, s, "MXFP8");
    }
    if rule == ScaleRule::CeilPow2 {
        // The default rule never saturates: every scaled element is within ±448.
        for (i, &v) in x.iter().enumerate() {
            assert!((v / ue8m0_decode(q.scales[i / 32])).abs() <= 448.0, "element {i} would saturate");
        }
    }
}

#[test]
fn mxfp4_round_trip_is_within_the_e2m1_bound() {
    let (rows, k) = (5, 1536);
    let x = data(rows * k, 32, 2);
    let q = quantize_mx(&x, rows, k, Element::E2M1, MxOptions::default()).unwrap();
    assert_eq!((q.codes.len(), q.scales.len()), (rows * k / 2, rows * k / 32));
    let xh = dequantize_mx(&q);
    for (i, (&v, &vh)) in x.iter().zip(&xh).enumerate() {
        let s = ue8m0_decode(q.scales[i / 32]);
        let bound = if (v / s).abs() >= 1.0 { v.abs() / 4.0 } else { s / 4.0 };
        assert!((vh - v).abs() <= bound, "MXFP4 element {i}: {v:e} -> {vh:e} (s {s:e})");
        assert!((v / s).abs() <= 6.0, "CeilPow2 must not saturate");
    }
}

#[test]
fn mx_scale_is_ceil_pow2_of_amax_over_max_finite() {
    // One block: amax 3.0 → 3/448 → 2^-7 (0.0078125 ≥ 0.0066964) → code 120.
    let mut x = vec![0.5f32; 32];
    x[7] = -3.0;
    let q = quantize_mx(&x, 1, 32, Element::E4M3, MxOptions::default()).unwrap();
    assert_eq!(q.scales, vec![120]);
    assert_eq!(dequantize_mx(&q)[7], -3.0);
    // OCP: floor(log2 3) − 8 = −7 as well here; amax 4 → 2 − 8 = −6 (code 121) vs ceil: 4/448 → 2^-6 too.
    let q = quantize_mx(&x, 1, 32, Element::E4M3, MxOptions { rule: ScaleRule::OcpFloor, amax_floor: None }).unwrap();
    assert_eq!(q.scales, vec![120]);
    // MXFP4: 3/6 = 0.5 → 2^-1 → code 126; elements 0.5/0.5 = 1, -3/0.5 = -6.
    let q = quantize_mx(&x, 1, 32, Element::E2M1, MxOptions::default()).unwrap();
    assert_eq!(q.scales, vec![126]);
    assert_eq!(&dequantize_mx(&q)[6..8], &[0.5, -3.0]);
}

#[rstest]
#[case::nan(f32::NAN)]
#[case::inf(f32::INFINITY)]
#[case::neg_inf(f32::NEG_INFINITY)]
fn a_non_finite_block_gets_a_nan_scale_and_leaves_others_alone(#[case] bad: f32) {
    let (rows, k) = (2, 128);
    let clean = data(rows * k, 32, 3);
    let mut x = clean.clone();
    x[64 + 5] = bad; // block 2
    for element in [Element::E4M3, Element::E2M1] {
        let q = quantize_mx(&x, rows, k, element, MxOptions::default()).unwrap();
        let c = quantize_mx(&clean, rows, k, element, MxOptions::default()).unwrap();
        assert_eq!(q.scales[2], 0xFF);
        let xh = dequantize_mx(&q);
        assert!(xh[64..96].iter().all(|v| v.is_nan()));
        let ch = dequantize_mx(&c);
        for i in (0..rows * k).filter(|i| !(64..96).contains(i)) {
            assert_eq!(xh[i].to_bits(), ch[i].to_bits(), "{element:?} element {i} changed");
        }
    }
    let q = quantize_nvfp4(&x, rows, k, Some(1.0)).unwrap();
    assert_eq!(q.scales[4], 0x7F); // block 4 of 16
    assert!(dequantize_nvfp4(&q)[64..80].iter().all(|v| v.is_nan()));
    let q = quantize_block_fp8(&x, rows, k, (1, 32), Fp8ScaleKind::F32).unwrap();
    assert!(q.scales.value(2).is_nan());
    let q = quantize_block_fp8(&x, rows, k, (1, 32), Fp8ScaleKind::Ue8m0).unwrap();
    assert!(matches!(&q.scales, Fp8Scales::Ue8m0(c) if c[2] == 0xFF));
    assert!(dequantize_block_fp8(&q)[64..96].iter().all(|v| v.is_nan()));
}

#[test]
fn zero_blocks_and_the_amax_floor() {
    let x = vec![0.0f32; 64];
    for element in [Element::E4M3, Element::E2M1] {
        let q = quantize_mx(&x, 1, 64, element, MxOptions::default()).unwrap();
        assert_eq!(q.scales, vec![0, 0]);
        assert!(q.codes.iter().all(|&c| c == 0));
    }
    // DeepSeek's FP4 floor 6·2^-126: ceil_pow2(6·2^-126 / 6) = 2^-126 (code 1).
    let floor = 6.0 * 2f32.powi(-126);
    let q = quantize_mx(&x, 1, 64, Element::E2M1, MxOptions { rule: ScaleRule::CeilPow2, amax_floor: Some(floor) })
        .unwrap();
    assert_eq!(q.scales, vec![1, 1]);
    let q = quantize_nvfp4(&x, 1, 64, None).unwrap();
    assert_eq!(q.enc, 1.0);
    assert!(q.scales.iter().all(|&s| s == 0) && q.codes.iter().all(|&c| c == 0));
    // Block FP8's floor 1e-4: scale 1e-4/448, codes 0.
    let q = quantize_block_fp8(&x, 1, 64, (1, 32), Fp8ScaleKind::F32).unwrap();
    assert_eq!(q.scales.value(0), 1e-4f32 * (1.0 / 448.0));
}

#[test]
fn nvfp4_round_trip_is_within_its_bound() {
    let (rows, k) = (4, 7168);
    // Block magnitudes within 2^±3 of each other keep every UE4M3 scale in its normal range.
    let x: Vec<f32> = data(rows * k, 16, 4).iter().map(|v| v.signum() * v.abs().powf(0.3)).collect();
    let q = quantize_nvfp4(&x, rows, k, None).unwrap();
    let a = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert_eq!(q.enc, 2688.0 / a);
    let xh = dequantize_nvfp4(&q);
    let mut checked = 0;
    for (i, (&v, &vh)) in x.iter().zip(&xh).enumerate() {
        let fs = ue4m3_decode(q.scales[i / 16]);
        if fs < 2f32.powi(-6) {
            continue;
        }
        checked += 1;
        let bound = (v.abs() / 4.0).max(fs / (4.0 * q.enc)) + v.abs() * 2f32.powi(-20);
        assert!((vh - v).abs() <= bound, "NVFP4 element {i}: {v:e} -> {vh:e} (fs {fs:e}, enc {:e})", q.enc);
    }
    assert!(checked > rows * k * 9 / 10, "only {checked} elements in normal-scale blocks");
}

#[test]
fn nvfp4_follows_the_reference_operation_order() {
    // A block whose r = 1/(fs·(1/enc)) is not enc/fs to the last bit.
    let enc = 3.0f32;
    let x: Vec<f32> = (0..16).map(|i| (i as f32 - 7.5) * 0.37).collect();
    let q = quantize_nvfp4(&x, 1, 16, Some(enc)).unwrap();
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let s = b12x_quant::codec::ue4m3_encode(enc * (amax / 6.0));
    assert_eq!(q.scales, vec![s]);
    let r = 1.0f32 / (ue4m3_decode(s) * (1.0f32 / enc));
    let want: Vec<u8> = x.iter().map(|&v| Element::E2M1.encode(v * r)).collect();
    assert_eq!(q.codes, b12x_quant::codec::pack_e2m1(&want));
}

#[rstest]
#[case::act_128(1, 128, Fp8ScaleKind::F32)]
#[case::act_64(1, 64, Fp8ScaleKind::Ue8m0)]
#[case::act_32(1, 32, Fp8ScaleKind::F32)]
#[case::weight_128(128, 128, Fp8ScaleKind::F32)]
#[case::weight_32_ue8m0(32, 32, Fp8ScaleKind::Ue8m0)]
fn block_fp8_round_trip_is_within_the_e4m3_bound(#[case] tr: usize, #[case] tc: usize, #[case] kind: Fp8ScaleKind) {
    // Weights: 200 × 300 has partial edge tiles in both directions (DeepSeek has 576-row weights).
    let (rows, k) = if tr == 1 { (3, 1024) } else { (200, 300) };
    let x = data(rows * k, tc, 5);
    let q = quantize_block_fp8(&x, rows, k, (tr, tc), kind).unwrap();
    let groups = rows.div_ceil(tr) * k.div_ceil(tc);
    match &q.scales {
        Fp8Scales::F32(v) => assert_eq!(v.len(), groups),
        Fp8Scales::Ue8m0(v) => assert_eq!(v.len(), groups),
    }
    let xh = dequantize_block_fp8(&q);
    let gc = k.div_ceil(tc);
    for (i, (&v, &vh)) in x.iter().zip(&xh).enumerate() {
        let s = q.scales.value((i / k / tr) * gc + (i % k) / tc);
        check_e4m3_bound(v, vh, s, "block FP8");
    }
}

#[test]
fn tensor_fp8_round_trip_and_specials() {
    let x = data(4096, 4096, 6);
    let q = quantize_tensor_fp8(&x, None).unwrap();
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert_eq!(q.scale, amax / 448.0);
    for (&v, &vh) in x.iter().zip(&dequantize_tensor_fp8(&q)) {
        check_e4m3_bound(v, vh, q.scale, "tensor FP8");
    }
    let q = quantize_tensor_fp8(&[f32::NAN, f32::INFINITY, -f32::INFINITY, 1.0], Some(0.5)).unwrap();
    assert_eq!(q.codes, vec![0x7F, 0x7E, 0xFE, 0x40]);
}

#[rstest]
#[case::mx_k(FormatError::KNotMultiple { what: "MX", k: 48, block: 32 })]
#[case::nvfp4_k(FormatError::KNotMultiple { what: "NVFP4", k: 24, block: 16 })]
#[case::act_k(FormatError::KNotMultiple { what: "block FP8 activations", k: 96, block: 64 })]
#[case::tile(FormatError::Tile { rows: 64, cols: 64 })]
#[case::shape(FormatError::Shape { len: 10, rows: 2, k: 32 })]
#[case::enc(FormatError::BadScale { what: "NVFP4 encode scale", value: 0.0 })]
#[case::tensor_scale(FormatError::BadScale { what: "per-tensor FP8 scale", value: -1.0 })]
#[case::e5m2(FormatError::Unsupported { what: "MX with E5M2 elements (MXFP8 is E4M3, MXFP4 is E2M1)" })]
fn bad_input_is_a_typed_error(#[case] want: FormatError) {
    let got = match &want {
        FormatError::KNotMultiple { what: "MX", .. } => {
            quantize_mx(&[0.0; 48], 1, 48, Element::E4M3, MxOptions::default()).err()
        }
        FormatError::KNotMultiple { what: "NVFP4", .. } => quantize_nvfp4(&[0.0; 24], 1, 24, None).err(),
        FormatError::KNotMultiple { .. } => quantize_block_fp8(&[0.0; 96], 1, 96, (1, 64), Fp8ScaleKind::F32).err(),
        FormatError::Tile { .. } => quantize_block_fp8(&[0.0; 64], 1, 64, (64, 64), Fp8ScaleKind::F32).err(),
        FormatError::Shape { .. } => quantize_mx(&[0.0; 10], 2, 32, Element::E4M3, MxOptions::default()).err(),
        FormatError::BadScale { what: "NVFP4 encode scale", .. } => quantize_nvfp4(&[1.0; 16], 1, 16, Some(0.0)).err(),
        FormatError::BadScale { .. } => quantize_tensor_fp8(&[1.0], Some(-1.0)).err(),
        FormatError::Unsupported { .. } => quantize_mx(&[0.0; 32], 1, 32, Element::E5M2, MxOptions::default()).err(),
    };
    assert_eq!(got, Some(want));
}

#[rstest]
#[case::one(1, 1)]
#[case::odd(7, 3)]
#[case::one_tile(128, 4)]
#[case::padded(300, 9)]
#[case::dsv4_mx_7168(4096, 224)]
#[case::nvfp4_1536(129, 96)]
fn swizzled_layout_round_trips_and_is_a_bijection(#[case] rows: usize, #[case] cols: usize) {
    let scales: Vec<u8> = (0..rows * cols).map(|i| (i % 251) as u8 + 1).collect();
    let sw = to_swizzled(&scales, rows, cols);
    assert_eq!(sw.len(), swizzled_len(rows, cols));
    assert_eq!(from_swizzled(&sw, rows, cols), scales);
    let mut seen = vec![false; sw.len()];
    for r in 0..rows {
        for c in 0..cols {
            let o = swizzled_offset(r, c, cols);
            assert!(!seen[o], "({r}, {c}) collides at {o}");
            seen[o] = true;
        }
    }
    // Padding is zero (every real scale is ≥ 1).
    assert!(sw.iter().zip(&seen).all(|(&b, &s)| s || b == 0));
}

#[rstest]
#[case::origin(0, 0, 8, 0)]
#[case::next_row(1, 0, 8, 16)]
#[case::row_32(32, 0, 8, 4)]
#[case::row_96_col_3(96, 3, 8, 15)]
#[case::last_of_tile(127, 3, 4, 511)]
#[case::second_col_tile(0, 4, 8, 512)]
#[case::second_row_tile(128, 0, 8, 1024)]
#[case::formula(200, 6, 9, (3 + 1) * 512 + (200 % 32) * 16 + (72 / 32) * 4 + 2)]
fn swizzled_offsets_match_the_spec(#[case] r: usize, #[case] c: usize, #[case] cols: usize, #[case] want: usize) {
    assert_eq!(swizzled_offset(r, c, cols), want);
}
