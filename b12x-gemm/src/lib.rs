//! `b12x-gemm`: GEMM ops for LLM inference.
//!
//! | op | module | what |
//! |---|---|---|
//! | `gemm.bf16_gemv` | [`bf16_gemv`] | `y = x · Wᵀ (+ bias)` for few rows of x (decode), BF16 weights |
//! | `gemm.blockscaled` | [`blockscaled`] | `C = alpha · A · Bᵀ (+ bias)` with NVFP4 / MX / block-FP8 / per-tensor FP8 operands: formats, the CPU oracle, `pack_weight`, and W4A16 / W8A16, W4A8 / W8A8 (x quantized in the call) and pre-quantized x (NVFP4 × NVFP4, MXFP8, block FP8, per-tensor E4M3) for every M ([`blockscaled::gemv`]: decode kernels for M ≤ 16, tiled kernels above; on SM90 also wgmma kernels) |
//! | `gemm.l2_warm` | [`l2_warm`] | reads a weight's bytes through L2 on a second stream beside a latency-bound kernel, so the GEMM after it finds them there |
//! | `gemm.block_fp8_linear`, `gemm.mxfp8_linear`, `gemm.tensor_fp8_linear` | [`blockscaled::linear`] | the fixed FP8 linears: prepared-only entry points on `gemm.blockscaled`'s kernels |

pub mod bf16_gemv;
pub mod blockscaled;
pub mod l2_warm;

// Fatbins, content hashes and the ptxas resource manifest of `kernels/*.cu`, from `b12x-build`.
include!(concat!(env!("OUT_DIR"), "/b12x_kernels.rs"));

/// The embedded `kernels/bf16_gemv.cu`, loaded once per device.
pub static BF16_GEMV_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-gemm/bf16_gemv", fatbin: BF16_GEMV_FATBIN, hash: BF16_GEMV_HASH };

/// The embedded `kernels/l2_warm.cu` (`gemm.l2_warm`), loaded once per device.
pub static L2_WARM_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-gemm/l2_warm", fatbin: L2_WARM_FATBIN, hash: L2_WARM_HASH };

/// The embedded `kernels/bsmma_probe.cu`: one SM120 block-scaled MMA per launch (tests only:
/// `tests/gpu_bsmma_probe.rs`; the portable product on other GPUs), loaded once per device.
pub static BSMMA_PROBE_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-gemm/bsmma_probe", fatbin: BSMMA_PROBE_FATBIN, hash: BSMMA_PROBE_HASH };

/// The embedded `kernels/blockscaled_gemv.cu` (`gemm.blockscaled`'s W4A16 / W8A16 decode path), loaded
/// once per device.
pub static BLOCKSCALED_GEMV_MODULE: b12x_core::KernelModule = b12x_core::KernelModule {
    name: "b12x-gemm/blockscaled_gemv",
    fatbin: BLOCKSCALED_GEMV_FATBIN,
    hash: BLOCKSCALED_GEMV_HASH,
};
