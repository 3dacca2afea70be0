//! CPU tests of `attention.rope`: query validation, the frequencies (plain and YaRN with
//! DeepSeek-V4's numbers against an independent evaluation), the oracle's rotation rules, and the
//! kernel names against the built manifest.

use b12x_attention::paging::FAULT_POSITION;
use b12x_attention::rope::{reference, CosSin, Query, RopeParams, RopeStyle, Yarn};
use b12x_core::testing::check_manifest;
use b12x_core::{DType, Error};
use rstest::rstest;

fn qwen3() -> Query {
    Query {
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        rotary_dim: 128,
        rotary_offset: 0,
        style: RopeStyle::Neox,
        base: 1e6,
        yarn: None,
        dtype: DType::BF16,
        max_tokens: 64,
        max_position: 40960,
        cos_sin: CosSin::Computed,
    }
}

fn v4() -> Query {
    Query {
        heads: 64,
        kv_heads: 1,
        head_dim: 512,
        rotary_dim: 64,
        rotary_offset: 448,
        style: RopeStyle::Gptj,
        base: 160000.0,
        yarn: Some(Yarn::deepseek_v4()),
        dtype: DType::BF16,
        max_tokens: 64,
        max_position: 1 << 20,
        cos_sin: CosSin::Computed,
    }
}

#[rstest]
#[case::f32_dtype(Query { dtype: DType::F32, ..qwen3() }, "dtype")]
#[case::no_heads(Query { heads: 0, ..qwen3() }, "heads")]
#[case::head_dim_not_8(Query { head_dim: 100, rotary_dim: 96, ..qwen3() }, "head_dim")]
#[case::odd_rotary(Query { rotary_dim: 60, ..qwen3() }, "rotary_dim")]
#[case::zero_rotary(Query { rotary_dim: 0, ..qwen3() }, "rotary_dim")]
#[case::rotary_too_long(Query { head_dim: 1024, rotary_dim: 520, ..qwen3() }, "rotary_dim")]
#[case::rotary_past_head(Query { rotary_offset: 8, ..qwen3() }, "rotary_offset")]
#[case::offset_not_8(Query { rotary_dim: 64, rotary_offset: 4, ..qwen3() }, "rotary_offset")]
#[case::base_one(Query { base: 1.0, ..qwen3() }, "base")]
#[case::base_nan(Query { base: f32::NAN, ..qwen3() }, "base")]
#[case::no_positions(Query { max_position: 0, ..qwen3() }, "max_position")]
#[case::no_tokens(Query { max_tokens: 0, ..qwen3() }, "max_tokens")]
#[case::yarn_factor_one(Query { yarn: Some(Yarn { factor: 1.0, ..Yarn::deepseek_v4() }), ..v4() }, "yarn")]
#[case::yarn_betas_swapped(Query { yarn: Some(Yarn { beta_fast: 1.0, beta_slow: 32.0, ..Yarn::deepseek_v4() }), ..v4() }, "yarn")]
#[case::yarn_zero_context(Query { yarn: Some(Yarn { original_max_position: 0, ..Yarn::deepseek_v4() }), ..v4() }, "yarn")]
#[case::table_too_big(Query { max_position: 1 << 30, cos_sin: CosSin::Table, ..qwen3() }, "max_position")]
fn bad_queries_name_the_field(#[case] q: Query, #[case] field: &str) {
    match q.validate() {
        Err(Error::InvalidQuery { field: f, .. }) => assert_eq!(f, field),
        other => panic!("expected InvalidQuery({field}), got {other:?}"),
    }
}

#[test]
fn good_queries_and_symbols() {
    qwen3().validate().unwrap();
    v4().validate().unwrap();
    Query { kv_heads: 0, rotary_dim: 64, ..qwen3() }.validate().unwrap();
    assert_eq!(qwen3().symbol(), "b12x_rope_bf16_neox");
    assert_eq!(Query { dtype: DType::F16, cos_sin: CosSin::Table, ..v4() }.symbol(), "b12x_rope_f16_gptj_table");
    assert_eq!(std::mem::size_of::<RopeParams>(), 1112);
}

#[test]
fn every_symbol_is_built_for_every_arch() {
    let mut symbols = Vec::new();
    for dtype in [DType::BF16, DType::F16] {
        for style in [RopeStyle::Neox, RopeStyle::Gptj] {
            for cos_sin in [CosSin::Computed, CosSin::Table] {
                symbols.push(Query { dtype, style, cos_sin, ..qwen3() }.symbol());
            }
        }
    }
    check_manifest(b12x_attention::KERNEL_MANIFEST, &symbols).unwrap();
}

#[test]
fn plain_frequencies_are_theta_powers() {
    let inv = qwen3().inv_freq();
    assert_eq!(inv.len(), 64);
    assert_eq!(inv[0], 1.0);
    for (j, &f) in inv.iter().enumerate() {
        let want = (1e6f64).powf(-((2 * j) as f64) / 128.0) as f32;
        assert_eq!(f, want, "pair {j}");
    }
    assert!(inv.windows(2).all(|w| w[1] < w[0]));
}

/// YaRN with DeepSeek-V4's numbers (rotary dim 64, θ 160000, factor 16, original 65536, β 32/1),
/// evaluated here independently of `reference` (the ramp written out per pair index).
#[test]
fn yarn_matches_deepseek_v4() {
    let y = Yarn::deepseek_v4();
    // corr_dim(32) = 64 ln(65536 / 64π) / (2 ln 160000) = 15.45…, corr_dim(1) = 24.71…
    assert_eq!(reference::yarn_range(64, 160000.0, &y), (15.0, 25.0));
    let inv = v4().inv_freq();
    assert_eq!(inv.len(), 32);
    for (j, &got) in inv.iter().enumerate() {
        let base = 160000f64.powf(-(j as f64) / 32.0);
        let want = if j <= 15 {
            base
        } else if j >= 25 {
            base / 16.0
        } else {
            let ramp = (j as f64 - 15.0) / 10.0;
            base / 16.0 * ramp + base * (1.0 - ramp)
        };
        let rel = ((got as f64 - want) / want).abs();
        assert!(rel <= f32::EPSILON as f64 / 2.0, "pair {j}: {got} vs {want}");
    }
    // mscale 0 on both sides: cos and sin unscaled; the softmax factor is 1.
    assert_eq!(reference::cos_sin_scale(Some(&y)), 1.0);
    assert_eq!(y.softmax_scale_factor(), 1.0);
    // DeepSeek-V3 (mscale = mscale_all_dim = 1, factor 40): cos/sin unscaled, softmax × (0.1 ln 40 + 1)².
    let v3 = Yarn { factor: 40.0, original_max_position: 4096, mscale: 1.0, mscale_all_dim: 1.0, ..y };
    assert_eq!(reference::cos_sin_scale(Some(&v3)), 1.0);
    let m = 0.1 * 40f64.ln() + 1.0;
    assert!((v3.softmax_scale_factor() as f64 - m * m).abs() < 1e-6);
    // The HF form (mscale 1, mscale_all_dim 0): cos and sin × (0.1 ln s + 1).
    let hf = Yarn { mscale: 1.0, mscale_all_dim: 0.0, ..y };
    assert_eq!(reference::cos_sin_scale(Some(&hf)), (0.1 * 16f64.ln() + 1.0) as f32);
}

fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 128.0).collect()
}

#[test]
fn position_zero_is_the_identity_and_rotation_keeps_norms() {
    let q = Query { heads: 2, kv_heads: 0, ..qwen3() };
    let x = values(2 * 2 * 128);
    let mut y = x.clone();
    assert_eq!(reference::rotate(&q, &[0, 12345], 2, &mut y), 0);
    assert_eq!(&y[..256], &x[..256]);
    for h in 2..4 {
        for j in 0..64 {
            let (a, b) = (x[h * 128 + j], x[h * 128 + j + 64]);
            let (c, d) = (y[h * 128 + j], y[h * 128 + j + 64]);
            assert!(((a * a + b * b) - (c * c + d * d)).abs() <= 1e-4 * (a * a + b * b).max(1.0));
        }
    }
}

#[test]
fn pair_layouts_are_permutations_of_each_other() {
    // GPT-J on a row equals NeoX on the row with pairs de-interleaved.
    let (neox, gptj) = (
        Query { kv_heads: 0, heads: 1, ..qwen3() },
        Query { kv_heads: 0, heads: 1, style: RopeStyle::Gptj, ..qwen3() },
    );
    let x = values(128);
    let mut inter = vec![0f32; 128];
    for j in 0..64 {
        inter[2 * j] = x[j];
        inter[2 * j + 1] = x[j + 64];
    }
    let (mut a, mut b) = (x.clone(), inter);
    reference::rotate(&neox, &[777], 1, &mut a);
    reference::rotate(&gptj, &[777], 1, &mut b);
    for j in 0..64 {
        assert_eq!((a[j], a[j + 64]), (b[2 * j], b[2 * j + 1]), "pair {j}");
    }
}

#[test]
fn partial_rotary_touches_only_its_dims() {
    let q = v4();
    let x = values(2 * 512);
    let mut y = x.clone();
    reference::rotate(&q, &[5], 2, &mut y);
    for h in 0..2 {
        assert_eq!(&y[h * 512..h * 512 + 448], &x[h * 512..h * 512 + 448]);
        assert_ne!(&y[h * 512 + 448..(h + 1) * 512], &x[h * 512 + 448..(h + 1) * 512]);
    }
}

#[test]
fn positions_outside_the_range_are_faults_and_rows_stay() {
    let q = Query { heads: 1, kv_heads: 0, max_position: 100, ..qwen3() };
    let x = values(4 * 128);
    let mut y = x.clone();
    assert_eq!(reference::rotate(&q, &[-1, 100, i32::MAX, 99], 1, &mut y), FAULT_POSITION);
    assert_eq!(&y[..384], &x[..384]);
    assert_ne!(&y[384..], &x[384..]);
}

#[test]
fn the_table_holds_the_oracles_cos_and_sin() {
    let q = Query { max_position: 300, rotary_dim: 64, ..qwen3() };
    let inv = q.inv_freq();
    let t = reference::table(300, 64, &inv);
    for pos in [0usize, 1, 299] {
        for j in 0..32 {
            let (c, s) = reference::cos_sin(pos as i32, inv[j]);
            assert_eq!((t[pos * 64 + j], t[pos * 64 + 32 + j]), (c, s));
        }
    }
    assert_eq!((t[0], t[32]), (1.0, 0.0));
}

/// Raw views (no device needed: `kernel_params` only checks and packs addresses).
fn fused_args(q: &Query, t: usize, positions_stride: isize, error_at: u64) -> b12x_attention::rope::Args<'static> {
    use b12x_core::{TensorMut, TensorRef};
    let (h, hkv, d) = (q.heads, q.kv_heads, q.head_dim);
    let cols = (h + 2 * hkv) * d;
    // SAFETY: never launched; the addresses are only checked.
    unsafe {
        let whole = TensorMut::from_raw(0x10_0000, &[t, cols], &[cols as isize, 1], DType::BF16).unwrap();
        let mut parts = whole.split_last(&[h * d, hkv * d, hkv * d]).unwrap();
        parts.truncate(2);
        let k = parts.pop().unwrap().unflatten_last(&[hkv, d]).unwrap();
        let qv = parts.pop().unwrap().unflatten_last(&[h, d]).unwrap();
        b12x_attention::rope::Args {
            q: qv,
            k: Some(k),
            positions: TensorRef::from_raw(0x90_0000, &[t], &[positions_stride], DType::I32).unwrap(),
            cos_sin: None,
            error: TensorMut::from_raw(error_at, &[1], &[1], DType::I32).unwrap(),
        }
    }
}

#[test]
fn kernel_params_take_a_fused_qkv_buffer_and_reject_bad_views() {
    let q = qwen3();
    let p = q.kernel_params(&fused_args(&q, 4, 1, 0xA0_0000)).unwrap();
    let cols = (32 + 16) * 128;
    assert_eq!((p.q, p.k, p.q_stride, p.k_stride), (0x10_0000, 0x10_0000 + 32 * 128 * 2, cols as i64, cols as i64));
    assert_eq!((p.tokens, p.heads, p.kv_heads, p.rotary_dim, p.max_position), (4, 32, 8, 128, 40960));
    assert_eq!((p.inv_freq[0], p.inv_freq[63], p.inv_freq[64], p.scale), (1.0, q.inv_freq()[63], 0.0, 1.0));
    // Strided positions (the kernel reads them with unit stride).
    assert!(matches!(q.kernel_params(&fused_args(&q, 4, 2, 0xA0_0000)), Err(Error::Stride { .. })));
    // The error word inside the positions, or inside q.
    assert!(matches!(q.kernel_params(&fused_args(&q, 4, 1, 0x90_0004)), Err(Error::Aliasing { .. })));
    assert!(matches!(q.kernel_params(&fused_args(&q, 4, 1, 0x10_0000 + 64)), Err(Error::Aliasing { .. })));
    // k over q's columns.
    let mut a = fused_args(&q, 4, 1, 0xA0_0000);
    let s0 = a.q.strides()[0];
    // SAFETY: never launched.
    a.k = Some(
        unsafe { b12x_core::TensorMut::from_raw(0x10_0000 + 256, &[4, 8, 128], &[s0, 128, 1], DType::BF16) }.unwrap(),
    );
    assert!(matches!(q.kernel_params(&a), Err(Error::Aliasing { .. })));
    // A table in computed mode, none in table mode.
    let mut a = fused_args(&q, 4, 1, 0xA0_0000);
    a.cos_sin = a.positions.into();
    assert!(matches!(q.kernel_params(&a), Err(Error::Shape { tensor: "cos_sin", .. })));
    let table = Query { cos_sin: CosSin::Table, ..qwen3() };
    assert!(matches!(
        table.kernel_params(&fused_args(&table, 4, 1, 0xA0_0000)),
        Err(Error::Shape { tensor: "cos_sin", .. })
    ));
    // Over capacity.
    let small = Query { max_tokens: 3, ..qwen3() };
    assert!(matches!(small.kernel_params(&fused_args(&small, 4, 1, 0xA0_0000)), Err(Error::Capacity { .. })));
}

#[test]
fn grid_overflow_is_a_typed_error() {
    let q =
        Query { max_tokens: 1 << 29, heads: 1 << 30, kv_heads: 1 << 30, head_dim: 1024, rotary_dim: 512, ..qwen3() };
    assert!(matches!(q.validate(), Err(Error::InvalidQuery { field: "max_tokens", .. })));
}
