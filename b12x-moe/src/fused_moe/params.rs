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

/// The decode path's route kernel (`b12x_fused_moe_route`, `kernels/fused_moe_decode.cu`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeRouteParams {
    pub ids: u64,
    pub weights: u64,
    pub x: u64,
    /// `[E]` f32 (NVFP4 recipe) or 0.
    pub a1_enc: u64,
    /// Scratch `slots`: `[max_slots]` of `{expert, first row, rows, 0}` i32.
    pub slots: u64,
    /// Scratch `meta`: `[slots, rows]` i32.
    pub meta: u64,
    pub row_token: u64,
    pub row_expert: u64,
    pub row_weight: u64,
    pub pair_row: u64,
    /// Scratch `xq` (`[P, Hd]` bf16, quantized recipes) or 0.
    pub xq: u64,
    pub error: u64,
    pub ldx: i64,
    pub tokens: i32,
    pub top_k: i32,
    pub experts: i32,
    pub hidden: i32,
    /// Rows per slot at most (8 NT).
    pub slot_rows: i32,
    /// 0 none (W4A16), 1 MXFP8, 2 NVFP4.
    pub quant: i32,
    pub rows_per_cta: i32,
    pub reserved: i32,
}

/// The decode path's FC kernels (`b12x_fused_moe_decode_gemv_*`): gemm.blockscaled's decode
/// parameters for the stacked weight, then the MoE rows.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeGemvParams {
    pub g: b12x_gemm::blockscaled::gemv::BsGemvParams,
    pub slots: u64,
    pub meta: u64,
    pub row_token: u64,
    pub row_weight: u64,
    /// FC1: x (gathered by row_token) or the scratch's x̂ rows; FC2: h.
    pub xin: u64,
    /// FC1: h; FC2: y_rows.
    pub out: u64,
    /// `[E]` f32 NVFP4 weight encode scales or 0.
    pub w_enc: u64,
    /// `[E]` f32 NVFP4-recipe activation encode scales or 0.
    pub a_enc: u64,
    pub ldin: i64,
    pub rbs: i32,
    pub out_cols: i32,
    /// 0 FC1 gated, 1 FC1 non-gated, 2 FC2.
    pub mode: i32,
    /// 0 SiLU, 1 SwiGLU-OAI, 2 ReLU².
    pub act: i32,
    pub limit: f32,
    /// 1: x rows gathered by token (W4A16 FC1).
    pub gather: i32,
    pub max_slots: i32,
    /// When the first ring of weights is requested: [`EARLY_NONE`] after the PDL wait,
    /// [`EARLY_ROUTE`] (FC2) before it from the route's slots, [`EARLY_LOCAL`] (FC1) before it
    /// from slots the CTA computes from `ids` (the kernel's `MoeRows::units`).
    pub early: i32,
    /// [`EARLY_LOCAL`]: the call's `[T, k]` expert ids.
    pub ids: u64,
    /// [`EARLY_LOCAL`]: `T · k` (at most [`EARLY_PAIRS`]).
    pub pairs: i32,
    /// [`EARLY_LOCAL`]: E.
    pub experts: i32,
    /// [`EARLY_LOCAL`]: the route's rows per slot R.
    pub slot_rows: i32,
    pub reserved: i32,
}

/// [`MoeGemvParams::early`]: the PDL wait, then the route's slots.
pub const EARLY_NONE: i32 = 0;
/// [`MoeGemvParams::early`] (FC2): the route's slots before the wait (complete: the route ran two
/// launches back).
pub const EARLY_ROUTE: i32 = 1;
/// [`MoeGemvParams::early`] (FC1): each CTA computes the route's slots from `ids` (`kMoeEarlyLocal`).
pub const EARLY_LOCAL: i32 = 2;
/// The most pairs `T · k` of an [`EARLY_LOCAL`] launch (`kMoeEarlyPairs`: the CTA's copy of the
/// slots lives in shared memory).
pub const EARLY_PAIRS: usize = 64;

/// The decode path's row kernels (`b12x_fused_moe_quant_rows`, `b12x_fused_moe_combine_rows`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeRowsParams {
    pub meta: u64,
    pub row_expert: u64,
    pub pair_row: u64,
    pub a2_enc: u64,
    pub h: u64,
    pub y_rows: u64,
    pub y: u64,
    pub ldy: i64,
    pub tokens: i32,
    pub top_k: i32,
    pub hidden: i32,
    pub inter: i32,
    pub quant: i32,
    pub max_rows: i32,
}

const _: () = {
    assert!(size_of::<MoeRouteParams>() == 136);
    assert!(offset_of!(MoeRouteParams, ldx) == 96);
    assert!(offset_of!(MoeRouteParams, slot_rows) == 120);
    assert!(size_of::<MoeGemvParams>() == 384);
    assert!(offset_of!(MoeGemvParams, slots) == 256);
    assert!(offset_of!(MoeGemvParams, ldin) == 320);
    assert!(offset_of!(MoeGemvParams, early) == 356);
    assert!(offset_of!(MoeGemvParams, ids) == 360);
    assert!(size_of::<MoeRowsParams>() == 88);
    assert!(offset_of!(MoeRowsParams, ldy) == 56);
};

/// The grouped path's grouping kernels (`b12x_fused_moe_group_*`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeGroupParams {
    pub ids: u64,
    pub weights: u64,
    pub x: u64,
    pub a1_enc: u64,
    pub counts: u64,
    pub rank: u64,
    pub row_start: u64,
    pub slots: u64,
    pub meta: u64,
    pub row_token: u64,
    pub row_expert: u64,
    pub row_weight: u64,
    pub pair_row: u64,
    pub xq: u64,
    pub error: u64,
    pub ldx: i64,
    pub tokens: i32,
    pub top_k: i32,
    pub experts: i32,
    pub hidden: i32,
    /// R: the tile's BM rows per slot.
    pub slot_rows: i32,
    /// 0 copy (W4A16), 1 MXFP8, 2 NVFP4.
    pub quant: i32,
    pub max_rows: i32,
    /// 1: x̂ rows in SM90's wgmma tiles' fragment order (`moe_store_group`), 0: k order.
    pub kperm: i32,
    /// `[E]` tail slots (`meta[2]` of them) when `tail_rows > 0`.
    pub tail_slots: u64,
    /// 0, or the tail slots' rows: an expert's last `c mod R` rows, when `0 < c mod R ≤
    /// tail_rows`, go to a tail slot instead of an R-row slot.
    pub tail_rows: i32,
    pub reserved: i32,
}

/// The grouped path's tile kernels (`b12x_fused_moe_tile_*`): `gemm.blockscaled`'s tiled
/// parameters for the stacked weight, then the slots.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeTileParams {
    pub g: b12x_gemm::blockscaled::gemv::BsGemmParams,
    pub slots: u64,
    pub meta: u64,
    pub w_enc: u64,
    pub a_enc: u64,
    pub ntiles: i32,
    pub rbs: i32,
    pub max_slots: i32,
    /// 1: the tail slots' launch (SM90's wgmma tiles): it starts without waiting for the 128-row
    /// tile before it and waits for it at exit (`late_wait` in the kernel).
    pub late_wait: i32,
}

/// SM90's wgmma tile kernels (`b12x_fused_moe_tile_wg_*`): the tile's parameters and the TMA
/// descriptors of its two inputs, 64-byte aligned as the kernel's `TmaDescriptor`s.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeTileTmaParams {
    pub t: MoeTileParams,
    /// FC1's activation in the epilogue (zeros: FC2, or FC1 writing gate/up rows).
    pub act: MoeTileAct,
    pub pad: [u64; 3],
    /// The call's rows (x̂ or h) `[T·k, K]` bf16: boxes of 64 k × the slot's rows (128, or 64 for the 64-row tile), 128-byte swizzle.
    pub xmap: [u64; 16],
    /// The stacked codes `[E·rbs·128, K/2]` bytes as bf16 pairs: boxes of 32 × 256 rows,
    /// 64-byte swizzle.
    pub wmap: [u64; 16],
}

/// FC1's activation fused into SM90's wgmma tiles' epilogue (`MoeTileAct` in the kernel): the
/// `_act` kernels read it and write `h` (the activation kernel's output, in the tiles' fragment
/// order) instead of gate/up rows, and the activation kernel is not launched. W4A16 recipes, gated
/// activations (`act`: SiLU 0 or SwiGLU-OAI 1).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeTileAct {
    pub h: u64,
    pub row_weight: u64,
    pub inter: i32,
    pub act: i32,
    pub limit: f32,
    pub reserved: i32,
}

/// The grouped path's activation kernel (`b12x_fused_moe_act_rows`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeActParams {
    pub meta: u64,
    pub row_expert: u64,
    pub row_weight: u64,
    pub a2_enc: u64,
    pub gu: u64,
    pub h: u64,
    pub gu_cols: i32,
    pub inter: i32,
    pub gated: i32,
    pub act: i32,
    pub limit: f32,
    pub quant: i32,
    pub max_rows: i32,
    /// 1: h rows in SM90's wgmma tiles' fragment order (`moe_store_group`), 0: k order.
    pub kperm: i32,
}

const _: () = {
    assert!(size_of::<MoeGroupParams>() == 176);
    assert!(offset_of!(MoeGroupParams, tail_slots) == 160);
    assert!(offset_of!(MoeGroupParams, ldx) == 120);
    assert!(offset_of!(MoeGroupParams, slot_rows) == 144);
    assert!(size_of::<MoeTileParams>() == 200);
    assert!(offset_of!(MoeTileParams, slots) == 152);
    assert!(offset_of!(MoeTileParams, ntiles) == 184);
    assert!(size_of::<MoeTileTmaParams>() == 512);
    assert!(size_of::<MoeTileAct>() == 32);
    assert!(offset_of!(MoeTileTmaParams, act) == 200);
    assert!(offset_of!(MoeTileTmaParams, xmap) == 256);
    assert!(offset_of!(MoeTileTmaParams, wmap) == 384);
    assert!(std::mem::align_of::<MoeTileTmaParams>() == 64);
    assert!(size_of::<MoeActParams>() == 80);
    assert!(offset_of!(MoeActParams, gu_cols) == 48);
    assert!(offset_of!(MoeActParams, limit) == 64);
};
