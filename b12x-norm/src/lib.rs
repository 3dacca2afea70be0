//! `b12x-norm`: normalization ops for LLM inference.
//!
//! | op | module | what |
//! |---|---|---|
//! | `norm.rmsnorm` | [`rmsnorm`] | `y = x · rsqrt(mean(x²) + eps) · w`, optionally fused with a residual add |
//! | `norm.rmsnorm_quant` | [`rmsnorm_quant`] | the same with `y` quantized in the kernel: MXFP8, block FP8 (1×128) or NVFP4 |
//! | `activation.silu_and_mul` | [`silu_and_mul`] | `y = silu(g) · u` over `x = [g, u]` (optional swiglu limit), bf16/f16 or quantized as `norm.rmsnorm_quant` |
//!
//! `activation.silu_and_mul` lives here, not in a crate of its own: it is `norm.rmsnorm`'s row
//! kernel without the reduction, and its quantized outputs reuse `norm.rmsnorm_quant`'s
//! quantizing row epilogue (`quantize_row`, `kernels/quant_row.cuh`) and formats unchanged.

pub mod rmsnorm;
pub mod rmsnorm_quant;
pub mod silu_and_mul;

// Fatbins, content hashes and the ptxas resource manifest of `kernels/*.cu`, from `b12x-build`.
include!(concat!(env!("OUT_DIR"), "/b12x_kernels.rs"));

/// The embedded `kernels/rmsnorm.cu`, loaded once per device.
pub static RMSNORM_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-norm/rmsnorm", fatbin: RMSNORM_FATBIN, hash: RMSNORM_HASH };

/// The embedded `kernels/silu_and_mul.cu`, loaded once per device.
pub static SILU_AND_MUL_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-norm/silu_and_mul", fatbin: SILU_AND_MUL_FATBIN, hash: SILU_AND_MUL_HASH };

// The workspace README's plan → prepare → run example compiles as a doc-test of this crate
// (it uses `norm.rmsnorm`), so the front-page example cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
