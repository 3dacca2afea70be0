//! CPU tests of `gemm.bf16_gemv`: the oracle against hand-computed values and identities, the
//! tolerance, query validation, argument checks (on views of fake device addresses: nothing is
//! dereferenced), config enumeration per bucket, and the variant table against the built kernels.

use b12x_core::half::bf16;
use b12x_core::testing::{cast, check_bitwise, check_manifest};
use b12x_core::{pow2_buckets, DType, Error, TensorMut, TensorRef};
use b12x_gemm::bf16_gemv::reference::{bound, exact, gemv, silu_mul_x, ulp};
use b12x_gemm::bf16_gemv::{
    all_symbols, enumerate, fold_norm_weight, rms_groups, rope_row_order, Args, Config, Geometry, MmaEpi, Query,
    RmsArgs, RopeAppend, RopeArgs, TmaMode, TmaWork, Variant, XAct, XLoad, YAct, ROPE_MAX_PAIRS, TMA_MAX_STAGES,
};
use rstest::rstest;

const H200_SMS: u32 = 132;
const H200_SMEM: u32 = 232_448;
/// SM120 (RTX 5090) / SM121 (GB10): 99 KB of opt-in shared memory per CTA.
const SM120_SMEM: u32 = 101_376;

fn query(n: usize, k: usize) -> Query {
    Query {
        n,
        k,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: 64,
        aligned: true,
        pdl: false,
        x_act: XAct::None,
        y_act: YAct::None,
    }
}

/// A fused-SwiGLU query (M ≤ 8).
fn silu_query(n: usize, k: usize, limit: Option<f32>) -> Query {
    Query { max_rows: 8, x_act: XAct::SiluMul { limit }, ..query(n, k) }
}

fn geometry(n: usize, k: usize, rows_hi: usize, x_f32: bool, aligned: bool) -> Geometry {
    Geometry {
        n,
        k,
        x_f32,
        aligned,
        x: XLoad::Plain,
        y_silu: false,
        y_rope: false,
        y_res: false,
        rows_hi,
        sm_count: H200_SMS,
        smem_optin: H200_SMEM,
    }
}

// ---- oracle -------------------------------------------------------------------------------

#[test]
fn oracle_matches_hand_computed_values() {
    // x = [[1, 2, 3, 4], [-1, 0.5, 0, 2]], W = [[1, 0, 0, 0], [1, 1, 1, 1], [0.5, -1, 2, 0.25]]
    let x = cast::<bf16>(&[1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.0, 2.0]);
    let w = cast::<bf16>(&[1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.5, -1.0, 2.0, 0.25]);
    let bias = [0.0f32, 0.5, -1.0];
    // Row 0: [1, 10, 0.5 - 2 + 6 + 1 = 5.5] + bias = [1, 10.5, 4.5]
    // Row 1: [-1, 1.5, -0.5 - 0.5 + 0 + 0.5 = -0.5] + bias = [-1, 2, -1.5]
    let want = [1.0f32, 10.5, 4.5, -1.0, 2.0, -1.5];
    let y: Vec<f32> = gemv(&x, &w, Some(&bias), 2, 3, 4);
    check_bitwise("y", &y, &want, &[2, 3]).unwrap();
    let y: Vec<bf16> = gemv(&x, &w, Some(&cast::<bf16>(&bias)), 2, 3, 4);
    check_bitwise("y", &y, &cast::<bf16>(&want), &[2, 3]).unwrap();
    let none: Option<&[f32]> = None;
    let y: Vec<f32> = gemv(&x, &w, none, 2, 3, 4);
    check_bitwise("y", &y, &[1.0, 10.0, 5.5, -1.0, 1.5, -0.5], &[2, 3]).unwrap();
}

#[test]
fn oracle_rounds_once_at_the_end() {
    // 1 + 2^-8 + 2^-8: rounding to bf16 after each add would tie to 1 twice; rounding once at
    // the end gives 1 + 2^-7 (one bf16 ULP above 1).
    let x = cast::<bf16>(&[1.0, 1.0, 1.0]);
    let w = cast::<bf16>(&[1.0, 2f32.powi(-8), 2f32.powi(-8)]);
    let none: Option<&[f32]> = None;
    let y: Vec<bf16> = gemv(&x, &w, none, 1, 1, 3);
    assert_eq!(y[0].to_f32(), 1.0 + 2f32.powi(-7));
    // f32 x is not rounded to bf16: 1 + 2^-12 survives into an f32 output.
    let xf = [1.0f32 + 2f32.powi(-12)];
    let y: Vec<f32> = gemv(&xf, &cast::<bf16>(&[1.0]), none, 1, 1, 1);
    assert_eq!(y[0], 1.0 + 2f32.powi(-12));
}

#[rstest]
#[case::first_column(0)]
#[case::middle_column(37)]
#[case::last_column(99)]
fn one_hot_x_selects_a_column_of_w(#[case] j: usize) {
    let (n, k) = (13, 100);
    let w: Vec<bf16> = cast(&b12x_core::testing::uniform(1, n * k, -3.0, 3.0));
    let mut x = vec![0.0f32; k];
    x[j] = 1.0;
    let none: Option<&[f32]> = None;
    let y: Vec<bf16> = gemv(&cast::<bf16>(&x), &w, none, 1, n, k);
    let want: Vec<bf16> = (0..n).map(|r| w[r * k + j]).collect();
    check_bitwise("y", &y, &want, &[1, n]).unwrap();
}

#[test]
fn exact_on_a_row_subset_matches_the_full_result() {
    let (m, n, k) = (3, 17, 40);
    let x: Vec<f32> = b12x_core::testing::uniform(2, m * k, -1.0, 1.0);
    let w: Vec<bf16> = cast(&b12x_core::testing::uniform(3, n * k, -1.0, 1.0));
    let none: Option<&[f32]> = None;
    let full = exact(&x, &w, none, m, k, &(0..n).collect::<Vec<_>>());
    let rows = [0, 5, 16];
    let part = exact(&x, &w, none, m, k, &rows);
    for i in 0..m {
        for (j, &r) in rows.iter().enumerate() {
            assert_eq!(part.acc[i * rows.len() + j], full.acc[i * n + r]);
            assert!(part.abs[i * rows.len() + j] >= part.acc[i * rows.len() + j].abs());
        }
    }
}

#[rstest]
#[case::bf16_one(DType::BF16, 1.0, 2f64.powi(-7))]
#[case::bf16_just_below_two(DType::BF16, 1.99, 2f64.powi(-7))]
#[case::bf16_minus_eight(DType::BF16, -8.0, 2f64.powi(-4))]
#[case::f32_one(DType::F32, 1.0, 2f64.powi(-23))]
#[case::f16_one(DType::F16, 1.0, 2f64.powi(-10))]
#[case::f16_five(DType::F16, 5.78, 2f64.powi(-8))]
#[case::f16_subnormal(DType::F16, 1e-6, 2f64.powi(-24))]
fn ulp_of_the_output_type(#[case] out: DType, #[case] v: f64, #[case] want: f64) {
    assert_eq!(ulp(out, v), want);
}

#[test]
fn bound_grows_with_k_and_magnitude() {
    assert_eq!(bound(DType::F32, 0, 1.0, 5.0), 2f64.powi(-23));
    assert!(bound(DType::F32, 7168, 1.0, 100.0) > bound(DType::F32, 4096, 1.0, 100.0));
    assert!(bound(DType::BF16, 4096, 1.0, 100.0) > bound(DType::F32, 4096, 1.0, 100.0));
}

// ---- query validation ---------------------------------------------------------------------

#[rstest]
#[case::zero_n(Query { n: 0, ..query(8, 8) }, "n")]
#[case::zero_k(Query { k: 0, ..query(8, 8) }, "k")]
#[case::huge_k(Query { k: 1 << 31, ..query(8, 8) }, "k")]
#[case::f16_x(Query { x_dtype: DType::F16, ..query(8, 8) }, "x_dtype")]
#[case::i32_out(Query { out_dtype: DType::I32, ..query(8, 8) }, "out_dtype")]
#[case::u8_bias(Query { bias: Some(DType::U8), ..query(8, 8) }, "bias")]
#[case::zero_rows(Query { max_rows: 0, ..query(8, 8) }, "max_rows")]
#[case::too_many_rows(Query { max_rows: 65, ..query(8, 8) }, "max_rows")]
#[case::silu_f32_x(Query { x_dtype: DType::F32, ..silu_query(4096, 12288, None) }, "x_act")]
#[case::silu_f32_out(Query { out_dtype: DType::F32, ..silu_query(4096, 12288, None) }, "x_act")]
#[case::silu_unaligned(Query { aligned: false, ..silu_query(4096, 12288, None) }, "x_act")]
#[case::silu_k_not_a_multiple_of_8(silu_query(4096, 12284, None), "x_act")]
#[case::silu_nine_rows(Query { max_rows: 9, ..silu_query(4096, 12288, None) }, "x_act")]
#[case::silu_zero_limit(silu_query(4096, 12288, Some(0.0)), "x_act")]
#[case::silu_negative_limit(silu_query(4096, 12288, Some(-7.0)), "x_act")]
#[case::silu_nan_limit(silu_query(4096, 12288, Some(f32::NAN)), "x_act")]
#[case::silu_infinite_limit(silu_query(4096, 12288, Some(f32::INFINITY)), "x_act")]
fn bad_queries_name_the_field(#[case] q: Query, #[case] field: &str) {
    match q.validate() {
        Err(Error::InvalidQuery { field: f, .. }) => assert_eq!(f, field),
        other => panic!("expected InvalidQuery({field}), got {other:?}"),
    }
}

#[rstest]
#[case::llama3_8b_gate(query(14336, 4096))]
#[case::prime_n(query(4099, 4104))]
#[case::one_by_one(Query { max_rows: 1, ..query(1, 1) })]
#[case::f32_everything(Query { x_dtype: DType::F32, out_dtype: DType::F32, bias: Some(DType::F32), ..query(384, 7168) })]
#[case::qwen3_8b_down_silu(silu_query(4096, 12288, None))]
#[case::gpt_oss_expert_down_silu_limit(silu_query(2880, 2880, Some(7.0)))]
#[case::silu_one_row_f32_bias(Query { max_rows: 1, bias: Some(DType::F32), ..silu_query(8, 8, Some(1e-3)) })]
fn good_queries_validate(#[case] q: Query) {
    q.validate().unwrap();
}

// ---- argument checks ----------------------------------------------------------------------

const BASE: u64 = 0x7f00_0000_0000;

fn view(ptr: u64, shape: &[usize], row_stride: usize, dtype: DType) -> TensorRef<'static> {
    let strides: Vec<isize> = if shape.len() == 2 { vec![row_stride as isize, 1] } else { vec![1] };
    // SAFETY: never dereferenced: kernel_params only inspects the views.
    unsafe { TensorRef::from_raw(ptr, shape, &strides, dtype) }.unwrap()
}
fn view_mut(ptr: u64, shape: &[usize], row_stride: usize, dtype: DType) -> TensorMut<'static> {
    // SAFETY: as above.
    unsafe { TensorMut::from_raw(ptr, shape, &[row_stride as isize, 1], dtype) }.unwrap()
}

struct Views {
    x: (u64, usize, usize, DType),
    w: (u64, usize, DType),
    y: (u64, usize, usize, DType),
    bias: Option<(u64, DType)>,
}

fn good(m: usize) -> Views {
    Views {
        x: (BASE, m, 4096, DType::BF16),
        w: (BASE + (1 << 30), 4096, DType::BF16),
        y: (BASE + (2 << 30), m, 1024, DType::BF16),
        bias: None,
    }
}

fn params(q: &Query, v: &Views) -> Result<b12x_gemm::bf16_gemv::Bf16GemvParams, Error> {
    let args = Args {
        x: view(v.x.0, &[v.x.1, q.k], v.x.2, v.x.3),
        w: view(v.w.0, &[q.n, q.k], v.w.1, v.w.2),
        bias: v.bias.map(|(p, d)| view(p, &[q.n], 1, d)),
        y: view_mut(v.y.0, &[v.y.1, q.n], v.y.2, v.y.3),
        add_norm: None,
        rope: None,
        rms: None,
    };
    q.kernel_params(&args)
}

#[test]
fn good_args_fill_the_params() {
    let q = Query { bias: Some(DType::F32), max_rows: 8, ..query(1024, 4096) };
    let v = Views { bias: Some((BASE + (3 << 30), DType::F32)), x: (BASE, 5, 4104, DType::BF16), ..good(5) };
    let p = params(&q, &v).unwrap();
    assert_eq!((p.n, p.k, p.m, p.ldx, p.ldw, p.ldy, p.flags), (1024, 4096, 5, 4104, 4096, 1024, 1));
    assert_eq!((p.x, p.w, p.bias), (BASE, BASE + (1 << 30), BASE + (3 << 30)));
}

/// A short tag of an error: its variant, and the tensor it names, e.g. `"Misaligned:x"`.
fn kind(e: &Error) -> String {
    match e {
        Error::Capacity { .. } => "Capacity".into(),
        Error::Shape { tensor, .. } => format!("Shape:{tensor}"),
        Error::DType { tensor, .. } => format!("DType:{tensor}"),
        Error::Stride { tensor, .. } => format!("Stride:{tensor}"),
        Error::Misaligned { tensor, .. } => format!("Misaligned:{tensor}"),
        other => format!("{other:?}"),
    }
}

const Y: u64 = BASE + (2 << 30);
const W: u64 = BASE + (1 << 30);

#[rstest]
#[case::above_capacity(Views { x: (BASE, 9, 4096, DType::BF16), y: (Y, 9, 1024, DType::BF16), ..good(1) }, "Capacity")]
#[case::x_wrong_dtype(Views { x: (BASE, 1, 4096, DType::F32), ..good(1) }, "DType:x")]
#[case::w_wrong_dtype(Views { w: (W, 4096, DType::F16), ..good(1) }, "DType:w")]
#[case::y_wrong_rows(Views { y: (Y, 2, 1024, DType::BF16), ..good(1) }, "Shape:y")]
#[case::y_wrong_dtype(Views { y: (Y, 1, 1024, DType::F32), ..good(1) }, "DType:y")]
#[case::unexpected_bias(Views { bias: Some((BASE, DType::BF16)), ..good(1) }, "Shape:bias")]
#[case::misaligned_x(Views { x: (BASE + 2, 1, 4096, DType::BF16), ..good(1) }, "Misaligned:x")]
#[case::odd_x_stride(Views { x: (BASE, 2, 4097, DType::BF16), y: (Y, 2, 1024, DType::BF16), ..good(2) }, "Misaligned:x")]
#[case::misaligned_w(Views { w: (W + 8, 4096, DType::BF16), ..good(1) }, "Misaligned:w")]
#[case::overlapping_w_rows(Views { w: (W, 4000, DType::BF16), ..good(1) }, "Stride:w")]
#[case::odd_y_pointer(Views { y: (BASE + 1, 1, 1024, DType::BF16), ..good(1) }, "Misaligned:y")]
fn bad_args_are_typed_errors(#[case] v: Views, #[case] expected: &str) {
    let q = Query { max_rows: 8, ..query(1024, 4096) };
    match params(&q, &v) {
        Err(e) => assert_eq!(kind(&e), expected, "{e}"),
        Ok(p) => panic!("expected {expected}, got {p:?}"),
    }
}

#[test]
fn missing_or_wrong_bias_is_a_typed_error() {
    let q = Query { bias: Some(DType::BF16), max_rows: 8, ..query(1024, 4096) };
    assert!(matches!(params(&q, &good(1)), Err(Error::Shape { tensor: "bias", .. })));
    let v = Views { bias: Some((BASE + (3 << 30), DType::F32)), ..good(1) };
    assert!(matches!(params(&q, &v), Err(Error::DType { tensor: "bias", .. })));
}

#[test]
fn unaligned_plans_accept_unaligned_views() {
    let q = Query { aligned: false, max_rows: 8, ..query(1024, 4095) };
    let v = Views { x: (BASE + 2, 2, 4097, DType::BF16), w: (BASE + 6, 4095, DType::BF16), ..good(2) };
    let v = Views { y: (BASE + (2 << 30) + 2, 2, 1025, DType::BF16), ..v };
    params(&q, &v).unwrap();
    // Element alignment is still required.
    let v = Views { w: (BASE + 7, 4095, DType::BF16), ..good(2) };
    assert!(matches!(params(&q, &v), Err(Error::Misaligned { tensor: "w", .. })));
}

// ---- configs ------------------------------------------------------------------------------

#[rstest]
#[case::decode_1(1, 1)]
#[case::decode_8(8, 1)]
#[case::rows_9_16(16, 2)]
#[case::rows_17_32(32, 4)]
#[case::rows_33_64(64, 8)]
fn buckets_pick_the_smallest_token_tile(#[case] rows_hi: usize, #[case] nt: u32) {
    for c in enumerate(&geometry(4096, 7168, rows_hi, false, true)) {
        match c.variant {
            Variant::Mma { nt: got, .. } | Variant::MmaDirect { nt: got, .. } | Variant::Tma { nt: got, .. } => {
                assert_eq!(got, nt, "{}", c.id())
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    for c in enumerate(&geometry(4096, 7168, rows_hi, true, true)) {
        match c.variant {
            Variant::Simt { mt, .. } => assert_eq!(mt as usize, rows_hi.next_power_of_two().min(8)),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(matches!(enumerate(&geometry(4096, 7168, rows_hi, false, false))[0].variant, Variant::MmaUnaligned { .. }));
    assert!(matches!(enumerate(&geometry(4096, 7168, rows_hi, true, false))[0].variant, Variant::SimtUnaligned { .. }));
}

#[rstest]
#[case::dsv4_router(384, 7168, 8)]
#[case::llama3_8b_o(4096, 4096, 1)]
#[case::dsv4_up(18432, 7168, 1)]
#[case::small(1024, 4096, 4)]
fn default_config_fills_every_sm(#[case] n: usize, #[case] k: usize, #[case] ksplit: u32) {
    let cs = enumerate(&geometry(n, k, 1, false, true));
    let d = cs[0];
    assert_eq!(d.ksplit, ksplit, "{}", d.id());
    assert!(d.row_blocks(n) * d.k_split(k).1 >= H200_SMS as usize);
}

#[rstest]
#[case::llama3_8b(4096, 4096)]
#[case::dsv4_router(384, 7168)]
#[case::dsv4_lm_head(129280, 7168)]
#[case::prime_n_odd_k(4099, 4097)]
#[case::tiny(1, 1)]
fn every_bucket_has_configs_that_fit(#[case] n: usize, #[case] k: usize, #[values(H200_SMEM, SM120_SMEM)] smem: u32) {
    for b in pow2_buckets(64) {
        for (x_f32, aligned) in [(false, true), (false, false), (true, true), (true, false)] {
            let g = Geometry { smem_optin: smem, ..geometry(n, k, b.hi, x_f32, aligned) };
            let cs = enumerate(&g);
            assert!(!cs.is_empty(), "bucket {} x_f32={x_f32} aligned={aligned}", b.label());
            let mut ids: Vec<String> = cs.iter().map(Config::id).collect();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), cs.len(), "duplicate config ids");
            for c in &cs {
                // TMA CTAs add a producer warp to at most 8 consumer warps.
                let max_threads = if c.tma.is_some() { 288 } else { 256 };
                assert!(c.dynamic_smem() + 1024 <= smem && c.threads() <= max_threads, "{}", c.id());
                let (partials, counters) = c.scratch_bytes(n, k, b.hi, 132);
                if let Some(s) = c.tma_schedule(n, k, 132) {
                    assert!(c.tma.is_some_and(|t| t.stages >= 2), "{}", c.id());
                    // What the kernel addresses: up to 1023 bytes to align the ring, the ring,
                    // and (cluster split-K) the partial tile after it.
                    let t = c.tma.unwrap();
                    assert!(t.stages <= TMA_MAX_STAGES, "{}", c.id());
                    let tile = if matches!(t.work, TmaWork::Cluster(_)) { c.tma_cluster_tile_bytes() } else { 0 };
                    assert!(c.dynamic_smem() >= 1023 + t.stages * c.tma_stage_bytes() + tile, "{}", c.id());
                    assert_eq!(partials > 0, s.merges);
                    assert_eq!(counters, if s.merges { s.row_blocks * c.warps_r as usize * 8 } else { 0 });
                    continue;
                }
                let (per, splits) = c.k_split(k);
                assert!(per % 32 == 0 && per * splits >= k && per * (splits - 1) < k, "{}", c.id());
                assert_eq!(partials > 0, splits > 1);
                assert_eq!(counters, if splits > 1 { c.row_blocks(n) * 8 } else { 0 });
            }
        }
    }
}

#[test]
fn config_ids_are_stable() {
    let c = Config {
        variant: Variant::Mma { nt: 1, rt: 1, u: 4, stages: 4, x: XLoad::Plain, epi: MmaEpi::Plain },
        warps_r: 1,
        warps_k: 2,
        ksplit: 8,
        tma: None,
    };
    assert_eq!(c.id(), "mma_nt1_rt1_u4_s4_wr1_wk2_ks8");
    assert_eq!(c.variant.symbol(DType::F32), "b12x_bf16_gemv_mma_nt1_rt1_u4_s4_f32out");
    let s = Config { variant: Variant::SimtUnaligned { mt: 8 }, warps_r: 2, warps_k: 4, ksplit: 1, tma: None };
    assert_eq!(s.id(), "simt_mt8_unaligned_wr2_wk4_ks1");
    assert_eq!(s.variant.symbol(DType::BF16), "b12x_bf16_gemv_simt_mt8_unaligned_bf16out");
    // The cluster split-K work split keeps the TMA kernel (the split is a run-time flag).
    let t = Config {
        variant: Variant::Tma { nt: 2, rt: 1, cw: 2, kb: 8 },
        warps_r: 2,
        warps_k: 1,
        ksplit: 1,
        tma: Some(TmaMode { stages: 4, work: TmaWork::Cluster(8), evict_first: false }),
    };
    assert_eq!(t.id(), "tma_nt2_rt1_cw2_kb8_s4_c8_nh");
    assert_eq!(t.variant.symbol(DType::F32), "b12x_bf16_gemv_tma_nt2_rt1_cw2_kb8_f32out");
    // Cluster tile: 2 consumer warps x 32 lanes x 8 fragment values (NT = 2) x 4 bytes.
    assert_eq!(t.tma_cluster_tile_bytes(), 2 * 32 * 8 * 4);
}

#[test]
fn every_enumerated_symbol_is_in_the_variant_table() {
    let all = all_symbols();
    for rows_hi in [1, 2, 4, 8, 16, 32, 64] {
        for (x_f32, aligned, x) in [
            (false, true, XLoad::Plain),
            (false, false, XLoad::Plain),
            (true, true, XLoad::Plain),
            (true, false, XLoad::Plain),
            (false, true, XLoad::SiluMul),
            (false, true, XLoad::AddNorm),
        ] {
            for c in enumerate(&Geometry { x, ..geometry(4096, 7168, rows_hi, x_f32, aligned) }) {
                // The fused variants exist for BF16 output only (validate requires it).
                let outs: &[DType] = if x != XLoad::Plain { &[DType::BF16] } else { &[DType::BF16, DType::F32] };
                for &out in outs {
                    assert!(all.contains(&c.variant.symbol(out)), "{}", c.variant.symbol(out));
                }
            }
        }
    }
}

#[test]
fn variant_table_matches_the_built_kernels() {
    // Every symbol exists for sm_90a, sm_120a and sm_121a, and no kernel spills.
    check_manifest(b12x_gemm::KERNEL_MANIFEST, &all_symbols()).unwrap();
}

#[test]
fn output_must_not_overlap_inputs() {
    let q = query(1024, 4096);
    let mut v = good(2);
    assert!(params(&q, &v).is_ok());
    v.y.0 = BASE + 4096; // inside x's first rows
    assert!(matches!(params(&q, &v), Err(Error::Aliasing { a: "y", b: "x", .. })));
    v.y.0 = BASE + (1 << 30) + 64; // inside W
    assert!(matches!(params(&q, &v), Err(Error::Aliasing { a: "y", b: "w", .. })));
}

/// `stream_k_three_row_blocks` of the GPU suite (9000 × 1152) exercises the stream-K walk order
/// where it matters: some `sk` config's CTAs start inside a row block, own a whole one and end
/// inside a third (the kernel walks the last one first), and the last row block and k-stage are
/// partial.
#[test]
fn gpu_stream_k_case_covers_the_rotated_walk() {
    let (n, k) = (9000, 1152);
    for rows_hi in [1, 16] {
        let spans_three = enumerate(&geometry(n, k, rows_hi, false, true)).into_iter().any(|c| {
            let Some(s) = c.tma_schedule(n, k, H200_SMS) else { return false };
            if c.tma.unwrap().work != TmaWork::StreamK || n % c.rows_per_cta() as usize == 0 {
                return false;
            }
            (0..s.grid).any(|cta| {
                let (begin, count) = s.units_of(cta);
                let end = begin + count;
                begin % s.kstages != 0 && end % s.kstages != 0 && end / s.kstages - begin / s.kstages >= 2
            })
        });
        assert!(spans_three, "rows_hi {rows_hi}: no stream-K CTA spans three row blocks");
    }
    // 512 k per stage (KB = 8) and 64- / 144-row blocks: partial last k-stage and row block.
    assert!(k % 512 != 0 && n % 64 != 0 && n % 144 != 0);
}

/// The TMA work split: every unit belongs to exactly one CTA; a row block is merged exactly
/// when two CTAs share it, and the partial slots of shared row blocks never collide.
#[rstest]
#[case::v4_58mb(4096, 7168)]
#[case::v4_58mb_t(7168, 4096)]
#[case::dsv4_up(18432, 7168)]
#[case::dsv4_lm_head(129280, 7168)]
#[case::router(384, 7168)]
#[case::prime_n_odd_k(4099, 4104)]
#[case::tiny(7, 8)]
fn tma_schedule_covers_every_unit_once(#[case] n: usize, #[case] k: usize) {
    for rows_hi in [1, 16, 32] {
        for c in enumerate(&geometry(n, k, rows_hi, false, true)).into_iter().filter(|c| c.tma.is_some()) {
            let s = c.tma_schedule(n, k, H200_SMS).unwrap();
            assert_eq!(s.units, c.row_blocks(n) * s.kstages);
            // Every unit is walked by exactly one CTA (units_of mirrors the kernel).
            let mut seen = vec![0u8; s.units];
            for cta in 0..s.grid {
                let (begin, count) = s.units_of(cta);
                seen[begin..begin + count].iter_mut().for_each(|v| *v += 1);
            }
            assert!(seen.iter().all(|&v| v == 1), "{}: units not covered exactly once", c.id());
            if let TmaWork::Cluster(nc) = c.tma.unwrap().work {
                // One cluster per row block, every rank with at least one k-stage, no scratch.
                assert_eq!((s.grid, s.cluster, s.merges), (s.row_blocks * nc as usize, nc, false), "{}", c.id());
                assert!((0..s.grid).all(|cta| s.units_of(cta).1 >= 1), "{}", c.id());
                assert!(s.grid <= H200_SMS as usize && nc <= 8, "{}", c.id());
                assert_eq!(c.scratch_bytes(n, k, rows_hi, H200_SMS), (0, 0), "{}", c.id());
                continue;
            }
            assert!(s.grid * s.units_per_cta >= s.units && (s.grid - 1) * s.units_per_cta < s.units, "{}", c.id());
            if c.tma.unwrap().work == TmaWork::RowBlocks {
                assert_eq!((s.units_per_cta, s.grid, s.merges), (s.kstages, s.row_blocks, false), "{}", c.id());
            } else {
                assert!(s.grid <= H200_SMS as usize, "{}", c.id());
            }
            let mut slots = std::collections::HashSet::new();
            let mut shared = false;
            for rb in 0..s.row_blocks {
                let (first, last) = s.ctas_of(rb);
                // The CTAs named are exactly those whose units intersect the row block.
                let owners: Vec<usize> = (rb * s.kstages..(rb + 1) * s.kstages).map(|u| u / s.units_per_cta).collect();
                assert_eq!((owners[0], *owners.last().unwrap()), (first, last), "{} rb {rb}", c.id());
                if first != last {
                    shared = true;
                    for cta in first..=last {
                        assert!(slots.insert((cta, s.slot(cta, rb))), "{} rb {rb} cta {cta}: slot reused", c.id());
                    }
                }
            }
            assert_eq!(shared, s.merges, "{}", c.id());
        }
    }
}

// ---- fused SwiGLU (x_act) -----------------------------------------------------------------

#[test]
fn silu_oracle_matches_hand_computed_values() {
    // One row of K = 4: g = [0, 1, -1, 10], u = [5, 2, 2, -9].
    let x = cast::<bf16>(&[0.0, 1.0, -1.0, 10.0, 5.0, 2.0, 2.0, -9.0]);
    // silu(1)·2 = 1.46212 → 1.4609375 (bf16 spacing 2^-7 in [1, 2)); silu(-1)·2 = -0.537883 →
    // -0.5390625 (2^-8); silu(10)·(-9) = -89.9959 → -90 (0.5).
    let act = silu_mul_x(&x, 1, 4, None);
    check_bitwise("act", &act, &cast::<bf16>(&[0.0, 1.4609375, -0.5390625, -90.0]), &[1, 4]).unwrap();
    // L = 5: g = 10 → 5, u = -9 → -5: silu(5)·(-5) = -24.8327 → -24.875 (0.125); u = 5 stays.
    let act = silu_mul_x(&x, 1, 4, Some(5.0));
    check_bitwise("act (L = 5)", &act, &cast::<bf16>(&[0.0, 1.4609375, -0.5390625, -24.875]), &[1, 4]).unwrap();
}

#[rstest]
#[case::no_limit(None)]
#[case::limit(Some(0.75))]
fn silu_oracle_is_the_silu_and_mul_oracle(#[case] limit: Option<f32>) {
    // Bit for bit activation.silu_and_mul's oracle (BF16 out): the fused GEMV's promise.
    let (m, k) = (3, 264);
    let x: Vec<bf16> = cast(&b12x_core::testing::uniform(5, m * 2 * k, -4.0, 4.0));
    let want = b12x_norm::silu_and_mul::reference::silu_and_mul(&x, k, limit);
    check_bitwise("act", &silu_mul_x(&x, m, k, limit), &want, &[m, k]).unwrap();
}

#[test]
fn silu_queries_have_their_own_key() {
    let plain = Query { max_rows: 8, ..query(4096, 12288) };
    // Plain keys are unchanged (cached selections stay valid).
    assert_eq!(plain.key(), "N=4096 K=12288 x=bf16 out=bf16 bias=none max_rows=8 aligned=true");
    let fused = silu_query(4096, 12288, None);
    assert_ne!(fused.key(), plain.key());
    assert!(fused.key().ends_with(" x_act=silu_mul"), "{}", fused.key());
    // The limit changes neither the kernels nor their speed: one key.
    assert_eq!(silu_query(4096, 12288, Some(7.0)).key(), fused.key());
    assert_ne!(silu_query(4096, 12288, Some(7.0)), fused);
    assert_eq!(silu_query(4096, 12288, Some(7.0)), silu_query(4096, 12288, Some(7.0)));
    assert_eq!(XAct::default(), XAct::None);
    assert_eq!((XAct::None.kernel_limit(), XAct::SiluMul { limit: Some(7.0) }.kernel_limit()), (f32::INFINITY, 7.0));
    assert_eq!(XAct::SiluMul { limit: None }.kernel_limit(), f32::INFINITY);
}

#[rstest]
#[case::qwen3_8b_down(4096, 12288)]
#[case::gpt_oss_120b_expert_down(2880, 2880)]
#[case::odd_n(1031, 1000)]
#[case::tiny(7, 8)]
fn silu_candidates_are_the_fused_ring_and_direct_variants(
    #[case] n: usize,
    #[case] k: usize,
    #[values(H200_SMEM, SM120_SMEM)] smem: u32,
) {
    for rows_hi in [1, 2, 4, 8] {
        let plain = Geometry { smem_optin: smem, ..geometry(n, k, rows_hi, false, true) };
        let cs = enumerate(&Geometry { x: XLoad::SiluMul, ..plain });
        // No tma, simt or unaligned config; NT = 1 ring and direct variants only, both families.
        for c in &cs {
            let fused = matches!(
                c.variant,
                Variant::Mma { nt: 1, x: XLoad::SiluMul, .. } | Variant::MmaDirect { nt: 1, x: XLoad::SiluMul, .. }
            );
            assert!(fused && c.tma.is_none() && c.variant.silu() && c.id().contains("_silu_"), "{}", c.id());
            assert!(c.dynamic_smem() + 1024 <= smem && c.threads() <= 256, "{}", c.id());
        }
        assert!(cs.iter().any(|c| matches!(c.variant, Variant::Mma { .. })), "rows_hi {rows_hi}: no ring config");
        assert!(
            cs.iter().any(|c| matches!(c.variant, Variant::MmaDirect { .. })),
            "rows_hi {rows_hi}: no direct config"
        );
        // Each has the plain twin the GPU tests compare it with (same CTA shape and splits).
        let ids: Vec<String> = enumerate(&plain).iter().map(Config::id).collect();
        assert!(ids.iter().all(|id| !id.contains("silu")));
        for c in &cs {
            assert!(ids.contains(&c.id().replace("_silu", "")), "{}: no plain twin", c.id());
        }
    }
}

#[test]
fn silu_variants_are_named_and_sized() {
    let ring = Config {
        variant: Variant::Mma { nt: 1, rt: 1, u: 4, stages: 4, x: XLoad::SiluMul, epi: MmaEpi::Plain },
        warps_r: 1,
        warps_k: 2,
        ksplit: 1,
        tma: None,
    };
    assert_eq!(ring.id(), "mma_nt1_rt1_u4_s4_silu_wr1_wk2_ks1");
    assert_eq!(ring.variant.symbol(DType::BF16), "b12x_bf16_gemv_mma_nt1_rt1_u4_s4_silu_bf16out");
    // A ring stage holds the W tile (16 rows × 4U chunks of 16 B) and the gate and up pieces
    // (2 × U × 32 lanes × 16 B): 2 warps × 4 stages × (4096 + 4096) bytes.
    assert_eq!(ring.dynamic_smem(), 2 * 4 * (4096 + 4096));
    let plain =
        Config { variant: Variant::Mma { nt: 1, rt: 1, u: 4, stages: 4, x: XLoad::Plain, epi: MmaEpi::Plain }, ..ring };
    assert_eq!(plain.dynamic_smem(), 2 * 4 * (4096 + 2048));
    let direct = Config {
        variant: Variant::MmaDirect { nt: 1, rt: 2, u: 4, x: XLoad::SiluMul },
        warps_r: 1,
        warps_k: 8,
        ..ring
    };
    assert_eq!(direct.id(), "mmad_nt1_rt2_u4_silu_wr1_wk8_ks1");
    assert_eq!(direct.variant.symbol(DType::BF16), "b12x_bf16_gemv_mmad_nt1_rt2_u4_silu_bf16out");
    // Six fused variants (the NT = 1 rows of both tables), BF16 output only.
    let all = all_symbols();
    let fused: Vec<&String> = all.iter().filter(|s| s.contains("_silu_")).collect();
    assert_eq!(fused.len(), 6);
    assert!(fused.iter().all(|s| s.contains("_nt1_") && s.ends_with("_bf16out")), "{fused:?}");
}

/// A fused add+RMSNorm query (M ≤ 8).
fn norm_query(n: usize, k: usize) -> Query {
    Query { max_rows: 8, x_act: XAct::AddRmsNorm { eps: 1e-6 }, ..query(n, k) }
}

#[rstest]
#[case::f32_out(Query { out_dtype: DType::F32, ..norm_query(6144, 4096) })]
#[case::f32_x(Query { x_dtype: DType::F32, ..norm_query(6144, 4096) })]
#[case::unaligned(Query { aligned: false, ..norm_query(6144, 4096) })]
#[case::k_not_a_multiple_of_8(norm_query(6144, 4092))]
#[case::nine_rows(Query { max_rows: 9, ..norm_query(6144, 4096) })]
#[case::nan_eps(Query { x_act: XAct::AddRmsNorm { eps: f32::NAN }, ..norm_query(6144, 4096) })]
#[case::negative_eps(Query { x_act: XAct::AddRmsNorm { eps: -1e-6 }, ..norm_query(6144, 4096) })]
fn addnorm_queries_it_cannot_serve_name_x_act(#[case] q: Query) {
    assert!(matches!(q.validate(), Err(b12x_core::Error::InvalidQuery { field: "x_act", .. })), "{q:?}");
}

#[test]
fn addnorm_queries_have_their_own_key_and_combine_with_the_swiglu_epilogue() {
    let q = norm_query(6144, 4096);
    q.validate().unwrap();
    assert!(q.key().ends_with(" x_act=add_rmsnorm"), "{}", q.key());
    assert_ne!(q, Query { x_act: XAct::AddRmsNorm { eps: 1e-5 }, ..q.clone() });
    assert_eq!(q.x_act.x_load(), XLoad::AddNorm);
    let epi = Query { y_act: YAct::SiluMul { limit: None }, ..norm_query(2 * 12288, 4096) };
    epi.validate().unwrap();
    assert!(epi.key().ends_with(" x_act=add_rmsnorm y_act=silu_mul"), "{}", epi.key());
    // SwiGLU on both sides is still refused.
    let both = Query { x_act: XAct::SiluMul { limit: None }, ..epi };
    assert!(matches!(both.validate(), Err(b12x_core::Error::InvalidQuery { field: "y_act", .. })));
}

#[rstest]
#[case::qwen3_8b_qkv(6144, 4096)]
#[case::qwen3_8b_gate_up(24576, 4096)]
#[case::odd_n(1031, 1000)]
fn addnorm_candidates_are_the_fused_ring_and_direct_variants(
    #[case] n: usize,
    #[case] k: usize,
    #[values(H200_SMEM, SM120_SMEM)] smem: u32,
) {
    for rows_hi in [1, 2, 4, 8] {
        let plain = Geometry { smem_optin: smem, ..geometry(n, k, rows_hi, false, true) };
        let cs = enumerate(&Geometry { x: XLoad::AddNorm, ..plain });
        assert!(cs.iter().any(|c| matches!(c.variant, Variant::Mma { .. })), "rows_hi {rows_hi}: no ring config");
        assert!(cs.iter().any(|c| matches!(c.variant, Variant::MmaDirect { .. })), "rows_hi {rows_hi}: no direct");
        for c in &cs {
            assert_eq!(c.variant.x_load(), XLoad::AddNorm, "{}", c.id());
            assert!(c.tma.is_none() && c.variant.tokens() == 8 && c.id().contains("_addnorm_"), "{}", c.id());
            assert!(c.dynamic_smem() + 1024 <= smem && c.threads() <= 256, "{}", c.id());
        }
    }
    // A ring stage holds the W tile and three piece sets (x, residual, norm weight).
    let ring = Config {
        variant: Variant::Mma { nt: 1, rt: 1, u: 4, stages: 4, x: XLoad::AddNorm, epi: MmaEpi::Plain },
        warps_r: 1,
        warps_k: 2,
        ksplit: 1,
        tma: None,
    };
    assert_eq!(ring.id(), "mma_nt1_rt1_u4_s4_addnorm_wr1_wk2_ks1");
    assert_eq!(ring.variant.symbol(DType::BF16), "b12x_bf16_gemv_mma_nt1_rt1_u4_s4_addnorm_bf16out");
    assert_eq!(ring.dynamic_smem(), 2 * 4 * (4096 + 3 * 2048));
    let all = all_symbols();
    assert_eq!(all.iter().filter(|s| s.contains("_addnorm_") && !s.contains("_rope")).count(), 6);
}

/// The params of a fused query for x `[2, x_cols]` with row stride `x_stride` at `x_ptr`.
fn silu_params(
    q: &Query,
    x_cols: usize,
    x_stride: usize,
    x_ptr: u64,
) -> Result<b12x_gemm::bf16_gemv::Bf16GemvParams, Error> {
    let args = Args {
        x: view(x_ptr, &[2, x_cols], x_stride, DType::BF16),
        w: view(W, &[q.n, q.k], q.k, DType::BF16),
        bias: None,
        y: view_mut(Y, &[2, q.n], q.n, DType::BF16),
        add_norm: None,
        rope: None,
        rms: None,
    };
    q.kernel_params(&args)
}

#[rstest]
#[case::dense(8192, 8192, BASE, "ok")]
#[case::padded_rows(8192, 8200, BASE, "ok")]
#[case::x_of_k_columns(4096, 4096, BASE, "Shape:x")]
#[case::odd_row_stride(8192, 8193, BASE, "Misaligned:x")]
#[case::misaligned_base(8192, 8192, BASE + 2, "Misaligned:x")]
#[case::overlapping_rows(8192, 8184, BASE, "Stride:x")]
fn silu_x_is_gate_and_up(#[case] cols: usize, #[case] stride: usize, #[case] ptr: u64, #[case] expected: &str) {
    let q = silu_query(1024, 4096, Some(7.0));
    match silu_params(&q, cols, stride, ptr) {
        Ok(p) => {
            assert_eq!(expected, "ok");
            // k stays K; the kernels find the up half K elements into each row.
            assert_eq!((p.k, p.m, p.ldx, p.x), (4096, 2, stride as i64, ptr));
        }
        Err(e) => assert_eq!(kind(&e), expected, "{e}"),
    }
    // A plain query still wants [M, K].
    assert!(matches!(
        silu_params(&Query { max_rows: 8, ..query(1024, 4096) }, 8192, 8192, BASE),
        Err(Error::Shape { tensor: "x", .. })
    ));
}

#[test]
fn ysilu_query_checks() {
    let ok = Query { y_act: YAct::SiluMul { limit: Some(7.0) }, ..query(24576, 4096) };
    ok.validate().unwrap();
    assert!(ok.key().ends_with(" y_act=silu_mul"));
    assert_ne!(ok.key(), query(24576, 4096).key());
    for (q, what) in [
        (Query { out_dtype: DType::F32, ..ok.clone() }, "f32 y"),
        (Query { x_dtype: DType::F32, ..ok.clone() }, "f32 x"),
        (Query { n: 24568, ..ok.clone() }, "N % 16"),
        (Query { x_act: XAct::SiluMul { limit: None }, max_rows: 8, ..ok.clone() }, "x_act"),
        (Query { y_act: YAct::SiluMul { limit: Some(f32::NAN) }, ..ok.clone() }, "NaN limit"),
        (Query { y_act: YAct::SiluMul { limit: Some(0.0) }, ..ok.clone() }, "zero limit"),
    ] {
        match q.validate() {
            Err(b12x_core::Error::InvalidQuery { field: "y_act", .. }) => {}
            other => panic!("{what}: expected InvalidQuery(y_act), got {other:?}"),
        }
    }
}

#[test]
fn ysilu_enumerates_no_cluster_configs() {
    for rows_hi in [1, 8, 16] {
        let g = geometry(2048, 7168, rows_hi, false, true);
        let all = enumerate(&g);
        let epi = enumerate(&Geometry { y_silu: true, ..g });
        assert!(all.iter().any(|c| matches!(c.tma, Some(TmaMode { work: TmaWork::Cluster(_), .. }))));
        assert!(!epi.iter().any(|c| matches!(c.tma, Some(TmaMode { work: TmaWork::Cluster(_), .. }))));
        assert!(epi.iter().all(|c| all.contains(c)), "the epilogue configs are plain configs");
        assert_eq!(
            epi.len() + all.iter().filter(|c| matches!(c.tma, Some(TmaMode { work: TmaWork::Cluster(_), .. }))).count(),
            all.len()
        );
    }
}

#[test]
fn interleave_gate_up_groups_rows() {
    // I = 16, K = 2: row r of [gate | up] holds (r, r).
    let (i, k) = (16, 2);
    let w: Vec<u32> = (0..2 * i).flat_map(|r| [r as u32; 2]).collect();
    let out = b12x_gemm::bf16_gemv::interleave_gate_up(&w, k);
    let rows: Vec<u32> = out.chunks(k).map(|r| r[0]).collect();
    let want: Vec<u32> = [0..8, 16..24, 8..16, 24..32].into_iter().flatten().collect();
    assert_eq!(rows, want);
}

// ---- the rope + KV-append epilogue (YAct::RopeAppend) ----------------------------------------

/// Qwen3-8B's QKV epilogue (H 32, Hkv 8, D 128, P 16, 4 pages per request, computed cos / sin).
fn rope_epi() -> RopeAppend {
    let mut inv_freq = [0.0f32; ROPE_MAX_PAIRS];
    for (j, f) in inv_freq.iter_mut().take(64).enumerate() {
        *f = 1.0e6f32.powf(-((2 * j) as f32) / 128.0);
    }
    RopeAppend {
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        page_size: 16,
        num_pages: 20,
        max_pages: 4,
        max_position: 64,
        neox: true,
        scale: 1.0,
        inv_freq: Some(inv_freq),
    }
}

fn rope_query(epi: RopeAppend) -> Query {
    Query { max_rows: 8, y_act: YAct::RopeAppend(epi), ..query(6144, 4096) }
}

#[test]
fn rope_row_order_pairs_each_rotary_pair_in_one_16_row_group() {
    for neox in [true, false] {
        let (h, hkv, d) = (3, 1, 64);
        let order = rope_row_order(h, hkv, d, neox);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..(h + 2 * hkv) * d).collect::<Vec<_>>(), "a permutation");
        for (i, &r) in order.iter().enumerate() {
            let (head, in_head) = (i / d, i % d);
            assert_eq!(r / d, head, "rows stay in their head");
            let f = (in_head / 16) * 8 + in_head % 8;
            let want = match (neox, in_head % 16 >= 8) {
                (true, false) => f,
                (true, true) => f + d / 2,
                (false, false) => 2 * f,
                (false, true) => 2 * f + 1,
            };
            assert_eq!(r % d, want, "row {i} (neox {neox})");
        }
    }
}

/// Every config is an unsplit NT = 1 ring variant with x load `x` and epilogue `epi` (its id
/// carrying `tag`), without TMA, and the variant table lists its symbol.
fn assert_ring_only(cs: &[Config], x: XLoad, epi: MmaEpi, tag: &str, all: &[String]) {
    for c in cs {
        assert!(matches!(c.variant, Variant::Mma { nt: 1, x: xl, epi: e, .. } if xl == x && e == epi), "{}", c.id());
        assert_eq!(c.ksplit, 1, "{}", c.id());
        assert!(c.id().contains(tag) && c.tma.is_none(), "{}", c.id());
        assert!(all.contains(&c.variant.symbol(DType::BF16)), "{}", c.variant.symbol(DType::BF16));
    }
}

#[rstest]
fn rope_candidates_are_the_unsplit_rope_ring_variants(#[values(XLoad::Plain, XLoad::AddNorm)] x: XLoad) {
    let all = all_symbols();
    for rows_hi in [1, 2, 4, 8] {
        let g = Geometry { x, y_rope: true, ..geometry(6144, 4096, rows_hi, false, true) };
        let cs = enumerate(&g);
        assert!(!cs.is_empty(), "rows_hi {rows_hi}");
        assert_ring_only(&cs, x, MmaEpi::Rope, "_rope_", &all);
    }
    // `_rope`, `_addnorm_rope` and `_addrms_rope`, three ring rows each.
    assert_eq!(all.iter().filter(|s| s.ends_with("_rope_bf16out")).count(), 9);
    let c = Config {
        variant: Variant::Mma { nt: 1, rt: 1, u: 8, stages: 3, x: XLoad::AddNorm, epi: MmaEpi::Rope },
        warps_r: 1,
        warps_k: 2,
        ksplit: 1,
        tma: None,
    };
    assert_eq!(c.id(), "mma_nt1_rt1_u8_s3_addnorm_rope_wr1_wk2_ks1");
    assert_eq!(c.variant.symbol(DType::BF16), "b12x_bf16_gemv_mma_nt1_rt1_u8_s3_addnorm_rope_bf16out");
}

#[test]
fn rope_queries_are_validated() {
    assert!(rope_query(rope_epi()).validate().is_ok());
    let bad = |q: Query| match q.validate() {
        Err(Error::InvalidQuery { field: "y_act", .. }) => {}
        other => panic!("{q:?}: expected InvalidQuery(y_act), got {other:?}"),
    };
    bad(Query { n: 6160, ..rope_query(rope_epi()) });
    bad(Query { max_rows: 16, ..rope_query(rope_epi()) });
    bad(Query { out_dtype: DType::F32, ..rope_query(rope_epi()) });
    bad(Query { aligned: false, ..rope_query(rope_epi()) });
    bad(Query { x_act: XAct::SiluMul { limit: None }, ..rope_query(rope_epi()) });
    bad(rope_query(RopeAppend { head_dim: 120, heads: 32 * 128 / 120, ..rope_epi() }));
    bad(rope_query(RopeAppend { scale: 0.0, ..rope_epi() }));
    bad(rope_query(RopeAppend { page_size: 0, ..rope_epi() }));
    let mut nan = rope_epi();
    if let Some(f) = nan.inv_freq.as_mut() {
        f[3] = f32::NAN;
    }
    bad(rope_query(nan));
    // Combines with the fused add+RMSNorm x load.
    assert!(Query { x_act: XAct::AddRmsNorm { eps: 1e-6 }, ..rope_query(rope_epi()) }.validate().is_ok());
    // Different epilogues, different keys.
    assert_ne!(rope_query(rope_epi()).key(), query(6144, 4096).key());
}

const POS: u64 = BASE + (3 << 30);
const KC: u64 = BASE + (4 << 30);
const VC: u64 = BASE + (5 << 30);
const ERR: u64 = BASE + (6 << 30);

fn rope_args(m: usize, k_cache: u64, error: u64) -> Args<'static> {
    let e = rope_epi();
    let cache = [e.num_pages, e.page_size, e.kv_heads, e.head_dim];
    let cache_strides = [(16 * 8 * 128) as isize, (8 * 128) as isize, 128, 1];
    // SAFETY: never dereferenced: the checks only inspect the views.
    let raw = |ptr, shape: &[usize], strides: &[isize], dtype| {
        unsafe { TensorRef::from_raw(ptr, shape, strides, dtype) }.unwrap()
    };
    let raw_mut = |ptr, shape: &[usize], strides: &[isize], dtype| {
        unsafe { TensorMut::from_raw(ptr, shape, strides, dtype) }.unwrap()
    };
    Args {
        x: view(BASE, &[m, 4096], 4096, DType::BF16),
        w: view(W, &[6144, 4096], 4096, DType::BF16),
        bias: None,
        y: view_mut(Y, &[m, 6144], 6144, DType::BF16),
        add_norm: None,
        rope: Some(RopeArgs {
            positions: raw(POS, &[m], &[1], DType::I32),
            seq_lens: raw(POS + 4096, &[m], &[1], DType::I32),
            page_table: raw(POS + 8192, &[m, 4], &[4, 1], DType::I32),
            cos_sin: None,
            k_cache: raw_mut(k_cache, &cache, &cache_strides, DType::BF16),
            v_cache: raw_mut(VC, &cache, &cache_strides, DType::BF16),
            error: raw_mut(error, &[1], &[1], DType::I32),
        }),
        rms: None,
    }
}

#[test]
fn rope_args_are_checked() {
    let q = rope_query(rope_epi());
    let ok = q.kernel_params(&rope_args(3, KC, ERR)).and_then(|_| q.rope_params(&rope_args(3, KC, ERR)));
    let epi = ok.unwrap().unwrap();
    assert_eq!((epi.pt_stride, epi.heads, epi.kv_heads, epi.head_dim, epi.neox), (4, 32, 8, 128, 1));
    assert_eq!((epi.k_cache, epi.v_cache, epi.error, epi.cos_sin), (KC, VC, ERR, 0));
    // No rope tensors for a rope plan, or rope tensors for a plain plan: typed errors.
    let mut none = rope_args(3, KC, ERR);
    none.rope = None;
    assert!(matches!(q.kernel_params(&none), Err(Error::Shape { tensor: "rope", .. })));
    assert!(matches!(
        query(6144, 4096).kernel_params(&rope_args(1, KC, ERR)),
        Err(Error::Shape { tensor: "rope", .. })
    ));
    // The error word inside the k cache, the k cache over y: overlaps.
    assert!(q.rope_params(&rope_args(3, KC, KC + 64)).is_err());
    assert!(q.rope_params(&rope_args(3, Y, ERR)).is_err());
    // A table for a computed-mode plan.
    let mut table = rope_args(3, KC, ERR);
    if let Some(r) = table.rope.as_mut() {
        // SAFETY: never dereferenced.
        r.cos_sin = Some(unsafe { TensorRef::from_raw(BASE + (7 << 30), &[64, 128], &[128, 1], DType::F32) }.unwrap());
    }
    assert!(matches!(q.rope_params(&table), Err(Error::Shape { tensor: "cos_sin", .. })));
    // Table mode: the table is required and must be [max_position, D] f32.
    let tq = rope_query(RopeAppend { inv_freq: None, ..rope_epi() });
    assert!(matches!(tq.rope_params(&rope_args(3, KC, ERR)), Err(Error::Shape { tensor: "cos_sin", .. })));
    assert!(tq.rope_params(&table).unwrap().is_some_and(|e| e.cos_sin == BASE + (7 << 30)));
}

// ---- the split add+RMSNorm (YAct::ResidualRms, XAct::RmsScale) --------------------------------

/// Qwen3-8B's O projection with the residual epilogue, and its gate/up projection with the rrms
/// scale and the SwiGLU epilogue.
fn res_query() -> Query {
    Query { max_rows: 8, y_act: YAct::ResidualRms, ..query(4096, 4096) }
}
fn scale_query() -> Query {
    Query {
        max_rows: 8,
        x_act: XAct::RmsScale { eps: 1e-6 },
        y_act: YAct::SiluMul { limit: None },
        ..query(24576, 4096)
    }
}

#[rstest]
fn split_norm_candidates_are_the_unsplit_ring_variants(#[values(true, false)] residual: bool) {
    let all = all_symbols();
    for rows_hi in [1, 2, 4, 8] {
        let g = geometry(4096, 4096, rows_hi, false, true);
        let g =
            if residual { Geometry { y_res: true, ..g } } else { Geometry { x: XLoad::RmsScale, y_silu: true, ..g } };
        let cs = enumerate(&g);
        assert!(!cs.is_empty(), "rows_hi {rows_hi}");
        let (x, epi, tag) = if residual {
            (XLoad::Plain, MmaEpi::ResidualRms, "_resrms_")
        } else {
            (XLoad::RmsScale, MmaEpi::Plain, "_rmsx_")
        };
        assert_ring_only(&cs, x, epi, tag, &all);
    }
    assert_eq!(all.iter().filter(|s| s.ends_with("_resrms_bf16out")).count(), 3);
    assert_eq!(all.iter().filter(|s| s.ends_with("_rmsx_bf16out")).count(), 3);
    let c = Config {
        variant: Variant::Mma { nt: 1, rt: 1, u: 4, stages: 4, x: XLoad::RmsScale, epi: MmaEpi::Plain },
        warps_r: 2,
        warps_k: 4,
        ksplit: 1,
        tma: None,
    };
    assert_eq!(c.id(), "mma_nt1_rt1_u4_s4_rmsx_wr2_wk4_ks1");
    let r = Config {
        variant: Variant::Mma { x: XLoad::Plain, epi: MmaEpi::ResidualRms, nt: 1, rt: 1, u: 4, stages: 4 },
        ..c
    };
    assert_eq!(r.variant.symbol(DType::BF16), "b12x_bf16_gemv_mma_nt1_rt1_u4_s4_resrms_bf16out");
    // One x piece set per ring stage: the same shared memory as the plain config.
    let plain =
        Config { variant: Variant::Mma { x: XLoad::Plain, epi: MmaEpi::Plain, nt: 1, rt: 1, u: 4, stages: 4 }, ..c };
    assert_eq!((c.dynamic_smem(), r.dynamic_smem()), (plain.dynamic_smem(), plain.dynamic_smem()));
}

#[test]
fn split_norm_queries_are_validated() {
    assert!(res_query().validate().is_ok());
    assert!(scale_query().validate().is_ok());
    assert!(Query { y_act: YAct::None, ..scale_query() }.validate().is_ok());
    let bad = |q: Query, field: &str| match q.validate() {
        Err(Error::InvalidQuery { field: f, .. }) if f == field => {}
        other => panic!("{q:?}: expected InvalidQuery({field}), got {other:?}"),
    };
    bad(Query { max_rows: 16, ..res_query() }, "y_act");
    bad(Query { out_dtype: DType::F32, ..res_query() }, "y_act");
    bad(Query { x_dtype: DType::F32, ..res_query() }, "y_act");
    bad(Query { aligned: false, ..res_query() }, "y_act");
    bad(Query { x_act: XAct::AddRmsNorm { eps: 1e-6 }, ..res_query() }, "y_act");
    bad(Query { max_rows: 16, ..scale_query() }, "x_act");
    bad(Query { aligned: false, ..scale_query() }, "x_act");
    bad(Query { k: 4100, ..scale_query() }, "x_act");
    bad(Query { x_act: XAct::RmsScale { eps: f32::NAN }, ..scale_query() }, "x_act");
    bad(Query { x_act: XAct::RmsScale { eps: -1.0 }, ..scale_query() }, "x_act");
    bad(Query { y_act: YAct::ResidualRms, ..scale_query() }, "x_act");
    bad(Query { y_act: YAct::RopeAppend(rope_epi()), n: 6144, ..scale_query() }, "x_act");
    // Their own keys.
    assert_ne!(res_query().key(), Query { max_rows: 8, ..query(4096, 4096) }.key());
    assert_ne!(scale_query().key(), Query { x_act: XAct::None, ..scale_query() }.key());
    assert_eq!((rms_groups(4096), rms_groups(1000), rms_groups(1)), (256, 63, 1));
}

const RES: u64 = BASE + (3 << 30);
const SSQ: u64 = BASE + (4 << 30);

fn rms_args(q: &Query, m: usize, rms: Option<RmsArgs<'static>>, y: u64) -> Args<'static> {
    Args {
        x: view(BASE, &[m, q.k], q.k, DType::BF16),
        w: view(BASE + (1 << 30), &[q.n, q.k], q.k, DType::BF16),
        bias: None,
        y: view_mut(y, &[m, if matches!(q.y_act, YAct::SiluMul { .. }) { q.n / 2 } else { q.n }], q.n, DType::BF16),
        add_norm: None,
        rope: None,
        rms,
    }
}

#[test]
fn split_norm_args_are_checked() {
    let (rq, sq) = (res_query(), scale_query());
    let y = BASE + (2 << 30);
    let residual = |ptr| RmsArgs::Residual {
        residual: view(ptr, &[3, 4096], 4096, DType::BF16),
        sum_sq: view_mut(SSQ, &[3, 256], 256, DType::F32),
    };
    let scale = |ptr, cols| RmsArgs::Scale { sum_sq: view(ptr, &[3, cols], cols, DType::F32) };
    let a = rms_args(&rq, 3, Some(residual(RES)), y);
    rq.kernel_params(&a).unwrap();
    let e = rq.rms_params(&a).unwrap().unwrap();
    assert_eq!((e.residual, e.sum_sq, e.ldr, e.lds, e.groups), (RES, SSQ, 4096, 256, 256));
    let a = rms_args(&sq, 3, Some(scale(SSQ, 256)), y);
    sq.kernel_params(&a).unwrap();
    let e = sq.rms_params(&a).unwrap().unwrap();
    assert_eq!((e.residual, e.sum_sq, e.lds, e.groups, e.eps), (0, SSQ, 256, 256, 1e-6));
    // Missing, of the other kind, or given to a plain plan: typed errors, nothing built.
    let shape_err = |q: &Query, a: &Args<'_>| matches!(q.kernel_params(a), Err(Error::Shape { tensor: "rms", .. }));
    assert!(shape_err(&rq, &rms_args(&rq, 3, None, y)));
    assert!(shape_err(&rq, &rms_args(&rq, 3, Some(scale(SSQ, 256)), y)));
    assert!(shape_err(&sq, &rms_args(&sq, 3, Some(residual(RES)), y)));
    assert!(shape_err(&sq, &rms_args(&sq, 3, None, y)));
    let plain = Query { max_rows: 8, ..query(4096, 4096) };
    assert!(shape_err(&plain, &rms_args(&plain, 3, Some(residual(RES)), y)));
    // A sum_sq of the wrong width, the residual over y, the sums over the residual: errors.
    assert!(sq.rms_params(&rms_args(&sq, 3, Some(scale(SSQ, 255)), y)).is_err());
    assert!(rq.rms_params(&rms_args(&rq, 3, Some(residual(y)), y)).is_err());
    assert!(rq.rms_params(&rms_args(&rq, 3, Some(residual(SSQ - 64)), y)).is_err());
    assert!(sq.rms_params(&rms_args(&sq, 3, Some(scale(y, 256)), y)).is_err());
}

fn add_rms_query() -> Query {
    Query {
        max_rows: 8,
        x_act: XAct::AddRmsScale { eps: 1e-6 },
        y_act: YAct::RopeAppend(rope_epi()),
        ..query(6144, 4096)
    }
}

#[rstest]
fn add_rms_candidates_are_the_unsplit_addrms_ring_variants(#[values(false, true)] rope: bool) {
    let all = all_symbols();
    for rows_hi in [1, 2, 4, 8] {
        let g = Geometry { x: XLoad::AddRms, y_rope: rope, ..geometry(6144, 4096, rows_hi, false, true) };
        let cs = enumerate(&g);
        assert!(!cs.is_empty(), "rows_hi {rows_hi}");
        let (epi, tag) = if rope { (MmaEpi::Rope, "_addrms_rope_") } else { (MmaEpi::Plain, "_addrms_") };
        assert_ring_only(&cs, XLoad::AddRms, epi, tag, &all);
    }
    assert_eq!(all.iter().filter(|s| s.ends_with("_addrms_bf16out")).count(), 3);
    assert_eq!(all.iter().filter(|s| s.ends_with("_addrms_rope_bf16out")).count(), 3);
    let c = Config {
        variant: Variant::Mma { nt: 1, rt: 1, u: 8, stages: 3, x: XLoad::AddRms, epi: MmaEpi::Rope },
        warps_r: 1,
        warps_k: 2,
        ksplit: 1,
        tma: None,
    };
    assert_eq!(c.id(), "mma_nt1_rt1_u8_s3_addrms_rope_wr1_wk2_ks1");
    assert_eq!(c.variant.symbol(DType::BF16), "b12x_bf16_gemv_mma_nt1_rt1_u8_s3_addrms_rope_bf16out");
    assert!(c.variant.unsplit_only() && c.variant.norm_params() && !c.variant.rms_params());
    // Two x piece sets per ring stage (x and the residual), as the SwiGLU x load.
    let silu =
        Config { variant: Variant::Mma { x: XLoad::SiluMul, epi: MmaEpi::Plain, nt: 1, rt: 1, u: 8, stages: 3 }, ..c };
    assert_eq!(c.dynamic_smem(), silu.dynamic_smem());
}

#[test]
fn add_rms_queries_are_validated() {
    let q = add_rms_query();
    assert!(q.validate().is_ok());
    assert!(Query { y_act: YAct::None, ..q.clone() }.validate().is_ok());
    assert!(Query { y_act: YAct::SiluMul { limit: None }, ..q.clone() }.validate().is_ok());
    let bad = |q: Query, field: &str| match q.validate() {
        Err(Error::InvalidQuery { field: f, .. }) if f == field => {}
        other => panic!("{q:?}: expected InvalidQuery({field}), got {other:?}"),
    };
    let plain = Query { y_act: YAct::None, ..q.clone() };
    bad(Query { max_rows: 16, ..plain.clone() }, "x_act");
    bad(Query { aligned: false, ..plain.clone() }, "x_act");
    bad(Query { k: 4100, ..plain.clone() }, "x_act");
    bad(Query { out_dtype: DType::F32, ..plain.clone() }, "x_act");
    bad(Query { x_act: XAct::AddRmsScale { eps: f32::NAN }, ..plain.clone() }, "x_act");
    bad(Query { x_act: XAct::AddRmsScale { eps: -1.0 }, ..plain.clone() }, "x_act");
    bad(Query { y_act: YAct::ResidualRms, ..plain.clone() }, "x_act");
    // Its own key, apart from the exact fold's.
    assert_ne!(q.key(), Query { x_act: XAct::AddRmsNorm { eps: 1e-6 }, ..q.clone() }.key());
    assert_ne!(plain.key(), Query { x_act: XAct::None, ..plain.clone() }.key());
}

#[test]
fn add_rms_args_are_checked() {
    let q = Query { y_act: YAct::None, ..add_rms_query() };
    let y = BASE + (2 << 30);
    let add = |res: u64, out: u64, cols: usize| RmsArgs::Add {
        residual: view(res, &[3, cols], 4096, DType::BF16),
        residual_out: view_mut(out, &[3, 4096], 4096, DType::BF16),
    };
    let a = rms_args(&q, 3, Some(add(RES, SSQ, 4096)), y);
    q.kernel_params(&a).unwrap();
    assert!(q.rms_params(&a).unwrap().is_none());
    let n = q.norm_params(&a).unwrap().unwrap();
    assert_eq!((n.residual, n.residual_out, n.norm_w, n.ldr, n.ldro, n.eps), (RES, SSQ, 0, 4096, 4096, 1e-6));
    // Missing, of another kind, or given to a plain plan: typed errors.
    let shape_err = |q: &Query, a: &Args<'_>| matches!(q.kernel_params(a), Err(Error::Shape { tensor: "rms", .. }));
    assert!(shape_err(&q, &rms_args(&q, 3, None, y)));
    let scale = RmsArgs::Scale { sum_sq: view(SSQ, &[3, 256], 256, DType::F32) };
    assert!(shape_err(&q, &rms_args(&q, 3, Some(scale), y)));
    let plain = Query { max_rows: 8, ..query(6144, 4096) };
    assert!(shape_err(&plain, &rms_args(&plain, 3, Some(add(RES, SSQ, 4096)), y)));
    // A short residual; the new residual over x, the residual, W or y; y over the residual.
    assert!(q.kernel_params(&rms_args(&q, 3, Some(add(RES, SSQ, 4088)), y)).is_err());
    for out in [BASE, RES + 64, BASE + (1 << 30), y] {
        assert!(q.kernel_params(&rms_args(&q, 3, Some(add(RES, out, 4096)), y)).is_err(), "{out:#x}");
    }
    assert!(q.kernel_params(&rms_args(&q, 3, Some(add(y, SSQ, 4096)), y)).is_err());
    // With the rope epilogue: the new residual over a cache or the positions is refused too
    // (rope_params), elsewhere accepted.
    let r = add_rms_query();
    let with = |out: u64| {
        let mut a = rope_args(3, KC, ERR);
        a.rms = Some(RmsArgs::Add {
            residual: view(BASE + (7 << 30), &[3, 4096], 4096, DType::BF16),
            residual_out: view_mut(out, &[3, 4096], 4096, DType::BF16),
        });
        a
    };
    let ok = with(BASE + (8 << 30));
    r.kernel_params(&ok).unwrap();
    assert!(r.rope_params(&ok).unwrap().is_some() && r.norm_params(&ok).unwrap().is_some());
    for out in [KC + 128, VC, POS] {
        let a = with(out);
        assert!(r.kernel_params(&a).is_err() || r.rope_params(&a).is_err(), "{out:#x}");
    }
}

#[test]
fn fold_norm_weight_scales_columns_once() {
    let b = |v: f32| bf16::from_f32(v);
    let w = [b(1.0), b(2.0), b(-3.0), b(0.5), b(1.5), b(7.0)];
    let nw = [b(0.5), b(1.25), b(0.3)];
    let out = fold_norm_weight(&w, &nw);
    let want: Vec<bf16> = w.iter().enumerate().map(|(i, v)| b(v.to_f32() * nw[i % 3].to_f32())).collect();
    assert_eq!(out, want);
    assert_eq!(out[1], b(2.5));
}

/// The most static shared memory any `bf16_gemv` entry point declares (sm_90a, `cuobjdump
/// -res-usage`: 1152 B plain, 1280 B `_addnorm`, 1408 B `_addrms`), which the launch adds to the
/// dynamic ring. The enumeration keeps only 1024 B off the opt-in limit (`STATIC_SMEM_RESERVE`):
/// this pins that no enumerated config, on the SM90 or the SM120 limit, comes close enough to it
/// for the real static size to matter.
const MAX_KERNEL_STATIC_SMEM: u32 = 1408;

#[test]
fn enumerated_configs_leave_room_for_the_static_shared_memory() {
    for optin in [H200_SMEM, 101376] {
        for rows_hi in [1, 2, 4, 8, 16, 32, 64] {
            for x in [XLoad::Plain, XLoad::SiluMul, XLoad::AddNorm, XLoad::RmsScale, XLoad::AddRms] {
                for (y_rope, y_res) in [(false, false), (true, false), (false, true)] {
                    for (x_f32, aligned) in [(false, true), (false, false), (true, true)] {
                        for (n, k) in [(4096, 4096), (6144, 4096), (24576, 4096), (4096, 12288), (129280, 7168)] {
                            let g = Geometry {
                                x,
                                y_rope,
                                y_res,
                                smem_optin: optin,
                                ..geometry(n, k, rows_hi, x_f32, aligned)
                            };
                            for c in enumerate(&g) {
                                assert!(
                                    c.dynamic_smem() + MAX_KERNEL_STATIC_SMEM <= optin,
                                    "{} at opt-in {optin}: {} dynamic bytes",
                                    c.id(),
                                    c.dynamic_smem()
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
