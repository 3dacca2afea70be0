//! Caller-owned scratch: named, 1024-byte-aligned regions of one device byte buffer.
//!
//! A plan *counts* its regions into a [`ScratchLayout`] (no memory involved); `run` *binds*
//! the layout to the caller's buffer, which checks the size and yields each region's address:
//!
//! ```
//! use b12x_core::{ScratchLayout, Scratch};
//! let mut layout = ScratchLayout::new();
//! let partials = layout.add("partials", 3000);
//! let counters = layout.add("counters", 64);
//! assert_eq!((partials, counters, layout.total_bytes()), (0, 3072, 4096));
//! let buf = unsafe { Scratch::from_raw(0x10000, 2048) };
//! let err = layout.bind(&buf).unwrap_err();
//! assert_eq!(err.to_string(), "scratch too small: region `partials` needs 3072 bytes in total, buffer has 2048");
//! ```

use crate::{Error, Result};
use cudarc::driver::{CudaSlice, DevicePtrMut};
use std::marker::PhantomData;

/// Alignment of every region's offset from the buffer's start.
pub const SCRATCH_ALIGN: usize = 1024;
/// Alignment the buffer itself must have: what every CUDA allocation guarantees (cudarc's
/// pooled allocations are 256- or 512-byte aligned), so any fresh allocation binds.
pub const SCRATCH_BASE_ALIGN: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub name: &'static str,
    pub offset: usize,
    pub bytes: usize,
}

/// Counting mode: regions with offsets. Binding mode: [`ScratchLayout::bind`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScratchLayout {
    regions: Vec<Region>,
}

impl ScratchLayout {
    pub fn new() -> Self {
        Self::default()
    }
    /// Appends a region and returns its byte offset (a multiple of [`SCRATCH_ALIGN`]).
    pub fn add(&mut self, name: &'static str, bytes: usize) -> usize {
        let offset = self.total_bytes();
        self.regions.push(Region { name, offset, bytes });
        offset
    }
    /// Bytes the caller's buffer must have.
    pub fn total_bytes(&self) -> usize {
        self.regions.last().map(|r| (r.offset + r.bytes).div_ceil(SCRATCH_ALIGN) * SCRATCH_ALIGN).unwrap_or(0)
    }
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }
    /// Binds to `scratch`: every region must fit, else [`Error::ScratchTooSmall`] naming the first
    /// region that does not.
    pub fn bind(&self, scratch: &Scratch<'_>) -> Result<BoundScratch<'_>> {
        for r in &self.regions {
            let need = (r.offset + r.bytes).div_ceil(SCRATCH_ALIGN) * SCRATCH_ALIGN;
            if need > scratch.bytes {
                return Err(Error::ScratchTooSmall { region: r.name, need, have: scratch.bytes });
            }
        }
        if scratch.ptr % SCRATCH_BASE_ALIGN as u64 != 0 && !self.regions.is_empty() {
            return Err(Error::Misaligned {
                tensor: "scratch",
                align: SCRATCH_BASE_ALIGN,
                ptr: scratch.ptr,
                row_stride_bytes: 0,
            });
        }
        Ok(BoundScratch { base: scratch.ptr, layout: self })
    }
}

/// A layout bound to a buffer: region addresses. Borrows the layout (binding allocates nothing).
#[derive(Clone, Copy, Debug)]
pub struct BoundScratch<'l> {
    base: u64,
    layout: &'l ScratchLayout,
}

impl BoundScratch<'_> {
    /// Device address of region `name` (0 if the layout has no such region).
    pub fn ptr(&self, name: &str) -> u64 {
        self.layout.regions.iter().find(|r| r.name == name).map(|r| self.base + r.offset as u64).unwrap_or(0)
    }
}

/// The caller's scratch buffer (device bytes), borrowed mutably for the launch.
#[derive(Debug)]
pub struct Scratch<'a> {
    ptr: u64,
    bytes: usize,
    _p: PhantomData<&'a mut ()>,
}

impl<'a> Scratch<'a> {
    /// No scratch (for plans whose layout is empty).
    pub fn none() -> Scratch<'static> {
        Scratch { ptr: 0, bytes: 0, _p: PhantomData }
    }
    pub fn from_slice(s: &'a mut CudaSlice<u8>) -> Self {
        let bytes = s.len();
        let stream = s.stream().clone();
        let (ptr, _g) = s.device_ptr_mut(&stream);
        Scratch { ptr, bytes, _p: PhantomData }
    }
    /// # Safety
    /// `ptr..ptr+bytes` must be device memory nothing else uses during the launches.
    pub unsafe fn from_raw(ptr: u64, bytes: usize) -> Self {
        Scratch { ptr, bytes, _p: PhantomData }
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    pub fn reborrow(&mut self) -> Scratch<'_> {
        Scratch { ptr: self.ptr, bytes: self.bytes, _p: PhantomData }
    }
}
