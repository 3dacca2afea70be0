//! CPU tests of `norm.rmsnorm_quant`: query validation and argument checks (typed errors,
//! nothing dereferenced).

use b12x_core::{DType, Error, TensorMut, TensorRef};
use b12x_norm::rmsnorm_quant::{configs, Args, Config, QuantOut, Query, TWO_ROWS_VECS};

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

#[test]
fn config_ids_round_trip_and_two_rows_are_plain_only() {
    for c in [Config::one_row(1), Config::one_row(2), Config::one_row(4), Config::one_row(8), Config::two_rows()] {
        assert_eq!(Config::parse(&c.id()), Some(c));
    }
    assert_eq!(Config::two_rows().id(), "v4r2");
    assert_eq!(Config::two_rows().row.vecs_per_thread, TWO_ROWS_VECS);
    // Only v4 has a two-row form; junk is rejected.
    for bad in ["v2r2", "v8r2", "r2", "v4r3", "v4r2r2", "x4"] {
        assert_eq!(Config::parse(bad), None, "{bad}");
    }
    assert_eq!(Config::two_rows().grid(7), 4);
    assert_eq!(Config::two_rows().grid(8), 4);
    assert_eq!(Config::one_row(4).grid(7), 7);
    let ids = |q: Query| configs(&q).iter().map(Config::id).collect::<Vec<_>>();
    for out in [QuantOut::Mxfp8, QuantOut::Fp8Block128F32, QuantOut::Fp8Block128Ue8m0, QuantOut::Nvfp4] {
        // The plain form adds v4r2 last (the default stays norm.rmsnorm's); the residual form does not.
        let plain = ids(query(7168, out, false));
        assert_eq!(plain.last().map(String::as_str), Some("v4r2"), "{out:?}");
        assert_eq!(&plain[..plain.len() - 1], &ids(query(7168, out, true))[..], "{out:?}");
        // D = 16384: v4's CTA is 512 threads, still offered.
        assert!(ids(query(16384, out, false)).contains(&"v4r2".to_string()));
    }
    // D = 512: v4 is not legal (v2 already fits one warp), so neither is v4r2.
    assert!(!ids(query(512, QuantOut::Mxfp8, false)).iter().any(|c| c.starts_with("v4")));
}

/// The fused NVFP4 output on sm_120a / sm_121a (never run: no SM120 hardware) encodes E2M1 with
/// the hardware conversion (SASS `F2FP.SATFINITE.E2M1.F32`), the sm_90a one (validated) in
/// software; the E4M3 outputs contain no E2M1 conversion anywhere. Checked on the built cubins
/// with `cuobjdump` (`cargo xtask toolchain`).
#[test]
fn fused_nvfp4_uses_the_hardware_e2m1_conversion_on_sm120_only() {
    use b12x_core::testing::check_sass_opcode;
    use b12x_norm::{KERNEL_MANIFEST, RMSNORM_FATBIN};
    const SM120: &[&str] = &["sm_120a", "sm_121a"];
    // v1, v2, v4, v8 and (plain form only) v4r2, each bf16 and f16.
    check_sass_opcode(RMSNORM_FATBIN, KERNEL_MANIFEST, "b12x_rmsnorm_nvfp4_", 10, "F2FP.SATFINITE.E2M1.F32", SM120)
        .unwrap();
    check_sass_opcode(RMSNORM_FATBIN, KERNEL_MANIFEST, "b12x_rmsnorm_add_nvfp4_", 8, "F2FP.SATFINITE.E2M1.F32", SM120)
        .unwrap();
    for out in ["mxfp8", "fp8b128f32", "fp8b128ue8m0"] {
        let prefix = format!("b12x_rmsnorm_{out}_");
        check_sass_opcode(RMSNORM_FATBIN, KERNEL_MANIFEST, &prefix, 10, "E2M1", &[]).unwrap();
    }
}
