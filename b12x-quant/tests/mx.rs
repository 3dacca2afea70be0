//! CPU tests of `quantization.mxfp8` / `quantization.mxfp4`: query validation, argument checks (typed errors, nothing
//! dereferenced), configs, and the variant table against the built kernels.

use b12x_core::testing::check_manifest;
use b12x_core::{DType, Error, TensorMut, TensorRef};
use b12x_quant::flat::FlatConfig;
use b12x_quant::layout::swizzled_len;
use b12x_quant::mx::{symbol, Args, MxFormat, MxParams, Query, BLOCK};
use rstest::rstest;

fn query(k: usize, row_major: bool, swizzled: bool) -> Query {
    Query { format: MxFormat::Fp8, k, dtype: DType::BF16, max_rows: 64, row_major, swizzled }
}

fn view(ptr: u64, shape: &[usize], row_stride: usize, dtype: DType) -> TensorRef<'static> {
    let strides: Vec<isize> = if shape.len() == 2 { vec![row_stride as isize, 1] } else { vec![1] };
    // SAFETY: never dereferenced: kernel_params only inspects the views.
    unsafe { TensorRef::from_raw(ptr, shape, &strides, dtype) }.unwrap()
}
fn view_mut(ptr: u64, shape: &[usize], row_stride: usize, dtype: DType) -> TensorMut<'static> {
    let strides: Vec<isize> = if shape.len() == 2 { vec![row_stride as isize, 1] } else { vec![1] };
    // SAFETY: as above.
    unsafe { TensorMut::from_raw(ptr, shape, &strides, dtype) }.unwrap()
}

const X: u64 = 0x1000_0000;
const CODES: u64 = 0x2000_0000;
const SCALES: u64 = 0x3000_0000;
const SW: u64 = 0x4000_0000;

fn args(m: usize, k: usize, scales: bool, sw: bool) -> Args<'static> {
    Args {
        x: view(X, &[m, k], k, DType::BF16),
        codes: view_mut(CODES, &[m, k], k, DType::U8),
        scales: scales.then(|| view_mut(SCALES, &[m, k / BLOCK], k / BLOCK, DType::U8)),
        scales_swizzled: sw.then(|| view_mut(SW, &[swizzled_len(m, k / BLOCK)], 1, DType::U8)),
    }
}

#[rstest]
#[case::k1536(1536, true, false)]
#[case::k7168_both(7168, true, true)]
#[case::k18432_swizzled(18432, false, true)]
#[case::k32(32, true, false)]
fn good_queries_validate(#[case] k: usize, #[case] row_major: bool, #[case] swizzled: bool) {
    query(k, row_major, swizzled).validate().unwrap();
}

#[rstest]
#[case::k_not_32(48, true, false, "k")]
#[case::k_not_128_swizzled(96, false, true, "k")]
#[case::zero_k(0, true, false, "k")]
#[case::no_layout(4096, false, false, "row_major")]
fn bad_queries_name_the_field(#[case] k: usize, #[case] row_major: bool, #[case] swizzled: bool, #[case] field: &str) {
    match query(k, row_major, swizzled).validate() {
        Err(Error::InvalidQuery { field: f, .. }) => assert_eq!(f, field),
        other => panic!("{other:?}"),
    }
    let q = Query { dtype: DType::F32, ..query(4096, true, false) };
    assert!(matches!(q.validate(), Err(Error::InvalidQuery { field: "dtype", .. })));
    let q = Query { max_rows: 0, ..query(4096, true, false) };
    assert!(matches!(q.validate(), Err(Error::InvalidQuery { field: "max_rows", .. })));
}

#[test]
fn good_args_fill_the_params() {
    let q = query(4096, true, true);
    let p = q.kernel_params(&args(7, 4096, true, true)).unwrap();
    let want = MxParams {
        x: X,
        codes: CODES,
        scales: SCALES,
        scales_sw: SW,
        ldx: 4096,
        ldq: 4096,
        lds: 128,
        rows: 7,
        rows_sw: 128,
        k: 4096,
        pad: 0,
    };
    assert_eq!(p, want);
    let p = query(4096, true, false).kernel_params(&args(7, 4096, true, false)).unwrap();
    assert_eq!((p.scales_sw, p.rows_sw), (0, 7));
}

#[test]
fn bad_args_are_typed_errors() {
    let q = query(4096, true, true);
    // Above capacity.
    assert!(matches!(q.kernel_params(&args(65, 4096, true, true)), Err(Error::Capacity { .. })));
    // Missing / unexpected outputs.
    assert!(matches!(q.kernel_params(&args(4, 4096, false, true)), Err(Error::Shape { tensor: "scales", .. })));
    let q2 = query(4096, true, false);
    assert!(matches!(
        q2.kernel_params(&args(4, 4096, true, true)),
        Err(Error::Shape { tensor: "scales_swizzled", .. })
    ));
    // Wrong codes dtype.
    let mut a = args(4, 4096, true, true);
    a.codes = view_mut(CODES, &[4, 4096], 4096, DType::BF16);
    assert!(q.kernel_params(&a).is_err());
    // Wrong swizzled length (row-major size instead of the padded one).
    let mut a = args(4, 4096, true, true);
    a.scales_swizzled = Some(view_mut(SW, &[4 * 128], 1, DType::U8));
    assert!(matches!(q.kernel_params(&a), Err(Error::Shape { tensor: "scales_swizzled", .. })));
    // Misaligned x.
    let mut a = args(4, 4096, true, true);
    a.x = view(X + 2, &[4, 4096], 4096, DType::BF16);
    assert!(q.kernel_params(&a).is_err());
    // Codes overlapping x.
    let mut a = args(4, 4096, true, true);
    a.codes = view_mut(X, &[4, 4096], 4096, DType::U8);
    assert!(matches!(q.kernel_params(&a), Err(Error::Aliasing { .. })));
}

fn all_symbols() -> Vec<String> {
    let mut out = Vec::new();
    for format in [MxFormat::Fp8, MxFormat::Fp4] {
        for c in FlatConfig::all() {
            for d in [DType::BF16, DType::F16] {
                out.push(symbol(format, d, &c));
            }
        }
    }
    out
}

#[test]
fn mxfp4_codes_are_packed_pairs() {
    let q = Query { format: MxFormat::Fp4, ..query(4096, true, false) };
    let mut a = args(4, 4096, true, false);
    // [M, K] codes are the MXFP8 shape: rejected for MXFP4.
    assert!(matches!(q.kernel_params(&a), Err(Error::Shape { tensor: "codes", .. })));
    a.codes = view_mut(CODES, &[4, 2048], 2048, DType::U8);
    let p = q.kernel_params(&a).unwrap();
    assert_eq!((p.ldq, p.k), (2048, 4096));
    assert_eq!(q.format.op(), "quantization.mxfp4");
    assert!(matches!(
        Query { k: 48, ..q }.validate(),
        Err(Error::InvalidQuery { op: "quantization.mxfp4", field: "k", .. })
    ));
}

#[test]
fn kernel_names() {
    let c = FlatConfig { threads: 512, unroll: 4 };
    assert_eq!(symbol(MxFormat::Fp8, DType::BF16, &c), "b12x_mxfp8_t512_u4_bf16");
    assert_eq!(symbol(MxFormat::Fp4, DType::F16, &c), "b12x_mxfp4_t512_u4_f16");
}

#[test]
fn variant_table_matches_built_kernels_without_spills() {
    check_manifest(b12x_quant::KERNEL_MANIFEST, &all_symbols()).unwrap();
}
