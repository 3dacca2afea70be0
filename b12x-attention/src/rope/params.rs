//! Kernel parameters of `kernels/rope.cu`, mirrored field for field.
//!
//! The C struct `b12x::RopeParams` asserts the same size and offsets with `static_assert`.

use std::mem::{offset_of, size_of};

/// Most pairs a head rotates (`kMaxPairs`): rotary dims up to 512.
pub const MAX_PAIRS: usize = 256;

/// The one `__grid_constant__` argument of every `b12x_rope_*` entry point. Pointers are CUDA
/// device addresses; strides are in elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RopeParams {
    /// `[T, H, D]` bf16/f16, row stride `q_stride`, rotated in place.
    pub q: u64,
    /// `[T, Hkv, D]`, row stride `k_stride` (0 without k).
    pub k: u64,
    /// `[T]` i32.
    pub positions: u64,
    /// `[max_position, R]` f32 (table mode; 0 otherwise).
    pub cos_sin: u64,
    /// `[1]` u32 fault bits (`crate::paging::FAULT_POSITION`), OR-ed.
    pub error: u64,
    pub q_stride: i64,
    pub k_stride: i64,
    /// T.
    pub tokens: i32,
    /// H.
    pub heads: i32,
    /// Hkv (0 without k).
    pub kv_heads: i32,
    /// D.
    pub head_dim: i32,
    /// R.
    pub rotary_dim: i32,
    /// The first rotated dim.
    pub rotary_offset: i32,
    pub max_position: i32,
    /// Multiplies cos and sin.
    pub scale: f32,
    /// The first `R / 2` entries: the rotation frequencies.
    pub inv_freq: [f32; MAX_PAIRS],
}

impl Default for RopeParams {
    fn default() -> Self {
        bytemuck::Zeroable::zeroed()
    }
}

const _: () = {
    assert!(size_of::<RopeParams>() == 1112);
    assert!(offset_of!(RopeParams, q_stride) == 40);
    assert!(offset_of!(RopeParams, tokens) == 56);
    assert!(offset_of!(RopeParams, scale) == 84);
    assert!(offset_of!(RopeParams, inv_freq) == 88);
};
