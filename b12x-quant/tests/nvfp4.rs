//! CPU tests of `quantization.nvfp4`: query validation, argument checks (typed errors, nothing
//! dereferenced), configs and symbols, and the built kernels (present for every arch, no spills).

use b12x_core::testing::check_manifest;
use b12x_core::{DType, Error, TensorMut, TensorRef};
use b12x_quant::flat::FlatConfig;
use b12x_quant::layout::swizzled_len;
use b12x_quant::nvfp4::{amax_symbol, symbol, Args, GlobalScale, Query, BLOCK};

fn query(k: usize, global: GlobalScale) -> Query {
    Query { k, dtype: DType::BF16, max_rows: 64, row_major: true, swizzled: true, global }
}

fn view(ptr: u64, shape: &[usize], dtype: DType) -> TensorRef<'static> {
    let strides: Vec<isize> = if shape.len() == 2 { vec![shape[1] as isize, 1] } else { vec![1] };
    // SAFETY: never dereferenced: kernel_params only inspects the views.
    unsafe { TensorRef::from_raw(ptr, shape, &strides, dtype) }.unwrap()
}
fn view_mut(ptr: u64, shape: &[usize], dtype: DType) -> TensorMut<'static> {
    let strides: Vec<isize> = if shape.len() == 2 { vec![shape[1] as isize, 1] } else { vec![1] };
    // SAFETY: as above.
    unsafe { TensorMut::from_raw(ptr, shape, &strides, dtype) }.unwrap()
}

fn args(m: usize, k: usize, global: GlobalScale) -> Args<'static> {
    Args {
        x: view(0x1000_0000, &[m, k], DType::BF16),
        codes: view_mut(0x2000_0000, &[m, k / 2], DType::U8),
        scales: Some(view_mut(0x3000_0000, &[m, k / BLOCK], DType::U8)),
        scales_swizzled: Some(view_mut(0x4000_0000, &[swizzled_len(m, k / BLOCK)], DType::U8)),
        enc_in: (global == GlobalScale::Given).then(|| view(0x5000_0000, &[1], DType::F32)),
        enc_out: (global == GlobalScale::Computed).then(|| view_mut(0x5000_0000, &[1], DType::F32)),
    }
}

#[test]
fn queries_validate_and_name_the_bad_field() {
    query(7168, GlobalScale::Computed).validate().unwrap();
    Query { swizzled: false, ..query(16, GlobalScale::Given) }.validate().unwrap();
    let field = |q: Query| match q.validate() {
        Err(Error::InvalidQuery { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(query(48, GlobalScale::Given)), "k"); // swizzled needs K % 64
    assert_eq!(field(Query { swizzled: false, ..query(24, GlobalScale::Given) }), "k");
    assert_eq!(field(Query { dtype: DType::F32, ..query(64, GlobalScale::Given) }), "dtype");
    assert_eq!(field(Query { max_rows: 0, ..query(64, GlobalScale::Given) }), "max_rows");
    assert_eq!(field(Query { row_major: false, swizzled: false, ..query(64, GlobalScale::Given) }), "row_major");
}

#[test]
fn args_fill_the_params_and_bad_args_are_typed_errors() {
    let q = query(4096, GlobalScale::Computed);
    let p = q.kernel_params(&args(7, 4096, GlobalScale::Computed)).unwrap();
    assert_eq!((p.ldx, p.ldq, p.lds, p.rows, p.rows_sw, p.k), (4096, 2048, 256, 7, 128, 4096));
    assert_eq!((p.enc_in, p.enc_out, p.amax), (0, 0x5000_0000, 0));
    // The mode's scale tensor must match.
    let err = q.kernel_params(&args(7, 4096, GlobalScale::Given)).unwrap_err();
    assert!(matches!(err, Error::Shape { tensor: "enc_in", .. }), "{err:?}");
    // Above capacity.
    assert!(matches!(q.kernel_params(&args(65, 4096, GlobalScale::Computed)), Err(Error::Capacity { .. })));
    // enc_out overlapping the codes.
    let mut a = args(7, 4096, GlobalScale::Computed);
    a.enc_out = Some(view_mut(0x2000_0000, &[1], DType::F32));
    assert!(matches!(q.kernel_params(&a), Err(Error::Aliasing { .. })));
    // Codes of the wrong size ([M, K] instead of [M, K/2]).
    let mut a = args(7, 4096, GlobalScale::Computed);
    a.codes = view_mut(0x2000_0000, &[7, 4096], DType::U8);
    assert!(matches!(q.kernel_params(&a), Err(Error::Shape { tensor: "codes", .. })));
}

#[test]
fn kernel_names() {
    assert_eq!(amax_symbol(DType::BF16), "b12x_nvfp4_amax_bf16");
    assert_eq!(symbol(DType::F16, &FlatConfig { threads: 256, unroll: 1 }), "b12x_nvfp4_t256_u1_f16");
}

#[test]
fn built_kernels_are_complete_without_spills() {
    let mut symbols = vec![amax_symbol(DType::BF16), amax_symbol(DType::F16)];
    for c in FlatConfig::all() {
        symbols.push(symbol(DType::BF16, &c));
        symbols.push(symbol(DType::F16, &c));
    }
    check_manifest(b12x_quant::KERNEL_MANIFEST, &symbols).unwrap();
}
