//! Helpers shared by the CPU tests: contiguous views at made-up addresses (never dereferenced),
//! for the ops' argument checks.

use b12x_core::{DType, TensorMut, TensorRef};

pub fn view(ptr: u64, shape: &[usize], dtype: DType) -> TensorRef<'static> {
    let strides = b12x_core::contiguous_strides(shape);
    // SAFETY: the tests only check arguments; nothing dereferences the address.
    unsafe { TensorRef::from_raw(ptr, shape, &strides, dtype) }.expect("a valid view")
}

pub fn view_mut(ptr: u64, shape: &[usize], dtype: DType) -> TensorMut<'static> {
    let strides = b12x_core::contiguous_strides(shape);
    // SAFETY: as `view`.
    unsafe { TensorMut::from_raw(ptr, shape, &strides, dtype) }.expect("a valid view")
}
