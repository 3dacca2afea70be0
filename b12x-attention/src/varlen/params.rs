//! Kernel parameters of `kernels/varlen.cu`, mirrored field for field.
//!
//! The C struct `b12x::VarlenParams` asserts the same size and offsets with `static_assert`.

use std::mem::{offset_of, size_of};

/// The one `__grid_constant__` argument of every `b12x_varlen_*` entry point. Pointers are CUDA
/// device addresses (0 = absent); strides are in elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct VarlenParams {
    /// `[total_q, H, D]`, row stride `q_stride`.
    pub q: u64,
    /// `[total_k, Hkv, D]`, row stride `k_stride`.
    pub k: u64,
    /// `[total_k, Hkv, D]`, row stride `v_stride`.
    pub v: u64,
    /// `[H]` f32 or 0.
    pub sinks: u64,
    /// `[B + 1]` i32.
    pub cu_seqlens_q: u64,
    /// `[B + 1]` i32.
    pub cu_seqlens_k: u64,
    /// `[total_q, H, D]`, row stride `o_stride`.
    pub o: u64,
    /// `[total_q, H]` f32, row stride `lse_stride`, or 0.
    pub lse: u64,
    /// `[1]` fault bits.
    pub error: u64,
    pub q_stride: i64,
    pub k_stride: i64,
    pub v_stride: i64,
    pub o_stride: i64,
    pub lse_stride: i64,
    /// Rows of q and o.
    pub total_q: i32,
    /// Rows of k and v.
    pub total_k: i32,
    /// B.
    pub batch: i32,
    /// H.
    pub heads: i32,
    /// Hkv.
    pub kv_heads: i32,
    /// Grid y: query blocks per sequence the grid covers (CTAs loop past it).
    pub m_blocks: i32,
    /// 1: causal (bottom-right aligned), 0: every key.
    pub causal: i32,
    /// −1: off.
    pub window_left: i32,
    /// Softmax scale · log2(e).
    pub scale_log2: f32,
    pub reserved: i32,
}

const _: () = {
    assert!(size_of::<VarlenParams>() == 152);
    assert!(offset_of!(VarlenParams, q_stride) == 72);
    assert!(offset_of!(VarlenParams, total_q) == 112);
    assert!(offset_of!(VarlenParams, scale_log2) == 144);
};
