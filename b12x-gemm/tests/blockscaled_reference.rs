//! CPU tests of `gemm.blockscaled`'s oracle: hand-computed cases for each operand format,
//! identities (alpha, bias, exact round trips), specials, shape errors, and a bound check that
//! rejects a wrong result.

use b12x_core::half::bf16;
use b12x_core::DType;
use b12x_gemm::blockscaled::reference::{bound, check_bound, exact, gemm, ShapeError};
use b12x_gemm::blockscaled::{Activation, Weight};
use b12x_quant::block::{
    quantize_block_fp8, quantize_mx, quantize_nvfp4, quantize_tensor_fp8, Fp8ScaleKind, Fp8Scales, Mx, MxOptions, Nvfp4,
};
use b12x_quant::codec::Element;

fn bf16_act(m: usize, k: usize, f: impl Fn(usize, usize) -> f32) -> Activation {
    let data = (0..m * k).map(|i| bf16::from_f32(f(i / k, i % k))).collect();
    Activation::Bf16 { m, k, data }
}

fn matmul(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|kk| f64::from(a[i * k + kk]) * f64::from(b[j * k + kk])).sum();
        }
    }
    c
}

#[test]
fn nvfp4_weight_by_hand() {
    // One row of 16: codes 0x2 (1.0) everywhere but element 3 = 0xF (-6.0); scale UE4M3 0x38 = 1.0;
    // enc = 2: each value is code · 1.0 / 2.
    let mut codes = vec![0x22u8; 8];
    codes[1] = 0xF2; // element 2 = 0x2 (low nibble), element 3 = 0xF (high nibble)
    let w = Weight::Nvfp4(Nvfp4 { rows: 1, k: 16, codes, scales: vec![0x38], enc: 2.0 });
    let a = bf16_act(1, 16, |_, k| k as f32);
    // Σ_k k · 0.5 for k ≠ 3, plus 3 · (-3.0).
    let want = (0..16).filter(|&k| k != 3).map(|k| k as f64 * 0.5).sum::<f64>() - 9.0;
    assert_eq!(gemm(&a, &w, 1.0, None).unwrap(), vec![want as f32]);
}

#[test]
fn mx_operands_by_hand() {
    // MXFP8 × MXFP8, K = 32: A codes 0x38 (1.0) with scale 2^1; B codes 0x40 (2.0) with scale 2^-3.
    let a = Activation::Mxfp8(Mx { element: Element::E4M3, rows: 1, k: 32, codes: vec![0x38; 32], scales: vec![128] });
    let b = Weight::Mx(Mx { element: Element::E4M3, rows: 2, k: 32, codes: vec![0x40; 64], scales: vec![124, 127] });
    assert_eq!(gemm(&a, &b, 1.0, None).unwrap(), vec![32.0 * 2.0 * 2.0 / 8.0, 32.0 * 2.0 * 2.0]);
    // MXFP4 weight (W4A16): codes 0x33 (1.5, 1.5), scale 2^2.
    let w4 = Weight::Mx(Mx { element: Element::E2M1, rows: 1, k: 32, codes: vec![0x33; 16], scales: vec![129] });
    let x = bf16_act(1, 32, |_, _| 0.25);
    assert_eq!(gemm(&x, &w4, 1.0, None).unwrap(), vec![32.0 * 0.25 * 6.0]);
}

#[test]
fn block_fp8_and_tensor_fp8_by_hand() {
    // 1×128 activation groups with f32 scales 0.5 (codes 0x38 = 1.0) against a 128×128 tile with
    // UE8M0 scale 2^3 (codes 0x30 = 0.5): 128 · 0.5 · 4.
    let a = Activation::BlockFp8(b12x_quant::block::BlockFp8 {
        rows: 1,
        k: 128,
        tile: (1, 128),
        codes: vec![0x38; 128],
        scales: Fp8Scales::F32(vec![0.5]),
    });
    let b = Weight::BlockFp8(b12x_quant::block::BlockFp8 {
        rows: 2,
        k: 128,
        tile: (128, 128),
        codes: vec![0x30; 256],
        scales: Fp8Scales::Ue8m0(vec![130]),
    });
    assert_eq!(gemm(&a, &b, 1.0, None).unwrap(), vec![256.0, 256.0]);
    // Per-tensor FP8 both sides: scales 0.25 and 3.
    let qa = b12x_quant::block::TensorFp8 { codes: vec![0x40; 4], scale: 0.25 }; // 2.0
    let qb = b12x_quant::block::TensorFp8 { codes: vec![0x38; 4], scale: 3.0 }; // 1.0
    let c = gemm(&Activation::TensorFp8 { m: 1, k: 4, q: qa }, &Weight::TensorFp8 { n: 1, k: 4, q: qb }, 1.0, None);
    assert_eq!(c.unwrap(), vec![4.0 * 0.5 * 3.0]);
}

#[test]
fn quantized_operands_equal_matmul_of_their_dequantized_values() {
    // Through the codecs: whatever the quantizers chose, the oracle multiplies exactly the
    // dequantized values (here exact in f64 too: small K, a few significant bits each).
    let (m, n, k) = (3, 5, 128);
    let xs: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 29) as f32 - 14.0) / 8.0).collect();
    let ws: Vec<f32> = (0..n * k).map(|i| ((i * 53 % 31) as f32 - 15.0) / 4.0).collect();
    let weights = [
        Weight::Nvfp4(quantize_nvfp4(&ws, n, k, Some(10.0)).unwrap()),
        Weight::Mx(quantize_mx(&ws, n, k, Element::E2M1, MxOptions::default()).unwrap()),
        Weight::Mx(quantize_mx(&ws, n, k, Element::E4M3, MxOptions::default()).unwrap()),
        Weight::BlockFp8(quantize_block_fp8(&ws, n, k, (128, 128), Fp8ScaleKind::F32).unwrap()),
        Weight::BlockFp8(quantize_block_fp8(&ws, n, k, (32, 32), Fp8ScaleKind::Ue8m0).unwrap()),
        Weight::TensorFp8 { n, k, q: quantize_tensor_fp8(&ws, None).unwrap() },
    ];
    let acts = [
        bf16_act(m, k, |i, j| xs[i * k + j]),
        Activation::Mxfp8(quantize_mx(&xs, m, k, Element::E4M3, MxOptions::default()).unwrap()),
        Activation::Nvfp4(quantize_nvfp4(&xs, m, k, None).unwrap()),
        Activation::BlockFp8(quantize_block_fp8(&xs, m, k, (1, 128), Fp8ScaleKind::Ue8m0).unwrap()),
        Activation::BlockFp8(quantize_block_fp8(&xs, m, k, (1, 32), Fp8ScaleKind::F32).unwrap()),
        Activation::TensorFp8 { m, k, q: quantize_tensor_fp8(&xs, None).unwrap() },
    ];
    for w in &weights {
        for a in &acts {
            let want = matmul(&a.dequantize(), &w.dequantize(), m, n, k);
            let got = exact(a, w, 1.0, None, &(0..n).collect::<Vec<_>>()).unwrap();
            assert_eq!(got.acc, want);
            // And the quantized operands stay close to the originals (a wrong codec would not).
            let orig = matmul(&xs, &ws, m, n, k);
            let scale = orig.iter().fold(0.0f64, |s, v| s.max(v.abs()));
            for (g, o) in got.acc.iter().zip(&orig) {
                assert!((g - o).abs() <= 0.35 * scale, "{g} vs {o}");
            }
        }
    }
}

#[test]
fn alpha_bias_and_column_subsets() {
    let (m, n, k) = (2, 4, 32);
    let ws: Vec<f32> = (0..n * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let w = Weight::Mx(quantize_mx(&ws, n, k, Element::E4M3, MxOptions::default()).unwrap());
    let a = bf16_act(m, k, |i, j| (i + j) as f32 / 16.0);
    let bias = [1.0f32, -2.0, 0.5, 0.0];
    let base = exact(&a, &w, 1.0, None, &[0, 1, 2, 3]).unwrap();
    let scaled = exact(&a, &w, -2.0, Some(&bias), &[0, 1, 2, 3]).unwrap();
    for i in 0..m * n {
        assert_eq!(scaled.acc[i], -2.0 * base.acc[i] + f64::from(bias[i % n]));
        assert_eq!(scaled.abs[i], 2.0 * base.abs[i]);
    }
    let sub = exact(&a, &w, 1.0, None, &[3, 1]).unwrap();
    assert_eq!(sub.acc, vec![base.acc[3], base.acc[1], base.acc[7], base.acc[5]]);
}

#[test]
fn nan_blocks_reach_the_output() {
    let (n, k) = (2, 32);
    let mut ws = vec![1.0f32; n * k];
    ws[k + 5] = f32::NAN; // row 1's only block
    let w = Weight::Mx(quantize_mx(&ws, n, k, Element::E2M1, MxOptions::default()).unwrap());
    let c = gemm(&bf16_act(1, k, |_, _| 1.0), &w, 1.0, None).unwrap();
    assert_eq!(c[0], 32.0);
    assert!(c[1].is_nan());
}

#[test]
fn shape_errors() {
    let w = Weight::TensorFp8 { n: 2, k: 8, q: quantize_tensor_fp8(&[1.0; 16], None).unwrap() };
    assert_eq!(gemm(&bf16_act(1, 4, |_, _| 1.0), &w, 1.0, None), Err(ShapeError::K { a: 4, b: 8 }));
    assert_eq!(gemm(&bf16_act(1, 8, |_, _| 1.0), &w, 1.0, Some(&[0.0; 3])), Err(ShapeError::Bias { n: 2, got: 3 }));
}

#[test]
fn the_bound_accepts_rounding_and_rejects_a_wrong_result() {
    let (m, n, k) = (4, 8, 256);
    let ws: Vec<f32> = (0..n * k).map(|i| ((i * 7919 % 61) as f32 - 30.0) / 10.0).collect();
    let w = Weight::Nvfp4(quantize_nvfp4(&ws, n, k, None).unwrap());
    let a = bf16_act(m, k, |i, j| ((i * 31 + j * 17) % 23) as f32 / 8.0 - 1.4);
    let want = exact(&a, &w, 0.75, None, &(0..n).collect::<Vec<_>>()).unwrap();
    // The exact result rounded to bf16 passes.
    let rounded: Vec<f64> = want.acc.iter().map(|&v| f64::from(bf16::from_f64(v).to_f32())).collect();
    check_bound("rounded", DType::BF16, &rounded, &want, &[m, n]).unwrap();
    // One element off by 4 bf16 ULPs fails.
    let mut off = rounded.clone();
    off[5] += 4.0 * bound(DType::BF16, 0, want.acc[5], 0.0).max(1e-3);
    assert!(check_bound("off", DType::BF16, &off, &want, &[m, n]).is_err());
    // Two columns swapped (a misplaced term) fails.
    let mut swapped = rounded.clone();
    for i in 0..m {
        swapped.swap(i * n, i * n + 1);
    }
    assert!(check_bound("swapped", DType::BF16, &swapped, &want, &[m, n]).is_err());
}

#[test]
fn the_activation_of_a_fused_quantization_is_the_quantizers() {
    use b12x_core::half::bf16;
    use b12x_gemm::blockscaled::gemv::XQuant;
    use b12x_quant::block::{
        dequantize_block_fp8, dequantize_mx, quantize_block_fp8, quantize_mx, Fp8ScaleKind, MxOptions,
    };
    let (m, k) = (2, 256);
    let x: Vec<bf16> = (0..m * k).map(|i| bf16::from_f32(((i * 29 % 61) as f32 - 30.0) / 11.0)).collect();
    let f: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
    let plain = b12x_gemm::blockscaled::reference::activation(m, k, &x, None).unwrap();
    assert_eq!(plain.dequantize(), f);
    let mx = b12x_gemm::blockscaled::reference::activation(m, k, &x, Some(XQuant::Mxfp8)).unwrap();
    let want = quantize_mx(&f, m, k, b12x_quant::codec::Element::E4M3, MxOptions::default()).unwrap();
    assert_eq!(mx.dequantize(), dequantize_mx(&want));
    for group in [32, 128] {
        let b = b12x_gemm::blockscaled::reference::activation(m, k, &x, Some(XQuant::BlockFp8Ue8m0 { group })).unwrap();
        let want = quantize_block_fp8(&f, m, k, (1, group), Fp8ScaleKind::Ue8m0).unwrap();
        assert_eq!(b.dequantize(), dequantize_block_fp8(&want), "1 × {group}");
        assert_eq!(b.shape(), (m, k));
    }
    // The quantization changes values (E4M3 has 4 significant bits; these need more).
    assert_ne!(mx.dequantize(), f);
}

#[test]
fn staged_x_of_f32_scaled_block_fp8_is_the_codes() {
    use b12x_gemm::blockscaled::gemv::XFormat;
    use b12x_gemm::blockscaled::reference::{pre_quantized, staged_x};
    let (m, k) = (3, 256);
    let x: Vec<bf16> = (0..m * k).map(|i| bf16::from_f32(((i * 37 % 101) as f32 - 50.0) * 0.013)).collect();
    let a = pre_quantized(m, k, &x, XFormat::BlockFp8 { group: 128, scale: Fp8ScaleKind::F32 }).unwrap();
    let Activation::BlockFp8(q) = &a else { panic!("block FP8") };
    let Fp8Scales::F32(sc) = &q.scales else { panic!("f32 scales") };
    let staged = staged_x(&a);
    let full = a.dequantize();
    for i in 0..m * k {
        // x̂ is the code's value (exact in BF16), and code · the group's f32 scale is the oracle's â.
        let code = Element::E4M3.decode(q.codes[i]);
        assert_eq!(staged[i].to_bits(), code.to_bits(), "element {i}");
        assert_eq!(bf16::from_f32(code).to_f32(), code);
        assert_eq!(full[i].to_bits(), (code * sc[(i / k) * (k / 128) + (i % k) / 128]).to_bits());
    }
    // UE8M0 scales are staged with the value (exact in BF16).
    let u = pre_quantized(m, k, &x, XFormat::BlockFp8 { group: 128, scale: Fp8ScaleKind::Ue8m0 }).unwrap();
    assert_eq!(staged_x(&u), u.dequantize());
}
