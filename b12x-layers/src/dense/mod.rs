//! A Llama / Qwen-style dense decoder layer's decode step from b12x ops (see the crate docs).
//!
//! - [`Config`]: the geometry ([`Config::qwen3_8b`]: hidden 4096, H 32, Hkv 8, D 128,
//!   intermediate 12288, θ 1e6, NeoX rope over the whole head). No QK-norm (Qwen3 has one; this
//!   layer is the composition).
//! - [`HostWeights`]: seeded random weights in a [`WeightFormat`]: BF16, block FP8 (128 × 128
//!   tiles, f32 scales, W8A16: `gemm.blockscaled`) or NVFP4 (W4A16). The fused linears are
//!   W_qkv `[(H + 2·Hkv)·D, hidden]` (Q rows, then K, then V), W_o `[hidden, H·D]`, W_gate_up
//!   `[2·I, hidden]` (gate rows first) and W_down `[hidden, I]`.
//! - [`Layer`]: every op's plan for a [`Capacity`]; [`Layer::plans`] for one
//!   `PreparationSession`; [`Layer::step`] enqueues the step's nine ops on a stream (only
//!   launches: capture it as one graph with `PreparationSession::capture`).
//! - [`State`]: the device buffers of a batch of B requests (activations, the paged KV cache,
//!   page table, lengths, positions, scratch, the error word); [`Batch`] is the host's page
//!   allocator: [`Batch::advance`] adds one token per request (a new page when one fills) and
//!   [`State::upload_batch`] writes lengths, positions and the page table into the same device
//!   buffers, so a captured graph replays the next step.
//!
//! Rounding points (the reference reproduces them): every op's output is rounded to bf16 (the
//! residual sums inside `norm.rmsnorm` too); K and V are cached in bf16 after rope.

mod layer;
mod run;
mod state;
mod weights;

pub use layer::{Capacity, FoldNorms, Layer, LayerOptions, Op, WarmWeight};
pub use run::{cosine_bound, decode_run, RunReport};
pub use state::{Batch, State};
pub use weights::{DeviceLinear, DeviceWeights, HostLinear, HostWeights};

use b12x_gemm::blockscaled::pack;

/// The layer's geometry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub intermediate: usize,
    /// Rope θ (NeoX pairs over the whole head).
    pub rope_theta: f32,
    /// RMSNorm ε.
    pub eps: f32,
    /// Tokens per KV page.
    pub page_size: usize,
}

impl Config {
    /// Qwen3-8B's dense layer shape (without its QK-norm).
    pub fn qwen3_8b() -> Self {
        Config {
            hidden: 4096,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            intermediate: 12288,
            rope_theta: 1e6,
            eps: 1e-6,
            page_size: 16,
        }
    }
    /// Columns of the fused QKV projection.
    pub fn qkv_cols(&self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }
    /// `(N, K)` of the four linears, in [`LINEARS`] order.
    pub fn linear_shapes(&self) -> [(usize, usize); 4] {
        let (h, q) = (self.hidden, self.heads * self.head_dim);
        [(self.qkv_cols(), h), (h, q), (2 * self.intermediate, h), (h, self.intermediate)]
    }
    /// The softmax scale, `1/√D`.
    pub fn softmax_scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }
}

/// The four linears, in weight order.
pub const LINEARS: [&str; 4] = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"];

/// How the linears' weights are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// BF16 weights, `gemm.bf16_gemv`.
    Bf16,
    /// Block FP8 (E4M3, one f32 scale per 128 × 128 tile), BF16 activations (W8A16),
    /// `gemm.blockscaled`.
    BlockFp8,
    /// NVFP4 (E2M1, UE4M3 per 16, f32 tensor scale), BF16 activations (W4A16), `gemm.blockscaled`.
    Nvfp4,
}

impl WeightFormat {
    pub const ALL: [WeightFormat; 3] = [WeightFormat::Bf16, WeightFormat::BlockFp8, WeightFormat::Nvfp4];
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::Bf16 => "bf16",
            WeightFormat::BlockFp8 => "block_fp8",
            WeightFormat::Nvfp4 => "nvfp4",
        }
    }
    /// Bytes of a `[n, k]` weight as the kernels read it: the packed codes and scales (one f32
    /// per 128 × 128 tile for block FP8, rows padded to 16 bytes; one UE4M3 per 16 for NVFP4, in
    /// 128 × 4 tiles).
    pub fn weight_bytes(self, n: usize, k: usize) -> usize {
        match self {
            WeightFormat::Bf16 => 2 * n * k,
            WeightFormat::BlockFp8 => n * k + n.div_ceil(128) * pack::block_scale_ld(k, 128) * 4,
            // Swizzled 128 × 4 scale tiles: rows padded to 128, scale columns to 4.
            WeightFormat::Nvfp4 => n * k / 2 + n.next_multiple_of(128) * (k / 16).next_multiple_of(4),
        }
    }
}
