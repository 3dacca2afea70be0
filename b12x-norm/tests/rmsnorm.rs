//! CPU tests of `norm.rmsnorm`: the oracle against hand-computed values and identities, query
//! validation, argument checks (on views of fake device addresses: nothing is dereferenced),
//! config enumeration, and the variant table against the built kernels.

use b12x_core::half::{bf16, f16};
use b12x_core::testing::{cast, check_bitwise, check_manifest, check_ulp, uniform};
use b12x_core::{DType, Error, TensorMut, TensorRef};
use b12x_norm::rmsnorm::reference::{inv_rms, rmsnorm, rmsnorm_add, ulp_bound};
use b12x_norm::rmsnorm::{buckets, configs, Args, Config, Query, MAX_COLS, VECS_PER_THREAD};
use b12x_norm::rmsnorm_quant::{self, QuantOut};
use rstest::rstest;

fn query(cols: usize, dtype: DType) -> Query {
    Query { cols, dtype, max_tokens: 64, eps: 1e-6, residual: false }
}

// ---- oracle -------------------------------------------------------------------------------

#[rstest]
#[case::f32(32)]
#[case::bf16(16)]
fn oracle_matches_hand_computed_row(#[case] bits: u32) {
    // x = [3, 4, 0, ...] over D = 8: mean(x²) = 25 / 8, rrms = sqrt(8 / 25) = 0.565685424949238...
    let x = [3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    let w = [1.0, 0.5, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0];
    let rrms = (8.0f64 / 25.0).sqrt();
    let want: Vec<f64> = x.iter().zip(&w).map(|(x, w)| x * rrms * w).collect();
    assert!((want[0] - 1.697056274847714).abs() < 1e-12 && (want[1] - 1.131370849898476).abs() < 1e-12);
    let want32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
    if bits == 32 {
        let y = rmsnorm(&x.map(|v| v as f32), &w.map(|v| v as f32), 0.0);
        // The oracle rounds rrms and two products: within 2 ULP of the exact value.
        check_ulp("y", &y, &want32, &[1, 8], 2).unwrap();
    } else {
        let y = rmsnorm(&cast::<bf16>(&x.map(|v| v as f32)), &cast::<bf16>(&w.map(|v| v as f32)), 0.0);
        check_bitwise("y", &y, &cast::<bf16>(&want32), &[1, 8]).unwrap();
    }
}

#[rstest]
#[case::one(1.0)]
#[case::two(2.0)]
#[case::negative_quarter(-0.25)]
#[case::large(1024.0)]
fn constant_power_of_two_row_gives_sign_times_w(#[case] c: f32) {
    // mean(c²) = c², so y = c / |c| · w exactly when c is a power of two (every step is exact).
    let d = 72;
    let w: Vec<f32> = uniform(1, d, -2.0, 2.0);
    let y = rmsnorm(&vec![c; 3 * d], &w, 0.0);
    let want: Vec<f32> = (0..3).flat_map(|_| w.iter().map(|&w| c.signum() * w)).collect();
    check_bitwise("y", &y, &want, &[3, d]).unwrap();
}

#[rstest]
#[case::by_two(2.0)]
#[case::by_quarter(0.25)]
#[case::by_2_pow_10(1024.0)]
fn scaling_x_by_a_power_of_two_changes_nothing(#[case] s: f32) {
    // With eps = 0, rmsnorm(s·x) = rmsnorm(x): every intermediate scales by an exact power of two.
    let (t, d) = (4, 4096);
    let x = cast::<bf16>(&uniform(2, t * d, -3.0, 3.0));
    let w = cast::<bf16>(&uniform(3, d, -1.0, 1.0));
    let scaled: Vec<bf16> = x.iter().map(|v| bf16::from_f32(v.to_f32() * s)).collect();
    check_bitwise("y", &rmsnorm(&scaled, &w, 0.0), &rmsnorm(&x, &w, 0.0), &[t, d]).unwrap();
}

#[test]
fn unit_weight_gives_unit_mean_square() {
    let (t, d) = (3, 7168);
    let x: Vec<f32> = uniform(4, t * d, -5.0, 5.0);
    let y = rmsnorm(&x, &vec![1.0f32; d], 0.0);
    for row in y.chunks(d) {
        let ms = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / d as f64;
        assert!((ms - 1.0).abs() < 1e-5, "mean(y²) = {ms}");
    }
}

#[test]
fn eps_keeps_a_zero_row_finite() {
    let d = 16;
    let y = rmsnorm(&vec![f16::ZERO; d], &vec![f16::ONE; d], 1e-6);
    assert!(y.iter().all(|v| v.to_f32() == 0.0));
    assert_eq!(inv_rms(&vec![0.0f32; d], 0.25), 2.0);
}

#[test]
fn fused_form_normalizes_the_rounded_sum_and_writes_it_back() {
    let (t, d) = (2, 64);
    let x = cast::<bf16>(&uniform(5, t * d, -1.0, 1.0));
    let res0 = cast::<bf16>(&uniform(6, t * d, -1.0, 1.0));
    let w = cast::<bf16>(&uniform(7, d, 0.5, 1.5));
    let mut res = res0.clone();
    let y = rmsnorm_add(&x, &mut res, &w, 1e-5);
    let sum: Vec<bf16> = x.iter().zip(&res0).map(|(a, b)| bf16::from_f32(a.to_f32() + b.to_f32())).collect();
    check_bitwise("residual", &res, &sum, &[t, d]).unwrap();
    check_bitwise("y", &y, &rmsnorm(&sum, &w, 1e-5), &[t, d]).unwrap();
    // A zero residual makes the fused form the plain one.
    let mut zeros = vec![bf16::ZERO; t * d];
    check_bitwise("y", &rmsnorm_add(&x, &mut zeros, &w, 1e-5), &rmsnorm(&x, &w, 1e-5), &[t, d]).unwrap();
}

#[test]
fn ulp_bounds_are_the_documented_ones() {
    assert_eq!((ulp_bound::<bf16>(), ulp_bound::<f16>(), ulp_bound::<f32>()), (1, 1, 32));
}

// ---- query validation ---------------------------------------------------------------------

#[rstest]
#[case::cols_zero(Query { cols: 0, ..query(8, DType::BF16) }, "cols")]
#[case::cols_not_multiple_of_8(Query { cols: 4100, ..query(8, DType::BF16) }, "cols")]
#[case::cols_above_max(Query { cols: MAX_COLS + 8, ..query(8, DType::BF16) }, "cols")]
#[case::dtype_i32(query(4096, DType::I32), "dtype")]
#[case::dtype_e4m3(query(4096, DType::E4M3), "dtype")]
#[case::no_capacity(Query { max_tokens: 0, ..query(4096, DType::BF16) }, "max_tokens")]
#[case::capacity_above_grid(Query { max_tokens: 1 << 31, ..query(4096, DType::BF16) }, "max_tokens")]
#[case::eps_nan(Query { eps: f32::NAN, ..query(4096, DType::BF16) }, "eps")]
#[case::eps_negative(Query { eps: -1e-6, ..query(4096, DType::BF16) }, "eps")]
fn invalid_queries_name_the_field(#[case] q: Query, #[case] field: &str) {
    match q.validate() {
        Err(Error::InvalidQuery { op: "norm.rmsnorm", field: f, .. }) => assert_eq!(f, field),
        other => panic!("expected InvalidQuery on {field}, got {other:?}"),
    }
}

#[rstest]
#[case::d8_bf16(8, DType::BF16)]
#[case::d16384_f32(MAX_COLS, DType::F32)]
#[case::d7168_f16(7168, DType::F16)]
fn valid_queries_pass(#[case] cols: usize, #[case] dtype: DType) {
    query(cols, dtype).validate().unwrap();
}

// ---- argument checks ----------------------------------------------------------------------

const BASE: u64 = 0x7000_0000_0000;

fn view(ptr: u64, shape: &[usize], strides: &[isize], dtype: DType) -> TensorRef<'static> {
    // SAFETY: the views are only validated, never launched on.
    unsafe { TensorRef::from_raw(ptr, shape, strides, dtype) }.unwrap()
}
fn view_mut(ptr: u64, shape: &[usize], strides: &[isize], dtype: DType) -> TensorMut<'static> {
    // SAFETY: as above.
    unsafe { TensorMut::from_raw(ptr, shape, strides, dtype) }.unwrap()
}

/// Contiguous bf16 `x`, `w`, `y` (and `residual`) of `t` rows of D = 4096 at distinct addresses.
fn args(t: usize, residual: bool) -> Args<'static> {
    let d = 4096;
    Args {
        x: view(BASE, &[t, d], &[d as isize, 1], DType::BF16),
        residual: residual.then(|| view_mut(BASE + (1 << 30), &[t, d], &[d as isize, 1], DType::BF16)),
        w: view(BASE + (2 << 30), &[d], &[1], DType::BF16),
        y: view_mut(BASE + (3 << 30), &[t, d], &[d as isize, 1], DType::BF16),
    }
}

#[rstest]
#[case::plain(false)]
#[case::fused(true)]
fn good_arguments_become_kernel_params(#[case] residual: bool) {
    let q = Query { residual, ..query(4096, DType::BF16) };
    let mut a = args(5, residual);
    a.y = view_mut(BASE + (3 << 30), &[5, 4096], &[4096 + 64, 1], DType::BF16);
    let p = q.kernel_params(&a).unwrap();
    assert_eq!((p.rows, p.cols, p.x_stride, p.y_stride, p.eps), (5, 4096, 4096, 4160, 1e-6));
    assert_eq!((p.x, p.w, p.y), (BASE, BASE + (2 << 30), BASE + (3 << 30)));
    assert_eq!(p.residual, if residual { BASE + (1 << 30) } else { 0 });
}

#[test]
fn zero_rows_are_accepted() {
    assert_eq!(query(4096, DType::BF16).kernel_params(&args(0, false)).unwrap().rows, 0);
}

/// Returns a bad variant of good bf16 arguments (T = 4, D = 4096) for each named case.
fn bad_args(case: &str) -> (Query, Args<'static>) {
    let d = 4096;
    let q = query(d, DType::BF16);
    let mut a = args(4, false);
    match case {
        "x_wrong_cols" => a.x = view(BASE, &[4, 2048], &[2048, 1], DType::BF16),
        "x_rank_3" => a.x = view(BASE, &[2, 2, d], &[2 * d as isize, d as isize, 1], DType::BF16),
        "x_wrong_dtype" => a.x = view(BASE, &[4, d], &[d as isize, 1], DType::F16),
        "y_wrong_rows" => a.y = view_mut(BASE + (3 << 30), &[3, d], &[d as isize, 1], DType::BF16),
        "w_wrong_len" => a.w = view(BASE + (2 << 30), &[d / 2], &[1], DType::BF16),
        "w_strided" => a.w = view(BASE + (2 << 30), &[d], &[2], DType::BF16),
        "x_overlapping_rows" => a.x = view(BASE, &[4, d], &[8, 1], DType::BF16),
        "x_column_major" => a.x = view(BASE, &[4, d], &[1, 4], DType::BF16),
        "y_odd_row_stride" => a.y = view_mut(BASE + (3 << 30), &[4, d], &[d as isize + 1, 1], DType::BF16),
        "x_misaligned_ptr" => a.x = view(BASE + 2, &[4, d], &[d as isize, 1], DType::BF16),
        "w_misaligned_ptr" => a.w = view(BASE + 8, &[d], &[1], DType::BF16),
        "above_capacity" => {
            a = args(65, false);
        }
        "residual_missing" => return (Query { residual: true, ..q }, a),
        "residual_unexpected" => a = args(4, true),
        "residual_wrong_shape" => {
            a = args(4, true);
            a.residual = Some(view_mut(BASE + (1 << 30), &[4, d + 8], &[d as isize + 8, 1], DType::BF16));
            return (Query { residual: true, ..q }, a);
        }
        "residual_misaligned" => {
            a = args(4, true);
            a.residual = Some(view_mut(BASE + (1 << 30) + 6, &[4, d], &[d as isize, 1], DType::BF16));
            return (Query { residual: true, ..q }, a);
        }
        other => panic!("unknown case {other}"),
    }
    (q, a)
}

#[rstest]
#[case::x_wrong_cols("x_wrong_cols", "Shape x")]
#[case::x_rank_3("x_rank_3", "Shape x")]
#[case::x_wrong_dtype("x_wrong_dtype", "DType x")]
#[case::y_wrong_rows("y_wrong_rows", "Shape y")]
#[case::w_wrong_len("w_wrong_len", "Shape w")]
#[case::w_strided("w_strided", "Stride w")]
#[case::x_overlapping_rows("x_overlapping_rows", "Stride x")]
#[case::x_column_major("x_column_major", "Stride x")]
#[case::y_odd_row_stride("y_odd_row_stride", "Misaligned y")]
#[case::x_misaligned_ptr("x_misaligned_ptr", "Misaligned x")]
#[case::w_misaligned_ptr("w_misaligned_ptr", "Misaligned w")]
#[case::above_capacity("above_capacity", "Capacity")]
#[case::residual_missing("residual_missing", "Shape residual")]
#[case::residual_unexpected("residual_unexpected", "Shape residual")]
#[case::residual_wrong_shape("residual_wrong_shape", "Shape residual")]
#[case::residual_misaligned("residual_misaligned", "Misaligned residual")]
fn bad_arguments_are_typed_errors(#[case] case: &str, #[case] want: &str) {
    let (q, a) = bad_args(case);
    let got = match q.kernel_params(&a) {
        Err(Error::Shape { tensor, .. }) => format!("Shape {tensor}"),
        Err(Error::DType { tensor, .. }) => format!("DType {tensor}"),
        Err(Error::Stride { tensor, .. }) => format!("Stride {tensor}"),
        Err(Error::Misaligned { tensor, .. }) => format!("Misaligned {tensor}"),
        Err(Error::Capacity { .. }) => "Capacity".to_string(),
        other => panic!("{case}: unexpected {other:?}"),
    };
    assert_eq!(got, want, "{case}");
}

#[test]
fn shape_error_message_names_tensor_and_both_shapes() {
    let (q, a) = bad_args("x_wrong_cols");
    let msg = q.kernel_params(&a).unwrap_err().to_string();
    assert_eq!(msg, "`x` must have shape [T, D] = [4, 4096], got [4, 2048]");
}

// ---- configs, buckets, variant table ------------------------------------------------------

#[rstest]
#[case::llama3_8b_bf16(4096, DType::BF16, &["v2", "v1", "v4", "v8"])]
#[case::deepseek_v4_bf16(7168, DType::BF16, &["v4", "v1", "v2", "v8"])]
#[case::d16384_bf16(16384, DType::BF16, &["v8", "v2", "v4"])]
#[case::d16384_f32(16384, DType::F32, &["v8", "v4"])]
#[case::llama3_8b_f32(4096, DType::F32, &["v4", "v1", "v2", "v8"])]
#[case::d4104_bf16(4104, DType::BF16, &["v4", "v1", "v2", "v8"])]
#[case::d512_f16(512, DType::F16, &["v1", "v2"])]
#[case::d72_bf16(72, DType::BF16, &["v1"])]
#[case::d8_bf16(8, DType::BF16, &["v1"])]
fn configs_default_first(#[case] cols: usize, #[case] dtype: DType, #[case] want: &[&str]) {
    let ids: Vec<String> = configs(&query(cols, dtype)).iter().map(Config::id).collect();
    assert_eq!(ids, want);
}

#[test]
fn every_legal_query_has_configs_that_fit_the_kernel() {
    for dtype in [DType::BF16, DType::F16, DType::F32] {
        let vec_elems = 16 / dtype.size_bytes();
        for cols in (8..=MAX_COLS).step_by(8) {
            let q = query(cols, dtype);
            let cs = configs(&q);
            assert!(!cs.is_empty(), "{dtype} D={cols}: no config");
            for c in cs {
                let threads = c.block_threads(&q);
                // The kernel's __launch_bounds__: min(1024, kMaxCols / VEC / kVecsPerThread).
                let bound = 1024.min(MAX_COLS / vec_elems / c.vecs_per_thread);
                assert!(threads % 32 == 0 && threads <= bound, "{dtype} D={cols} {}: {threads} threads", c.id());
                assert!(
                    threads * c.vecs_per_thread * vec_elems >= cols,
                    "{dtype} D={cols} {}: row not covered",
                    c.id()
                );
            }
        }
    }
}

#[rstest]
#[case::decode_only(1, &["1"])]
#[case::small(100, &["1-100"])]
#[case::prefill(32768, &["1-128", "129-2048", "2049-32768"])]
#[case::edge(2048, &["1-128", "129-2048"])]
fn buckets_come_from_capacity(#[case] capacity: usize, #[case] want: &[&str]) {
    let labels: Vec<String> = buckets(capacity).iter().map(|b| b.label()).collect();
    assert_eq!(labels, want);
}

#[test]
fn config_ids_round_trip() {
    for v in VECS_PER_THREAD {
        let c = Config { vecs_per_thread: v };
        assert_eq!(Config::parse(&c.id()), Some(c));
    }
    assert_eq!(Config::parse("v3"), None);
    assert_eq!(Config::parse("x2"), None);
}

/// Every symbol the variant table can name.
fn all_symbols() -> Vec<String> {
    let mut out = Vec::new();
    for dtype in [DType::BF16, DType::F16, DType::F32] {
        for residual in [false, true] {
            for v in VECS_PER_THREAD {
                out.push(Config { vecs_per_thread: v }.symbol(&Query { residual, ..query(4096, dtype) }));
            }
        }
    }
    // The fused quantized-output entry points of `norm.rmsnorm_quant` (bf16/f16 only).
    for dtype in [DType::BF16, DType::F16] {
        for residual in [false, true] {
            for out_fmt in [QuantOut::Mxfp8, QuantOut::Fp8Block128F32, QuantOut::Fp8Block128Ue8m0, QuantOut::Nvfp4] {
                let q = rmsnorm_quant::Query { cols: 4096, dtype, max_tokens: 64, eps: 1e-6, residual, out: out_fmt };
                for v in VECS_PER_THREAD {
                    out.push(rmsnorm_quant::Config::one_row(v).symbol(&q));
                }
                if !residual {
                    out.push(rmsnorm_quant::Config::two_rows().symbol(&q));
                }
            }
        }
    }
    out
}

#[test]
fn symbols_follow_the_naming_scheme() {
    let q = Query { residual: true, ..query(4096, DType::BF16) };
    assert_eq!(Config { vecs_per_thread: 2 }.symbol(&q), "b12x_rmsnorm_add_v2_bf16");
    assert_eq!(Config { vecs_per_thread: 8 }.symbol(&query(4096, DType::F16)), "b12x_rmsnorm_v8_f16");
    let fused = rmsnorm_quant::Query {
        cols: 4096,
        dtype: DType::BF16,
        max_tokens: 64,
        eps: 1e-6,
        residual: true,
        out: QuantOut::Fp8Block128Ue8m0,
    };
    assert_eq!(rmsnorm_quant::Config::one_row(2).symbol(&fused), "b12x_rmsnorm_add_fp8b128ue8m0_v2_bf16");
    let plain = rmsnorm_quant::Query { residual: false, out: QuantOut::Nvfp4, ..fused };
    assert_eq!(rmsnorm_quant::Config::two_rows().symbol(&plain), "b12x_rmsnorm_nvfp4_v4r2_bf16");
    // 24 plain + 64 fused one-row + 8 fused two-row.
    assert_eq!(all_symbols().len(), 96);
}

#[test]
fn variant_table_matches_built_kernels_without_spills() {
    check_manifest(b12x_norm::KERNEL_MANIFEST, &all_symbols()).unwrap();
    // And the fatbin holds nothing the table cannot select.
    let m: serde_json::Value = serde_json::from_str(b12x_norm::KERNEL_MANIFEST).unwrap();
    let built: Vec<String> = m["units"]["rmsnorm"]["kernels"].as_object().unwrap().keys().cloned().collect();
    let mut table = all_symbols();
    table.sort();
    assert_eq!(built, table);
}

#[test]
fn aliasing_rules() {
    let q = query(4096, DType::BF16);
    // y exactly over x (same address and strides): in place, allowed.
    let mut a = args(4, false);
    a.y = view_mut(BASE, &[4, 4096], &[4096, 1], DType::BF16);
    assert!(q.kernel_params(&a).is_ok());
    // y one row into x: a partial overlap, rejected.
    a.y = view_mut(BASE + 2 * 4096, &[4, 4096], &[4096, 1], DType::BF16);
    assert!(matches!(q.kernel_params(&a), Err(Error::Aliasing { a: "y", b: "x", .. })));
    // residual over y, rejected.
    let qr = Query { residual: true, ..query(4096, DType::BF16) };
    let mut a = args(4, true);
    a.residual = Some(view_mut(BASE + (3 << 30), &[4, 4096], &[4096, 1], DType::BF16));
    assert!(matches!(qr.kernel_params(&a), Err(Error::Aliasing { a: "residual", b: "y", .. })));
}
