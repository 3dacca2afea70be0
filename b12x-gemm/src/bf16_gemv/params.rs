//! Kernel parameters of `kernels/bf16_gemv.cu`, mirrored field for field.
//!
//! The C struct `b12x::Bf16GemvParams` asserts the same size and offsets with `static_assert`;
//! a change on one side that is not made on the other fails the build on that side.

use std::mem::{offset_of, size_of};

/// The one `__grid_constant__` argument of every `b12x_bf16_gemv_*` entry point.
///
/// Pointers are CUDA device addresses; strides are in elements. The grid is
/// `(row blocks, ksplit)`, the block `32 * warps_k * warps_r` threads.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Bf16GemvParams {
    /// `[N, K]` bf16, row stride `ldw`.
    pub w: u64,
    /// `[M, K]` bf16 (MMA variants) or f32 (SIMT variants), row stride `ldx`.
    pub x: u64,
    /// `[N]` bf16 or f32 (`flags`), contiguous; 0 for no bias.
    pub bias: u64,
    /// `[M, N]` bf16 or f32 (the entry point's output type), row stride `ldy`.
    pub y: u64,
    /// `[ksplit, m_pad, n_pad]` f32 split-K partial sums (scratch); unused when `ksplit == 1`.
    pub partials: u64,
    /// `[row blocks]` 8-byte tagged arrival counters (scratch, any initial bits: the kernel
    /// tells this launch's arrivals by its grid id); unused when `ksplit == 1`.
    pub counters: u64,
    /// Elements between rows of `w`.
    pub ldw: i64,
    /// Elements between rows of `x`.
    pub ldx: i64,
    /// Elements between rows of `y`.
    pub ldy: i64,
    /// N.
    pub n: i32,
    /// K.
    pub k: i32,
    /// M, the live row count of x and y.
    pub m: i32,
    /// K elements per split, a multiple of 32 (the last split may be shorter).
    pub k_per_split: i32,
    /// Number of K splits (`gridDim.y`).
    pub ksplit: i32,
    /// Warps of a CTA along K.
    pub warps_k: i32,
    /// Warps of a CTA along N.
    pub warps_r: i32,
    /// Row blocks × rows per CTA: the row stride of `partials`.
    pub n_pad: i32,
    /// Token capacity of `partials` (≥ m).
    pub m_pad: i32,
    /// Bit 0 (`FLAG_BIAS_F32`): `bias` is f32 (else bf16); bit 1 (`FLAG_PDL`): launched with
    /// programmatic dependent launch (the kernel triggers its dependents, prefetches W and
    /// waits for the previous kernel before touching anything else); bit 2 (`FLAG_Y_SILU`): the
    /// SwiGLU epilogue (`Query::y_act`).
    pub flags: i32,
    /// `FLAG_Y_SILU`: the swiglu limit L (finite, > 0) or `f32::INFINITY` for none.
    pub y_limit: f32,
    /// Zero; pads the struct to a multiple of 8 bytes.
    pub reserved: i32,
}

/// [`Bf16GemvParams::flags`]: the bias is f32.
pub const FLAG_BIAS_F32: i32 = 1;
/// [`Bf16GemvParams::flags`]: the launch carries the PDL attribute.
pub const FLAG_PDL: i32 = 2;
/// [`Bf16GemvParams::flags`]: y is the SwiGLU of the (gate, up) row pairs (`Query::y_act`).
pub const FLAG_Y_SILU: i32 = 4;

const _: () = {
    assert!(size_of::<Bf16GemvParams>() == 120);
    assert!(offset_of!(Bf16GemvParams, w) == 0);
    assert!(offset_of!(Bf16GemvParams, x) == 8);
    assert!(offset_of!(Bf16GemvParams, bias) == 16);
    assert!(offset_of!(Bf16GemvParams, y) == 24);
    assert!(offset_of!(Bf16GemvParams, partials) == 32);
    assert!(offset_of!(Bf16GemvParams, counters) == 40);
    assert!(offset_of!(Bf16GemvParams, ldw) == 48);
    assert!(offset_of!(Bf16GemvParams, ldx) == 56);
    assert!(offset_of!(Bf16GemvParams, ldy) == 64);
    assert!(offset_of!(Bf16GemvParams, n) == 72);
    assert!(offset_of!(Bf16GemvParams, k) == 76);
    assert!(offset_of!(Bf16GemvParams, m) == 80);
    assert!(offset_of!(Bf16GemvParams, k_per_split) == 84);
    assert!(offset_of!(Bf16GemvParams, ksplit) == 88);
    assert!(offset_of!(Bf16GemvParams, warps_k) == 92);
    assert!(offset_of!(Bf16GemvParams, warps_r) == 96);
    assert!(offset_of!(Bf16GemvParams, n_pad) == 100);
    assert!(offset_of!(Bf16GemvParams, m_pad) == 104);
    assert!(offset_of!(Bf16GemvParams, flags) == 108);
    assert!(offset_of!(Bf16GemvParams, y_limit) == 112);
};

/// The one `__grid_constant__` argument of the fused-activation entry points
/// (`b12x_bf16_gemv_*_silu_*`): the plain parameters, whose `x` is `[M, 2K]` bf16 = `[gate | up]`
/// (row stride `ldx ≥ 2K`; `k` stays K), and the swiglu limit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Bf16GemvActParams {
    pub g: Bf16GemvParams,
    /// L (finite, > 0): `g ← min(g, L)`, `u ← clamp(u, −L, L)`; `f32::INFINITY`: no limit.
    pub limit: f32,
    /// Zero; pads the struct to a multiple of 8 bytes.
    pub reserved: i32,
}

const _: () = {
    assert!(size_of::<Bf16GemvActParams>() == 128);
    assert!(offset_of!(Bf16GemvActParams, g) == 0);
    assert!(offset_of!(Bf16GemvActParams, limit) == 120);
    assert!(offset_of!(Bf16GemvActParams, reserved) == 124);
};

/// The one `__grid_constant__` argument of the fused add+RMSNorm entry points
/// (`b12x_bf16_gemv_*_addnorm_*`): the plain parameters (x `[M, K]` bf16, the sublayer output),
/// the residual `[M, K]`, where the rounded sum `bf16(x + residual)` goes (CTA (0, 0) writes it)
/// and the norm weight `[K]`, with RMSNorm's ε.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Bf16GemvNormParams {
    pub g: Bf16GemvParams,
    /// `[M, K]` bf16, row stride `ldr` (read only).
    pub residual: u64,
    /// `[M, K]` bf16, row stride `ldro`: `bf16(x + residual)` (aliases neither x nor residual).
    pub residual_out: u64,
    /// `[K]` bf16, contiguous.
    pub norm_w: u64,
    pub ldr: i64,
    pub ldro: i64,
    /// Added to `mean(r²)` before the rsqrt.
    pub eps: f32,
    /// Zero; pads the struct to a multiple of 8 bytes.
    pub reserved: i32,
}
const _: () = {
    assert!(size_of::<Bf16GemvNormParams>() == 168);
    assert!(offset_of!(Bf16GemvNormParams, g) == 0);
    assert!(offset_of!(Bf16GemvNormParams, residual) == 120);
    assert!(offset_of!(Bf16GemvNormParams, ldro) == 152);
    assert!(offset_of!(Bf16GemvNormParams, eps) == 160);
};

/// Pairs of `GemvRopeEpi::inv_freq` (head_dim ≤ 256; `kRopeMaxPairs`).
pub const ROPE_MAX_PAIRS: usize = 128;

/// The rope + KV-append epilogue of the `_rope` entry points (`GemvRopeEpi` in
/// `kernels/bf16_gemv.cu`; see [`super::YAct::RopeAppend`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GemvRopeEpi {
    /// `[M]` i32 rope positions.
    pub positions: u64,
    /// `[M]` i32 context lengths including the new token.
    pub seq_lens: u64,
    /// `[M, pt_stride]` i32 page ids.
    pub page_table: u64,
    /// `[max_position, D]` f32 cos / sin table, or 0: `sincosf` of `pos · inv_freq`.
    pub cos_sin: u64,
    /// `[num_pages, P, Hkv, D]` bf16.
    pub k_cache: u64,
    /// `[num_pages, P, Hkv, D]` bf16.
    pub v_cache: u64,
    /// `[1]` u32 fault bits.
    pub error: u64,
    pub pt_stride: i64,
    pub heads: i32,
    pub kv_heads: i32,
    pub head_dim: i32,
    pub page_size: i32,
    pub num_pages: i32,
    pub max_pages: i32,
    pub max_position: i32,
    /// 1: NeoX halves, 0: GPT-J pairs.
    pub neox: i32,
    pub scale: f32,
    /// Zero.
    pub reserved: i32,
    /// `D/2` entries used.
    pub inv_freq: [f32; ROPE_MAX_PAIRS],
}
const _: () = {
    assert!(size_of::<GemvRopeEpi>() == 616);
    assert!(offset_of!(GemvRopeEpi, pt_stride) == 56);
    assert!(offset_of!(GemvRopeEpi, scale) == 96);
    assert!(offset_of!(GemvRopeEpi, inv_freq) == 104);
};

/// The one `__grid_constant__` argument of the `b12x_bf16_gemv_mma_*_rope_bf16out` and
/// `…_addnorm_rope_bf16out` entry points: the add+RMSNorm parameters (norm fields unused by
/// `_rope`), then the epilogue's.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Bf16GemvRopeParams {
    pub n: Bf16GemvNormParams,
    pub r: GemvRopeEpi,
}
const _: () = {
    assert!(size_of::<Bf16GemvRopeParams>() == 784);
    assert!(offset_of!(Bf16GemvRopeParams, r) == 168);
};

/// The split second add+RMSNorm of the `_resrms` / `_rmsx` entry points (`GemvRmsEpi` in
/// `kernels/bf16_gemv.cu`; see [`super::YAct::ResidualRms`] and [`super::XAct::RmsScale`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GemvRmsEpi {
    /// `_resrms`: `[M, N]` bf16, the residual added to y (0 for `_rmsx`).
    pub residual: u64,
    /// `[M, groups]` f32 sums of squares: written (`_resrms`) or read (`_rmsx`).
    pub sum_sq: u64,
    /// The residual's row stride, elements.
    pub ldr: i64,
    /// `sum_sq`'s row stride, elements.
    pub lds: i64,
    /// `_resrms`: `ceil(N / 16)`; `_rmsx`: the entries summed per token, `ceil(K / 16)`.
    pub groups: i32,
    /// `_rmsx`: ε.
    pub eps: f32,
}
const _: () = {
    assert!(size_of::<GemvRmsEpi>() == 40);
    assert!(offset_of!(GemvRmsEpi, groups) == 32);
};

/// The one `__grid_constant__` argument of the `b12x_bf16_gemv_mma_*_resrms_bf16out` and
/// `…_rmsx_bf16out` entry points.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Bf16GemvRmsParams {
    pub g: Bf16GemvParams,
    pub e: GemvRmsEpi,
}
const _: () = {
    assert!(size_of::<Bf16GemvRmsParams>() == 160);
    assert!(offset_of!(Bf16GemvRmsParams, e) == 120);
};

/// The one `__grid_constant__` argument of the `b12x_bf16_gemv_tma_*` entry points.
///
/// The grid is `ceil(row blocks · kstages / units_per_cta)` CTAs of `32 * (consumer warps + 1)` threads. Of
/// `g` the kernel uses `bias`, `y`, `partials`, `counters`, `ldy`, `n`, `k`, `m` and `flags`.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Bf16GemvTmaParams {
    /// `CUtensorMap` of W `[N, K]`: boxes of 64 k × rows-per-CTA rows, 128-byte swizzle.
    pub w_map: [u64; 16],
    /// `CUtensorMap` of x `[M, K]`: boxes of 64 k × 8·NT tokens, 128-byte swizzle, zero fill.
    pub x_map: [u64; 16],
    pub g: Bf16GemvParams,
    /// k-stages (64·KB k each) per row block.
    pub kstages: i32,
    /// Consecutive units of the flat (row block, k-stage) list per CTA.
    pub units_per_cta: i32,
    /// Ring depth (2..=16).
    pub stages: i32,
    /// `TMA_FLAG_EVICT_FIRST` (bit 0) and `TMA_FLAG_CLUSTER` (bit 1).
    pub flags: i32,
    /// Zeros: the struct's size to its 64-byte alignment.
    pub pad: [i32; 14],
}

/// [`Bf16GemvTmaParams::flags`]: stream W with an L2 evict-first hint.
pub const TMA_FLAG_EVICT_FIRST: i32 = 1;
/// [`Bf16GemvTmaParams::flags`]: cluster split-K (the launch carries the cluster dimension).
pub const TMA_FLAG_CLUSTER: i32 = 2;

impl Default for Bf16GemvTmaParams {
    fn default() -> Self {
        bytemuck::Zeroable::zeroed()
    }
}

const _: () = {
    assert!(size_of::<Bf16GemvTmaParams>() == 448);
    assert!(offset_of!(Bf16GemvTmaParams, x_map) == 128);
    assert!(offset_of!(Bf16GemvTmaParams, g) == 256);
    assert!(offset_of!(Bf16GemvTmaParams, kstages) == 376);
    assert!(offset_of!(Bf16GemvTmaParams, flags) == 388);
};
