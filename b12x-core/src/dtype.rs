//! Element types of device tensors.

use std::fmt;

/// The element type of a device tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DType {
    BF16,
    F16,
    F32,
    I32,
    U8,
    /// FP8 E4M3 (OCP, "fn" variant: no infinities).
    E4M3,
}

impl DType {
    /// Bytes per element.
    pub const fn size_bytes(self) -> usize {
        match self {
            DType::BF16 | DType::F16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::U8 | DType::E4M3 => 1,
        }
    }

    /// Short lowercase name used in kernel symbols and cache keys (`bf16`, `f32`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::U8 => "u8",
            DType::E4M3 => "e4m3",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Host element types that map to a [`DType`].
///
/// # Safety
/// `size_of::<Self>()` must equal `Self::DTYPE.size_bytes()` and the bit layouts must agree:
/// views built from a `CudaSlice<Self>` trust it to size their bounds.
pub unsafe trait Element: cudarc::driver::DeviceRepr + Copy + Default + 'static {
    const DTYPE: DType;
}
unsafe impl Element for half::bf16 {
    const DTYPE: DType = DType::BF16;
}
unsafe impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
}
unsafe impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
unsafe impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
unsafe impl Element for u8 {
    const DTYPE: DType = DType::U8;
}
