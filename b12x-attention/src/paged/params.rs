//! Kernel parameters of `kernels/paged.cu`, mirrored field for field.
//!
//! The C struct `b12x::PagedParams` asserts the same size and offsets with `static_assert`.

use std::mem::{offset_of, size_of};

/// The one `__grid_constant__` argument of every `b12x_paged_*` entry point. Pointers are CUDA
/// device addresses (0 = absent); strides are in elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PagedParams {
    /// `[T, H, D]`, row stride `q_stride`.
    pub q: u64,
    /// `[num_pages, P, Hkv, D]`.
    pub k_cache: u64,
    /// `[num_pages, P, Hkv, D]`.
    pub v_cache: u64,
    /// `[B, Hkv]` f32 (E4M3 caches).
    pub k_scale: u64,
    /// `[B, Hkv]` f32 (E4M3 caches).
    pub v_scale: u64,
    /// `[H]` f32 or 0.
    pub sinks: u64,
    /// `[B, max_pages]` i32, row stride `pt_stride`.
    pub page_table: u64,
    /// `[B]` i32.
    pub seq_lens: u64,
    /// `[B + 1]` i32.
    pub cu_seqlens_q: u64,
    /// `[T, H, D]`, row stride `o_stride`.
    pub o: u64,
    /// `[T, H]` f32, row stride `lse_stride`, or 0.
    pub lse: u64,
    /// `[1]` fault bits.
    pub error: u64,
    /// Scratch `[B·Hkv·tiles, max_splits, 16, D]` f32 (split merges).
    pub partials: u64,
    /// Scratch `[B·Hkv·tiles, max_splits, 16, 2]` f32.
    pub partial_ml: u64,
    /// Scratch `[B·Hkv·tiles]` tagged arrival words.
    pub counters: u64,
    pub q_stride: i64,
    pub o_stride: i64,
    pub lse_stride: i64,
    pub tokens: i32,
    pub batch: i32,
    pub max_pages: i32,
    pub pt_stride: i32,
    pub num_pages: i32,
    pub heads: i32,
    pub kv_heads: i32,
    pub page_size: i32,
    /// Row tiles (16 rows of (token, head in group)) per request and KV head.
    pub tiles: i32,
    /// Grid x: most CTAs one request's keys are split over.
    pub max_splits: i32,
    /// Fewest keys per split (a multiple of 16).
    pub min_chunk: i32,
    /// Softmax scale · log2(e).
    pub scale_log2: f32,
    /// −1: off.
    pub window_left: i32,
    /// Bit 0 ([`FLAG_PDL`]): launched with programmatic dependent launch.
    pub flags: u32,
}

/// [`PagedParams::flags`]: the launch is a programmatic dependent launch (the kernel reads only
/// the lengths, page ids and the cache's old keys before `griddepcontrol.wait`).
pub const FLAG_PDL: u32 = 1;

const _: () = {
    assert!(size_of::<PagedParams>() == 200);
    assert!(offset_of!(PagedParams, q_stride) == 120);
    assert!(offset_of!(PagedParams, tokens) == 144);
    assert!(offset_of!(PagedParams, scale_log2) == 188);
};
