//! CPU tests of `norm.rmsnorm_quant`: query validation and argument checks (typed errors,
//! nothing dereferenced).

use b12x_core::{DType, Error, TensorMut, TensorRef};
use b12x_norm::rmsnorm_quant::{Args, QuantOut, Query};

fn query(cols: usize, out: QuantOut, residual: bool) -> Query {
    Query { cols, dtype: DType::BF16, max_tokens: 64, eps: 1e-6, residual, out }
}
fn view(ptr: u64, shape: &[usize], dtype: DType) -> TensorRef<'static> {
    let strides: Vec<isize> = if shape.len() == 2 { vec![shape[1] as isize, 1] } else { vec![1] };
    // SAFETY: never dereferenced.
    unsafe { TensorRef::from_raw(ptr, shape, &strides, dtype) }.unwrap()
}
fn view_mut(ptr: u64, shape: &[usize], dtype: DType) -> TensorMut<'static> {
    let strides: Vec<isize> = if shape.len() == 2 { vec![shape[1] as isize, 1] } else { vec![1] };
    // SAFETY: never dereferenced.
    unsafe { TensorMut::from_raw(ptr, shape, &strides, dtype) }.unwrap()
}
fn args(t: usize, d: usize, out: QuantOut, residual: bool) -> Args<'static> {
    Args {
        x: view(0x1000_0000, &[t, d], DType::BF16),
        residual: residual.then(|| view_mut(0x2000_0000, &[t, d], DType::BF16)),
        w: view(0x3000_0000, &[d], DType::BF16),
        codes: view_mut(0x4000_0000, &[t, out.code_bytes(d)], DType::U8),
        scales: view_mut(0x5000_0000, &[t, d / out.block()], out.scale_dtype()),
        enc: (out == QuantOut::Nvfp4).then(|| view(0x6000_0000, &[1], DType::F32)),
    }
}

#[test]
fn queries_validate_and_name_the_bad_field() {
    query(7168, QuantOut::Mxfp8, true).validate().unwrap();
    query(7168, QuantOut::Fp8Block128Ue8m0, false).validate().unwrap();
    let field = |q: Query| match q.validate() {
        Err(Error::InvalidQuery { op: "norm.rmsnorm_quant", field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(query(4112, QuantOut::Mxfp8, false)), "cols"); // not a multiple of 32
    assert_eq!(field(query(4160, QuantOut::Fp8Block128F32, false)), "cols"); // not of 128
    assert_eq!(field(Query { dtype: DType::F32, ..query(4096, QuantOut::Mxfp8, false) }), "dtype");
    assert_eq!(field(Query { eps: -1.0, ..query(4096, QuantOut::Mxfp8, false) }), "eps");
}

#[test]
fn args_fill_the_params_and_bad_args_are_typed_errors() {
    let q = query(4096, QuantOut::Fp8Block128F32, true);
    let p = q.kernel_params(&args(5, 4096, QuantOut::Fp8Block128F32, true)).unwrap();
    assert_eq!((p.base.rows, p.base.cols, p.ldq, p.lds, p.base.y), (5, 4096, 4096, 32, 0));
    assert_eq!((p.base.residual, p.codes, p.scales), (0x2000_0000, 0x4000_0000, 0x5000_0000));
    // Missing residual for the fused form.
    let err = q.kernel_params(&args(5, 4096, QuantOut::Fp8Block128F32, false)).unwrap_err();
    assert!(matches!(err, Error::Shape { tensor: "residual", .. }), "{err:?}");
    // UE8M0 (u8) scales where the plan wants f32.
    let mut a = args(5, 4096, QuantOut::Fp8Block128F32, true);
    a.scales = view_mut(0x5000_0000, &[5, 32], DType::U8);
    assert!(q.kernel_params(&a).is_err());
    // Codes overlapping x.
    let mut a = args(5, 4096, QuantOut::Fp8Block128F32, true);
    a.codes = view_mut(0x1000_0000, &[5, 4096], DType::U8);
    assert!(matches!(q.kernel_params(&a), Err(Error::Aliasing { .. })));
    // Above capacity.
    assert!(matches!(q.kernel_params(&args(65, 4096, QuantOut::Fp8Block128F32, true)), Err(Error::Capacity { .. })));
}

#[test]
fn nvfp4_output_takes_packed_codes_and_the_encode_scale() {
    let q = query(4096, QuantOut::Nvfp4, false);
    let p = q.kernel_params(&args(3, 4096, QuantOut::Nvfp4, false)).unwrap();
    assert_eq!((p.ldq, p.lds, p.enc), (2048, 256, 0x6000_0000));
    let mut a = args(3, 4096, QuantOut::Nvfp4, false);
    a.enc = None;
    assert!(matches!(q.kernel_params(&a), Err(Error::Shape { tensor: "enc", .. })));
    let mut a = args(3, 4096, QuantOut::Nvfp4, false);
    a.codes = view_mut(0x4000_0000, &[3, 4096], DType::U8);
    assert!(matches!(q.kernel_params(&a), Err(Error::Shape { tensor: "codes", .. })));
    assert!(matches!(query(4104, QuantOut::Nvfp4, false).validate(), Err(Error::InvalidQuery { field: "cols", .. })));
}
