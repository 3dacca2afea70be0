//! `b12x-norm`: normalization ops for LLM inference.
//!
//! | op | module | what |
//! |---|---|---|
//! | `norm.rmsnorm` | [`rmsnorm`] | `y = x · rsqrt(mean(x²) + eps) · w`, optionally fused with a residual add |
//! | `norm.rmsnorm_quant` | [`rmsnorm_quant`] | the same with `y` quantized in the kernel: MXFP8 or block FP8 (1×128) |

pub mod rmsnorm;
pub mod rmsnorm_quant;

// Fatbins, content hashes and the ptxas resource manifest of `kernels/*.cu`, from `b12x-build`.
include!(concat!(env!("OUT_DIR"), "/b12x_kernels.rs"));

/// The embedded `kernels/rmsnorm.cu`, loaded once per device.
pub static RMSNORM_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-norm/rmsnorm", fatbin: RMSNORM_FATBIN, hash: RMSNORM_HASH };

// The workspace README's plan → prepare → run example compiles as a doc-test of this crate
// (it uses `norm.rmsnorm`), so the front-page example cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
