//! Kernel parameters of `kernels/silu_and_mul.cu`, mirrored field for field.
//!
//! The C struct `b12x::SiluAndMulParams` asserts the same size and offsets with `static_assert`;
//! a change on one side that is not made on the other fails the build on that side.

use std::mem::{offset_of, size_of};

/// The one `__grid_constant__` argument of every `b12x_silu_and_mul_*` entry point.
///
/// `x` and `y` have the entry point's dtype (bf16 or f16); strides of `x`, `y` are in elements,
/// of `codes` in bytes, of `scales` in scale elements. Pointers are CUDA device addresses.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SiluAndMulParams {
    /// `[T, 2I]`, row stride `x_stride`: gate `x[t, :I]`, up `x[t, I:]`.
    pub x: u64,
    /// `[T, I]`, row stride `y_stride` (plain output; 0 for the quantized ones).
    pub y: u64,
    /// `[T, I]` u8 E4M3 codes or `[T, I/2]` E2M1 pairs, row stride `ldq` bytes (quantized outputs).
    pub codes: u64,
    /// `[T, I/block]` scales (u8 or f32), row stride `lds` elements (quantized outputs).
    pub scales: u64,
    /// `[1]` f32 NVFP4 encode scale, or 0.
    pub enc: u64,
    /// Elements between rows of `x`.
    pub x_stride: i64,
    /// Elements between rows of `y`.
    pub y_stride: i64,
    /// Bytes between rows of `codes`.
    pub ldq: i64,
    /// Elements between rows of `scales`.
    pub lds: i64,
    /// T: the grid has T × chunks CTAs.
    pub rows: i32,
    /// I.
    pub cols: i32,
    /// The limit L (> 0), or `+inf` for none.
    pub limit: f32,
    /// Zero; pads the struct to a multiple of 8 bytes.
    pub reserved: u32,
}

const _: () = {
    assert!(size_of::<SiluAndMulParams>() == 88);
    assert!(offset_of!(SiluAndMulParams, x) == 0);
    assert!(offset_of!(SiluAndMulParams, y) == 8);
    assert!(offset_of!(SiluAndMulParams, codes) == 16);
    assert!(offset_of!(SiluAndMulParams, scales) == 24);
    assert!(offset_of!(SiluAndMulParams, enc) == 32);
    assert!(offset_of!(SiluAndMulParams, x_stride) == 40);
    assert!(offset_of!(SiluAndMulParams, y_stride) == 48);
    assert!(offset_of!(SiluAndMulParams, ldq) == 56);
    assert!(offset_of!(SiluAndMulParams, lds) == 64);
    assert!(offset_of!(SiluAndMulParams, rows) == 72);
    assert!(offset_of!(SiluAndMulParams, cols) == 76);
    assert!(offset_of!(SiluAndMulParams, limit) == 80);
    assert!(offset_of!(SiluAndMulParams, reserved) == 84);
};
