//! TMA descriptors: the `CUtensorMap` a kernel passes to `cp.async.bulk.tensor` (see
//! `b12x/mma.cuh`: `TmaDescriptor`, `tma_load_2d`, `swizzle128_offset`).
//!
//! Encoding is a host-only driver call (no allocation, no synchronization, no device work), so
//! ops encode their descriptors inside `run` from the caller's pointers and pass them by value
//! in the kernel's `__grid_constant__` parameter struct; a captured graph keeps the values.

use crate::{DType, Error, Result};
use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion,
    CUtensorMapSwizzle,
};

/// The opaque 128-byte descriptor, laid out as the kernels' `TmaDescriptor`.
pub type TmaDescriptor = [u64; 16];

/// The shared-memory swizzle of a box: 16-byte chunk `c` of box row `r` lands at chunk
/// `c ^ (r % 8)` (128-byte rows) or `c ^ ((r / 2) % 4)` (64-byte rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmaSwizzle {
    /// 64-byte box rows.
    B64,
    /// 128-byte box rows (wgmma's K-major layout).
    B128,
}

impl TmaSwizzle {
    /// The box row's bytes.
    pub fn row_bytes(self) -> usize {
        match self {
            TmaSwizzle::B64 => 64,
            TmaSwizzle::B128 => 128,
        }
    }
}

/// A row-major 2-D tensor read in boxes of `box_cols × box_rows` elements with the 128-byte
/// swizzle (each box row is one 128-byte line, so `box_cols · size = 128`; [`Tma2d::encode_with`]
/// takes the 64-byte one); elements outside `rows × cols` read as zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tma2d {
    /// Device address of element (0, 0): 16-byte aligned.
    pub base: u64,
    pub dtype: DType,
    pub rows: usize,
    pub cols: usize,
    /// Bytes between rows: a multiple of 16.
    pub row_stride_bytes: usize,
    pub box_rows: u32,
    pub box_cols: u32,
}

impl Tma2d {
    /// Encodes the descriptor with the 128-byte swizzle. `tensor` names the tensor in errors.
    pub fn encode(&self, tensor: &'static str) -> Result<TmaDescriptor> {
        self.encode_with(tensor, TmaSwizzle::B128)
    }

    /// Encodes the descriptor with `swizzle`: each box row is `swizzle.row_bytes()` bytes.
    pub fn encode_with(&self, tensor: &'static str, swizzle: TmaSwizzle) -> Result<TmaDescriptor> {
        let data_type = match self.dtype {
            DType::BF16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            DType::F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            DType::F32 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            other => {
                let reason = format!("TMA descriptors of {other} are not supported");
                return Err(Error::InvalidQuery { op: "tma", field: "dtype", reason });
            }
        };
        if self.base % 16 != 0 || self.row_stride_bytes % 16 != 0 {
            return Err(Error::Misaligned {
                tensor,
                align: 16,
                ptr: self.base,
                row_stride_bytes: self.row_stride_bytes,
            });
        }
        let bad = |reason: String| Err(Error::InvalidQuery { op: "tma", field: "box", reason });
        let line = swizzle.row_bytes();
        if self.box_cols as usize * self.dtype.size_bytes() != line || !(1..=256).contains(&self.box_rows) {
            return bad(format!(
                "a {line}-byte swizzled box needs {line}-byte rows and 1..=256 rows, got {}×{}",
                self.box_cols, self.box_rows
            ));
        }
        let limit = 1usize << 32;
        if self.rows == 0
            || self.cols == 0
            || self.rows >= limit
            || self.cols >= limit
            || self.row_stride_bytes >= 1 << 40
        {
            let strides = vec![self.row_stride_bytes as isize, self.dtype.size_bytes() as isize];
            let reason = format!(
                "{}×{} with a {}-byte row stride is outside the TMA's limits",
                self.rows, self.cols, self.row_stride_bytes
            );
            return Err(Error::Stride { tensor, strides, reason });
        }
        let dims = [self.cols as u64, self.rows as u64];
        let strides = [self.row_stride_bytes as u64];
        let boxes = [self.box_cols, self.box_rows];
        let element_strides = [1u32, 1];
        let mut map = sys::CUtensorMap { opaque: [0; 16] };
        // SAFETY: every pointer argument points at a live local array of the rank the call
        // reads (2 dims, 1 stride, 2 box and element sizes); the descriptor is written in place.
        let rc = unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut map,
                data_type,
                2,
                self.base as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                element_strides.as_ptr(),
                CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                match swizzle {
                    TmaSwizzle::B64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
                    TmaSwizzle::B128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
                },
                CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
                CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        rc.result()?;
        Ok(map.opaque)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid bf16 W view: 4096 × 7168, 64-k × 64-row boxes. The checks below fail before any
    /// driver call, so they run without CUDA.
    fn w() -> Tma2d {
        Tma2d {
            base: 0x7f00_0000_0000,
            dtype: DType::BF16,
            rows: 4096,
            cols: 7168,
            row_stride_bytes: 7168 * 2,
            box_rows: 64,
            box_cols: 64,
        }
    }

    #[test]
    fn misaligned_base_or_stride_is_a_typed_error() {
        let e = Tma2d { base: w().base + 8, ..w() }.encode("w");
        assert!(matches!(e, Err(Error::Misaligned { tensor: "w", align: 16, .. })), "{e:?}");
        let e = Tma2d { row_stride_bytes: 7170 * 2, ..w() }.encode("w");
        assert!(matches!(e, Err(Error::Misaligned { tensor: "w", row_stride_bytes: 14340, .. })), "{e:?}");
    }

    #[test]
    fn boxes_must_be_128_byte_rows_of_at_most_256() {
        for (box_cols, box_rows) in [(32, 64), (128, 64), (64, 0), (64, 257)] {
            let e = Tma2d { box_cols, box_rows, ..w() }.encode("w");
            assert!(
                matches!(e, Err(Error::InvalidQuery { op: "tma", field: "box", .. })),
                "{box_cols}×{box_rows}: {e:?}"
            );
        }
        // f32 rows of 32 elements are 128 bytes too, so the box check passes and the next one
        // (the empty tensor) fires.
        let e = Tma2d { dtype: DType::F32, box_cols: 32, rows: 0, ..w() }.encode("x");
        assert!(matches!(e, Err(Error::Stride { tensor: "x", .. })), "{e:?}");
    }

    #[test]
    fn a_64_byte_swizzle_takes_64_byte_box_rows() {
        // 32 bf16 = 64 bytes: right for B64, wrong for B128 (and 64 bf16 the other way round).
        let e = Tma2d { box_cols: 64, ..w() }.encode_with("w", TmaSwizzle::B64);
        assert!(matches!(e, Err(Error::InvalidQuery { op: "tma", field: "box", .. })), "{e:?}");
        let e = Tma2d { box_cols: 32, ..w() }.encode("w");
        assert!(matches!(e, Err(Error::InvalidQuery { op: "tma", field: "box", .. })), "{e:?}");
        // The box passes for B64; the empty tensor is then the error (no driver call).
        let e = Tma2d { box_cols: 32, box_rows: 256, rows: 0, ..w() }.encode_with("w", TmaSwizzle::B64);
        assert!(matches!(e, Err(Error::Stride { tensor: "w", .. })), "{e:?}");
    }

    #[test]
    fn empty_or_oversized_tensors_are_typed_errors() {
        for (rows, cols) in [(0, 7168), (4096, 0), (1 << 32, 64)] {
            let e = Tma2d { rows, cols, ..w() }.encode("w");
            assert!(matches!(e, Err(Error::Stride { tensor: "w", .. })), "{rows}×{cols}: {e:?}");
        }
        let e = Tma2d { row_stride_bytes: 1 << 40, ..w() }.encode("w");
        assert!(matches!(e, Err(Error::Stride { tensor: "w", .. })), "{e:?}");
    }

    #[test]
    fn dtypes_without_a_descriptor_type_are_rejected() {
        let e = Tma2d { dtype: DType::E4M3, box_cols: 128, ..w() }.encode("w");
        assert!(matches!(e, Err(Error::InvalidQuery { op: "tma", field: "dtype", .. })), "{e:?}");
    }
}
