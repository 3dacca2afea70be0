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
//! Status: CPU oracle only (kernels, plan and GPU suite: issue 7's next steps; their design is
//! in `README.md` next to this file).

pub mod reference;

use b12x_core::{Error, Result};

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
