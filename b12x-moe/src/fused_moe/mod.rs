//! `moe.fused_moe`: the routed experts of a MoE layer, rank-local.
//!
//! ```text
//! y[t] = bf16( Σ_{slots i of t, in order}  f32(y_e) ),   e = ids[t, i], w = weights[t, i]
//!   x̂    = x[t] (W4A16) or the recipe's quantize-then-dequantize of x[t] (rows of Hd)
//!   g, u = bf16(f32(Σ_k x̂_k · Ŵ1_e[r, k]))     r = j (gate), I + j (up); non-gated: g only
//!   a    = act(g, u)                            f32 (Activation)
//!   h    = bf16(w · a)                          the routing weight multiplies here, in f32
//!   ĥ    = h (W4A16) or the recipe's quantize-then-dequantize of h (rows of I)
//!   y_e  = bf16(f32(Σ_j ĥ_j · Ŵ2_e[o, j]))      o < Hd
//! ```
//!
//! - Excludes any shared expert and any tensor-parallel reduction (as b12x): with tensor
//!   parallelism a rank holds every expert's `I/tp` slice of FC1 (gate and up) and FC2, and its
//!   `y` is a partial sum the caller reduces.
//! - **The routing weight multiplies the activation output, in f32, before FC2** (DeepSeek's
//!   reference places it there: `h = bf16(w_e · silu(g) · u)`); mathematically the same as
//!   weighting FC2's output, not bitwise.
//! - Weights: FC1 `[E, 2·I, Hd]` with the gate rows first (`[0, I)`) and the up rows after
//!   (`[I, 2·I)`), or `[E, I, Hd]` for a non-gated activation; FC2 `[E, Hd, I]`; each expert
//!   an FP4 matrix of b12x-quant's formats (NVFP4 with its own encode scale, or MXFP4).
//!   Checkpoints that interleave gate and up rows (gpt-oss) are de-interleaved when loaded.
//! - Rounding points (above): FC1's and FC2's outputs are rounded to BF16 from an f32
//!   accumulator, as the linears of the reference models are; the activation is f32; h is BF16
//!   and is what the W4A8 / NVFP4 recipes quantize for FC2; the k expert outputs are summed in
//!   f32 in slot order and rounded once. The oracle sums the dot products in f64 and rounds
//!   them to f32 first, so a kernel (f32 accumulation, another order) may differ from it by one
//!   BF16 ulp at each rounding point; tests compare with a cosine bound and a per-element one.
//! - Untrusted ids: a slot whose id is outside `[0, E)` contributes nothing and sets
//!   [`FAULT_EXPERT_ID`] (the same bit as `moe.route_topk`'s); its weight is ignored.
//!
//! - Kernels, chosen by the query's [`WeightLayout`]:
//!   - `RowMajor` → the **simple path** (`kernels/fused_moe.cu`): the oracle's loops on the GPU —
//!     FC1 (one thread per gate/up row pair; W4A8 / NVFP4 quantize x's row first), FC2 (h's row
//!     quantized likewise), then the combine, three launches, each pair reading its expert's
//!     weights itself. Every recipe and activation; Hd and I ≤ 8192, T·k ≤ 65535; weights in
//!     b12x-quant's row-major layout ([`WeightArgs`]). Slow by design: the baseline.
//!   - `Packed` → on [`PackedExperts`], chosen per T bucket by the plan:
//!     - the **decode path** (T ≤ [`GROUPED_ABOVE`], `kernels/fused_moe_decode.cu`): a route
//!       kernel groups the pairs by expert on the device (stable, deterministic), then FC1 and
//!       FC2 are `gemm.blockscaled`'s W4A16 decode kernel body run over the touched experts' row
//!       blocks only (each touched expert's weights read once per call, every SM busy; FC1's
//!       epilogue applies the activation and the routing weight), then the combine; five
//!       launches (four with BF16 activations), chained with PDL. FC1 (at T·k ≤ 8) and FC2 ask
//!       for their first ring of weights before their PDL waits (FC1 computes the route's slots
//!       from the ids itself), so that streaming starts while the previous kernel still runs;
//!     - the **grouped GEMV** (T above, up to [`Query::gemv_up_to`] — by default while an
//!       expert's expected rows `T·k/E` are at most [`GEMV_ROWS_PER_EXPERT`], on SM90
//!       [`Query::gemv_up_to_wg64`]'s [`GEMV_ROWS_PER_EXPERT_WG64`]; [`plan_with`]'s
//!       [`PlanOptions`] move the boundary): the decode path's kernels with 16-row slots (each
//!       touched expert's weights streamed once per 16 of its rows), up to the T·k the route's
//!       one CTA holds in shared memory;
//!     - the **tiled path** (T above that, same file): the pairs grouped by expert into slots
//!       (atomic ranks: rows inside an expert in no fixed order, which no result depends on),
//!       x̂ rows gathered, then FC1 and FC2 as `gemm.blockscaled`'s tiled kernel body per (slot,
//!       256 weight rows) — on SM90 its wgmma body with 128-row slots from
//!       [`Query::wgmma_from`] (an expert's expected rows `T·k/E` ≥ [`WGMMA_ROWS_PER_EXPERT`])
//!       and at N = 64 with 64-row slots below that (at N = 32 with 32-row slots up to
//!       [`Query::wg32_up_to`]: `T·k/E` ≤ [`WG32_ROWS_PER_EXPERT`]), the mma.sync body with
//!       64-row slots on every other architecture ([`TileKernel`]; [`PlanOptions::tile`] forces
//!       one) — the activation between them as its own launch (on SM90 for W4A16 recipes with a
//!       gated activation optionally in FC1's epilogue instead: [`PlanOptions::fused_activation`]), the
//!       combine; up to nine launches chained with PDL. [`Plan::path`] says which path a T takes.
//!
//!     Hd and I multiples of 32, T·k ≤ [`MAX_PAIRS`].
//!
//!   The NVFP4 recipe's calibrated activation scales come as [`ActScaleArgs`] (finite and > 0:
//!   device data, not checked). Both paths are graph-capturable: scratch from the plan's
//!   layout, no allocation, any routing at replay.
//!
//! **Status: validated on the H200 (sm_90a) — `tests/gpu_fused_moe.rs` 236/236 on every path,
//! memcheck and racecheck clean (reduced profile, sessions 42–43); with the grouped GEMV
//! (session 46, on an H100, sm_90a): 267/267, memcheck 49/49 and racecheck 5/5 on the small
//! packed trials of both grouped paths; SM120 unrun.** Decode speed
//! (`benches/fused_moe.rs`, `bench-results/2026-12-05-h200/call1/`, `…-h200-b/`): 15–49% of the
//! read ceiling at T 1 / 8 against the 80% target.
//!
//! ```no_run
//! use b12x_core::{Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! use b12x_moe::fused_moe::{
//!     self, reference::Experts, Args, ExpertWeights, PackedExperts, Query, Routing, Shape, WeightLayout,
//! };
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! // Qwen3-30B-A3B: 128 experts, top-8, hidden 2048, I 768, NVFP4 weights x BF16 activations.
//! let shape = Shape::qwen3_30b_a3b();
//! let (k, hd) = (shape.top_k, shape.hidden);
//! let query = Query { shape, max_tokens: 8, layout: WeightLayout::Packed, router: None };
//! let plan = fused_moe::plan(&query, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let s = dev.stream();
//! // The experts as b12x-quant quantizes them (a checkpoint's in practice; random here), packed
//! // once at load time.
//! let experts = Experts::random(&shape, 1);
//! let packed = PackedExperts::new(&shape, &experts, s)?;
//! let t = 2;
//! let x = s.alloc_zeros::<b12x_core::half::bf16>(t * hd)?;
//! let ids = s.clone_htod(&(0..(t * k) as i32).collect::<Vec<_>>())?; // from moe.route_topk
//! let weights = s.clone_htod(&vec![0.125f32; t * k])?;
//! let mut y = s.alloc_zeros::<b12x_core::half::bf16>(t * hd)?;
//! let mut err = s.alloc_zeros::<i32>(1)?;
//! let mut scratch = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes())?;
//! let args = Args {
//!     x: TensorRef::from_slice(&x, &[t, hd])?,
//!     routing: Routing::TopK {
//!         ids: TensorRef::from_slice(&ids, &[t, k])?,
//!         weights: TensorRef::from_slice(&weights, &[t, k])?,
//!     },
//!     experts: ExpertWeights::Packed(&packed),
//!     act_scales: None,
//!     y: TensorMut::from_slice(&mut y, &[t, hd])?,
//!     error: TensorMut::from_slice(&mut err, &[1])?,
//! };
//! fused_moe::run(&plan, args, Scratch::from_slice(&mut scratch), s)?;
//! # Ok(()) }
//! ```

pub mod packed;
mod params;
pub mod reference;

pub use packed::PackedExperts;
pub use params::{
    FusedMoeParams, MoeActParams, MoeGemvParams, MoeGroupParams, MoeRouteParams, MoeRowsParams, MoeTileAct,
    MoeTileParams, MoeTileTmaParams, EARLY_LOCAL, EARLY_NONE, EARLY_PAIRS, EARLY_ROUTE,
};

use crate::route_topk::{self, RouteTopkParams, Router, ScoreFn};
use b12x_core::cudarc::driver::{CudaStream, DevicePtr};
use b12x_core::{
    require_disjoint, resolve,
    tma::{Tma2d, TmaSwizzle},
    Arch, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchDims, LaunchOpts, OpPlan, PlanSlot, Result,
    Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "moe.fused_moe";
/// Fault bit: a slot's expert id outside `[0, E)` (the slot is skipped).
pub const FAULT_EXPERT_ID: u32 = crate::route_topk::FAULT_EXPERT_ID;

/// The expert MLP's activation, on FC1's BF16 outputs taken to f32.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// SwiGLU: `silu(g) · u`, with an optional limit L (`u ← clamp(u, −L, L)`,
    /// `g ← min(g, L)`: DeepSeek's swiglu limit, 10 in V4); `b12x_core::testing::silu_mul`.
    Silu { limit: Option<f32> },
    /// gpt-oss: `g ← min(g, L)`, `u ← clamp(u, −L, L)`, `(u + 1) · g · σ(1.702 · g)`.
    SwigluOai { limit: f32 },
    /// Non-gated `relu(g)²` (FC1 has I rows).
    Relu2,
}

/// gpt-oss's sigmoid slope.
pub const SWIGLU_OAI_ALPHA: f32 = 1.702;

impl Activation {
    /// Whether FC1 produces gate and up (2·I rows) rather than I.
    pub fn gated(self) -> bool {
        !matches!(self, Activation::Relu2)
    }
}

/// The FP4 format of the expert weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp4 {
    /// E2M1, UE4M3 scale per 16, one f32 encode scale per expert matrix.
    Nvfp4,
    /// E2M1, UE8M0 scale per 32.
    Mxfp4,
}

impl Fp4 {
    /// Elements per scale block (K must be a multiple).
    pub fn block(self) -> usize {
        match self {
            Fp4::Nvfp4 => 16,
            Fp4::Mxfp4 => 32,
        }
    }
}

/// Weights × activations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recipe {
    /// FP4 weights dequantized inline, BF16 activations.
    W4a16(Fp4),
    /// MXFP4 weights × MXFP8 activations, x and h quantized inside the op (b12x-quant's MXFP8:
    /// E4M3, UE8M0 per 32, the CeilPow2 rule).
    W4a8Mx,
    /// NVFP4 weights × NVFP4 activations, x and h quantized inside the op with calibrated
    /// per-expert encode scales (FC1's input scale and FC2's).
    Nvfp4,
}

impl Recipe {
    /// The weights' format.
    pub fn weights(self) -> Fp4 {
        match self {
            Recipe::W4a16(f) => f,
            Recipe::W4a8Mx => Fp4::Mxfp4,
            Recipe::Nvfp4 => Fp4::Nvfp4,
        }
    }
    /// The block of the activations' quantization (1: none).
    fn act_block(self) -> usize {
        match self {
            Recipe::W4a16(_) => 1,
            Recipe::W4a8Mx => 32,
            Recipe::Nvfp4 => 16,
        }
    }
}

/// A routed-experts layer's static problem (one rank's slice).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// E: experts (global ids `[0, E)`).
    pub experts: usize,
    /// k: experts per token.
    pub top_k: usize,
    /// Hd: hidden size (FC1's K, FC2's N).
    pub hidden: usize,
    /// I: this rank's intermediate channels per expert (FC2's K).
    pub inter: usize,
    pub activation: Activation,
    pub recipe: Recipe,
}

impl Shape {
    /// DeepSeek-V4-Flash at TP2: 256 experts, top-6, hidden 4096, I 1024 per rank, SiLU limit
    /// 10, MXFP4 × MXFP8.
    pub fn deepseek_v4_flash_tp2() -> Shape {
        Shape {
            experts: 256,
            top_k: 6,
            hidden: 4096,
            inter: 1024,
            activation: Activation::Silu { limit: Some(10.0) },
            recipe: Recipe::W4a8Mx,
        }
    }
    /// DeepSeek-V4.1-Flash at TP4: 384 experts, top-6, hidden 5120, I 576 per rank, SiLU limit
    /// 10, MXFP4 × MXFP8.
    pub fn deepseek_v41_flash_tp4() -> Shape {
        Shape { experts: 384, hidden: 5120, inter: 576, ..Shape::deepseek_v4_flash_tp2() }
    }
    /// Qwen3-30B-A3B: 128 experts, top-8, hidden 2048, I 768, SiLU, NVFP4 weights × BF16.
    pub fn qwen3_30b_a3b() -> Shape {
        Shape {
            experts: 128,
            top_k: 8,
            hidden: 2048,
            inter: 768,
            activation: Activation::Silu { limit: None },
            recipe: Recipe::W4a16(Fp4::Nvfp4),
        }
    }
    /// gpt-oss-120b: 128 experts, top-4, hidden 2880, I 2880, SwiGLU-OAI limit 7, MXFP4 × BF16.
    /// (The checkpoint's expert biases are not part of this op yet.)
    pub fn gpt_oss_120b() -> Shape {
        Shape {
            experts: 128,
            top_k: 4,
            hidden: 2880,
            inter: 2880,
            activation: Activation::SwigluOai { limit: 7.0 },
            recipe: Recipe::W4a16(Fp4::Mxfp4),
        }
    }

    /// FC1's rows per expert: 2·I (gated) or I.
    pub fn fc1_rows(&self) -> usize {
        if self.activation.gated() {
            2 * self.inter
        } else {
            self.inter
        }
    }

    /// Checks the fields; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        let r = crate::route_topk::Router::qwen3_moe(self.experts, self.top_k);
        // The same limits on E and k as moe.route_topk (its error names the field).
        r.validate().map_err(|e| match e {
            Error::InvalidQuery { field, reason, .. } => Error::InvalidQuery { op: OP, field, reason },
            other => other,
        })?;
        let block = self.recipe.weights().block().max(self.recipe.act_block());
        for (field, v) in [("hidden", self.hidden), ("inter", self.inter)] {
            if v == 0 || v % block != 0 {
                return bad(
                    field,
                    format!("must be a positive multiple of {block} (the recipe's scale block), got {v}"),
                );
            }
        }
        match self.activation {
            Activation::Silu { limit: Some(l) } | Activation::SwigluOai { limit: l } if !(l.is_finite() && l > 0.0) => {
                bad("activation", format!("the limit must be finite and > 0, got {l}"))
            }
            _ => Ok(()),
        }
    }
}

/// The largest Hd and I of the simple path (`kMoeMaxRow`: a row of x or h in shared memory).
pub const MAX_ROW: usize = 8192;
/// The most experts of the decode path (the route kernel's shared-memory counters).
pub const MAX_DECODE_EXPERTS: usize = 4096;
/// x̂ rows each CTA of the route kernel writes (quantized recipes).
const ROUTE_ROWS_PER_CTA: usize = 4;
/// Threads of the route kernel (`kMoeRouteThreads`).
const ROUTE_THREADS: u32 = 256;
/// Threads of the decode GEMV (`32 · (kConsumers + 1)`).
const GEMV_THREADS: u32 = 32 * 9;
/// The decode GEMV's static shared memory: its barriers and scale table (`gemm.blockscaled`'s
/// `STATIC_SMEM`, 1280) and the CTA's own slots (`MoeEarlySmem`, 1664).
const GEMV_STATIC_SMEM: u32 = BS_STATIC_SMEM + EARLY_SMEM;
/// `gemm.blockscaled`'s static shared memory, which its own `fits` counts.
const BS_STATIC_SMEM: u32 = 1280;
/// The static shared memory this op's GEMV kernels add to it (`MoeEarlySmem`).
const EARLY_SMEM: u32 = 1664;
/// The most pairs `T · k` at which the decode FC1 groups the ids itself ([`EARLY_LOCAL`]; the
/// kernel can up to [`EARLY_PAIRS`], validated there). Measured on the H200
/// (`bench-results/2026-12-05-h200-b/call2/`): at T = 1 it beats waiting for the route by 1–2%
/// (DeepSeek-V4-Flash 38.7 vs 39.7 µs, Qwen3-30B 28.0 vs 28.3; gpt-oss even, 42.2 vs 42.0); at
/// T = 8 it loses (Qwen3-30B, 64 pairs: 68.8 vs 66.0 µs; gpt-oss, 32: 183.8 vs 182.7): the
/// O(P²) grouping per CTA costs more than the route it overlaps.
const EARLY_LOCAL_PAIRS: usize = 8;
/// The most (token, slot) pairs a call may have (the simple path's grids' y extent; the packed
/// layout keeps the same bound).
pub const MAX_PAIRS: usize = 65535;
/// Threads per CTA (`kMoeThreads`).
const THREADS: u32 = 128;
/// The one config.
const CONFIG: &str = "simple";

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "moe",
        entry_points: &["plan", "run"],
        dtypes: &["bf16 x (W4A16, or quantized in the op to MXFP8 / NVFP4), NVFP4 | MXFP4 experts -> bf16 y"],
        // sm_90a: the GPU suite (236 trials, both layouts) and its memcheck / racecheck profile on
        // the H200 (session 42, bench-results/2026-12-05-h200/call1, call2). SM120: compiled and
        // ptxas-checked only.
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-moe",
        summary: "routed experts of a MoE layer (FC1, activation, routing weight, FC2, combine), FP4 weights; simple path (row-major weights); packed experts: decode path (T ≤ 16), grouped GEMV and tiled path (device-side grouping)",
    }
}

/// How a call's expert weights are laid out, which decides the kernels (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightLayout {
    /// b12x-quant's row-major matrices ([`WeightArgs`]): the simple path (the slow baseline).
    RowMajor,
    /// [`PackedExperts`]: the decode path, the grouped GEMV and the tiled path ([`Path`]).
    Packed,
}

/// The op's static problem: the layer's shape, a token capacity and the weights' layout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Query {
    pub shape: Shape,
    /// The largest T `run` accepts.
    pub max_tokens: usize,
    pub layout: WeightLayout,
    /// `Some`: the op takes router logits ([`Routing::Logits`]) and routes them itself with
    /// `moe.route_topk`'s kernel (launched first, ids and weights in the scratch); `None`: it
    /// takes precomputed ids and weights ([`Routing::TopK`]). Its E and k must be the shape's.
    pub router: Option<Router>,
}

impl Query {
    /// Checks the shape, the capacity and what the layout's path serves; the error names the
    /// first bad field.
    pub fn validate(&self) -> Result<()> {
        self.shape.validate()?;
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if let Some(r) = &self.router {
            r.validate().map_err(|e| match e {
                Error::InvalidQuery { reason, .. } => Error::InvalidQuery { op: OP, field: "router", reason },
                other => other,
            })?;
            if (r.experts, r.top_k) != (self.shape.experts, self.shape.top_k) {
                return bad(
                    "router",
                    format!(
                        "routes to {} experts, top-{}; the shape has {}, top-{}",
                        r.experts, r.top_k, self.shape.experts, self.shape.top_k
                    ),
                );
            }
        }
        if self.layout == WeightLayout::Packed {
            for (field, v) in [("hidden", self.shape.hidden), ("inter", self.shape.inter)] {
                if v % 32 != 0 {
                    return bad(field, format!("must be a multiple of 32 on the decode path, got {v}"));
                }
            }
            if self.shape.experts > MAX_DECODE_EXPERTS {
                return bad(
                    "experts",
                    format!("at most {MAX_DECODE_EXPERTS} on the decode path, got {}", self.shape.experts),
                );
            }
            let pairs = self.max_tokens.saturating_mul(self.shape.top_k);
            if self.max_tokens == 0 || pairs > MAX_PAIRS {
                return bad("max_tokens", format!("must be ≥ 1 with T·k ≤ {MAX_PAIRS}, got T = {}", self.max_tokens));
            }
            return Ok(());
        }
        for (field, v) in [("hidden", self.shape.hidden), ("inter", self.shape.inter)] {
            if v > MAX_ROW {
                return bad(field, format!("must be at most {MAX_ROW} on the simple path, got {v}"));
            }
        }
        let pairs = self.max_tokens.saturating_mul(self.shape.top_k);
        // The simple path's grids put the pairs on grid.y (at most 65535).
        if self.max_tokens == 0 || pairs > MAX_PAIRS {
            return bad(
                "max_tokens",
                format!("must be ≥ 1 with T·k ≤ {MAX_PAIRS} on the simple path, got T = {}", self.max_tokens),
            );
        }
        Ok(())
    }

    /// The simple path's scratch at this capacity: `h [T·k, I]` and `y_pairs [T·k, Hd]` bf16
    /// (the decode path's depends on the device: [`Plan::scratch_layout`]).
    pub fn scratch_layout(&self) -> ScratchLayout {
        let pairs = self.max_tokens * self.shape.top_k;
        let mut l = ScratchLayout::new();
        self.add_topk_regions(&mut l);
        l.add("h", pairs * self.shape.inter * 2);
        l.add("y_pairs", pairs * self.shape.hidden * 2);
        l
    }

    /// The checks both paths make: x, ids, weights, y and the error word against the query, the
    /// NVFP4 recipe's activation scales present exactly for that recipe, and y and the error word
    /// apart from every input (`weights`: the layout's device spans). Returns `(T, a1, a2)`, the
    /// activation scales' pointers (0 without).
    fn check_args(&self, args: &Args<'_>, weight_spans: &[(&'static str, (u64, u64))]) -> Result<(usize, u64, u64)> {
        let s = &self.shape;
        let (e, k, hd) = (s.experts, s.top_k, s.hidden);
        let t = args.x.shape().first().copied().unwrap_or(0);
        args.x.expect("x", "[T, Hd]", DType::BF16, &[t, hd])?;
        if t > self.max_tokens {
            return Err(Error::Capacity { what: "T (rows of x)", got: t, capacity: self.max_tokens });
        }
        args.y.expect("y", "[T, Hd]", DType::BF16, &[t, hd])?;
        args.error.expect("error", "[1]", DType::I32, &[1])?;
        let mut inputs = vec![("x", args.x.byte_span())];
        match (&args.routing, &self.router) {
            (Routing::TopK { ids, weights }, None) => {
                ids.expect("ids", "[T, k]", DType::I32, &[t, k])?;
                weights.expect("weights", "[T, k]", DType::F32, &[t, k])?;
                ids.require_contiguous("ids")?;
                weights.require_contiguous("weights")?;
                inputs.push(("ids", ids.byte_span()));
                inputs.push(("weights", weights.byte_span()));
            }
            (Routing::Logits(r), Some(_)) => {
                r.logits.expect("logits", "[T, E]", DType::F32, &[t, e])?;
                for (name, v) in [("bias", &r.bias), ("token_ids", &r.token_ids), ("tid2eid", &r.tid2eid)] {
                    if let Some(v) = v {
                        inputs.push((name, v.byte_span()));
                    }
                }
                inputs.push(("logits", r.logits.byte_span()));
            }
            (Routing::TopK { .. }, Some(_)) => {
                let expected = "Routing::Logits (the query has a router)".into();
                return Err(Error::Shape { tensor: "routing", expected, actual: vec![] });
            }
            (Routing::Logits(_), None) => {
                let expected = "Routing::TopK (the query has no router)".into();
                return Err(Error::Shape { tensor: "routing", expected, actual: vec![] });
            }
        }
        let (mut a1, mut a2) = (0, 0);
        match (&args.act_scales, s.recipe == Recipe::Nvfp4) {
            (Some(a), true) => {
                for (name, v) in [("act_scales.fc1", &a.fc1), ("act_scales.fc2", &a.fc2)] {
                    v.expect(name, "[E]", DType::F32, &[e])?;
                    v.require_contiguous(name)?;
                }
                (a1, a2) = (a.fc1.ptr(), a.fc2.ptr());
            }
            (None, true) => {
                let expected = format!("two [E] = [{e}] f32 tensors (the NVFP4 recipe)");
                return Err(Error::Shape { tensor: "act_scales", expected, actual: vec![] });
            }
            (Some(_), false) => {
                let expected = "no tensors (only the NVFP4 recipe has activation scales)".into();
                return Err(Error::Shape { tensor: "act_scales", expected, actual: vec![] });
            }
            (None, false) => {}
        }
        if let Some(a) = &args.act_scales {
            inputs.push(("act_scales.fc1", a.fc1.byte_span()));
            inputs.push(("act_scales.fc2", a.fc2.byte_span()));
        }
        inputs.extend_from_slice(weight_spans);
        let (ys, es) = (("y", args.y.byte_span()), ("error", args.error.byte_span()));
        require_disjoint(ys, es)?;
        for &input in &inputs {
            require_disjoint(ys, input)?;
            require_disjoint(es, input)?;
        }
        Ok((t, a1, a2))
    }

    /// The router launch's parameters when the call routes logits: `moe.route_topk`'s checks of
    /// the router's tensors, its outputs the scratch's `topk_ids` / `topk_weights` (at `ids`,
    /// `weights`), the call's error word.
    fn route_params(&self, args: &Args<'_>, t: usize, ids: u64, weights: u64) -> Result<Option<RouteTopkParams>> {
        let (Routing::Logits(r), Some(router)) = (&args.routing, &self.router) else { return Ok(None) };
        let k = self.shape.top_k;
        // SAFETY: `ids` and `weights` are the scratch's topk regions ([max_tokens, k] i32 / f32,
        // bound by the caller), `error` is the call's checked error word; views, never freed here.
        let (ids, weights, error) = unsafe {
            (
                TensorMut::from_raw(ids, &[t, k], &[k as isize, 1], DType::I32)?,
                TensorMut::from_raw(weights, &[t, k], &[k as isize, 1], DType::F32)?,
                TensorMut::from_raw(args.error.ptr(), &[1], &[1], DType::I32)?,
            )
        };
        let ra = route_topk::Args {
            logits: r.logits,
            bias: r.bias,
            token_ids: r.token_ids,
            tid2eid: r.tid2eid,
            ids,
            weights,
            error,
        };
        route_topk::Query { router: *router, max_tokens: self.max_tokens }.kernel_params(&ra).map(Some)
    }

    /// The router kernel's symbol in this op's modules, when the query routes logits.
    fn route_symbol(&self) -> Option<String> {
        self.router.map(|r| {
            let score = match r.score {
                ScoreFn::Softmax => "softmax",
                ScoreFn::Sigmoid => "sigmoid",
                ScoreFn::SqrtSoftplus => "sqrtsoftplus",
            };
            format!("b12x_fused_moe_route_topk_{score}")
        })
    }

    /// Scratch regions for the routed ids and weights (a query with a router).
    fn add_topk_regions(&self, l: &mut ScratchLayout) {
        if self.router.is_some() {
            l.add("topk_ids", 4 * self.max_tokens * self.shape.top_k);
            l.add("topk_weights", 4 * self.max_tokens * self.shape.top_k);
        }
    }

    /// The activation's limit as the kernels take it (`+inf`: none).
    fn limit(&self) -> f32 {
        match self.shape.activation {
            Activation::Silu { limit } => limit.unwrap_or(f32::INFINITY),
            Activation::SwigluOai { limit } => limit,
            Activation::Relu2 => f32::INFINITY,
        }
    }

    /// Checks `args` against the query (a [`WeightLayout::RowMajor`] call) and builds the simple
    /// path's kernel parameters (scratch pointers left 0); nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<FusedMoeParams> {
        let s = &self.shape;
        let (e, k, hd, i) = (s.experts, s.top_k, s.hidden, s.inter);
        let ExpertWeights::RowMajor(w) = &args.experts else {
            return Err(Error::Shape {
                tensor: "experts",
                expected: "ExpertWeights::RowMajor (the plan's layout)".into(),
                actual: vec![],
            });
        };
        let f = s.recipe.weights();
        let b = f.block();
        let r1 = s.fc1_rows();
        let mats = [
            ("w1_codes", &w.w1_codes, [e, r1, hd / 2]),
            ("w1_scales", &w.w1_scales, [e, r1, hd / b]),
            ("w2_codes", &w.w2_codes, [e, hd, i / 2]),
            ("w2_scales", &w.w2_scales, [e, hd, i / b]),
        ];
        for (name, v, shape) in &mats {
            v.expect(name, "[E, rows, cols]", DType::U8, shape)?;
            v.require_contiguous(name)?;
        }
        let nvfp4 = f == Fp4::Nvfp4;
        for (name, v) in [("w1_enc", &w.w1_enc), ("w2_enc", &w.w2_enc)] {
            match (nvfp4, v) {
                (true, Some(v)) => {
                    v.expect(name, "[E]", DType::F32, &[e])?;
                    v.require_contiguous(name)?;
                }
                (true, None) => {
                    return Err(Error::Shape {
                        tensor: name,
                        expected: format!("[E] = [{e}] f32 (NVFP4)"),
                        actual: vec![],
                    })
                }
                (false, Some(_)) => {
                    return Err(Error::Shape {
                        tensor: name,
                        expected: "no tensor (MXFP4 has no encode scale)".into(),
                        actual: vec![],
                    })
                }
                (false, None) => {}
            }
        }
        let mut spans: Vec<_> = mats.iter().map(|(n, v, _)| (*n, v.byte_span())).collect();
        for (name, v) in [("w1_enc", &w.w1_enc), ("w2_enc", &w.w2_enc)] {
            if let Some(v) = v {
                spans.push((name, v.byte_span()));
            }
        }
        let (t, a1, a2) = self.check_args(args, &spans)?;
        Ok(FusedMoeParams {
            x: args.x.ptr(),
            ids: routing_ptrs(&args.routing).0,
            weights: routing_ptrs(&args.routing).1,
            w1_codes: w.w1_codes.ptr(),
            w1_scales: w.w1_scales.ptr(),
            w1_enc: w.w1_enc.as_ref().map_or(0, |v| v.ptr()),
            w2_codes: w.w2_codes.ptr(),
            w2_scales: w.w2_scales.ptr(),
            w2_enc: w.w2_enc.as_ref().map_or(0, |v| v.ptr()),
            a1_enc: a1,
            a2_enc: a2,
            y: args.y.ptr(),
            error: args.error.ptr(),
            ldx: args.x.row_stride("x")? as i64,
            ldy: args.y.row_stride("y")? as i64,
            tokens: t as i32,
            top_k: k as i32,
            experts: e as i32,
            hidden: hd as i32,
            inter: i as i32,
            limit: self.limit(),
            ..FusedMoeParams::default()
        })
    }

    /// The decode path's kernel symbols for 8·`nt`-row slots: the router (a query with one), the
    /// route, the GEMV (FC1 and FC2), the row quantizer (W4A8 / NVFP4 only), the combine.
    pub fn decode_symbols(&self, nt: usize) -> Vec<String> {
        let f = match self.shape.recipe.weights() {
            Fp4::Nvfp4 => "nvfp4",
            Fp4::Mxfp4 => "mxfp4",
        };
        let mut out: Vec<String> = self.route_symbol().into_iter().collect();
        out.extend([
            "b12x_fused_moe_route".into(),
            format!("b12x_fused_moe_decode_gemv_{f}_nt{nt}"),
            "b12x_fused_moe_quant_rows".into(),
            "b12x_fused_moe_combine_rows".into(),
        ]);
        out
    }

    /// The default largest T of the grouped GEMV ([`Path::GroupedGemv`]; [`PlanOptions`]
    /// overrides it): while `T · k / E ≤` [`GEMV_ROWS_PER_EXPERT`], i.e. an expert gets at most
    /// that many rows under uniform routing — each expert's weights are then streamed once per 16
    /// of its rows by the decode GEMV instead of through 64-row tiles that are mostly empty.
    pub fn gemv_up_to(&self) -> usize {
        GEMV_ROWS_PER_EXPERT * self.shape.experts / self.shape.top_k.max(1)
    }

    /// SM90's default largest T of the grouped GEMV, where the 64-row wgmma tile serves the tiled
    /// T below [`Query::wgmma_from`]: while `T · k / E ≤` [`GEMV_ROWS_PER_EXPERT_WG64`]. A plan
    /// takes this one wherever its tiled path splits into SM90's two wgmma tiles (the default
    /// tile choice there), [`Query::gemv_up_to`] elsewhere.
    pub fn gemv_up_to_wg64(&self) -> usize {
        GEMV_ROWS_PER_EXPERT_WG64 * self.shape.experts / self.shape.top_k.max(1)
    }

    /// SM90's default largest T of the 32-row wgmma tile ([`PlanOptions::wg32_up_to`] overrides
    /// it): while `T · k / E ≤` [`WG32_ROWS_PER_EXPERT`]. Its bucket holds the tiled T up to
    /// here (above the grouped GEMV's [`Query::gemv_up_to_wg64`]); the 64-row wgmma tile takes
    /// the T above.
    pub fn wg32_up_to(&self) -> usize {
        WG32_ROWS_PER_EXPERT * self.shape.experts / self.shape.top_k.max(1)
    }

    /// The default smallest T of SM90's wgmma tile ([`PlanOptions::wgmma_from`] overrides it):
    /// from `T · k / E ≥` [`WGMMA_ROWS_PER_EXPERT`] (an expert's expected rows fill half a
    /// 128-row slot); the tiled T below it take the 64-row wgmma tile's 64-row slots. Other
    /// architectures have the mma.sync tile (64-row slots) only.
    pub fn wgmma_from(&self) -> usize {
        (WGMMA_ROWS_PER_EXPERT * self.shape.experts).div_ceil(self.shape.top_k.max(1))
    }

    /// The grouped path's kernel symbols: the router (a query with one), the grouping (zero,
    /// count, scan, place, gather), the tile GEMM (FC1 and FC2), the activation, the combine,
    /// then the tail slots' tile GEMM (FC1 and FC2) when there is one; with `fused_act` (SM90's
    /// wgmma tiles) then FC1's kernel with the activation in its epilogue, and the tail slots'.
    pub fn grouped_symbols(&self, tile: &TileKernel, tail: Option<&TileKernel>, fused_act: bool) -> Vec<String> {
        let f = match self.shape.recipe.weights() {
            Fp4::Nvfp4 => "nvfp4",
            Fp4::Mxfp4 => "mxfp4",
        };
        let mut out: Vec<String> = self.route_symbol().into_iter().collect();
        out.extend(["zero", "count", "scan", "place", "gather"].map(|k| format!("b12x_fused_moe_group_{k}")));
        out.extend([tile.symbol(f), "b12x_fused_moe_act_rows".into(), "b12x_fused_moe_combine_rows".into()]);
        out.extend(tail.map(|t| t.symbol(f)));
        if fused_act {
            out.extend(tile.act_symbol(f));
            out.extend(tail.and_then(|t| t.act_symbol(f)));
        }
        out
    }

    /// The simple path's kernel symbols, in launch order: the router (a query with one), FC1,
    /// FC2, the combine.
    pub fn symbols(&self) -> Vec<String> {
        let f = match self.shape.recipe {
            Recipe::W4a16(Fp4::Nvfp4) => "w4a16_nvfp4",
            Recipe::W4a16(Fp4::Mxfp4) => "w4a16_mxfp4",
            Recipe::W4a8Mx => "w4a8_mx",
            Recipe::Nvfp4 => "nvfp4",
        };
        let act = match self.shape.activation {
            Activation::Silu { .. } => "silu",
            Activation::SwigluOai { .. } => "oai",
            Activation::Relu2 => "relu2",
        };
        let mut out: Vec<String> = self.route_symbol().into_iter().collect();
        out.extend([
            format!("b12x_fused_moe_simple_fc1_{f}_{act}"),
            format!("b12x_fused_moe_simple_fc2_{f}"),
            "b12x_fused_moe_combine".into(),
        ]);
        out
    }
}

/// The experts' weights on the device, b12x-quant's row-major layout (what
/// `reference::ExpertMatrix` holds): per matrix the E2M1 pairs `[E, rows, K/2]` (element 2i in
/// the low nibble), the scales `[E, rows, K/B]` (UE4M3 for NVFP4, B = 16; UE8M0 for MXFP4,
/// B = 32) and, NVFP4 only, the f32 encode scales `[E]`. FC1's rows: gate `[0, I)` then up
/// `[I, 2I)` (I rows for a non-gated activation); FC2's rows: Hd.
#[derive(Debug)]
pub struct WeightArgs<'a> {
    pub w1_codes: TensorRef<'a>,
    pub w1_scales: TensorRef<'a>,
    pub w1_enc: Option<TensorRef<'a>>,
    pub w2_codes: TensorRef<'a>,
    pub w2_scales: TensorRef<'a>,
    pub w2_enc: Option<TensorRef<'a>>,
}

/// The NVFP4 recipe's calibrated activation encode scales (`reference::ActScales` on the
/// device): `[E]` f32 each, finite and > 0 (device data: not checked).
#[derive(Debug)]
pub struct ActScaleArgs<'a> {
    /// x's, before FC1.
    pub fc1: TensorRef<'a>,
    /// h's, before FC2.
    pub fc2: TensorRef<'a>,
}

/// The expert weights of a call, in the plan's [`WeightLayout`].
// Argument bundles built per call on the stack: boxing the large variant would allocate.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum ExpertWeights<'a> {
    /// [`WeightLayout::RowMajor`].
    RowMajor(WeightArgs<'a>),
    /// [`WeightLayout::Packed`].
    Packed(&'a PackedExperts),
}

/// How a call is routed.
// Argument bundles built per call on the stack: boxing the large variant would allocate.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Routing<'a> {
    /// Precomputed top-k (from `moe.route_topk` or the caller): `ids [T, k]` i32 (untrusted:
    /// outside `[0, E)` the slot is skipped and reported) and `weights [T, k]` f32, contiguous.
    TopK { ids: TensorRef<'a>, weights: TensorRef<'a> },
    /// Router logits, routed in the op by the query's [`Router`] (a plan with `router: Some`).
    Logits(RouterArgs<'a>),
}

/// The router's inputs, as `moe.route_topk` takes them.
#[derive(Debug)]
pub struct RouterArgs<'a> {
    /// `[T, E]` f32 (rows may be padded).
    pub logits: TensorRef<'a>,
    /// `[E]` f32, exactly when the router selects by `scores + bias`.
    pub bias: Option<TensorRef<'a>>,
    /// `[T]` i32 token ids, exactly for hash routing.
    pub token_ids: Option<TensorRef<'a>>,
    /// `[vocab, k]` i32, exactly for hash routing.
    pub tid2eid: Option<TensorRef<'a>>,
}

/// The ids and weights pointers of precomputed routing (0, 0 for logits: the scratch's).
fn routing_ptrs(r: &Routing<'_>) -> (u64, u64) {
    match r {
        Routing::TopK { ids, weights } => (ids.ptr(), weights.ptr()),
        Routing::Logits(_) => (0, 0),
    }
}

/// The tensors of one call.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[T, Hd]` bf16 (rows may be padded; the decode path wants 16-byte aligned rows).
    pub x: TensorRef<'a>,
    /// The routing: precomputed ids and weights, or router logits (the query's `router`).
    pub routing: Routing<'a>,
    pub experts: ExpertWeights<'a>,
    /// The NVFP4 recipe's activation encode scales, exactly for that recipe.
    pub act_scales: Option<ActScaleArgs<'a>>,
    /// `[T, Hd]` bf16 (rows may be padded; the decode path wants 16-byte aligned rows).
    pub y: TensorMut<'a>,
    /// `[1]` i32: [`FAULT_EXPERT_ID`] is ORed in.
    pub error: TensorMut<'a>,
}

/// The packed layout's static choices: per GEMV bucket (the decode path's and the grouped GEMV's)
/// the decode GEMV config, for the tiled bucket (last) the tile config; the sizes of the scratch.
#[derive(Clone, Debug)]
struct Decode {
    /// Per bucket, the path that serves it.
    paths: Vec<Path>,
    /// Per GEMV bucket (they come first, in bucket order), the GEMV config (`gemm.blockscaled`'s
    /// decode configs, KB = 1).
    configs: Vec<GemvConfig>,
    /// Per tiled bucket (they come last, in bucket order), its kernel: on SM90 by default the
    /// 64-row wgmma tile below [`PlanOptions::wgmma_from`] and the 128-row one from it.
    tiles: Vec<TileKernel>,
    /// Per tiled bucket, the kernel of its tail slots ([`PlanOptions::no_tail_slots`]: SM90's 64-row
    /// wgmma tile beside the 128-row one), if any.
    tails: Vec<Option<TileKernel>>,
    /// Tail slots capacity: E where a bucket has tail slots, else 0.
    tail_slots: usize,
    /// FC1's epilogue applies the activation wherever a bucket runs a wgmma tile
    /// ([`PlanOptions::fused_activation`]: W4A16, gated activations).
    fused_act: bool,
    /// 128-row blocks per expert of FC1 and FC2.
    rbs: (usize, usize),
    /// Slots capacity (the largest over the buckets), and over the GEMV buckets only (the
    /// GEMV's merge counters).
    max_slots: usize,
    decode_slots: usize,
    /// FC grid capacity (CTAs) and SM count.
    sm_count: u32,
    /// The wgmma tile's persistent grid: [`PlanOptions::tile_ctas`] or one CTA per SM.
    tile_ctas: usize,
}

use b12x_gemm::blockscaled::gemv::{BsGemmParams, Config as GemvConfig, TileConfig, WgConfig};

/// Tokens above which a packed plan leaves the decode path's buckets (8- and 16-row token tiles)
/// for the grouped GEMV or the tiled path.
pub const GROUPED_ABOVE: usize = 16;
/// The tiled path's mma.sync tile: 64 rows (slots of 64 rows) by 256 weight rows.
const GROUPED_WM: usize = 2;
const GROUPED_WN: usize = 8;
/// The default [`Query::wgmma_from`] on SM90: the wgmma tile (128-row slots) serves T while the
/// expected rows per expert under uniform routing, `T · k / E`, are at least this many; the
/// 64-row wgmma tile ([`TileKernel::Wgmma64`], 64-row slots) serves the tiled T below (its slots
/// are filled twice as densely where an expert has few rows).
///
/// Measured on an H100 (`bench-results/2026-12-07-h200-c/call1/r/bench_b8`, one job, each tile
/// forced at the same T): below 64 rows the 64-row wgmma tile takes 0.84× the 128-row tile's time
/// (DeepSeek-V4-Flash T = 1024, 24 rows: 1485 µs against 1778; gpt-oss-120b T = 1024, 32 rows: 1505
/// against 1785; Qwen3-30B-A3B T = 512, 32 rows: 336 against 400), from 64 rows 1.16–1.48× (Qwen3
/// T = 1024, 64 rows: 511 against 441; DeepSeek T = 4096, 96 rows: 3142 against 2123). 48 rows
/// (DeepSeek T = 2048) is not cleanly measured yet.
///
/// The split's first measurement, against the mma.sync tile (then the tile below it), on the H200 (`bench-results/2026-12-06-h200-f/call2`, bench `b1`, one job, both tiles
/// forced at the same T): below 64 rows per expert the mma.sync tile is 1.06–1.11× faster
/// (DeepSeek-V4-Flash T = 1024 / 2048: 24 / 48 rows, 2180 / 2319 µs against 2408 / 2514;
/// gpt-oss-120b T = 1024: 32 rows, 2225 against 2366); from 64 rows the wgmma tile is
/// 1.29–1.60× faster (Qwen3-30B-A3B T = 1024: 556 µs against 715; gpt-oss-120b T = 2048: 2451
/// against 3281; DeepSeek-V4-Flash T = 4096: 2771 against 4425).
pub const WGMMA_ROWS_PER_EXPERT: usize = 64;
/// The SM90 wgmma tile's ring depth. Its producer refills a stage three k16 steps into the
/// k-tile after the one that read it, so two stages leave a load under one k-tile of MMAs;
/// four stages (205 KB) keep three k-tiles in flight.
const GROUPED_WG_STAGES: usize = 4;

/// The grouped tiled path's kernel ([`Path::GroupedTile`]): `gemm.blockscaled`'s tiled bodies
/// per (expert slot, 256-row N tile), the slot's rows the tile's x rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileKernel {
    /// The mma.sync tiled body (every architecture): 64-row slots (`wm` 2, `wn` 8, any ring
    /// depth that fits, no split).
    Mma(TileConfig),
    /// SM90 only: the wgmma body (`b12x_bsgemm_wg_*`'s), 128-row slots (`wn` 8, 2..4 stages, no
    /// split tail) — the default there.
    Wgmma(WgConfig),
    /// SM90 only: the same wgmma body at N = 64 — 64-row slots (the mma.sync tile's grouping),
    /// `m64n64k16` — with a ring of `stages` (2..=4) stages of 34 KB: SM90's default below
    /// [`Query::wgmma_from`], where experts have fewer rows than 128-row slots fill (measured on
    /// an H100, `bench-results/2026-12-07-h200-c/call1`, forced rows of one job: 0.67–0.69× the
    /// mma.sync tile's time at 24–32 rows per expert, 1.16–1.48× the 128-row tile's from 64).
    Wgmma64 {
        /// Ring depth, 2..=4.
        stages: usize,
    },
    /// SM90 only: the same wgmma body at N = 32 — 32-row slots, `m64n32k16`, stages of 26 KB
    /// (2..=4) — for experts of ~8–24 rows, where a 64-row slot's x rows are mostly empty (x
    /// streams as many bytes as the weights there) and its tensor work mostly wasted. Session 64
    /// (H100, forced against the 64-row tile in one job): 0.95× its time at DeepSeek-V4-Flash
    /// T = 512, 0.96× at gpt-oss-120b T = 512, 1.29–1.36× at 32 rows per expert; no plan picks it
    /// by default, [`PlanOptions::tile`] forces it.
    Wgmma32 {
        /// Ring depth, 2..=4.
        stages: usize,
    },
}

impl TileKernel {
    /// The mma.sync body with the deepest ring (2..8 stages) that fits `smem_optin` with this
    /// op's static shared memory (the default off SM90; [`PlanOptions::tile`] forces it on SM90).
    pub fn mma(smem_optin: u32) -> Option<TileKernel> {
        (2..=8usize)
            .rev()
            .map(|stages| TileKernel::Mma(TileConfig { w8: false, wm: GROUPED_WM, wn: GROUPED_WN, stages, splits: 1 }))
            .find(|t| t.fits(smem_optin, Arch::Other(0, 0)))
    }
    /// The config's id (`gemm.blockscaled`'s: `tile_w4_wm2_wn8_s6_k1`, `wg_w4_wn8_s2`; this
    /// op's `wg64_w4_wn8_s4`).
    pub fn id(&self) -> String {
        match self {
            TileKernel::Mma(t) => t.id(),
            TileKernel::Wgmma(w) => w.id(),
            TileKernel::Wgmma64 { stages } => format!("wg64_w4_wn8_s{stages}"),
            TileKernel::Wgmma32 { stages } => format!("wg32_w4_wn8_s{stages}"),
        }
    }
    /// One stage of the 64- or 32-row wgmma tile (`rows`): the mma.sync tiled body's at BM =
    /// `rows` (x 16 / 8 KB, the codes 16 KB, the scales 2 KB).
    fn wg_small_stage(rows: usize) -> u32 {
        TileConfig { w8: false, wm: rows / 32, wn: 8, stages: 2, splits: 1 }.stage_bytes()
    }
    /// SM90's wgmma tiles (128-, 64- or 32-row slots; their x operands in fragment order).
    pub fn is_wgmma(&self) -> bool {
        !matches!(self, TileKernel::Mma(_))
    }
    /// `(BM, BN)`: rows per slot (the grouping's R) and weight rows per CTA.
    pub fn tile(&self) -> (usize, usize) {
        match self {
            TileKernel::Mma(t) => t.tile(),
            TileKernel::Wgmma(w) => w.tile().tile(),
            TileKernel::Wgmma64 { .. } => (64, 256),
            TileKernel::Wgmma32 { .. } => (32, 256),
        }
    }
    /// Ring depth.
    pub fn stages(&self) -> usize {
        match self {
            TileKernel::Mma(t) => t.stages,
            TileKernel::Wgmma(w) => w.stages,
            TileKernel::Wgmma64 { stages } | TileKernel::Wgmma32 { stages } => *stages,
        }
    }
    /// Dynamic shared memory of one CTA (the ring and its alignment slack).
    pub fn dynamic_smem(&self) -> u32 {
        match self {
            TileKernel::Mma(t) => t.dynamic_smem(),
            TileKernel::Wgmma(w) => w.dynamic_smem(),
            // The ring plus wgmma's 1024 bytes of alignment slack.
            TileKernel::Wgmma64 { stages } | TileKernel::Wgmma32 { stages } => {
                *stages as u32 * Self::wg_small_stage(self.tile().0) + 1024
            }
        }
    }
    /// Whether this op builds the kernel and one CTA fits a device of `arch` with `smem_optin`
    /// bytes (this op's static shared memory counted as the decode GEMV's).
    pub fn fits(&self, smem_optin: u32, arch: Arch) -> bool {
        let optin = smem_optin.saturating_sub(EARLY_SMEM);
        match self {
            TileKernel::Mma(t) => !t.w8 && t.wm == GROUPED_WM && t.wn == GROUPED_WN && t.splits == 1 && t.fits(optin),
            TileKernel::Wgmma(w) => arch == Arch::Sm90 && !w.w8 && w.wn == 8 && !w.tail && w.fits(optin),
            // The kernel traps outside 2..=4 stages (its epilogue-params ring holds 4 tiles).
            TileKernel::Wgmma64 { stages } | TileKernel::Wgmma32 { stages } => {
                arch == Arch::Sm90 && (2..=4).contains(stages) && self.dynamic_smem() + BS_STATIC_SMEM <= optin
            }
        }
    }
    /// SM90's wgmma tiles' FC1 kernel with the activation in its epilogue
    /// ([`PlanOptions::fused_activation`]), for weights of format `f`; `None` for the mma.sync tile.
    pub fn act_symbol(&self, f: &str) -> Option<String> {
        // `b12x_fused_moe_tile_wg{,64,32}_act_{f}`: the plain kernel's name with `act_` before the format.
        self.is_wgmma().then(|| self.symbol(&format!("act_{f}")))
    }
    /// The kernel symbol for weights of format `f` (`nvfp4` / `mxfp4`).
    pub fn symbol(&self, f: &str) -> String {
        match self {
            TileKernel::Mma(t) => format!("b12x_fused_moe_tile_{f}_wm{}", t.wm),
            TileKernel::Wgmma(_) => format!("b12x_fused_moe_tile_wg_{f}"),
            TileKernel::Wgmma64 { .. } => format!("b12x_fused_moe_tile_wg64_{f}"),
            TileKernel::Wgmma32 { .. } => format!("b12x_fused_moe_tile_wg32_{f}"),
        }
    }
}
/// Threads of the mma.sync tiled kernel (`bsgemm::kThreads`) and of the grouping scan.
const TILE_THREADS: u32 = 256;
/// Threads of SM90's wgmma tile kernel (`kMoeWgThreads` in `kernels/fused_moe_decode.cu`: four
/// warpgroups of one m64 weight tile each).
const WG_TILE_THREADS: u32 = 512;
const SCAN_THREADS: u32 = 1024;
/// The default [`Query::gemv_up_to`]: the grouped GEMV serves T while the expected rows per
/// expert under uniform routing, `T · k / E`, are at most this many.
///
/// Measured on an H100 (`bench-results/2026-12-05-h200-c/call3`, grouped GEMV against the tile
/// at the same T): 2.0–2.1× faster at T = 64 (1.5 rows per expert on DeepSeek-V4-Flash, 2 on
/// gpt-oss, 4 on Qwen3-30B), 1.56× at DeepSeek's T = 512 (12 rows), 1.17× at gpt-oss' T = 512
/// and Qwen3's T = 256 (16 rows), 0.74× at Qwen3's T = 512 (32 rows); `call1`: 0.46–0.58× at
/// T = 4096.
pub const GEMV_ROWS_PER_EXPERT: usize = 16;

/// SM90's default [`Query::gemv_up_to_wg64`]: there the tiled T below [`Query::wgmma_from`] run
/// the 64-row wgmma tile, which overtakes the grouped GEMV at fewer rows per expert than the
/// mma.sync tile does.
///
/// Measured on an H100 (`bench-results/2026-12-07-h200-f/`, calls 3 and 4: one bundle, each path
/// forced at the same T), µs, grouped GEMV against the 64-row wgmma tile, rows per expert
/// `T·k/E` in brackets: DeepSeek-V4-Flash TP2 T = 128 (3) 960 / 1073, 256 (6) 1124 / 1141,
/// 512 (12) 1321 / 1190; gpt-oss-120b T = 128 (4) 1119 / 1134, 256 (8) 1257 / 1185, 512 (16)
/// 1880 / 1213; Qwen3-30B-A3B T = 128 (8) 256 / 274, 256 (16) 394 / 283, 512 (32) 665 / 303.
/// The crossover lies near 8 rows (at 8 the tile is 6% faster on gpt-oss-120b, the GEMV 7% on
/// Qwen3-30B-A3B); with 8 every measured T is within 6% of the faster path. The GEMV's time
/// grows with the rows (each expert's weights streamed once per 16 of its rows, more often where
/// routing puts more on it), the tile's barely. Not measured on the H200, whose higher bandwidth
/// may move the crossover.
pub const GEMV_ROWS_PER_EXPERT_WG64: usize = 8;

/// SM90's default [`Query::wg32_up_to`]: the tiled T while `T · k / E ≤` this run the 32-row wgmma
/// tile ([`TileKernel::Wgmma32`], 32-row slots) instead of the 64-row one — between the grouped
/// GEMV (up to [`GEMV_ROWS_PER_EXPERT_WG64`]) and the 64-row tile.
///
/// Measured on an H100 (session 64, `bench-results/2026-12-07-gpu-h/r1/bench_bm_wg32`, one job,
/// the 32-row tile forced against the default 64-row one), µs, rows per expert in brackets:
/// DeepSeek-V4-Flash TP2 T = 512 (12) 1112.2 / 1168.2 (0.95×), gpt-oss-120b T = 512 (16)
/// 1134.8 / 1185.4 (0.96×), DeepSeek-V4-Flash T = 1024 (24) level, 32 rows 1.29–1.36× slower
/// (experts past 32 rows spill into a second slot). 16 keeps every measured T on the faster tile.
pub const WG32_ROWS_PER_EXPERT: usize = 16;

/// The kernels that serve a call (per T bucket of a plan: [`Plan::path`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// [`WeightLayout::RowMajor`]: the oracle's loops on the GPU.
    Simple,
    /// Packed, T ≤ [`GROUPED_ABOVE`]: the route kernel (one CTA groups the pairs, stable order)
    /// and the decode GEMV over 8- (T ≤ 8) or 16-row slots.
    Decode,
    /// Packed, [`GROUPED_ABOVE`] < T ≤ the plan's [`Query::gemv_up_to`] (SM90:
    /// [`Query::gemv_up_to_wg64`]): the decode path's
    /// kernels with 16-row slots at any T the route's shared memory holds (one CTA, stable order,
    /// 4 (E + 3 T·k) bytes): each touched expert's weights streamed once per 16 of its rows.
    GroupedGemv,
    /// Packed, T above: the grouping into slots of the tile's rows (SM90's wgmma tiles 128, 64
    /// or 32, the mma.sync tile 64) and `gemm.blockscaled`'s tiled kernel body per slot
    /// ([`TileKernel`]).
    GroupedTile,
}

/// Options of [`plan_with`] (tuning tools, benches, tests); [`plan`] takes the defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Packed layout: the largest T the grouped GEMV ([`Path::GroupedGemv`]) serves; the tiled
    /// path above it. `None`: [`Query::gemv_up_to`] (SM90 with its default wgmma tiles:
    /// [`Query::gemv_up_to_wg64`]); `Some(t)` with `t ≤ GROUPED_ABOVE`: no
    /// grouped GEMV bucket (the tile from T = 17, the layout before session 46). Either way at
    /// most the T whose pairs the route's shared memory holds (`(optin/4 − E) / 3` pairs).
    pub gemv_up_to: Option<usize>,
    /// Packed layout: the tiled path's kernel at every tiled T. `None`: on SM90 the 64-row wgmma
    /// tile below [`PlanOptions::wgmma_from`] and the 128-row one from it, the mma.sync body
    /// elsewhere; `Some` forces one (a typed error where it does not exist or fit: wgmma off
    /// SM90). The GPU suite runs all three on SM90.
    pub tile: Option<TileKernel>,
    /// Packed layout, SM90 with `tile: None`: the smallest T of the wgmma tile (the tiled path's
    /// own bucket from there). `None`: [`Query::wgmma_from`]; `Some(0)`: wgmma at every tiled T;
    /// `Some(usize::MAX)`: never.
    pub wgmma_from: Option<usize>,
    /// Packed layout, SM90's wgmma tile: the most CTAs of its persistent launches (each walks the
    /// live (slot, N tile) tiles with one ring). `None`: one per SM; `Some(n)`, `n ≥ 1`: at
    /// most `n` (fewer SMs for this op, e.g. beside a concurrent stream; the GPU suite makes each
    /// CTA walk many tiles this way). `Some(0)` is [`Error::InvalidQuery`].
    pub tile_ctas: Option<usize>,
    /// Packed layout, buckets of SM90's 128-row wgmma tile: **tail slots** — an expert's last
    /// `c mod 128` rows, when at most [`TAIL_ROWS`], go to a 64-row slot that the 64-row wgmma
    /// tile runs (a second launch per FC, started on the SMs the 128-row tile's CTAs leave)
    /// instead of a mostly empty 128-row slot, wherever the 64-row tile fits beside the 128-row
    /// one. `true` turns them off (one 128-row slot per started 128 rows, the layout before
    /// session 63).
    pub no_tail_slots: bool,
    /// Packed layout, SM90's wgmma tiles, W4A16 recipes with a gated activation: `true` has FC1's
    /// epilogue apply the activation and the routing weight and write h directly (the values the
    /// activation kernel would write from FC1's gate/up rows, bit for bit), so the call has no
    /// activation launch and FC1 writes I instead of 2·I values per row. Opt-in until it is
    /// measured on a GPU (written in session 65, when no device call started; a similar epilogue
    /// measured slower in session 54); `false`: FC1 writes gate/up rows and the activation kernel
    /// follows.
    pub fused_activation: bool,
    /// Packed layout, SM90 with `tile: None`: the largest T of the 32-row wgmma tile's bucket
    /// (the tiled T from the grouped GEMV's last up to here; the 64-row tile above). `None`:
    /// [`Query::wg32_up_to`]; `Some(0)` (or any T the grouped GEMV covers): no such bucket (the
    /// layout before session 65). Never past [`PlanOptions::wgmma_from`]: the 128-row tile's
    /// bucket wins (`wgmma_from: Some(0)` is the 128-row tile at every tiled T).
    pub wg32_up_to: Option<usize>,
}

/// The rows of a tail slot (see [`PlanOptions::no_tail_slots`]): the 64-row wgmma tile's.
pub const TAIL_ROWS: usize = 64;

/// The decode GEMV's config for `rows` token rows (the first `kb = 1` candidate) whose dynamic
/// ring plus **this op's** static shared memory ([`GEMV_STATIC_SMEM`]: `gemm.blockscaled`'s and
/// the CTA's own slots, `MoeEarlySmem`) fits `smem_optin` bytes, and whose `ctas` CTAs per SM
/// fit the SM (`smem_optin` + 1 KB, as `gemm.blockscaled` counts it) with that static counted
/// too. (`gemm.blockscaled`'s own fit check counts only its 1280 static bytes.)
pub(crate) fn decode_gemv_config(rows: usize, smem_optin: u32) -> Option<GemvConfig> {
    b12x_gemm::blockscaled::gemv::configs(rows, smem_optin.saturating_sub(EARLY_SMEM), false)
        .into_iter()
        .find(|c| c.kb == 1 && c.ctas as u32 * (c.dynamic_smem() + GEMV_STATIC_SMEM + 1024) <= smem_optin + 1024)
}

/// SM90's default tile below [`Query::wgmma_from`]: the 64-row wgmma tile with the deepest ring
/// of 2..=[`GROUPED_WG_STAGES`] stages that fits, else the mma.sync tile's ([`TileKernel::mma`]).
pub(crate) fn small_tile_config(smem_optin: u32, arch: Arch) -> Option<TileKernel> {
    (2..=GROUPED_WG_STAGES)
        .rev()
        .map(|stages| TileKernel::Wgmma64 { stages })
        .find(|t| t.fits(smem_optin, arch))
        .or_else(|| TileKernel::mma(smem_optin))
}

/// SM90's default tile up to [`Query::wg32_up_to`]: the 32-row wgmma tile with the deepest ring of
/// 2..=[`GROUPED_WG_STAGES`] stages that fits (`None` elsewhere).
pub(crate) fn wg32_tile_config(smem_optin: u32, arch: Arch) -> Option<TileKernel> {
    (2..=GROUPED_WG_STAGES).rev().map(|stages| TileKernel::Wgmma32 { stages }).find(|t| t.fits(smem_optin, arch))
}

/// The grouped path's default tile kernel on `arch`: SM90 the wgmma tile (128-row slots) with
/// the deepest ring of 2..=[`GROUPED_WG_STAGES`] stages that fits, else the mma.sync body's deepest ring (2..8
/// stages) whose dynamic shared memory plus this op's static ([`GEMV_STATIC_SMEM`], as
/// [`decode_gemv_config`]) fits `smem_optin`.
pub(crate) fn grouped_tile_config(smem_optin: u32, arch: Arch) -> Option<TileKernel> {
    let wg = (2..=GROUPED_WG_STAGES)
        .rev()
        .map(|stages| TileKernel::Wgmma(WgConfig { w8: false, wn: 8, stages, tail: false }))
        .find(|t| t.fits(smem_optin, arch));
    wg.or_else(|| TileKernel::mma(smem_optin))
}

/// The tail slots' kernel of a tiled bucket whose tile is `tile` with `slots` slots at most
/// ([`PlanOptions::no_tail_slots`]): SM90's 64-row wgmma tile (the deepest ring that fits)
/// beside the 128-row one, where the grouping's packed counts hold the slots (both below 2^16:
/// `moe_group_scan`).
fn tail_config(tile: TileKernel, slots: usize, device: &Device) -> Option<TileKernel> {
    match (tile, small_tile_config(device.smem_optin(), device.arch())) {
        (TileKernel::Wgmma(_), Some(small @ TileKernel::Wgmma64 { .. })) if slots < 1 << 16 => Some(small),
        _ => None,
    }
}

impl Decode {
    fn new(
        query: &Query,
        buckets: &[Bucket],
        paths: &[Path],
        device: &Device,
        options: &PlanOptions,
        split: Option<usize>,
        wg32_hi: Option<usize>,
    ) -> Result<Decode> {
        let s = &query.shape;
        let mut configs = Vec::new();
        let mut max_slots = 0;
        let mut tiles = Vec::new();
        let mut tails = Vec::new();
        let mut decode_slots = 0;
        for (b, path) in buckets.iter().zip(paths) {
            if *path == Path::GroupedTile {
                let unsupported =
                    |reason: String| Error::Unsupported { op: OP, device: format!("{:?}", device.arch()), reason };
                let t = match options.tile {
                    Some(t) if t.fits(device.smem_optin(), device.arch()) => t,
                    Some(t) => {
                        return Err(unsupported(format!(
                            "grouped tile kernel {} does not exist for this device or does not fit its shared memory",
                            t.id()
                        )))
                    }
                    // Below the split (SM90's wgmma default, the mma.sync tile fitting too): the
                    // 64-row wgmma tile.
                    None => match split {
                        Some(_) if wg32_hi.is_some_and(|h| b.hi <= h) => {
                            wg32_tile_config(device.smem_optin(), device.arch())
                                .or_else(|| small_tile_config(device.smem_optin(), device.arch()))
                        }
                        Some(from) if b.hi < from => small_tile_config(device.smem_optin(), device.arch()),
                        _ => grouped_tile_config(device.smem_optin(), device.arch()),
                    }
                    .ok_or_else(|| unsupported("no grouped tile config fits this device's shared memory".into()))?,
                };
                let slots = packed::max_slots(s.experts, b.hi * s.top_k, t.tile().0);
                max_slots = max_slots.max(slots);
                tails.push(if options.no_tail_slots { None } else { tail_config(t, slots, device) });
                tiles.push(t);
                continue;
            }
            // The grouped GEMV takes the 16-row token tile (as the decode path's T 9..16).
            let rows = if *path == Path::GroupedGemv { GROUPED_ABOVE } else { b.hi };
            let c = decode_gemv_config(rows, device.smem_optin()).ok_or_else(|| Error::Unsupported {
                op: OP,
                device: format!("{:?}", device.arch()),
                reason: "no decode GEMV config fits this device's shared memory".into(),
            })?;
            max_slots = max_slots.max(packed::max_slots(s.experts, b.hi * s.top_k, 8 * c.nt));
            decode_slots = decode_slots.max(packed::max_slots(s.experts, b.hi * s.top_k, 8 * c.nt));
            configs.push(c);
        }
        let rbs = (s.fc1_rows().div_ceil(packed::ROW_BLOCK), s.hidden.div_ceil(packed::ROW_BLOCK));
        let tile_ctas = match options.tile_ctas {
            None => device.sm_count() as usize,
            Some(0) => {
                return Err(Error::InvalidQuery { op: OP, field: "tile_ctas", reason: "must be at least 1".into() })
            }
            Some(n) => n,
        };
        let tail_slots = if tails.iter().any(Option::is_some) { s.experts } else { 0 };
        let fused_act = options.fused_activation && quant_code(s.recipe) == 0 && s.activation.gated();
        Ok(Decode {
            paths: paths.to_vec(),
            configs,
            tiles,
            tails,
            tail_slots,
            fused_act,
            rbs,
            max_slots,
            decode_slots,
            sm_count: device.sm_count(),
            tile_ctas,
        })
    }

    /// The kernel of a tiled bucket (`None` for a GEMV bucket).
    fn tile_of(&self, bucket: usize) -> Option<TileKernel> {
        bucket.checked_sub(self.configs.len()).and_then(|i| self.tiles.get(i)).copied()
    }

    /// The tail slots' kernel of a tiled bucket (`None`: no tail slots there).
    fn tail_of(&self, bucket: usize) -> Option<TileKernel> {
        bucket.checked_sub(self.configs.len()).and_then(|i| self.tails.get(i)).copied().flatten()
    }

    /// Whether FC1's epilogue applies the activation in `bucket` (a wgmma tile's bucket of a
    /// plan with [`Decode::fused_act`]).
    fn act_fused_in(&self, bucket: usize) -> bool {
        self.fused_act && self.tile_of(bucket).is_some_and(|t| t.is_wgmma())
    }

    /// `(grid, units)` of one FC launch at `tokens` with `c` on a matrix of `rbs` row blocks and
    /// K `k`: the grid covers the most units the call can have, at most `ctas` per SM.
    fn grid(&self, c: &GemvConfig, query: &Query, tokens: usize, rbs: usize, k: usize) -> u32 {
        let s = &query.shape;
        let slots = packed::max_slots(s.experts, tokens * s.top_k, 8 * c.nt);
        let units = slots * rbs * k.div_ceil(256);
        units.clamp(1, self.sm_count as usize * c.ctas) as u32
    }

    fn scratch_layout(&self, query: &Query, buckets: &[Bucket]) -> ScratchLayout {
        let s = &query.shape;
        let pairs = query.max_tokens * s.top_k;
        let quantized = s.recipe.act_block() > 1;
        let mut partials = 0;
        for (b, c) in buckets.iter().zip(&self.configs) {
            // (the GEMV buckets come first; the tiled one, if any, has no GEMV config)
            let g1 = self.grid(c, query, b.hi, self.rbs.0, s.hidden) as usize;
            let g2 = self.grid(c, query, b.hi, self.rbs.1, s.inter) as usize;
            partials = partials.max(2 * g1.max(g2) * 8 * c.nt * packed::ROW_BLOCK * 4);
        }
        let mut l = ScratchLayout::new();
        query.add_topk_regions(&mut l);
        l.add("slots", 16 * self.max_slots);
        l.add("meta", 16);
        l.add("tail_slots", 16 * self.tail_slots);
        l.add("row_token", 4 * pairs);
        l.add("row_expert", 4 * pairs);
        l.add("row_weight", 4 * pairs);
        l.add("pair_row", 4 * pairs);
        let tiled = !self.tiles.is_empty();
        l.add("xq", if quantized || tiled { 2 * pairs * s.hidden } else { 0 });
        l.add("h", 2 * pairs * s.inter);
        l.add("y_rows", 2 * pairs * s.hidden);
        l.add("partials", partials);
        l.add("counters", 64 * self.decode_slots * self.rbs.0.max(self.rbs.1));
        // The tiled path's grouping kernels (counts and row starts per expert, ranks per pair)
        // and FC1 gate/up rows.
        let (e, r1) = (s.experts, s.fc1_rows());
        l.add("counts", if tiled { 4 * e } else { 0 });
        l.add("row_start", if tiled { 4 * e } else { 0 });
        l.add("rank", if tiled { 4 * pairs } else { 0 });
        l.add("gu", if tiled { 2 * pairs * r1 } else { 0 });
        l
    }
}

/// A validated query bound to a device.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    decode: Option<Decode>,
    slot: PlanSlot,
}

/// Validates `query` and picks the packed layout's configs (decode path: T ≤ 8 8-row slots, T ≤
/// [`GROUPED_ABOVE`] 16-row slots; grouped GEMV up to [`Query::gemv_up_to`] (SM90:
/// [`Query::gemv_up_to_wg64`]), 16-row slots;
/// tiled path above, 128-row slots with SM90's wgmma tile (from [`Query::wgmma_from`]), 64-row
/// slots with SM90's 64-row wgmma tile below it — 32-row slots with its 32-row one up to
/// [`Query::wg32_up_to`] — and the mma.sync tile elsewhere).
/// Allocates, compiles and launches nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    plan_with(query, device, PlanOptions::default())
}

/// [`plan`] with `options` overriding where the grouped GEMV hands over to the tiled path.
///
/// ```no_run
/// # use b12x_moe::fused_moe::{self, Path, PlanOptions, Query, Shape, WeightLayout};
/// # fn main() -> b12x_core::Result<()> {
/// # let dev = b12x_core::Device::new(0)?;
/// let query = Query { shape: Shape::qwen3_30b_a3b(), max_tokens: 4096, layout: WeightLayout::Packed, router: None };
/// let plan = fused_moe::plan_with(&query, &dev, PlanOptions { gemv_up_to: Some(1024), ..Default::default() })?;
/// assert_eq!((plan.path(1024), plan.path(1025)), (Path::GroupedGemv, Path::GroupedTile));
/// assert_eq!(plan.slot_rows(1024), 16);
/// // The tiled path's slots: 128 rows with SM90's wgmma tile (from `Query::wgmma_from`, 1024
/// // here), 64 below it (SM90's 64-row wgmma tile) and everywhere else (the mma.sync tile).
/// let sm90 = dev.arch() == b12x_core::Arch::Sm90;
/// assert_eq!(plan.slot_rows(1025), if sm90 { 128 } else { 64 });
/// let plan = fused_moe::plan_with(&query, &dev, PlanOptions { gemv_up_to: Some(256), ..Default::default() })?;
/// assert_eq!((plan.slot_rows(1023), plan.slot_rows(1024)), (64, if sm90 { 128 } else { 64 }));
/// # Ok(()) }
/// ```
pub fn plan_with(query: &Query, device: &Arc<Device>, options: PlanOptions) -> Result<Plan> {
    query.validate()?;
    let (buckets, decode) = match query.layout {
        WeightLayout::RowMajor => (vec![Bucket { lo: 1, hi: query.max_tokens }], None),
        WeightLayout::Packed => {
            // The route groups a call in one CTA's shared memory: 4 (E + 3 T·k) bytes.
            let route_pairs =
                ((device.smem_optin() as usize).saturating_sub(64) / 4).saturating_sub(query.shape.experts) / 3;
            // SM90's default: the 64-row wgmma tile below `wgmma_from`, the 128-row one from it.
            let optin = device.smem_optin();
            let split = match (options.tile, grouped_tile_config(optin, device.arch())) {
                (None, Some(TileKernel::Wgmma(_))) if TileKernel::mma(optin).is_some() => {
                    Some(options.wgmma_from.unwrap_or(query.wgmma_from()))
                }
                _ => None,
            };
            // The grouped GEMV hands over to the 64-row wgmma tile sooner than to the mma.sync one.
            let default_up_to = if split.is_some() { query.gemv_up_to_wg64() } else { query.gemv_up_to() };
            let up_to = options.gemv_up_to.unwrap_or(default_up_to).min(route_pairs / query.shape.top_k);
            // SM90's default also puts the 32-row wgmma tile below the 64-row one.
            // (below the 128-row tile's first T: `wgmma_from` wins, `Some(0)` is wgmma everywhere)
            let wg32_hi =
                split.map(|from| options.wg32_up_to.unwrap_or(query.wg32_up_to()).min(from.saturating_sub(1)));
            let starts: Vec<usize> = [wg32_hi.map(|h| h.saturating_add(1)), split].into_iter().flatten().collect();
            let (b, paths) = packed_buckets(query.max_tokens, up_to, &starts);
            let d = Decode::new(query, &b, &paths, device, &options, split, wg32_hi)?;
            (b, Some(d))
        }
    };
    Ok(Plan { query: *query, device: device.clone(), buckets, decode, slot: PlanSlot::default() })
}

/// A packed plan's buckets and their paths for a capacity of `max_tokens` with the grouped GEMV
/// up to `gemv_up_to` tokens: `{1..8}`, `{9..16}` decode, `{17..gemv_up_to}` grouped GEMV, the
/// rest tiled (each only where the capacity reaches it) — split into more tiled buckets at each
/// T of `tile_starts` (ascending) that falls strictly inside the tiled range: SM90's 32-row wgmma
/// tile's, 64-row tile's and 128-row tile's buckets.
pub fn packed_buckets(max_tokens: usize, gemv_up_to: usize, tile_starts: &[usize]) -> (Vec<Bucket>, Vec<Path>) {
    let mut b = vec![Bucket { lo: 1, hi: max_tokens.min(8) }];
    let mut paths = vec![Path::Decode];
    if max_tokens > 8 {
        b.push(Bucket { lo: 9, hi: max_tokens.min(GROUPED_ABOVE) });
        paths.push(Path::Decode);
    }
    let gemv_hi = gemv_up_to.max(GROUPED_ABOVE);
    if max_tokens > GROUPED_ABOVE && gemv_hi > GROUPED_ABOVE {
        b.push(Bucket { lo: GROUPED_ABOVE + 1, hi: max_tokens.min(gemv_hi) });
        paths.push(Path::GroupedGemv);
    }
    if max_tokens > gemv_hi {
        let mut lo = gemv_hi + 1;
        for &from in tile_starts {
            if from > lo && from <= max_tokens {
                b.push(Bucket { lo, hi: from - 1 });
                paths.push(Path::GroupedTile);
                lo = from;
            }
        }
        b.push(Bucket { lo, hi: max_tokens });
        paths.push(Path::GroupedTile);
    }
    (b, paths)
}

impl Plan {
    pub fn query(&self) -> &Query {
        &self.query
    }
    /// The scratch of a call: the simple path's `h` and `y_pairs`; the decode path's grouping
    /// (`slots`, `meta`, `row_token`, `row_expert`, `row_weight`, `pair_row`), `xq` (W4A8 /
    /// NVFP4), `h`, `y_rows` and the GEMV's split-K `partials` and `counters`.
    pub fn scratch_layout(&self) -> ScratchLayout {
        match &self.decode {
            None => self.query.scratch_layout(),
            Some(d) => d.scratch_layout(&self.query, &self.buckets),
        }
    }
    /// The bucket a call of `tokens` falls in (T = 0: the first; above the capacity: the last).
    fn bucket_of(&self, tokens: usize) -> usize {
        self.buckets.iter().position(|b| tokens <= b.hi).unwrap_or(self.buckets.len() - 1)
    }
    /// The path a call of `tokens` takes.
    pub fn path(&self, tokens: usize) -> Path {
        match &self.decode {
            None => Path::Simple,
            Some(d) => d.paths[self.bucket_of(tokens)],
        }
    }
    /// The packed layout's tiled-path kernel at `tokens` (`None`: the simple path, or a T the
    /// tiled path does not serve).
    pub fn tile_kernel(&self, tokens: usize) -> Option<TileKernel> {
        self.decode.as_ref().and_then(|d| d.tile_of(self.bucket_of(tokens)))
    }
    /// The packed layout's tail slots' kernel at `tokens` ([`PlanOptions::no_tail_slots`]; `None`:
    /// no tail slots there).
    pub fn tail_kernel(&self, tokens: usize) -> Option<TileKernel> {
        self.decode.as_ref().and_then(|d| d.tail_of(self.bucket_of(tokens)))
    }
    /// Whether FC1's epilogue applies the activation at `tokens` (no activation launch; see
    /// [`PlanOptions::fused_activation`]): the tiled path with SM90's wgmma tiles, a W4A16
    /// recipe and a gated activation, where the plan's options ask for it.
    pub fn fused_activation(&self, tokens: usize) -> bool {
        self.decode.as_ref().is_some_and(|d| d.act_fused_in(self.bucket_of(tokens)))
    }
    /// The packed layout's tail slots' rows at `tokens`: [`TAIL_ROWS`] where it has tail slots,
    /// else 0.
    pub fn tail_rows(&self, tokens: usize) -> usize {
        self.tail_kernel(tokens).map_or(0, |t| t.tile().0)
    }
    /// The packed layout's rows per slot at `tokens` (the grouping's R: 8 or 16 on the decode
    /// and grouped-GEMV paths; on the tiled path 128 with SM90's wgmma kernel, 64 with the
    /// mma.sync one and SM90's 64-row wgmma kernel, 32 with its 32-row one; 0 on the simple path).
    pub fn slot_rows(&self, tokens: usize) -> usize {
        match &self.decode {
            None => 0,
            Some(d) => {
                let b = self.bucket_of(tokens);
                match (d.configs.get(b), d.tile_of(b)) {
                    (Some(c), _) => 8 * c.nt,
                    (None, Some(t)) => t.tile().0,
                    (None, None) => 0,
                }
            }
        }
    }
}

/// Runs the routed experts on `stream`, every check before the first launch; no allocation, no
/// synchronization. `T = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    match (&plan.decode, &args.experts) {
        (Some(d), ExpertWeights::Packed(w)) => {
            let t = args.x.shape().first().copied().unwrap_or(0);
            match plan.path(t) {
                Path::GroupedTile => run_grouped(plan, d, w, &args, scratch, stream),
                _ => run_decode(plan, d, w, &args, scratch, stream),
            }
        }
        (None, ExpertWeights::RowMajor(_)) => {
            let mut p = plan.query.kernel_params(&args)?;
            let layout = plan.scratch_layout();
            let bound = layout.bind(&scratch)?;
            (p.h, p.y_pairs) = (bound.ptr("h"), bound.ptr("y_pairs"));
            let topk = if plan.query.router.is_some() {
                (p.ids, p.weights) = (bound.ptr("topk_ids"), bound.ptr("topk_weights"));
                plan.query.route_params(&args, p.tokens as usize, p.ids, p.weights)?
            } else {
                None
            };
            plan.device.check_stream(stream)?;
            if p.tokens == 0 {
                return Ok(());
            }
            let selected = resolve(plan, 0, stream)?;
            launch(&selected, topk.as_ref(), &p, stream)
        }
        (_, w) => Err(Error::Shape {
            tensor: "experts",
            expected: format!("weights in the plan's layout ({:?})", plan.query.layout),
            actual: vec![],
        })
        .inspect_err(|_| {
            let _ = w;
        }),
    }
}

/// The decode path's parameters of one call (everything checked; scratch bound).
struct DecodeCall {
    topk: Option<RouteTopkParams>,
    route: MoeRouteParams,
    fc1: MoeGemvParams,
    fc2: MoeGemvParams,
    rows: MoeRowsParams,
    route_grid: u32,
    route_smem: u32,
    grids: (u32, u32),
    gemv_smem: u32,
    quantized: bool,
}

/// The packed layout's checks before any launch (both paths): the packed experts against the
/// plan (shape, then every buffer's size: their fields are public), the call's tensors, 16-byte
/// rows of x and y. Returns `(T, a1, a2)` as [`Query::check_args`].
fn packed_checks(plan: &Plan, d: &Decode, w: &PackedExperts, args: &Args<'_>) -> Result<(usize, u64, u64)> {
    let q = &plan.query;
    let s = &q.shape;
    if w.shape != *s {
        let reason = format!("packed for {:?}, the plan's shape is {:?}", w.shape, s);
        return Err(Error::InvalidQuery { op: OP, field: "experts", reason });
    }
    // The packed buffers themselves (their fields are public): what the TMA descriptors, the
    // scale copies and the scratch sizes assume.
    for (name, m, rows, k, interleaved, rbs) in [
        ("experts.fc1", &w.fc1, s.fc1_rows(), s.hidden, s.activation.gated(), d.rbs.0),
        ("experts.fc2", &w.fc2, s.hidden, s.inter, false, d.rbs.1),
    ] {
        let f = s.recipe.weights();
        let tiles = (k / f.block()).div_ceil(4);
        let want = (f, rows, k, interleaved, rbs, s.experts * rbs * packed::ROW_BLOCK * k / 2);
        let got = (m.format, m.rows, m.k, m.interleaved, m.rbs, m.codes.len());
        if got != want || m.scales.len() != s.experts * rbs * tiles * 512 || m.enc.len() != s.experts {
            let reason = format!(
                "{name}: (format, rows, K, interleaved, row blocks, code bytes) {got:?} with {} scale bytes and {} \
                 encode scales; the plan wants {want:?}, {} and {}",
                m.scales.len(),
                m.enc.len(),
                s.experts * rbs * tiles * 512,
                s.experts
            );
            return Err(Error::InvalidQuery { op: OP, field: "experts", reason });
        }
    }
    let span = |v: &b12x_core::cudarc::driver::CudaSlice<u8>| {
        let p = v.device_ptr(v.stream()).0;
        (p, p + v.len() as u64)
    };
    let span_f = |v: &b12x_core::cudarc::driver::CudaSlice<f32>| {
        let p = v.device_ptr(v.stream()).0;
        (p, p + 4 * v.len() as u64)
    };
    let spans = [
        ("fc1.codes", span(&w.fc1.codes)),
        ("fc1.scales", span(&w.fc1.scales)),
        ("fc1.enc", span_f(&w.fc1.enc)),
        ("fc2.codes", span(&w.fc2.codes)),
        ("fc2.scales", span(&w.fc2.scales)),
        ("fc2.enc", span_f(&w.fc2.enc)),
    ];
    let r = q.check_args(args, &spans)?;
    // x's rows are staged (or gathered) with 16-byte copies, y's written as 16-byte vectors.
    args.x.require_aligned("x", 16)?;
    args.y.require_aligned("y", 16)?;
    Ok(r)
}

/// The activation as the kernels take it (`kActSilu`, `kActSwigluOai`, `kActRelu2`).
fn act_code(a: Activation) -> i32 {
    match a {
        Activation::Silu { .. } => 0,
        Activation::SwigluOai { .. } => 1,
        Activation::Relu2 => 2,
    }
}

/// The row kernels' parameters (h quantizer, combine) of a packed call.
fn rows_params(
    q: &Query,
    args: &Args<'_>,
    bound: &b12x_core::BoundScratch<'_>,
    t: usize,
    a2: u64,
) -> Result<MoeRowsParams> {
    let s = &q.shape;
    Ok(MoeRowsParams {
        meta: bound.ptr("meta"),
        row_expert: bound.ptr("row_expert"),
        pair_row: bound.ptr("pair_row"),
        a2_enc: a2,
        h: bound.ptr("h"),
        y_rows: bound.ptr("y_rows"),
        y: args.y.ptr(),
        ldy: args.y.row_stride("y")? as i64,
        tokens: t as i32,
        top_k: s.top_k as i32,
        hidden: s.hidden as i32,
        inter: s.inter as i32,
        quant: quant_code(s.recipe),
        max_rows: (t * s.top_k) as i32,
    })
}

/// The recipe's activation quantization as the kernels take it (0 none, 1 MXFP8, 2 NVFP4).
fn quant_code(r: Recipe) -> i32 {
    match r {
        Recipe::W4a16(_) => 0,
        Recipe::W4a8Mx => 1,
        Recipe::Nvfp4 => 2,
    }
}

/// The ids and weights pointers of a call (the scratch's when the op routes logits) and the
/// router's launch parameters.
fn routing_for(
    q: &Query,
    args: &Args<'_>,
    t: usize,
    bound: &b12x_core::BoundScratch<'_>,
) -> Result<(u64, u64, Option<RouteTopkParams>)> {
    if q.router.is_some() {
        let (i_, w_) = (bound.ptr("topk_ids"), bound.ptr("topk_weights"));
        Ok((i_, w_, q.route_params(args, t, i_, w_)?))
    } else {
        let (i_, w_) = routing_ptrs(&args.routing);
        Ok((i_, w_, None))
    }
}

fn decode_call(
    plan: &Plan,
    d: &Decode,
    w: &PackedExperts,
    args: &Args<'_>,
    scratch: &Scratch<'_>,
) -> Result<(usize, usize, DecodeCall)> {
    let q = &plan.query;
    let s = &q.shape;
    let (t, a1, a2) = packed_checks(plan, d, w, args)?;
    let bucket = plan.bucket_of(t);
    let c = d.configs[bucket];
    let layout = plan.scratch_layout();
    let bound = layout.bind(scratch)?;
    let (e, k, hd, i) = (s.experts, s.top_k, s.hidden, s.inter);
    let quant = quant_code(s.recipe);
    let pairs = t * k;
    let (ids_ptr, weights_ptr, topk) = routing_for(q, args, t, &bound)?;
    // x̂ rows (quantized recipes): every route CTA groups the pairs itself, so a large call
    // spreads its rows over at most one CTA per SM.
    let rows_per_cta = ROUTE_ROWS_PER_CTA.max(pairs.div_ceil(d.sm_count as usize));
    let route_grid = if quant > 0 { pairs.div_ceil(rows_per_cta).max(1) as u32 } else { 1 };
    let route = MoeRouteParams {
        ids: ids_ptr,
        weights: weights_ptr,
        x: args.x.ptr(),
        a1_enc: a1,
        slots: bound.ptr("slots"),
        meta: bound.ptr("meta"),
        row_token: bound.ptr("row_token"),
        row_expert: bound.ptr("row_expert"),
        row_weight: bound.ptr("row_weight"),
        pair_row: bound.ptr("pair_row"),
        xq: if quant > 0 { bound.ptr("xq") } else { 0 },
        error: args.error.ptr(),
        ldx: args.x.row_stride("x")? as i64,
        tokens: t as i32,
        top_k: k as i32,
        experts: e as i32,
        hidden: hd as i32,
        slot_rows: (8 * c.nt) as i32,
        quant,
        rows_per_cta: rows_per_cta as i32,
        reserved: 0,
    };
    let route_smem = (4 * (e + 3 * pairs)) as u32;
    let gemv = |m: &packed::PackedMatrix, kdim: usize, xin: u64, ldin: i64, out: u64, cols: usize, mode: i32| {
        let row_bytes = kdim / 2;
        let map = Tma2d {
            base: m.codes.device_ptr(m.codes.stream()).0,
            dtype: DType::BF16, // the packed bytes as 16-bit elements: 64 of them are a 128-byte line
            rows: e * m.rbs * packed::ROW_BLOCK,
            cols: row_bytes / 2,
            row_stride_bytes: row_bytes,
            box_rows: packed::ROW_BLOCK as u32,
            box_cols: 64,
        };
        let mut g: b12x_gemm::blockscaled::gemv::BsGemvParams = bytemuck::Zeroable::zeroed();
        g.codes_map = map.encode(if mode == 2 { "fc2.codes" } else { "fc1.codes" })?;
        g.scales = m.scales.device_ptr(m.scales.stream()).0;
        // The source address of the zero-size copies for rows past a slot (never read).
        g.x = xin;
        g.partials = bound.ptr("partials");
        g.counters = bound.ptr("counters");
        g.n = (m.rbs * packed::ROW_BLOCK) as i32;
        g.k = kdim as i32;
        g.kstages = kdim.div_ceil(256) as i32;
        g.stages = c.stages as i32;
        g.scale_tiles = (kdim / m.format.block()).div_ceil(4) as i32;
        g.scale_bias = m.scale_bias;
        g.out_scale = m.out_scale;
        let nvfp4 = m.format == Fp4::Nvfp4;
        Ok::<_, Error>(MoeGemvParams {
            g,
            slots: bound.ptr("slots"),
            meta: bound.ptr("meta"),
            row_token: bound.ptr("row_token"),
            row_weight: bound.ptr("row_weight"),
            xin,
            out,
            w_enc: if nvfp4 { m.enc.device_ptr(m.enc.stream()).0 } else { 0 },
            a_enc: 0,
            ldin,
            rbs: m.rbs as i32,
            out_cols: cols as i32,
            mode,
            act: act_code(s.activation),
            limit: q.limit(),
            gather: 0,
            max_slots: d.decode_slots as i32,
            early: EARLY_NONE,
            ids: 0,
            pairs: 0,
            experts: 0,
            slot_rows: 0,
            reserved: 0,
        })
    };
    let (xin, ldin, gather) =
        if quant > 0 { (bound.ptr("xq"), hd as i64, 0) } else { (args.x.ptr(), args.x.row_stride("x")? as i64, 1) };
    let mode1 = if s.activation.gated() { 0 } else { 1 };
    let mut fc1 = gemv(&w.fc1, hd, xin, ldin, bound.ptr("h"), i, mode1)?;
    fc1.gather = gather;
    fc1.a_enc = a1;
    if pairs <= EARLY_LOCAL_PAIRS {
        // FC1 streams its first ring of weights while the route runs: each CTA computes the
        // route's slots from ids itself (kMoeEarlyLocal; ids are complete when the route releases
        // FC1, since the route waits for their producer first).
        fc1.early = EARLY_LOCAL;
        fc1.ids = ids_ptr;
        fc1.pairs = pairs as i32;
        fc1.experts = e as i32;
        fc1.slot_rows = route.slot_rows;
    }
    let mut fc2 = gemv(&w.fc2, i, bound.ptr("h"), i as i64, bound.ptr("y_rows"), hd, 2)?;
    fc2.a_enc = a2;
    // FC2 streams its first ring of weights while FC1 (or quant_rows) finishes: the slots come
    // from the route, two launches back (the kernel's MoeRows::units says why that is safe).
    fc2.early = EARLY_ROUTE;
    let rows = rows_params(q, args, &bound, t, a2)?;
    let grids = (d.grid(&c, q, t, w.fc1.rbs, hd), d.grid(&c, q, t, w.fc2.rbs, i));
    let call = DecodeCall {
        topk,
        route,
        fc1,
        fc2,
        rows,
        route_grid,
        route_smem,
        grids,
        gemv_smem: c.dynamic_smem(),
        quantized: quant > 0,
    };
    Ok((t, bucket, call))
}

fn run_decode(
    plan: &Plan,
    d: &Decode,
    w: &PackedExperts,
    args: &Args<'_>,
    scratch: Scratch<'_>,
    stream: &Arc<CudaStream>,
) -> Result<()> {
    let (t, bucket, call) = decode_call(plan, d, w, args, &scratch)?;
    plan.device.check_stream(stream)?;
    if t == 0 {
        return Ok(());
    }
    let selected = resolve(plan, bucket, stream)?;
    launch_decode(&selected, &call, stream)
}

/// The grouped path's parameters of one call (everything checked; scratch bound).
struct GroupedCall {
    topk: Option<RouteTopkParams>,
    group: MoeGroupParams,
    /// The tile's parameters (`.t` for the mma.sync tile; the wgmma tile takes the whole struct
    /// with its TMA descriptors).
    fc1: MoeTileTmaParams,
    act: MoeActParams,
    /// FC1's epilogue applies the activation (`fc1.act`): no activation launch.
    fused_act: bool,
    fc2: MoeTileTmaParams,
    wgmma: bool,
    rows: MoeRowsParams,
    grids: (u32, u32),
    tile_smem: u32,
    /// The tail slots' launches (FC1, FC2; SM90's 64-row wgmma tile), their grids and ring.
    tail: Option<(MoeTileTmaParams, MoeTileTmaParams)>,
    tail_grids: (u32, u32),
    tail_smem: u32,
}

fn grouped_call(
    plan: &Plan,
    d: &Decode,
    w: &PackedExperts,
    args: &Args<'_>,
    scratch: &Scratch<'_>,
) -> Result<(usize, usize, GroupedCall)> {
    let q = &plan.query;
    let s = &q.shape;
    let (t, a1, a2) = packed_checks(plan, d, w, args)?;
    let bucket = plan.bucket_of(t);
    let Some(tile) = d.tile_of(bucket) else {
        return Err(Error::UnknownConfig { op: OP, bucket: format!("T = {t}"), config: "grouped".into() });
    };
    let tail = d.tail_of(bucket);
    let layout = plan.scratch_layout();
    let bound = layout.bind(scratch)?;
    let (e, k, hd, i, r1) = (s.experts, s.top_k, s.hidden, s.inter, s.fc1_rows());
    let (bm, bn) = tile.tile();
    let wgmma = tile.is_wgmma();
    let fused_act = d.act_fused_in(bucket);
    let pairs = t * k;
    let quant = quant_code(s.recipe);
    let (ids_ptr, weights_ptr, topk) = routing_for(q, args, t, &bound)?;
    let max_slots = packed::max_slots(e, pairs, bm);
    let group = MoeGroupParams {
        ids: ids_ptr,
        weights: weights_ptr,
        x: args.x.ptr(),
        a1_enc: a1,
        counts: bound.ptr("counts"),
        rank: bound.ptr("rank"),
        row_start: bound.ptr("row_start"),
        slots: bound.ptr("slots"),
        meta: bound.ptr("meta"),
        row_token: bound.ptr("row_token"),
        row_expert: bound.ptr("row_expert"),
        row_weight: bound.ptr("row_weight"),
        pair_row: bound.ptr("pair_row"),
        xq: bound.ptr("xq"),
        error: args.error.ptr(),
        ldx: args.x.row_stride("x")? as i64,
        tokens: t as i32,
        top_k: k as i32,
        experts: e as i32,
        hidden: hd as i32,
        slot_rows: bm as i32,
        quant,
        max_rows: pairs as i32,
        // The wgmma tiles read their x operand in each 32-k group's fragment order.
        kperm: i32::from(wgmma),
        tail_slots: bound.ptr("tail_slots"),
        tail_rows: tail.map_or(0, |k| k.tile().0 as i32),
        reserved: 0,
    };
    // The launch of `kern` on the slots at `slots` (`meta[0]` of them, at most `max_slots`; the
    // tail slots': `meta[2]`, E, late_wait). `names`: the rows' and the codes' names in TMA errors.
    let tile_params = |kern: TileKernel,
                       (slots, meta, max_slots, late): (u64, u64, usize, bool),
                       m: &packed::PackedMatrix,
                       kdim: usize,
                       n: usize,
                       x: u64,
                       ldx: usize,
                       y: u64,
                       a_enc: u64,
                       names: (&'static str, &'static str)| {
        let f = m.format;
        let g = BsGemmParams {
            codes: m.codes.device_ptr(m.codes.stream()).0,
            scales: m.scales.device_ptr(m.scales.stream()).0,
            x,
            y,
            ldx: ldx as i64,
            ldy: n as i64,
            n: n as i32,
            k: kdim as i32,
            m: 0,
            row_bytes: (kdim / 2) as i32,
            ktiles: kdim.div_ceil(128) as i32,
            mtiles: 1,
            stages: kern.stages() as i32,
            scale_tiles: (kdim / f.block()).div_ceil(4) as i32,
            scale_bias: m.scale_bias,
            out_scale: m.out_scale,
            kt_per: kdim.div_ceil(128) as i32,
            ..BsGemmParams::default()
        };
        let (kbm, kbn) = kern.tile();
        let t = MoeTileParams {
            g,
            slots,
            meta,
            w_enc: if f == Fp4::Nvfp4 { m.enc.device_ptr(m.enc.stream()).0 } else { 0 },
            a_enc,
            ntiles: n.div_ceil(kbn) as i32,
            rbs: m.rbs as i32,
            max_slots: max_slots as i32,
            late_wait: i32::from(late),
        };
        let mut p = MoeTileTmaParams { t, ..bytemuck::Zeroable::zeroed() };
        if wgmma {
            // x: this call's T·k rows (zeros past them), 64-k boxes of the tile's 128, 64 or 32 rows.
            let xmap = Tma2d {
                base: x,
                dtype: DType::BF16,
                rows: pairs,
                cols: kdim,
                row_stride_bytes: 2 * ldx,
                box_rows: kbm as u32,
                box_cols: 64,
            };
            // codes: the stacked experts' rows, K/2 bytes as bf16 pairs, 128-k (64-byte) boxes of
            // the CTA's 256 rows (zeros past the last expert's rows and past K).
            let wmap = Tma2d {
                base: m.codes.device_ptr(m.codes.stream()).0,
                dtype: DType::BF16,
                rows: e * m.rbs * packed::ROW_BLOCK,
                cols: kdim / 4,
                row_stride_bytes: kdim / 2,
                box_rows: kbn as u32,
                box_cols: 32,
            };
            p.xmap = xmap.encode(names.0)?;
            p.wmap = wmap.encode_with(names.1, TmaSwizzle::B64)?;
        }
        Ok::<_, Error>(p)
    };
    // FC1 and FC2 of `kern` on the slots `at` (as `tile_params`).
    // FC1's fused activation (the wgmma tiles, `fused_act`): h and the rows' weights.
    let fc1_act = MoeTileAct {
        h: bound.ptr("h"),
        row_weight: bound.ptr("row_weight"),
        inter: i as i32,
        act: act_code(s.activation),
        limit: q.limit(),
        reserved: 0,
    };
    let fcs = |kern: TileKernel, at: (u64, u64, usize, bool)| {
        let mut fc1 =
            tile_params(kern, at, &w.fc1, hd, r1, bound.ptr("xq"), hd, bound.ptr("gu"), a1, ("xq", "fc1.codes"))?;
        if fused_act {
            fc1.act = fc1_act;
        }
        let fc2 = tile_params(kern, at, &w.fc2, i, hd, bound.ptr("h"), i, bound.ptr("y_rows"), a2, ("h", "fc2.codes"))?;
        Ok::<_, Error>((fc1, fc2))
    };
    let (fc1, fc2) = fcs(tile, (bound.ptr("slots"), bound.ptr("meta"), max_slots, false))?;
    // The tail slots: `meta[2]` of them (8 bytes into `meta`), at most one per expert.
    let tail_params = tail.map(|k| fcs(k, (bound.ptr("tail_slots"), bound.ptr("meta") + 8, e, true))).transpose()?;
    let act = MoeActParams {
        meta: bound.ptr("meta"),
        row_expert: bound.ptr("row_expert"),
        row_weight: bound.ptr("row_weight"),
        a2_enc: a2,
        gu: bound.ptr("gu"),
        h: bound.ptr("h"),
        gu_cols: r1 as i32,
        inter: i as i32,
        gated: i32::from(s.activation.gated()),
        act: act_code(s.activation),
        limit: q.limit(),
        quant,
        max_rows: pairs as i32,
        kperm: i32::from(wgmma),
    };
    let rows = rows_params(q, args, &bound, t, a2)?;
    // The mma.sync tile: one CTA per (slot, N tile) of the plan's most slots (those past the live
    // slots exit). The wgmma tile is persistent: one CTA per SM by default (its 512 threads at 127
    // registers hold the whole register file), each walking the live tiles.
    let tiles = |n: usize| max_slots * n.div_ceil(bn);
    let grid = |n: usize| if wgmma { tiles(n).min(d.tile_ctas) } else { tiles(n) } as u32;
    let grids = (grid(r1), grid(hd));
    // The tail slots' persistent launches: at most one slot per expert with rows.
    let tail_grid = |n: usize| tail.map_or(0, |k| (e.min(pairs) * n.div_ceil(k.tile().1)).clamp(1, d.tile_ctas)) as u32;
    let call = GroupedCall {
        topk,
        group,
        fc1,
        act,
        fused_act,
        fc2,
        wgmma,
        rows,
        grids,
        tile_smem: tile.dynamic_smem(),
        tail: tail_params,
        tail_grids: (tail_grid(r1), tail_grid(hd)),
        tail_smem: tail.map_or(0, |k| k.dynamic_smem()),
    };
    Ok((t, bucket, call))
}

fn run_grouped(
    plan: &Plan,
    d: &Decode,
    w: &PackedExperts,
    args: &Args<'_>,
    scratch: Scratch<'_>,
    stream: &Arc<CudaStream>,
) -> Result<()> {
    let (_, bucket, call) = grouped_call(plan, d, w, args, &scratch)?;
    plan.device.check_stream(stream)?;
    let selected = resolve(plan, bucket, stream)?;
    launch_grouped(&selected, &call, stream)
}

fn launch_grouped(selected: &Selected, c: &GroupedCall, stream: &CudaStream) -> Result<()> {
    let unknown = || Error::UnknownConfig { op: OP, bucket: String::new(), config: selected.config.clone() };
    // The base eight, the tail slots' kernel, then FC1's activation kernels (tile, tail).
    let n = 8 + usize::from(c.tail.is_some()) * (1 + usize::from(c.fused_act)) + usize::from(c.fused_act);
    let ([zero, count, scan, place, gather, tile, act, combine], rest) =
        router_then(selected, c.topk.as_ref(), n, stream)?.split_at_checked(8).ok_or_else(unknown)?
    else {
        return Err(unknown());
    };
    let (tail, tile_act, tail_act) = match (rest, &c.tail, c.fused_act) {
        ([], None, false) => (None, tile, None),
        ([k], Some(p), false) => (Some((k, p)), tile, Some(k)),
        ([a], None, true) => (None, a, None),
        ([k, a, ka], Some(p), true) => (Some((k, p)), a, Some(ka)),
        _ => return Err(unknown()),
    };
    let pdl = LaunchOpts { pdl: true, cluster_x: 0 };
    let first = LaunchOpts { pdl: c.topk.is_some(), cluster_x: 0 };
    let blocks = |n: usize, per: u32| LaunchDims {
        grid: ((n as u32).div_ceil(per).max(1), 1, 1),
        block: (per, 1, 1),
        smem_bytes: 0,
    };
    let g = &c.group;
    let pairs = c.rows.max_rows as usize;
    // Values per thread of the gather / activation kernels: a recipe block, or a 32-k group in
    // the wgmma tiles' fragment order.
    let xb = match (g.kperm, g.quant) {
        (1, _) => 32,
        (_, 0) => 8,
        (_, 1) => 32,
        _ => 16,
    };
    let threads = if c.wgmma { WG_TILE_THREADS } else { TILE_THREADS };
    let tile_dims =
        |grid: u32| LaunchDims { grid: (grid.max(1), 1, 1), block: (threads, 1, 1), smem_bytes: c.tile_smem };
    let tail_dims =
        |grid: u32| LaunchDims { grid: (grid.max(1), 1, 1), block: (WG_TILE_THREADS, 1, 1), smem_bytes: c.tail_smem };
    // SAFETY (all): each params struct mirrors its kernel's (asserted on both sides);
    // `grouped_call` checked every tensor and the packed experts against the plan (the tile
    // kernels' bases move within the stacked codes, scales and the scratch's rows by the slot's
    // expert and first row, and their bounds are the expert's rows and the slot's rows); the
    // scratch was bound at the plan's sizes (counts and row starts for E, ranks and rows for T·k
    // pairs, slots for the most a call can have with the tile's slot rows, tail slots for one per
    // expert, x̂, gate/up, h and y rows for T·k rows). The kernels mask ids outside [0, E) and
    // read what the chain wrote only after their PDL waits — except the tail slots' launches
    // (late_wait), which start once every CTA of the 128-row tile before them has passed its
    // wait (so the grouping and x̂ / h they read are complete), write only their own slots' rows
    // and wait for that tile before they exit; grids past the live slots / rows exit (the wgmma
    // tiles' persistent CTAs walk the live tiles).
    unsafe {
        zero.launch_ex(stream, blocks(g.experts as usize, 256), g, first)?;
        count.launch_ex(stream, blocks(pairs, 256), g, pdl)?;
        scan.launch_ex(stream, LaunchDims { grid: (1, 1, 1), block: (SCAN_THREADS, 1, 1), smem_bytes: 0 }, g, pdl)?;
        place.launch_ex(stream, blocks(pairs, 256), g, pdl)?;
        gather.launch_ex(stream, blocks(pairs * (g.hidden as usize / xb), 256), g, pdl)?;
        if c.wgmma {
            tile_act.launch_ex(stream, tile_dims(c.grids.0), &c.fc1, pdl)?;
        } else {
            tile.launch_ex(stream, tile_dims(c.grids.0), &c.fc1.t, pdl)?;
        }
        // The tail slots (late_wait: they start without waiting for the tile above, whose
        // inputs they share and whose rows they do not touch, and wait for it at exit).
        if let (Some((_, (fc1, _))), Some(k)) = (tail, tail_act) {
            k.launch_ex(stream, tail_dims(c.tail_grids.0), fc1, pdl)?;
        }
        // (With the activation in FC1's epilogue, FC2 waits on FC1's launches directly.)
        if !c.fused_act {
            act.launch_ex(stream, blocks(pairs * (c.act.inter as usize / xb), 256), &c.act, pdl)?;
        }
        if c.wgmma {
            tile.launch_ex(stream, tile_dims(c.grids.1), &c.fc2, pdl)?;
        } else {
            tile.launch_ex(stream, tile_dims(c.grids.1), &c.fc2.t, pdl)?;
        }
        if let Some((k, (_, fc2))) = tail {
            k.launch_ex(stream, tail_dims(c.tail_grids.1), fc2, pdl)?;
        }
        let dims = LaunchDims {
            grid: ((c.rows.hidden as u32 / 8).div_ceil(128), c.rows.tokens as u32, 1),
            block: (128, 1, 1),
            smem_bytes: 0,
        };
        combine.launch_ex(stream, dims, &c.rows, pdl)
    }
}

fn launch_decode(selected: &Selected, c: &DecodeCall, stream: &CudaStream) -> Result<()> {
    let unknown = || Error::UnknownConfig { op: OP, bucket: String::new(), config: selected.config.clone() };
    let [route, gemv, quant, combine] = router_then(selected, c.topk.as_ref(), 4, stream)? else {
        return Err(unknown());
    };
    let pdl = LaunchOpts { pdl: true, cluster_x: 0 };
    // The grouping waits for the router (PDL) when there is one; otherwise it is the call's
    // first kernel and launches plainly.
    let first = LaunchOpts { pdl: c.topk.is_some(), cluster_x: 0 };
    let gemv_dims = |grid: u32| LaunchDims { grid: (grid, 1, 1), block: (GEMV_THREADS, 1, 1), smem_bytes: c.gemv_smem };
    let t = c.rows.tokens as u32;
    let block = if c.rows.quant == 1 { 32 } else { 16 };
    let quant_threads = (c.rows.max_rows as u32) * (c.rows.inter as u32 / block);
    // SAFETY (all): each params struct mirrors its kernel's (asserted on both sides); `decode_call`
    // checked every tensor (shapes, dtypes, contiguity, 16-byte rows of x and y, y and the error
    // word apart from the inputs), the packed experts match the plan's shape (the TMA descriptor
    // covers exactly their stacked codes, the scale tiles are theirs), and the scratch was bound
    // at the plan's sizes: grouping regions for T·k pairs, slots for the most a call can have,
    // partials for the grid, counters for every (slot, row block, warp). The kernels mask ids
    // outside [0, E). Before their PDL waits FC1 reads only ids (complete once the route released
    // it) when it groups them itself (T·k ≤ EARLY_LOCAL_PAIRS), and FC2 the route's slots (complete:
    // two launches back; the kernel's MoeRows::units); every other read of what the chain wrote,
    // and every global write, comes after the waits.
    unsafe {
        route.launch_ex(
            stream,
            LaunchDims { grid: (c.route_grid, 1, 1), block: (ROUTE_THREADS, 1, 1), smem_bytes: c.route_smem },
            &c.route,
            first,
        )?;
        gemv.launch_ex(stream, gemv_dims(c.grids.0), &c.fc1, pdl)?;
        if c.quantized {
            let dims =
                LaunchDims { grid: (quant_threads.div_ceil(256).max(1), 1, 1), block: (256, 1, 1), smem_bytes: 0 };
            quant.launch_ex(stream, dims, &c.rows, pdl)?;
        }
        gemv.launch_ex(stream, gemv_dims(c.grids.1), &c.fc2, pdl)?;
        let dims =
            LaunchDims { grid: ((c.rows.hidden as u32 / 8).div_ceil(128), t, 1), block: (128, 1, 1), smem_bytes: 0 };
        combine.launch_ex(stream, dims, &c.rows, pdl)
    }
}

/// Launches the router (when `topk` holds its parameters) on `stream`: one CTA of 256 threads
/// per token, as `moe.route_topk` does.
fn launch_router(kernel: &b12x_core::Kernel, topk: &RouteTopkParams, stream: &CudaStream) -> Result<()> {
    let dims = LaunchDims { grid: (topk.tokens as u32, 1, 1), block: (ROUTE_THREADS, 1, 1), smem_bytes: 0 };
    // SAFETY: RouteTopkParams mirrors the kernel's struct (asserted on both sides); it passed
    // route_topk's `Query::kernel_params` (logits, bias and hash tables checked, outputs the
    // scratch's topk regions sized [max_tokens, k]); the kernel bounds every untrusted index.
    unsafe { kernel.launch_ex(stream, dims, topk, LaunchOpts { pdl: false, cluster_x: 0 }) }
}

/// The path's `n` kernels of `selected`, after launching the router first when `topk` holds its
/// parameters (the selection then starts with the router's kernel; a timing tool's case without
/// router parameters skips it).
fn router_then<'k>(
    selected: &'k Selected,
    topk: Option<&RouteTopkParams>,
    n: usize,
    stream: &CudaStream,
) -> Result<&'k [b12x_core::Kernel]> {
    let all = selected.kernels.as_slice();
    let (router, rest) = if all.len() == n + 1 { (Some(&all[0]), &all[1..]) } else { (None, all) };
    match (router, topk) {
        (Some(k), Some(t)) => launch_router(k, t, stream)?,
        (None, Some(_)) => {
            return Err(Error::UnknownConfig { op: OP, bucket: String::new(), config: selected.config.clone() })
        }
        _ => {}
    }
    Ok(rest)
}

fn launch(selected: &Selected, topk: Option<&RouteTopkParams>, p: &FusedMoeParams, stream: &CudaStream) -> Result<()> {
    let unknown = || Error::UnknownConfig { op: OP, bucket: String::new(), config: selected.config.clone() };
    let [fc1, fc2, combine] = router_then(selected, topk, 3, stream)? else { return Err(unknown()) };
    let pairs = (p.tokens * p.top_k) as u32;
    let blocks = |n: i32| (n as u32).div_ceil(THREADS);
    let opts = LaunchOpts { pdl: false, cluster_x: 0 };
    let block = (THREADS, 1, 1);
    // SAFETY (all three): FusedMoeParams mirrors the kernels' struct (asserted on both sides); `p`
    // passed `Query::kernel_params` (shapes, dtypes and contiguity of every tensor, y and the
    // error word apart from the inputs) and its scratch pointers come from the plan's layout
    // bound to a large enough buffer; the kernels skip ids outside [0, E).
    unsafe {
        fc1.launch_ex(stream, LaunchDims { grid: (blocks(p.inter), pairs, 1), block, smem_bytes: 0 }, p, opts)?;
        fc2.launch_ex(stream, LaunchDims { grid: (blocks(p.hidden), pairs, 1), block, smem_bytes: 0 }, p, opts)?;
        combine.launch_ex(stream, LaunchDims { grid: (p.tokens as u32, 1, 1), block, smem_bytes: 0 }, p, opts)
    }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        format!("{:?} max_tokens={} layout={:?}", self.query.shape, self.query.max_tokens, self.query.layout)
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        match self.decode {
            None => &crate::FUSED_MOE_MODULE,
            Some(_) => &crate::FUSED_MOE_DECODE_MODULE,
        }
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, bucket: usize) -> Vec<String> {
        match &self.decode {
            None => vec![CONFIG.into()],
            Some(d) => match (d.paths.get(bucket), d.configs.get(bucket), d.tile_of(bucket)) {
                (Some(Path::GroupedGemv), Some(c), _) => vec![format!("grouped_gemv_{}", c.id())],
                (_, Some(c), _) => vec![c.id()],
                (_, None, Some(t)) => {
                    let id = match d.tail_of(bucket) {
                        None => format!("grouped_{}", t.id()),
                        Some(tail) => format!("grouped_{}_tail_{}", t.id(), tail.id()),
                    };
                    // `_fact`: FC1's epilogue applies the activation (its own kernels).
                    vec![if d.act_fused_in(bucket) { id + "_fact" } else { id }]
                }
                _ => Vec::new(),
            },
        }
    }
    fn symbols(&self, bucket: usize, config_index: usize) -> Vec<String> {
        match (&self.decode, config_index) {
            (None, 0) => self.query.symbols(),
            (Some(d), 0) => match (d.configs.get(bucket), d.tile_of(bucket)) {
                (Some(c), _) => self.query.decode_symbols(c.nt),
                (None, Some(t)) => self.query.grouped_symbols(&t, d.tail_of(bucket).as_ref(), d.act_fused_in(bucket)),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }
    fn dynamic_smem(&self, bucket: usize, _config_index: usize) -> u32 {
        // The decode GEMV's ring is above the 48 KB default: its kernels get the device's opt-in
        // limit when the selection is resolved (the simple path uses static shared memory only).
        match &self.decode {
            None => 0,
            Some(d) => match (d.configs.get(bucket), d.tile_of(bucket)) {
                (Some(c), _) => c.dynamic_smem() + GEMV_STATIC_SMEM,
                (None, Some(t)) => t.dynamic_smem() + GEMV_STATIC_SMEM,
                _ => 0,
            },
        }
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        if self.decode.is_some() {
            // One config per bucket: never raced.
            return Err(Error::Unsupported {
                op: OP,
                device: format!("{:?}", self.device.arch()),
                reason: "the decode path has one config per bucket: nothing to race".into(),
            });
        }
        // One config: never raced; this case (one token, every slot on expert 0 of a one-expert
        // copy of the shape, zero weights with encode scales 1) is for tools that time every op.
        let s = &self.query.shape;
        let (k, hd, i, r1, b) = (s.top_k, s.hidden, s.inter, s.fc1_rows(), s.recipe.weights().block());
        let sizes = [
            hd * 2,
            k * 4,
            k * 4,
            r1 * hd / 2,
            r1 * hd / b,
            4,
            hd * i / 2,
            hd * i / b,
            4,
            k * i * 2,
            k * hd * 2,
            hd * 2,
            4,
        ];
        let race = b12x_core::RaceBuffer::new(&self.device, &sizes)?;
        let at = &race.ptrs;
        let stream = self.device.stream();
        b12x_core::memset_u32(stream, at[5], 1.0f32.to_bits(), 1)?;
        b12x_core::memset_u32(stream, at[8], 1.0f32.to_bits(), 1)?;
        let nvfp4 = s.recipe.weights() == Fp4::Nvfp4;
        let p = FusedMoeParams {
            x: at[0],
            ids: at[1],
            weights: at[2],
            w1_codes: at[3],
            w1_scales: at[4],
            w1_enc: if nvfp4 { at[5] } else { 0 },
            w2_codes: at[6],
            w2_scales: at[7],
            w2_enc: if nvfp4 { at[8] } else { 0 },
            a1_enc: if s.recipe == Recipe::Nvfp4 { at[5] } else { 0 },
            a2_enc: if s.recipe == Recipe::Nvfp4 { at[8] } else { 0 },
            h: at[9],
            y_pairs: at[10],
            y: at[11],
            error: at[12],
            ldx: hd as i64,
            ldy: hd as i64,
            tokens: 1,
            top_k: k as i32,
            experts: 1,
            hidden: hd as i32,
            inter: i as i32,
            limit: f32::INFINITY,
            ..FusedMoeParams::default()
        };
        Ok(Box::new(RaceCase { params: p, _buffer: race.buffer }))
    }
}

/// What a timing tool launches.
struct RaceCase {
    params: FusedMoeParams,
    _buffer: b12x_core::cudarc::driver::CudaSlice<u8>,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(selected, None, &self.params, stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The threads the host launches each tile / decode GEMV kernel with fit the registers ptxas
    /// gave it: registers are allocated per warp (in steps of 8 per thread) from each of the SM's
    /// four 16K-register quarters, which a CTA's warps share round-robin, so a CTA of W warps
    /// needs ceil(W / 4) warps' registers in one quarter (ptxas caps `__launch_bounds__(544, 1)`
    /// at 96, not 65536 / 544; a `__maxnreg__` past that compiles and then fails to launch).
    #[test]
    fn kernels_fit_the_threads_they_are_launched_with() {
        let fits = |threads: u32, regs: u64| {
            let per_warp = 32 * regs.div_ceil(8) * 8;
            u64::from(threads / 32).div_ceil(4) * per_warp <= 16384
        };
        assert!(fits(512, 128) && fits(544, 96) && !fits(544, 104) && !fits(544, 120));
        let mut checked = 0;
        for (k, arch, r) in b12x_core::testing::manifest_resources(crate::KERNEL_MANIFEST) {
            let threads = if k.starts_with("b12x_fused_moe_tile_wg") {
                WG_TILE_THREADS
            } else if k.starts_with("b12x_fused_moe_tile_") {
                TILE_THREADS
            } else if k.starts_with("b12x_fused_moe_decode_gemv") {
                GEMV_THREADS
            } else {
                continue;
            };
            let regs = r["registers"].as_u64().unwrap();
            assert!(fits(threads, regs), "{k} on {arch}: {regs} registers x {threads} threads");
            checked += 1;
        }
        assert!(checked >= 8, "{checked} kernels checked");
    }

    /// The plan counts [`GEMV_STATIC_SMEM`] of static shared memory for the decode GEMV and tile
    /// kernels beside their dynamic rings (`fits`, `dynamic_smem`): every such kernel's static
    /// shared memory as ptxas reported it, on every arch built, stays within it (a kernel past it
    /// would ask the launch for more than the plan checked). Needs the kernels built.
    #[test]
    fn kernels_static_smem_fits_the_plans_budget() {
        let m: serde_json::Value = serde_json::from_str(crate::KERNEL_MANIFEST).unwrap();
        assert_eq!(m["built"], serde_json::Value::Bool(true), "kernels not built");
        let mut checked = 0;
        for (k, arch, r) in b12x_core::testing::manifest_resources(crate::KERNEL_MANIFEST) {
            if !(k.starts_with("b12x_fused_moe_tile") || k.starts_with("b12x_fused_moe_decode_gemv")) {
                continue;
            }
            let smem = r["smem_bytes"].as_u64().unwrap();
            assert!(smem <= u64::from(GEMV_STATIC_SMEM), "{k} on {arch}: {smem} bytes of static shared memory");
            checked += 1;
        }
        assert!(checked >= 8, "{checked} kernels checked");
    }

    /// Every config the plan would pick fits the device's opt-in limit with this op's static
    /// shared memory counted (the kernels' `MoeEarlySmem` beside `gemm.blockscaled`'s), at every
    /// limit from SM120's 99 KB to past SM90's 227 KB — including the limits just above a ring
    /// size, where a check counting only `gemm.blockscaled`'s 1280 static bytes picks a config
    /// whose launch would ask for more than the device has (it fails this test).
    #[test]
    fn chosen_configs_fit_with_the_ops_static_smem() {
        for optin in (96 * 1024..=240 * 1024).step_by(16) {
            for rows in [1, 8, GROUPED_ABOVE] {
                if let Some(c) = decode_gemv_config(rows, optin) {
                    assert!(c.dynamic_smem() + GEMV_STATIC_SMEM <= optin, "gemv rows {rows} optin {optin}: {c:?}");
                    let per_sm = c.ctas as u32 * (c.dynamic_smem() + GEMV_STATIC_SMEM + 1024);
                    assert!(per_sm <= optin + 1024, "gemv rows {rows} optin {optin}: {c:?} per SM {per_sm}");
                }
            }
            for arch in [Arch::Sm90, Arch::Sm120] {
                if let Some(t) = grouped_tile_config(optin, arch) {
                    assert!(t.dynamic_smem() + GEMV_STATIC_SMEM <= optin, "tile optin {optin}: {t:?}");
                    assert!(t.fits(optin, arch));
                }
            }
        }
        // SM90 (227 KB) and SM120 (99 KB) both have a decode config for every row count and a
        // tile config; SM90's are the ones measured (3-stage rings, 3 CTAs per SM at 8 rows).
        for optin in [232_448u32, 101_376] {
            for rows in [1, 8, GROUPED_ABOVE] {
                assert!(decode_gemv_config(rows, optin).is_some(), "rows {rows} optin {optin}");
            }
            assert!(grouped_tile_config(optin, Arch::Sm120).is_some());
        }
        // SM90 takes the wgmma tile (128-row slots), SM120 / SM121 the mma.sync one (64), also
        // at SM90's limit; the wgmma tile is never chosen off SM90.
        let sm90 = grouped_tile_config(232_448, Arch::Sm90).unwrap();
        assert_eq!((sm90.id().as_str(), sm90.tile()), ("wg_w4_wn8_s4", (128, 256)));
        // Below the four-stage ring's size the wgmma tile takes a shallower ring, not the mma.sync tile.
        let three = grouped_tile_config(200 * 1024, Arch::Sm90).unwrap();
        assert_eq!(three.id(), "wg_w4_wn8_s3");
        for arch in [Arch::Sm120, Arch::Sm121] {
            for optin in [101_376, 232_448] {
                assert!(matches!(grouped_tile_config(optin, arch), Some(TileKernel::Mma(t)) if t.tile() == (64, 256)));
            }
        }
        assert_eq!(TileKernel::mma(232_448).map(|t| t.id()).as_deref(), Some("tile_w4_wm2_wn8_s6_k1"));
        // The 64-row wgmma tile: SM90 only, 2..=4 stages of 34 KB plus 1 KB of alignment slack.
        let wg64 = TileKernel::Wgmma64 { stages: 4 };
        assert_eq!((wg64.id().as_str(), wg64.tile(), wg64.dynamic_smem()), ("wg64_w4_wn8_s4", (64, 256), 140_288));
        assert!(wg64.fits(232_448, Arch::Sm90) && !wg64.fits(232_448, Arch::Sm120) && !wg64.fits(101_376, Arch::Sm90));
        for stages in [1, 5] {
            assert!(!TileKernel::Wgmma64 { stages }.fits(232_448, Arch::Sm90), "{stages} stages");
        }
        assert!(TileKernel::Wgmma64 { stages: 2 }.fits(101_376, Arch::Sm90));
        // The 32-row wgmma tile: the same at 26 KB stages (x 8 KB).
        let wg32 = TileKernel::Wgmma32 { stages: 4 };
        assert_eq!((wg32.id().as_str(), wg32.tile(), wg32.dynamic_smem()), ("wg32_w4_wn8_s4", (32, 256), 107_520));
        assert_eq!(wg32.symbol("nvfp4"), "b12x_fused_moe_tile_wg32_nvfp4");
        assert!(wg32.fits(232_448, Arch::Sm90) && !wg32.fits(232_448, Arch::Sm120) && !wg32.fits(101_376, Arch::Sm90));
        for stages in [1, 5] {
            assert!(!TileKernel::Wgmma32 { stages }.fits(232_448, Arch::Sm90), "{stages} stages");
        }
        assert!(TileKernel::Wgmma32 { stages: 3 }.fits(101_376, Arch::Sm90));
        assert_eq!(decode_gemv_config(8, 232_448).map(|c| c.id()).as_deref(), Some("w4a16_nt1_kb1_s3_c3"));
        assert_eq!(decode_gemv_config(GROUPED_ABOVE, 232_448).map(|c| c.id()).as_deref(), Some("w4a16_nt2_kb1_s4_c2"));
    }
}
