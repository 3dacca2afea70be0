//! `b12x-moe`: mixture-of-experts ops.
//!
//! | op | module | what |
//! |---|---|---|
//! | `moe.route_topk` | [`route_topk`] | router scores (softmax, sigmoid, sqrtsoftplus), top-k selection with an optional selection-only bias or a hash table, renormalized and scaled weights |
//! | `moe.fused_moe` | [`fused_moe`] | `y[t] = Σ_k w_tk · FC2_e(act(FC1_e(x_t)))` over FP4 experts (W4A16, W4A8 MX, NVFP4), rank-local (no shared expert, no tensor-parallel reduction) |
//!
//! **Status: CPU oracles only.** Each module defines the op's problem types (validated, with the
//! model presets the GPU suites will use) and its `reference` module, the executable spec: the
//! math, the rounding points and the masking of untrusted ids, tested on the CPU
//! (`tests/route_topk.rs`, `tests/fused_moe.rs`). The kernels, their plans (`plan`/`run`
//! through `b12x-core`'s lifecycle) and the GPU suites that compare them with these oracles are
//! not written yet (issue 7); nothing here launches anything.

pub mod fused_moe;
pub mod route_topk;

// Fatbins, content hashes and the ptxas resource manifest of `kernels/*.cu`, from `b12x-build`.
include!(concat!(env!("OUT_DIR"), "/b12x_kernels.rs"));

/// The embedded `kernels/fused_moe.cu`, loaded once per device.
pub static FUSED_MOE_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-moe/fused_moe", fatbin: FUSED_MOE_FATBIN, hash: FUSED_MOE_HASH };

/// The embedded `kernels/route_topk.cu`, loaded once per device.
pub static ROUTE_TOPK_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-moe/route_topk", fatbin: ROUTE_TOPK_FATBIN, hash: ROUTE_TOPK_HASH };
