//! CPU tests of `quantization.fp8_block`: query validation, argument checks (typed errors,
//! nothing dereferenced), symbols, and the built kernels (every arch, no spills).

use b12x_core::testing::check_manifest;
use b12x_core::{DType, Error, TensorMut, TensorRef};
use b12x_quant::block::Fp8ScaleKind;
use b12x_quant::flat::FlatConfig;
use b12x_quant::fp8_block::{symbol, Args, Query, GROUPS};

fn query(group: usize, k: usize, scale: Fp8ScaleKind) -> Query {
    Query { group, k, dtype: DType::BF16, max_rows: 64, scale }
}

fn view(ptr: u64, shape: &[usize], dtype: DType) -> TensorRef<'static> {
    // SAFETY: never dereferenced: kernel_params only inspects the views.
    unsafe { TensorRef::from_raw(ptr, shape, &[shape[1] as isize, 1], dtype) }.unwrap()
}
fn view_mut(ptr: u64, shape: &[usize], dtype: DType) -> TensorMut<'static> {
    // SAFETY: as above.
    unsafe { TensorMut::from_raw(ptr, shape, &[shape[1] as isize, 1], dtype) }.unwrap()
}

fn args(m: usize, k: usize, groups: usize, scale_dtype: DType) -> Args<'static> {
    Args {
        x: view(0x1000_0000, &[m, k], DType::BF16),
        codes: view_mut(0x2000_0000, &[m, k], DType::U8),
        scales: view_mut(0x3000_0000, &[m, groups], scale_dtype),
    }
}

#[test]
fn queries_validate_and_name_the_bad_field() {
    for g in GROUPS {
        query(g, 7168, Fp8ScaleKind::F32).validate().unwrap();
    }
    let field = |q: Query| match q.validate() {
        Err(Error::InvalidQuery { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(query(16, 4096, Fp8ScaleKind::F32)), "group");
    assert_eq!(field(query(128, 4160, Fp8ScaleKind::F32)), "k");
    assert_eq!(field(Query { dtype: DType::F32, ..query(128, 4096, Fp8ScaleKind::F32) }), "dtype");
    assert_eq!(field(Query { max_rows: 0, ..query(128, 4096, Fp8ScaleKind::F32) }), "max_rows");
}

#[test]
fn args_fill_the_params_and_bad_args_are_typed_errors() {
    let q = query(128, 7168, Fp8ScaleKind::F32);
    let p = q.kernel_params(&args(5, 7168, 56, DType::F32)).unwrap();
    assert_eq!((p.ldx, p.ldq, p.lds, p.rows, p.k), (7168, 7168, 56, 5, 7168));
    // UE8M0 scales are u8: f32 scales are the wrong dtype for that plan, and vice versa.
    let q8 = query(128, 7168, Fp8ScaleKind::Ue8m0);
    assert!(q8.kernel_params(&args(5, 7168, 56, DType::F32)).is_err());
    q8.kernel_params(&args(5, 7168, 56, DType::U8)).unwrap();
    // Wrong number of groups.
    assert!(matches!(q.kernel_params(&args(5, 7168, 112, DType::F32)), Err(Error::Shape { tensor: "scales", .. })));
    // Above capacity.
    assert!(matches!(q.kernel_params(&args(65, 7168, 56, DType::F32)), Err(Error::Capacity { .. })));
    // Scales overlapping the codes.
    let mut a = args(5, 7168, 56, DType::F32);
    a.scales = view_mut(0x2000_0000, &[5, 56], DType::F32);
    assert!(matches!(q.kernel_params(&a), Err(Error::Aliasing { .. })));
}

#[test]
fn symbols() {
    let q = query(64, 4096, Fp8ScaleKind::Ue8m0);
    assert_eq!(symbol(&q, &FlatConfig { threads: 256, unroll: 2 }), "b12x_fp8_block_g64_ue8m0_t256_u2_bf16");
}

#[test]
fn built_kernels_are_complete_without_spills() {
    let mut symbols = Vec::new();
    for g in GROUPS {
        for scale in [Fp8ScaleKind::F32, Fp8ScaleKind::Ue8m0] {
            for dtype in [DType::BF16, DType::F16] {
                let q = Query { dtype, ..query(g, 4096, scale) };
                symbols.extend(FlatConfig::all().iter().map(|c| symbol(&q, c)));
            }
        }
    }
    check_manifest(b12x_quant::KERNEL_MANIFEST, &symbols).unwrap();
}
