//! CPU tests of `activation.silu_and_mul`: the oracle against hand-computed values and identities
//! (limit, non-finite inputs, f16), query validation and argument checks (typed errors, on views
//! of fake device addresses: nothing is dereferenced), config enumeration, and the variant table
//! against the built kernels (manifest, SASS of the NVFP4 output).

use b12x_core::half::{bf16, f16};
use b12x_core::testing::{cast, check_bitwise, check_manifest};
use b12x_core::{DType, Error, TensorMut, TensorRef};
use b12x_norm::silu_and_mul::reference::{silu_and_mul, silu_mul};
use b12x_norm::silu_and_mul::{
    buckets, configs, Args, Config, QuantOut, Query, SiluAndMulParams, MAX_BLOCK_THREADS, MAX_INTER, OP,
};
use rstest::rstest;

const OUTS: [Option<QuantOut>; 5] = [
    None,
    Some(QuantOut::Mxfp8),
    Some(QuantOut::Fp8Block128F32),
    Some(QuantOut::Fp8Block128Ue8m0),
    Some(QuantOut::Nvfp4),
];

fn query(intermediate: usize, out: Option<QuantOut>) -> Query {
    Query { intermediate, dtype: DType::BF16, max_tokens: 64, limit: None, out }
}

// ---- oracle -------------------------------------------------------------------------------

fn silu64(g: f64) -> f64 {
    g / (1.0 + (-g).exp())
}

#[rstest]
#[case::zero_gate(0.0, 3.0)]
#[case::one(1.0, 1.0)]
#[case::two_three(2.0, 3.0)]
#[case::negative_gate(-1.5, 0.75)]
#[case::negative_up(4.0, -2.5)]
#[case::large_gate(17.0, 0.5)]
fn oracle_matches_hand_computed_values(#[case] g: f32, #[case] u: f32) {
    // silu(1) = 1 / (1 + e^-1) = 0.7310585786300049.
    assert!((silu64(1.0) - 0.7310585786300049).abs() < 1e-15);
    let want = silu64(f64::from(g)) * f64::from(u);
    let got = silu_mul(g, u, None);
    // Three f32 roundings and exp's: within 4 f32 ulp of the exact value.
    assert!((f64::from(got) - want).abs() <= 4.0 * f64::from(f32::EPSILON) * want.abs(), "{got} vs {want}");
    // bf16: the oracle rounds the f32 value once; here it equals the exact value rounded.
    let y = silu_and_mul(&cast::<bf16>(&[g, u]), 1, None);
    check_bitwise("y", &y, &cast::<bf16>(&[want as f32]), &[1, 1]).unwrap();
}

#[test]
fn limit_clamps_gate_above_and_up_on_both_sides() {
    let l = 7.0;
    // g above L takes L; below -L it is not clamped (min only).
    assert_eq!(silu_mul(20.0, 1.0, Some(l)), silu_mul(l, 1.0, None));
    assert_eq!(silu_mul(-20.0, 1.0, Some(l)), silu_mul(-20.0, 1.0, None));
    // u clamps to [-L, L].
    assert_eq!(silu_mul(2.0, 20.0, Some(l)), silu_mul(2.0, l, None));
    assert_eq!(silu_mul(2.0, -20.0, Some(l)), silu_mul(2.0, -l, None));
    assert_eq!(silu_mul(2.0, 6.5, Some(l)), silu_mul(2.0, 6.5, None));
    // Exactly L is unchanged.
    assert_eq!(silu_mul(l, -l, Some(l)), silu_mul(l, -l, None));
}

#[rstest]
#[case::bf16_l10(10.0)]
#[case::bf16_l7(7.0)]
fn limit_above_every_input_changes_nothing_and_a_biting_one_does(#[case] l: f32) {
    let (t, i) = (3, 64);
    let x: Vec<f32> = b12x_core::testing::uniform(5, t * 2 * i, -20.0, 20.0);
    let x = cast::<bf16>(&x);
    let free = silu_and_mul(&x, i, None);
    check_bitwise("y", &silu_and_mul(&x, i, Some(1e30)), &free, &[t, i]).unwrap();
    let clamped = silu_and_mul(&x, i, Some(l));
    assert!(clamped.iter().zip(&free).any(|(a, b)| a.to_bits() != b.to_bits()), "the limit must bite");
    // Every clamped output is bounded by silu(L) · L (silu is increasing above its minimum).
    let bound = silu64(f64::from(l)) * f64::from(l) * 1.01;
    assert!(clamped.iter().all(|v| v.to_f64().abs() <= bound));
}

#[test]
fn non_finite_inputs_follow_ieee_f32() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    assert!(silu_mul(nan, 1.0, None).is_nan());
    assert!(silu_mul(1.0, nan, None).is_nan());
    assert!(silu_mul(nan, 1.0, Some(7.0)).is_nan(), "a NaN gate passes the clamp");
    assert!(silu_mul(1.0, nan, Some(7.0)).is_nan(), "a NaN up passes the clamp");
    assert_eq!(silu_mul(inf, 2.0, None), inf);
    assert!(silu_mul(inf, 0.0, None).is_nan());
    assert!(silu_mul(-inf, 2.0, None).is_nan(), "-inf / inf");
    assert!(silu_mul(-inf, 2.0, Some(7.0)).is_nan(), "no lower clamp on g");
    assert_eq!(silu_mul(inf, inf, Some(7.0)), silu_mul(7.0, 7.0, None));
    assert_eq!(silu_mul(1.0, -inf, Some(7.0)), silu_mul(1.0, -7.0, None));
    // exp(100) overflows f32: y = -100 / inf · 2 = -0.
    let y = silu_mul(-100.0, 2.0, None);
    assert!(y == 0.0 && y.is_sign_negative());
}

#[test]
fn f16_rounds_once_to_f16() {
    let x = cast::<f16>(&[0.5, -3.0, 9.0, 1.25, 2.0, 0.125]);
    let y = silu_and_mul(&x, 3, None);
    let want: Vec<f16> = (0..3).map(|j| f16::from_f32((silu64(x[j].to_f64()) * x[3 + j].to_f64()) as f32)).collect();
    check_bitwise("y", &y, &want, &[1, 3]).unwrap();
}

// ---- queries and arguments --------------------------------------------------------------------

#[test]
fn queries_validate_and_name_the_bad_field() {
    for out in OUTS {
        query(12288, out).validate().unwrap();
        query(18432, out).validate().unwrap();
    }
    query(2880, Some(QuantOut::Mxfp8)).validate().unwrap();
    query(8, None).validate().unwrap();
    let field = |q: Query| match q.validate() {
        Err(Error::InvalidQuery { op, field, .. }) if op == OP => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(Query { dtype: DType::F32, ..query(4096, None) }), "dtype");
    assert_eq!(field(query(0, None)), "intermediate");
    assert_eq!(field(query(12, None)), "intermediate");
    assert_eq!(field(query(MAX_INTER + 8, None)), "intermediate");
    assert_eq!(field(query(2880, Some(QuantOut::Fp8Block128F32))), "intermediate"); // not of 128
    assert_eq!(field(query(8, Some(QuantOut::Nvfp4))), "intermediate"); // not of 16
    assert_eq!(field(Query { max_tokens: 0, ..query(4096, None) }), "max_tokens");
    for l in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        assert_eq!(field(Query { limit: Some(l), ..query(4096, None) }), "limit", "{l}");
    }
}

fn view(ptr: u64, shape: &[usize], row_stride: usize, dtype: DType) -> TensorRef<'static> {
    let strides: Vec<isize> = if shape.len() == 2 { vec![row_stride as isize, 1] } else { vec![1] };
    // SAFETY: never dereferenced.
    unsafe { TensorRef::from_raw(ptr, shape, &strides, dtype) }.unwrap()
}
fn view_mut(ptr: u64, shape: &[usize], dtype: DType) -> TensorMut<'static> {
    let strides: Vec<isize> = if shape.len() == 2 { vec![shape[1] as isize, 1] } else { vec![1] };
    // SAFETY: never dereferenced.
    unsafe { TensorMut::from_raw(ptr, shape, &strides, dtype) }.unwrap()
}
fn args(t: usize, i: usize, out: Option<QuantOut>) -> Args<'static> {
    Args {
        x: view(0x1000_0000, &[t, 2 * i], 2 * i, DType::BF16),
        y: out.is_none().then(|| view_mut(0x2000_0000, &[t, i], DType::BF16)),
        codes: out.map(|o| view_mut(0x3000_0000, &[t, o.code_bytes(i)], DType::U8)),
        scales: out.map(|o| view_mut(0x4000_0000, &[t, i / o.block()], o.scale_dtype())),
        enc: (out == Some(QuantOut::Nvfp4)).then(|| view(0x5000_0000, &[1], 1, DType::F32)),
    }
}

#[test]
fn params_struct_mirrors_the_kernel() {
    assert_eq!(size_of::<SiluAndMulParams>(), 88);
}

#[test]
fn plain_args_fill_the_params() {
    let q = Query { limit: Some(7.0), ..query(4096, None) };
    let p = q.kernel_params(&args(5, 4096, None)).unwrap();
    assert_eq!((p.x, p.y, p.x_stride, p.y_stride, p.rows, p.cols), (0x1000_0000, 0x2000_0000, 8192, 4096, 5, 4096));
    assert_eq!((p.codes, p.scales, p.enc, p.limit), (0, 0, 0, 7.0));
    // No limit: +inf (every comparison false).
    assert_eq!(query(4096, None).kernel_params(&args(5, 4096, None)).unwrap().limit, f32::INFINITY);
    // Strided rows of x (row stride 2I + 8, still 16-byte aligned).
    let mut a = args(5, 4096, None);
    a.x = view(0x1000_0000, &[5, 8192], 8200, DType::BF16);
    assert_eq!(q.kernel_params(&a).unwrap().x_stride, 8200);
    // T = 0 is a valid call (run launches nothing).
    assert_eq!(q.kernel_params(&args(0, 4096, None)).unwrap().rows, 0);
}

#[test]
fn bad_plain_args_are_typed_errors() {
    let q = query(4096, None);
    let check = |a: Args<'static>, ok: fn(&Error) -> bool, what: &str| {
        let e = q.kernel_params(&a).unwrap_err();
        assert!(ok(&e), "{what}: {e:?}");
    };
    let mut a = args(5, 4096, None);
    a.y = None;
    check(a, |e| matches!(e, Error::Shape { tensor: "y", .. }), "missing y");
    let mut a = args(5, 4096, None);
    a.codes = Some(view_mut(0x3000_0000, &[5, 4096], DType::U8));
    check(a, |e| matches!(e, Error::Shape { tensor: "codes", .. }), "codes for a plain plan");
    let mut a = args(5, 4096, None);
    a.x = view(0x1000_0000, &[5, 4096], 4096, DType::BF16);
    check(a, |e| matches!(e, Error::Shape { tensor: "x", .. }), "x of I columns");
    let mut a = args(5, 4096, None);
    a.x = view(0x1000_0000, &[5, 8192], 8192, DType::F16);
    check(a, |e| matches!(e, Error::DType { tensor: "x", .. }), "f16 x for a bf16 plan");
    let mut a = args(5, 4096, None);
    a.y = Some(view_mut(0x2000_0000, &[4, 4096], DType::BF16));
    check(a, |e| matches!(e, Error::Shape { tensor: "y", .. }), "y with 4 rows");
    check(args(65, 4096, None), |e| matches!(e, Error::Capacity { .. }), "above capacity");
    let mut a = args(5, 4096, None);
    a.x = view(0x1000_0008, &[5, 8192], 8192, DType::BF16);
    check(a, |e| matches!(e, Error::Misaligned { tensor: "x", .. }), "x 8-byte aligned");
    let mut a = args(5, 4096, None);
    a.x = view(0x1000_0000, &[5, 8192], 8196, DType::BF16);
    check(a, |e| matches!(e, Error::Misaligned { tensor: "x", .. }), "row stride of 8 bytes past 16");
    let mut a = args(5, 4096, None);
    // SAFETY: never dereferenced.
    a.x = unsafe { TensorRef::from_raw(0x1000_0000, &[5, 8192], &[16384, 2], DType::BF16) }.unwrap();
    check(a, |e| matches!(e, Error::Stride { tensor: "x", .. } | Error::Misaligned { .. }), "inner stride 2");
    let mut a = args(5, 4096, None);
    a.y = Some(view_mut(0x1000_0000 + 4096, &[5, 4096], DType::BF16));
    check(a, |e| matches!(e, Error::Aliasing { .. }), "y inside x");
}

#[test]
fn quantized_args_fill_the_params_and_bad_ones_are_typed_errors() {
    let q = query(4096, Some(QuantOut::Fp8Block128F32));
    let p = q.kernel_params(&args(3, 4096, Some(QuantOut::Fp8Block128F32))).unwrap();
    assert_eq!((p.y, p.codes, p.scales, p.ldq, p.lds, p.enc), (0, 0x3000_0000, 0x4000_0000, 4096, 32, 0));
    let qn = query(4096, Some(QuantOut::Nvfp4));
    let p = qn.kernel_params(&args(3, 4096, Some(QuantOut::Nvfp4))).unwrap();
    assert_eq!((p.ldq, p.lds, p.enc), (2048, 256, 0x5000_0000));

    // y given to a quantized plan.
    let mut a = args(3, 4096, Some(QuantOut::Fp8Block128F32));
    a.y = Some(view_mut(0x2000_0000, &[3, 4096], DType::BF16));
    assert!(matches!(q.kernel_params(&a), Err(Error::Shape { tensor: "y", .. })));
    // Missing codes / scales.
    let mut a = args(3, 4096, Some(QuantOut::Fp8Block128F32));
    a.codes = None;
    assert!(matches!(q.kernel_params(&a), Err(Error::Shape { tensor: "codes", .. })));
    let mut a = args(3, 4096, Some(QuantOut::Fp8Block128F32));
    a.scales = None;
    assert!(matches!(q.kernel_params(&a), Err(Error::Shape { tensor: "scales", .. })));
    // UE8M0 (u8) scales where the plan wants f32.
    let mut a = args(3, 4096, Some(QuantOut::Fp8Block128F32));
    a.scales = Some(view_mut(0x4000_0000, &[3, 32], DType::U8));
    assert!(matches!(q.kernel_params(&a), Err(Error::DType { tensor: "scales", .. })));
    // NVFP4: unpacked codes, no encode scale; an encode scale for MXFP8.
    let mut a = args(3, 4096, Some(QuantOut::Nvfp4));
    a.codes = Some(view_mut(0x3000_0000, &[3, 4096], DType::U8));
    assert!(matches!(qn.kernel_params(&a), Err(Error::Shape { tensor: "codes", .. })));
    let mut a = args(3, 4096, Some(QuantOut::Nvfp4));
    a.enc = None;
    assert!(matches!(qn.kernel_params(&a), Err(Error::Shape { tensor: "enc", .. })));
    let qm = query(4096, Some(QuantOut::Mxfp8));
    let mut a = args(3, 4096, Some(QuantOut::Mxfp8));
    a.enc = Some(view(0x5000_0000, &[1], 1, DType::F32));
    assert!(matches!(qm.kernel_params(&a), Err(Error::Shape { tensor: "enc", .. })));
    // Codes overlapping x or the scales; misaligned codes.
    let mut a = args(3, 4096, Some(QuantOut::Mxfp8));
    a.codes = Some(view_mut(0x1000_0000, &[3, 4096], DType::U8));
    assert!(matches!(qm.kernel_params(&a), Err(Error::Aliasing { .. })));
    let mut a = args(3, 4096, Some(QuantOut::Mxfp8));
    a.scales = Some(view_mut(0x3000_0000 + 100, &[3, 128], DType::U8));
    assert!(matches!(qm.kernel_params(&a), Err(Error::Aliasing { .. })));
    let mut a = args(3, 4096, Some(QuantOut::Mxfp8));
    a.codes = Some(view_mut(0x3000_0004, &[3, 4096], DType::U8));
    assert!(matches!(qm.kernel_params(&a), Err(Error::Misaligned { tensor: "codes", .. })));
    assert!(matches!(qm.kernel_params(&args(65, 4096, Some(QuantOut::Mxfp8))), Err(Error::Capacity { .. })));
}

// ---- configs ------------------------------------------------------------------------------------

#[rstest]
#[case::i8(8)]
#[case::llama3_8b(14336)]
#[case::qwen3_8b(12288)]
#[case::gpt_oss(2880)]
#[case::deepseek_v3_dense(18432)]
#[case::qwen3_30b_a3b_expert(768)]
#[case::max(MAX_INTER)]
fn configs_cover_the_row_within_the_launch_bound(#[case] i: usize) {
    let q = query(i, None);
    let cs = configs(&q);
    assert!(!cs.is_empty());
    assert_eq!(cs[0].split, 1, "the default is unsplit");
    let nvec = i / 8;
    for c in &cs {
        assert_eq!(Config::parse(&c.id()), Some(*c));
        let threads = c.block_threads(&q);
        assert!(threads % 32 == 0 && threads <= MAX_BLOCK_THREADS, "{c:?}: {threads} threads");
        let chunks = c.chunks(&q);
        assert!(chunks >= 1 && chunks <= c.split, "{c:?}: {chunks} chunks");
        // Every vector is covered, and the last chunk is not empty.
        assert!(chunks * threads * c.vecs_per_thread >= nvec);
        assert!((chunks - 1) * threads * c.vecs_per_thread < nvec);
    }
    let mut ids: Vec<String> = cs.iter().map(Config::id).collect();
    ids.dedup();
    assert_eq!(ids.len(), cs.len());
}

#[test]
fn config_ids_reject_junk_and_i8_has_one_config() {
    for bad in ["v3s1", "v4s3", "v4", "s1", "v4s1x", "x4s1", "v16s1"] {
        assert_eq!(Config::parse(bad), None, "{bad}");
    }
    let ids: Vec<String> = configs(&query(8, None)).iter().map(Config::id).collect();
    assert_eq!(ids, ["v1s1"]);
    // Qwen3-8B: the default holds the row in 192 threads of 8 vectors.
    assert_eq!(configs(&query(12288, None))[0].id(), "v8s1");
}

#[test]
fn buckets_follow_the_edges_and_stop_at_capacity() {
    let b = |cap| buckets(cap).iter().map(|b| (b.lo, b.hi)).collect::<Vec<_>>();
    assert_eq!(b(1), [(1, 1)]);
    assert_eq!(b(100), [(1, 16), (17, 100)]);
    assert_eq!(b(32768), [(1, 16), (17, 128), (129, 2048), (2049, 32768)]);
}

// ---- built kernels ------------------------------------------------------------------------------

#[test]
fn every_symbol_is_built_for_every_arch_without_spills() {
    let mut symbols = Vec::new();
    for dtype in [DType::BF16, DType::F16] {
        for out in OUTS {
            for i in [128, 2048, 12288, 18432, MAX_INTER] {
                let q = Query { dtype, ..query(i, out) };
                symbols.extend(configs(&q).iter().map(|c| c.symbol(&q)));
            }
        }
    }
    symbols.sort();
    symbols.dedup();
    // 5 outputs × v1, v2, v4, v8 × 2 dtypes.
    assert_eq!(symbols.len(), 40);
    check_manifest(b12x_norm::KERNEL_MANIFEST, &symbols).unwrap();
}

/// The NVFP4 output on sm_120a / sm_121a (never run: no SM120 hardware) encodes E2M1 with the
/// hardware conversion, sm_90a in software; the other outputs contain no E2M1 conversion.
#[test]
fn nvfp4_uses_the_hardware_e2m1_conversion_on_sm120_only() {
    use b12x_core::testing::check_sass_opcode;
    use b12x_norm::{KERNEL_MANIFEST, SILU_AND_MUL_FATBIN};
    const SM120: &[&str] = &["sm_120a", "sm_121a"];
    let op = "F2FP.SATFINITE.E2M1.F32";
    check_sass_opcode(SILU_AND_MUL_FATBIN, KERNEL_MANIFEST, "b12x_silu_and_mul_nvfp4_", 8, op, SM120).unwrap();
    for out in ["mxfp8_", "fp8b128f32_", "fp8b128ue8m0_", "v"] {
        let prefix = format!("b12x_silu_and_mul_{out}");
        check_sass_opcode(SILU_AND_MUL_FATBIN, KERNEL_MANIFEST, &prefix, 8, "E2M1", &[]).unwrap();
    }
}

#[test]
fn op_is_registered_validated_on_sm90_only() {
    let info = b12x_core::list_ops().into_iter().find(|o| o.name == OP).expect("registered");
    assert_eq!(info.krate, "b12x-norm");
    for (arch, v) in info.archs {
        let validated = matches!(v, b12x_core::Validation::Validated);
        assert_eq!(validated, *arch == "sm_90a", "{arch}: {v:?}");
    }
}
