//! Kernel parameters of `kernels/rmsnorm.cu`, mirrored field for field.
//!
//! The C struct `b12x::RmsnormParams` asserts the same size and offsets with `static_assert`;
//! a change on one side that is not made on the other fails the build on that side.

use std::mem::{offset_of, size_of};

/// The one `__grid_constant__` argument of every `b12x_rmsnorm_*` entry point.
///
/// All tensors share the entry point's dtype (bf16, f16 or f32); strides are in elements and
/// every row starts on a 16-byte boundary. Pointers are CUDA device addresses.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RmsnormParams {
    /// `[T, D]`, row stride `x_stride`; `y` may alias it.
    pub x: u64,
    /// `[T, D]`, row stride `residual_stride`; overwritten with `x + residual` (add form only,
    /// 0 otherwise).
    pub residual: u64,
    /// `[D]`.
    pub w: u64,
    /// `[T, D]`, row stride `y_stride`.
    pub y: u64,
    /// Elements between rows of `x`.
    pub x_stride: i64,
    /// Elements between rows of `residual`.
    pub residual_stride: i64,
    /// Elements between rows of `y`.
    pub y_stride: i64,
    /// T: the live row count; the grid has one CTA per row.
    pub rows: i32,
    /// D.
    pub cols: i32,
    /// Added to `mean(x^2)` before the rsqrt.
    pub eps: f32,
    /// `FLAG_*` bits (0: none; `norm.rmsnorm_quant` passes 0).
    pub flags: u32,
}

/// [`RmsnormParams::flags`]: a PDL launch releases the next PDL kernel at entry, before its own
/// wait (`Plan::with_early_release`).
pub const FLAG_RELEASE_AT_ENTRY: u32 = 1;

const _: () = {
    assert!(size_of::<RmsnormParams>() == 72);
    assert!(offset_of!(RmsnormParams, x) == 0);
    assert!(offset_of!(RmsnormParams, residual) == 8);
    assert!(offset_of!(RmsnormParams, w) == 16);
    assert!(offset_of!(RmsnormParams, y) == 24);
    assert!(offset_of!(RmsnormParams, x_stride) == 32);
    assert!(offset_of!(RmsnormParams, residual_stride) == 40);
    assert!(offset_of!(RmsnormParams, y_stride) == 48);
    assert!(offset_of!(RmsnormParams, rows) == 56);
    assert!(offset_of!(RmsnormParams, cols) == 60);
    assert!(offset_of!(RmsnormParams, eps) == 64);
    assert!(offset_of!(RmsnormParams, flags) == 68);
};
