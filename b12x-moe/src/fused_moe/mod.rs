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
//! - Kernels: for now only the **simple path** (`kernels/fused_moe.cu`): the oracle's loops on the
//!   GPU — FC1 (one thread per gate/up row pair; W4A8 / NVFP4 quantize x's row first), FC2 (h's
//!   row quantized likewise), then the combine, three launches, each pair reading its expert's
//!   weights itself. Every recipe and activation; Hd and I ≤ 8192, T·k ≤ 65535; weights in
//!   b12x-quant's row-major layout ([`WeightArgs`]); the NVFP4 recipe's calibrated activation
//!   scales as [`ActScaleArgs`] (finite and > 0: device data, not checked). Correctness first: it
//!   is slow by design; the fast decode and grouped paths are planned in `README.md` next to
//!   this file. Graph-capturable (scratch from the plan's layout, no allocation, any routing at
//!   replay).
//!
//! **Status: written without a GPU (session 41) — compiled for sm_90a / sm_120a / sm_121a,
//! ptxas-checked, not run anywhere.** `tests/gpu_fused_moe.rs` and `benches/fused_moe.rs` wait
//! for the H200.
//!
//! ```no_run
//! use b12x_core::{Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! use b12x_moe::fused_moe::{self, Args, Query, Shape, WeightArgs};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! // Qwen3-30B-A3B: 128 experts, top-8, hidden 2048, I 768, NVFP4 weights x BF16 activations.
//! let shape = Shape::qwen3_30b_a3b();
//! let (e, k, hd, i) = (shape.experts, shape.top_k, shape.hidden, shape.inter);
//! let query = Query { shape, max_tokens: 8 };
//! let plan = fused_moe::plan(&query, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let s = dev.stream();
//! // The experts as b12x-quant quantizes them (row-major E2M1 pairs, UE4M3 per 16, encode
//! // scales); zeros here, the weights of a checkpoint in practice.
//! let w1_codes = s.alloc_zeros::<u8>(e * 2 * i * hd / 2)?;
//! let w1_scales = s.alloc_zeros::<u8>(e * 2 * i * hd / 16)?;
//! let w2_codes = s.alloc_zeros::<u8>(e * hd * i / 2)?;
//! let w2_scales = s.alloc_zeros::<u8>(e * hd * i / 16)?;
//! let enc = s.clone_htod(&vec![1.0f32; e])?;
//! let t = 2;
//! let x = s.alloc_zeros::<b12x_core::half::bf16>(t * hd)?;
//! let ids = s.clone_htod(&(0..(t * k) as i32).collect::<Vec<_>>())?; // from moe.route_topk
//! let weights = s.clone_htod(&vec![0.125f32; t * k])?;
//! let mut y = s.alloc_zeros::<b12x_core::half::bf16>(t * hd)?;
//! let mut err = s.alloc_zeros::<i32>(1)?;
//! let mut scratch = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes())?;
//! let args = Args {
//!     x: TensorRef::from_slice(&x, &[t, hd])?,
//!     ids: TensorRef::from_slice(&ids, &[t, k])?,
//!     weights: TensorRef::from_slice(&weights, &[t, k])?,
//!     experts: WeightArgs {
//!         w1_codes: TensorRef::from_slice(&w1_codes, &[e, 2 * i, hd / 2])?,
//!         w1_scales: TensorRef::from_slice(&w1_scales, &[e, 2 * i, hd / 16])?,
//!         w1_enc: Some(TensorRef::from_slice(&enc, &[e])?),
//!         w2_codes: TensorRef::from_slice(&w2_codes, &[e, hd, i / 2])?,
//!         w2_scales: TensorRef::from_slice(&w2_scales, &[e, hd, i / 16])?,
//!         w2_enc: Some(TensorRef::from_slice(&enc, &[e])?),
//!     },
//!     act_scales: None,
//!     y: TensorMut::from_slice(&mut y, &[t, hd])?,
//!     error: TensorMut::from_slice(&mut err, &[1])?,
//! };
//! fused_moe::run(&plan, args, Scratch::from_slice(&mut scratch), s)?;
//! # Ok(()) }
//! ```

mod params;
pub mod reference;

pub use params::FusedMoeParams;

use b12x_core::cudarc::driver::CudaStream;
use b12x_core::{
    require_disjoint, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchDims, LaunchOpts, OpPlan,
    PlanSlot, Result, Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
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
/// The most (token, slot) pairs a call of the simple path may have (its grids' y extent).
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
        // Written without a GPU (session 41): compiled and ptxas-checked for every arch, run nowhere.
        archs: &[
            ("sm_90a", b12x_core::Validation::CompiledOnly),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-moe",
        summary: "routed experts of a MoE layer (FC1, activation, routing weight, FC2, combine), FP4 weights; simple path only",
    }
}

/// The op's static problem: the layer's shape and a token capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Query {
    pub shape: Shape,
    /// The largest T `run` accepts.
    pub max_tokens: usize,
}

impl Query {
    /// Checks the shape, the capacity and what the simple path serves; the error names the
    /// first bad field.
    pub fn validate(&self) -> Result<()> {
        self.shape.validate()?;
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
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

    /// The scratch this capacity needs: `h [T·k, I]` and `y_pairs [T·k, Hd]` bf16.
    pub fn scratch_layout(&self) -> ScratchLayout {
        let pairs = self.max_tokens * self.shape.top_k;
        let mut l = ScratchLayout::new();
        l.add("h", pairs * self.shape.inter * 2);
        l.add("y_pairs", pairs * self.shape.hidden * 2);
        l
    }

    /// Checks `args` against the query and builds the kernel parameters (scratch pointers left
    /// 0); nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<FusedMoeParams> {
        let s = &self.shape;
        let (e, k, hd, i) = (s.experts, s.top_k, s.hidden, s.inter);
        let t = args.x.shape().first().copied().unwrap_or(0);
        args.x.expect("x", "[T, Hd]", DType::BF16, &[t, hd])?;
        if t > self.max_tokens {
            return Err(Error::Capacity { what: "T (rows of x)", got: t, capacity: self.max_tokens });
        }
        args.ids.expect("ids", "[T, k]", DType::I32, &[t, k])?;
        args.weights.expect("weights", "[T, k]", DType::F32, &[t, k])?;
        args.y.expect("y", "[T, Hd]", DType::BF16, &[t, hd])?;
        args.error.expect("error", "[1]", DType::I32, &[1])?;
        args.ids.require_contiguous("ids")?;
        args.weights.require_contiguous("weights")?;
        let w = &args.experts;
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
        let mut inputs =
            vec![("x", args.x.byte_span()), ("ids", args.ids.byte_span()), ("weights", args.weights.byte_span())];
        if let Some(a) = &args.act_scales {
            inputs.push(("act_scales.fc1", a.fc1.byte_span()));
            inputs.push(("act_scales.fc2", a.fc2.byte_span()));
        }
        inputs.extend(mats.iter().map(|(n, v, _)| (*n, v.byte_span())));
        for (name, v) in [("w1_enc", &w.w1_enc), ("w2_enc", &w.w2_enc)] {
            if let Some(v) = v {
                inputs.push((name, v.byte_span()));
            }
        }
        let (ys, es) = (("y", args.y.byte_span()), ("error", args.error.byte_span()));
        require_disjoint(ys, es)?;
        for &input in &inputs {
            require_disjoint(ys, input)?;
            require_disjoint(es, input)?;
        }
        let limit = match s.activation {
            Activation::Silu { limit } => limit.unwrap_or(f32::INFINITY),
            Activation::SwigluOai { limit } => limit,
            Activation::Relu2 => f32::INFINITY,
        };
        Ok(FusedMoeParams {
            x: args.x.ptr(),
            ids: args.ids.ptr(),
            weights: args.weights.ptr(),
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
            limit,
            ..FusedMoeParams::default()
        })
    }

    /// The kernel symbols of one call, in launch order: FC1, FC2, the combine.
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
        vec![
            format!("b12x_fused_moe_simple_fc1_{f}_{act}"),
            format!("b12x_fused_moe_simple_fc2_{f}"),
            "b12x_fused_moe_combine".into(),
        ]
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

/// The tensors of one call.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[T, Hd]` bf16 (rows may be padded).
    pub x: TensorRef<'a>,
    /// `[T, k]` i32 expert ids (untrusted: outside `[0, E)` the slot is skipped and reported).
    pub ids: TensorRef<'a>,
    /// `[T, k]` f32 routing weights.
    pub weights: TensorRef<'a>,
    pub experts: WeightArgs<'a>,
    /// The NVFP4 recipe's activation encode scales, exactly for that recipe.
    pub act_scales: Option<ActScaleArgs<'a>>,
    /// `[T, Hd]` bf16 (rows may be padded).
    pub y: TensorMut<'a>,
    /// `[1]` i32: [`FAULT_EXPERT_ID`] is ORed in.
    pub error: TensorMut<'a>,
}

/// A validated query bound to a device.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    slot: PlanSlot,
}

/// Validates `query`. Allocates, compiles and launches nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    Ok(Plan {
        query: *query,
        device: device.clone(),
        buckets: vec![Bucket { lo: 1, hi: query.max_tokens }],
        slot: PlanSlot::default(),
    })
}

impl Plan {
    pub fn query(&self) -> &Query {
        &self.query
    }
    /// Scratch regions `h` and `y_pairs` ([`Query::scratch_layout`]).
    pub fn scratch_layout(&self) -> ScratchLayout {
        self.query.scratch_layout()
    }
}

/// Runs the routed experts on `stream`: three launches, every check before the first; no
/// allocation, no synchronization. `T = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let mut p = plan.query.kernel_params(&args)?;
    let layout = plan.scratch_layout();
    let bound = layout.bind(&scratch)?;
    (p.h, p.y_pairs) = (bound.ptr("h"), bound.ptr("y_pairs"));
    plan.device.check_stream(stream)?;
    if p.tokens == 0 {
        return Ok(());
    }
    let selected = resolve(plan, 0, stream)?;
    launch(&selected, &p, stream)
}

fn launch(selected: &Selected, p: &FusedMoeParams, stream: &CudaStream) -> Result<()> {
    let unknown = || Error::UnknownConfig { op: OP, bucket: String::new(), config: selected.config.clone() };
    let [fc1, fc2, combine] = selected.kernels.as_slice() else { return Err(unknown()) };
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
        format!("{:?} max_tokens={}", self.query.shape, self.query.max_tokens)
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::FUSED_MOE_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        vec![CONFIG.into()]
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        if config_index == 0 {
            self.query.symbols()
        } else {
            Vec::new()
        }
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
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
        launch(selected, &self.params, stream)
    }
}
