//! `gemm.blockscaled` — `C[M, N] = alpha · A[M, K] · B[N, K]ᵀ (+ bias)` with block-scaled or
//! per-tensor quantized operands (issue 5). This module holds the operand formats
//! ([`Activation`], [`Weight`]) as b12x-quant's CPU codecs hold them, the CPU oracle
//! ([`mod@reference`]), `pack_weight` ([`pack`]: layout v3, host and device), the op
//! itself [`gemv`] (packed NVFP4, MXFP4, MXFP8, block-FP8 or per-tensor FP8 weights × BF16 x,
//! optionally quantized to MXFP8 / block FP8 inside the call, or pre-quantized MXFP8 / NVFP4 /
//! block-FP8 (UE8M0 scales; f32 scales with block-FP8 weights) / per-tensor E4M3 x; every M: decode kernels for M ≤ 16, tiled kernels above) and the
//! fixed linears [`linear`] (`gemm.block_fp8_linear`, `gemm.mxfp8_linear`,
//! `gemm.tensor_fp8_linear`: prepared-only entry points on the same kernels), with SM120 native
//! kernels for E4M3 x × MXFP8 / UE8M0 block-FP8 / MXFP4 weights (unvalidated on SM120). Not
//! written yet: native NVFP4 × NVFP4, f32 activation scales with non-block-FP8 weights
//! (`src/blockscaled/README.md`).
//! The SM120 block-scaled MMAs the kernels will use, and where their operands live, are in
//! `b12x/mma_sm120.cuh` (b12x-core): fragment and scale index functions checked on the CPU
//! against the PTX ISA's formulas and CUTLASS's layouts (`tests/sm120_fragments.rs`), wrappers
//! whose SASS CI checks, and `kernels/bsmma_probe.cu`, one MMA per launch against the CPU product
//! (`tests/gpu_bsmma_probe.rs`: the portable path on the H200; **the hardware path is
//! unvalidated**: no SM120 GPU).
//!
//! Formats (formats.md; every value decodes exactly as b12x-quant's codecs decode it):
//!
//! | operand | format | elements | scales |
//! |---|---|---|---|
//! | A (activation) `[M, K]` | BF16 / FP16 | the values | — |
//! | | MXFP8 | E4M3 | UE8M0 per 1×32 |
//! | | NVFP4 | E2M1 pairs | UE4M3 per 1×16, f32 encode scale |
//! | | block FP8 | E4M3 | f32 or UE8M0 per 1×128 / 1×32 |
//! | | per-tensor FP8 | E4M3 | one f32 |
//! | B (weight) `[N, K]` | NVFP4 | E2M1 pairs | UE4M3 per 1×16, f32 encode scale |
//! | | MXFP4 / MXFP8 | E2M1 pairs / E4M3 | UE8M0 per 1×32 |
//! | | block FP8 | E4M3 | f32 or UE8M0 per 128×128 / 32×32 tile (edge tiles partial) |
//! | | per-tensor FP8 | E4M3 | one f32 |

pub mod gemv;
pub mod linear;
pub mod pack;
pub mod reference;

use b12x_core::half::{bf16, f16};
use b12x_quant::block::{BlockFp8, Mx, Nvfp4, TensorFp8};

/// The A operand (activations), `[M, K]` row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum Activation {
    Bf16 {
        m: usize,
        k: usize,
        data: Vec<bf16>,
    },
    F16 {
        m: usize,
        k: usize,
        data: Vec<f16>,
    },
    /// MXFP8 (`element` E4M3; MXFP4 activations are not a GEMM input).
    Mxfp8(Mx),
    Nvfp4(Nvfp4),
    /// Block FP8 with `1 × G` groups (`tile.0 == 1`).
    BlockFp8(BlockFp8),
    TensorFp8 {
        m: usize,
        k: usize,
        q: TensorFp8,
    },
}

/// The B operand (weights), `[N, K]` row-major (the checkpoint layout).
#[derive(Clone, Debug, PartialEq)]
pub enum Weight {
    Nvfp4(Nvfp4),
    /// MXFP4 (`element` E2M1) or MXFP8 (E4M3).
    Mx(Mx),
    /// Block FP8 with `G × G` tiles.
    BlockFp8(BlockFp8),
    TensorFp8 {
        n: usize,
        k: usize,
        q: TensorFp8,
    },
}

impl Activation {
    /// `(M, K)`.
    pub fn shape(&self) -> (usize, usize) {
        match self {
            Activation::Bf16 { m, k, .. } | Activation::F16 { m, k, .. } | Activation::TensorFp8 { m, k, .. } => {
                (*m, *k)
            }
            Activation::Mxfp8(q) => (q.rows, q.k),
            Activation::Nvfp4(q) => (q.rows, q.k),
            Activation::BlockFp8(q) => (q.rows, q.k),
        }
    }
    /// The values the kernels multiply, `[M, K]` (exactly b12x-quant's dequantization).
    pub fn dequantize(&self) -> Vec<f32> {
        use b12x_quant::block::{dequantize_block_fp8, dequantize_mx, dequantize_nvfp4, dequantize_tensor_fp8};
        match self {
            Activation::Bf16 { data, .. } => data.iter().map(|v| v.to_f32()).collect(),
            Activation::F16 { data, .. } => data.iter().map(|v| v.to_f32()).collect(),
            Activation::Mxfp8(q) => dequantize_mx(q),
            Activation::Nvfp4(q) => dequantize_nvfp4(q),
            Activation::BlockFp8(q) => dequantize_block_fp8(q),
            Activation::TensorFp8 { q, .. } => dequantize_tensor_fp8(q),
        }
    }
}

impl Weight {
    /// `(N, K)`.
    pub fn shape(&self) -> (usize, usize) {
        match self {
            Weight::Nvfp4(q) => (q.rows, q.k),
            Weight::Mx(q) => (q.rows, q.k),
            Weight::BlockFp8(q) => (q.rows, q.k),
            Weight::TensorFp8 { n, k, .. } => (*n, *k),
        }
    }
    /// The values the kernels multiply, `[N, K]` (exactly b12x-quant's dequantization).
    pub fn dequantize(&self) -> Vec<f32> {
        use b12x_quant::block::{dequantize_block_fp8, dequantize_mx, dequantize_nvfp4, dequantize_tensor_fp8};
        match self {
            Weight::Nvfp4(q) => dequantize_nvfp4(q),
            Weight::Mx(q) => dequantize_mx(q),
            Weight::BlockFp8(q) => dequantize_block_fp8(q),
            Weight::TensorFp8 { q, .. } => dequantize_tensor_fp8(q),
        }
    }
}
