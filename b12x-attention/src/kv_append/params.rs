//! Kernel parameters of `kernels/kv_append.cu`, mirrored field for field.
//!
//! The C struct `b12x::KvAppendParams` asserts the same size and offsets with `static_assert`.

use std::mem::{offset_of, size_of};

/// The one `__grid_constant__` argument of every `b12x_kv_append_*` entry point. Pointers are
/// CUDA device addresses; strides are in elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct KvAppendParams {
    /// `[T, Hkv, D]` bf16/f16, row stride `k_stride`.
    pub k: u64,
    /// `[T, Hkv, D]` bf16/f16, row stride `v_stride`.
    pub v: u64,
    /// `[num_pages, P, Hkv, D]`, contiguous.
    pub k_cache: u64,
    /// `[num_pages, P, Hkv, D]`, contiguous.
    pub v_cache: u64,
    /// `[B, Hkv]` f32 (E4M3 caches; 0 otherwise).
    pub k_scale: u64,
    /// `[B, Hkv]` f32 (E4M3 caches; 0 otherwise).
    pub v_scale: u64,
    /// `[B, max_pages]` i32, row stride `pt_stride`.
    pub page_table: u64,
    /// `[B]` i32.
    pub seq_lens: u64,
    /// `[B + 1]` i32.
    pub cu_seqlens_q: u64,
    /// `[1]` u32 fault bits (`crate::paging`), OR-ed.
    pub error: u64,
    pub k_stride: i64,
    pub v_stride: i64,
    /// T: packed rows of k and v.
    pub tokens: i32,
    /// B.
    pub batch: i32,
    pub max_pages: i32,
    pub pt_stride: i32,
    pub num_pages: i32,
    pub kv_heads: i32,
    pub head_dim: i32,
    pub page_size: i32,
}

const _: () = {
    assert!(size_of::<KvAppendParams>() == 128);
    assert!(offset_of!(KvAppendParams, k_stride) == 80);
    assert!(offset_of!(KvAppendParams, tokens) == 96);
    assert!(offset_of!(KvAppendParams, page_size) == 124);
};
