//! `b12x-moe`: mixture-of-experts ops.
//!
//! | op | module | what |
//! |---|---|---|
//! | `moe.route_topk` | [`route_topk`] | router scores (softmax, sigmoid, sqrtsoftplus), top-k selection with an optional selection-only bias or a hash table, renormalized and scaled weights |
//! | `moe.fused_moe` | [`fused_moe`] | `y[t] = Σ_k w_tk · FC2_e(act(FC1_e(x_t)))` over FP4 experts (W4A16, W4A8 MX, NVFP4), rank-local (no shared expert, no tensor-parallel reduction) |
//!
//! Each module defines the op's problem types (validated, with the model presets), its
//! `reference` module — the executable spec: the math, the rounding points and the masking of
//! untrusted ids, tested on the CPU (`tests/route_topk.rs`, `tests/fused_moe.rs`) — and its
//! `plan` / `run` through `b12x-core`'s lifecycle.
//!
//! **Status: both ops validated on the H200 (sm_90a: GPU suites `tests/gpu_route_topk.rs`,
//! `tests/gpu_fused_moe.rs` and their sanitizer profiles, sessions 42–43); compiled and
//! ptxas-checked for sm_120a / sm_121a, run nowhere.** `moe.fused_moe` has a simple path
//! (row-major weights, correctness first) and, on packed experts, a decode path (device-side
//! grouping, `gemm.blockscaled`'s decode kernel body over the touched experts) and a grouped
//! path for large T (its tiled kernel per expert slot). Its decode speed is far from issue 7's
//! target (design notes and measurements in `src/fused_moe/README.md`).

pub mod fused_moe;
pub mod route_topk;

// Fatbins, content hashes and the ptxas resource manifest of `kernels/*.cu`, from `b12x-build`.
include!(concat!(env!("OUT_DIR"), "/b12x_kernels.rs"));

/// The embedded `kernels/fused_moe.cu`, loaded once per device.
pub static FUSED_MOE_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-moe/fused_moe", fatbin: FUSED_MOE_FATBIN, hash: FUSED_MOE_HASH };

/// The embedded `kernels/fused_moe_decode.cu` (the decode path), loaded once per device.
pub static FUSED_MOE_DECODE_MODULE: b12x_core::KernelModule = b12x_core::KernelModule {
    name: "b12x-moe/fused_moe_decode",
    fatbin: FUSED_MOE_DECODE_FATBIN,
    hash: FUSED_MOE_DECODE_HASH,
};

/// The embedded `kernels/route_topk.cu`, loaded once per device.
pub static ROUTE_TOPK_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-moe/route_topk", fatbin: ROUTE_TOPK_FATBIN, hash: ROUTE_TOPK_HASH };
