//! Kernel parameters of `kernels/paged_rope.cu`, mirrored field for field.
//!
//! The C struct `b12x::PagedRopeParams` (in `kernels/paged.cuh`) asserts the same size and
//! offsets with `static_assert`.

use crate::paged::PagedParams;
use crate::rope::RopeParams;
use std::mem::{offset_of, size_of};

/// The one `__grid_constant__` argument of every `b12x_paged_rope_*` entry point.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PagedRopeParams {
    /// attention.paged's parameters (q: the unrotated rows, read only; the caches are written at
    /// the new tokens' slots).
    pub attn: PagedParams,
    /// attention.rope's rotary fields: positions, the cos/sin table (0: computed), the rotated
    /// dims, the scale and the frequencies. Its q, k, error, strides and head counts are unused.
    pub rope: RopeParams,
    /// `[T, Hkv, D]`: the new keys, unrotated.
    pub k: u64,
    /// `[T, Hkv, D]`: the new values.
    pub v: u64,
    /// Elements between rows of k.
    pub k_stride: i64,
    /// Elements between rows of v.
    pub v_stride: i64,
    /// 1: NeoX halves; 0: GPT-J pairs.
    pub neox: i32,
    /// Zero.
    pub reserved: i32,
}

impl Default for PagedRopeParams {
    fn default() -> Self {
        bytemuck::Zeroable::zeroed()
    }
}

const _: () = {
    assert!(size_of::<PagedRopeParams>() == 1352);
    assert!(offset_of!(PagedRopeParams, rope) == 200);
    assert!(offset_of!(PagedRopeParams, k) == 1312);
    assert!(offset_of!(PagedRopeParams, neox) == 1344);
};
