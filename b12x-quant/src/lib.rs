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
//! GPU quantizers (ops with plan / prepare / run, outputs caller-owned):
//!
//! | op | module | what |
//! |---|---|---|
//! | `quantization.mxfp8` | [`mx`] | BF16/FP16 `[M, K]` → E4M3 + UE8M0 scales, row-major and/or swizzled |
//! | `quantization.mxfp4` | [`mx`] | BF16/FP16 `[M, K]` → E2M1 pairs + UE8M0 scales (same layouts) |
//! | `quantization.fp8_block` | [`fp8_block`] | BF16/FP16 `[M, K]` → E4M3 + f32 or UE8M0 scale per 1×G (G = 32, 64, 128) |
//! | `quantization.swizzle_scales` | [`swizzle`] | block scales row-major ⇄ swizzled 128×4 on the GPU |
//! | `quantization.nvfp4` | [`nvfp4`] | BF16/FP16 `[M, K]` → E2M1 pairs + UE4M3 scales per 16 + f32 encode scale (given or computed) |
//!
//! ```
//! use b12x_quant::codec::{e4m3_decode, e4m3_encode};
//! assert_eq!(e4m3_encode(1.0), 0x38);
//! assert_eq!(e4m3_encode(1000.0), 0x7E); // saturates to 448
//! assert_eq!(e4m3_decode(0x7E), 448.0);
//! ```

pub mod block;
pub mod codec;
pub mod flat;
pub mod fp8_block;
pub mod layout;
pub mod mx;
pub mod nvfp4;
pub mod swizzle;

// Fatbins, content hashes and the ptxas resource manifest of `kernels/*.cu`, from `b12x-build`.
include!(concat!(env!("OUT_DIR"), "/b12x_kernels.rs"));

/// The embedded `kernels/mx.cu` (MXFP8 and MXFP4 quantizers), loaded once per device.
pub static MX_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-quant/mx", fatbin: MX_FATBIN, hash: MX_HASH };

/// The embedded `kernels/fp8_block.cu`, loaded once per device.
pub static FP8_BLOCK_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-quant/fp8_block", fatbin: FP8_BLOCK_FATBIN, hash: FP8_BLOCK_HASH };

/// The embedded `kernels/swizzle.cu`, loaded once per device.
pub static SWIZZLE_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-quant/swizzle", fatbin: SWIZZLE_FATBIN, hash: SWIZZLE_HASH };

/// The embedded `kernels/nvfp4.cu` (amax pass and NVFP4 quantizer), loaded once per device.
pub static NVFP4_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-quant/nvfp4", fatbin: NVFP4_FATBIN, hash: NVFP4_HASH };
