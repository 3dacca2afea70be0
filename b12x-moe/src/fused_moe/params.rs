//! Kernel parameters of `kernels/fused_moe.cu`, mirrored field for field.
//!
//! The C struct `b12x::FusedMoeParams` asserts the same size and offsets with `static_assert`.

use std::mem::{offset_of, size_of};

/// The one `__grid_constant__` argument of every `b12x_fused_moe_*` entry point.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct FusedMoeParams {
    /// `[T, Hd]` bf16, row stride `ldx`.
    pub x: u64,
    /// `[T, k]` i32.
    pub ids: u64,
    /// `[T, k]` f32.
    pub weights: u64,
    /// `[E, R1, Hd/2]` E2M1 pairs.
    pub w1_codes: u64,
    /// `[E, R1, Hd/B]` UE4M3 / UE8M0.
    pub w1_scales: u64,
    /// `[E]` f32 (NVFP4) or 0.
    pub w1_enc: u64,
    /// `[E, Hd, I/2]`.
    pub w2_codes: u64,
    /// `[E, Hd, I/B]`.
    pub w2_scales: u64,
    /// `[E]` f32 (NVFP4) or 0.
    pub w2_enc: u64,
    /// `[E]` f32: x's NVFP4 encode scale per expert (NVFP4 recipe) or 0.
    pub a1_enc: u64,
    /// `[E]` f32: h's NVFP4 encode scale per expert (NVFP4 recipe) or 0.
    pub a2_enc: u64,
    /// `[T·k, I]` bf16 scratch.
    pub h: u64,
    /// `[T·k, Hd]` bf16 scratch.
    pub y_pairs: u64,
    /// `[T, Hd]` bf16, row stride `ldy`.
    pub y: u64,
    /// `[1]` fault bits.
    pub error: u64,
    pub ldx: i64,
    pub ldy: i64,
    pub tokens: i32,
    pub top_k: i32,
    pub experts: i32,
    pub hidden: i32,
    pub inter: i32,
    /// The activation's limit (`+inf`: none).
    pub limit: f32,
    pub flags: i32,
    pub reserved: i32,
}

const _: () = {
    assert!(size_of::<FusedMoeParams>() == 168);
    assert!(offset_of!(FusedMoeParams, ldx) == 120);
    assert!(offset_of!(FusedMoeParams, tokens) == 136);
    assert!(offset_of!(FusedMoeParams, limit) == 156);
};
