//! b12x-quant: every numeric format b12x uses, as bit-exact CPU codecs.
//!
//! These codecs are the executable spec of `spec/formats.md`: the GPU quantizers must equal
//! them bit for bit, and they equal CUDA's own host conversions (`__nv_cvt_float_to_fp8`,
//! `__nv_cvt_float_to_fp4` of the pinned toolkit) on every input (tested by compiling those
//! headers for the CPU).
//!
//! - [`codec`]: element codes — E4M3, E5M2, E2M1 (packed pairs), UE4M3, UE8M0 — and the
//!   power-of-two scale rule [`codec::ceil_pow2`].
//! - [`block`]: MXFP8, MXFP4, NVFP4, block FP8 (1×G and G×G) and per-tensor FP8, quantize and
//!   dequantize, with the special-value rules.
//! - [`layout`]: row-major ⇄ swizzled 128×4 scale layouts.
//!
//! ```
//! use b12x_quant::codec::{e4m3_decode, e4m3_encode};
//! assert_eq!(e4m3_encode(1.0), 0x38);
//! assert_eq!(e4m3_encode(1000.0), 0x7E); // saturates to 448
//! assert_eq!(e4m3_decode(0x7E), 448.0);
//! ```
#![forbid(unsafe_code)]

pub mod block;
pub mod codec;
pub mod layout;
