//! CPU tests of `quantization.swizzle_scales`: query and argument checks (nothing dereferenced)
//! and the built kernels.

use b12x_core::testing::check_manifest;
use b12x_core::{DType, Error, TensorMut, TensorRef};
use b12x_quant::layout::swizzled_len;
use b12x_quant::swizzle::{symbol, Args, Direction, Query, Side};

fn rm(ptr: u64, rows: usize, cols: usize) -> TensorRef<'static> {
    // SAFETY: never dereferenced.
    unsafe { TensorRef::from_raw(ptr, &[rows, cols], &[cols as isize, 1], DType::U8) }.unwrap()
}
fn sw_mut(ptr: u64, len: usize) -> TensorMut<'static> {
    // SAFETY: never dereferenced.
    unsafe { TensorMut::from_raw(ptr, &[len], &[1], DType::U8) }.unwrap()
}

#[test]
fn params_and_typed_errors() {
    let q = Query { direction: Direction::ToSwizzled, cols: 224, max_rows: 4096 };
    q.validate().unwrap();
    let a = Args {
        row_major: Side::In(rm(0x1000_0000, 7, 224)),
        swizzled: Side::Out(sw_mut(0x2000_0000, swizzled_len(7, 224))),
    };
    let p = q.kernel_params(&a).unwrap();
    assert_eq!((p.ld, p.total, p.rows, p.cols), (224, 128 * 224, 7, 224));
    // Swizzled buffer of the unpadded size.
    let a = Args { row_major: Side::In(rm(0x1000_0000, 7, 224)), swizzled: Side::Out(sw_mut(0x2000_0000, 7 * 224)) };
    assert!(matches!(q.kernel_params(&a), Err(Error::Shape { tensor: "swizzled", .. })));
    // Overlap.
    let a = Args {
        row_major: Side::In(rm(0x1000_0000, 7, 224)),
        swizzled: Side::Out(sw_mut(0x1000_0010, swizzled_len(7, 224))),
    };
    assert!(matches!(q.kernel_params(&a), Err(Error::Aliasing { .. })));
    assert!(matches!(Query { cols: 0, ..q.clone() }.validate(), Err(Error::InvalidQuery { field: "cols", .. })));
    assert!(matches!(Query { max_rows: 0, ..q }.validate(), Err(Error::InvalidQuery { field: "max_rows", .. })));
}

#[test]
fn built_kernels_are_complete_without_spills() {
    let symbols = [Direction::ToSwizzled, Direction::FromSwizzled].map(|d| symbol(d).to_string());
    check_manifest(b12x_quant::KERNEL_MANIFEST, &symbols).unwrap();
}
