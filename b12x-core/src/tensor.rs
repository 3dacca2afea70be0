//! Device tensor views: pointer, shape, strides (in elements) and dtype, borrowed for `'a`.
//!
//! Views come from cudarc `CudaSlice`/`CudaView` (safe) or from raw device pointers (unsafe),
//! so an engine on cudarc (candle, mistral.rs) can run ops on its own buffers.
//!
//! A view made from a cudarc buffer can never reach outside that buffer: any shape or
//! strides that would (including after [`TensorRef::with_strides`]) are an error.
//!
//! **Ordering is the caller's.** A view carries no event: an op launches on the stream given to
//! its `run`, so work that produces an input must be ordered before that launch (same stream,
//! or an event the stream waits on), and every buffer must outlive the launch. A [`Device`]
//! disables cudarc's per-buffer event tracking on its context (graph capture requires it), so
//! cudarc does not insert these waits either.
//!
//! [`Device`]: crate::Device
//!
//!
//! ```no_run
//! # use b12x_core::{Device, TensorRef, TensorMut};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let x = dev.stream().alloc_zeros::<half::bf16>(4 * 4096)?;
//! let mut y = dev.stream().alloc_zeros::<half::bf16>(4 * 4096)?;
//! let xv = TensorRef::from_slice(&x, &[4, 4096])?;     // row-major, contiguous
//! let yv = TensorMut::from_slice(&mut y, &[4, 4096])?;
//! assert_eq!(xv.shape(), &[4, 4096]);
//! # let _ = yv; Ok(()) }
//! ```

use crate::{DType, Element, Error, Result};
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice};
use std::marker::PhantomData;

/// Maximum tensor rank a view carries.
pub const MAX_RANK: usize = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    ptr: u64,
    rank: usize,
    shape: [usize; MAX_RANK],
    strides: [isize; MAX_RANK],
    dtype: DType,
    /// Elements addressable from `ptr`: the buffer's length for views of cudarc buffers,
    /// `None` (trusted) for raw views. Every view stays inside it, whatever its strides.
    extent: Option<usize>,
}

impl Layout {
    fn new(ptr: u64, shape: &[usize], strides: &[isize], dtype: DType, extent: Option<usize>) -> Result<Self> {
        let bad = |reason: String| Error::Stride { tensor: "view", strides: strides.to_vec(), reason };
        if shape.len() > MAX_RANK || strides.len() != shape.len() {
            return Err(bad(format!("rank {} (max {MAX_RANK}) with {} strides", shape.len(), strides.len())));
        }
        if strides.iter().any(|&s| s < 0) {
            return Err(bad("negative strides are not supported".into()));
        }
        // Elements spanned: 1 + sum((n_i - 1) * s_i), 0 for an empty view; checked, so no
        // shape or stride can wrap around into a small (passing) number.
        let numel =
            shape.iter().try_fold(1usize, |a, &n| a.checked_mul(n)).ok_or_else(|| bad("shape overflows".into()))?;
        let span = if numel == 0 {
            Some(0)
        } else {
            shape
                .iter()
                .zip(strides)
                .try_fold(1usize, |a, (&n, &s)| (n - 1).checked_mul(s as usize).and_then(|x| a.checked_add(x)))
        };
        let span = span.ok_or_else(|| bad("the view's extent overflows".into()))?;
        if span.checked_mul(dtype.size_bytes()).is_none() {
            return Err(bad("the view's extent overflows".into()));
        }
        if let Some(len) = extent {
            if span > len {
                return Err(Error::Shape {
                    tensor: "view",
                    expected: format!("a view within the buffer's {len} elements (this one spans {span})"),
                    actual: shape.to_vec(),
                });
            }
        }
        let mut l = Layout { ptr, rank: shape.len(), shape: [0; MAX_RANK], strides: [0; MAX_RANK], dtype, extent };
        l.shape[..shape.len()].copy_from_slice(shape);
        l.strides[..shape.len()].copy_from_slice(strides);
        Ok(l)
    }
    fn contiguous(ptr: u64, shape: &[usize], dtype: DType, len: usize) -> Result<Self> {
        Self::new(ptr, shape, &contiguous_strides(shape), dtype, Some(len))
    }
}

/// Row-major strides (in elements) of a contiguous tensor of `shape` (saturating: a shape whose
/// size overflows is rejected when a view is made from it).
pub fn contiguous_strides(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![1isize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(shape[i + 1].min(isize::MAX as usize) as isize);
    }
    s
}

macro_rules! view_common {
    ($t:ident) => {
        impl<'a> $t<'a> {
            /// Device address of element 0.
            pub fn ptr(&self) -> u64 {
                self.l.ptr
            }
            pub fn shape(&self) -> &[usize] {
                &self.l.shape[..self.l.rank]
            }
            /// Strides in elements.
            pub fn strides(&self) -> &[isize] {
                &self.l.strides[..self.l.rank]
            }
            pub fn dtype(&self) -> DType {
                self.l.dtype
            }
            pub fn rank(&self) -> usize {
                self.l.rank
            }
            pub fn numel(&self) -> usize {
                self.shape().iter().product()
            }
            /// Returns the same view with other strides (elements), e.g. a padded row stride.
            /// The new view must still lie inside the buffer the view was made from.
            pub fn with_strides(self, strides: &[isize]) -> Result<Self> {
                let l = Layout::new(self.l.ptr, self.shape(), strides, self.l.dtype, self.l.extent)?;
                Ok(Self { l, _p: PhantomData })
            }
            /// Checks dtype and exact shape; `name` and `dims` (e.g. "[T, D]") go into the error.
            pub fn expect(&self, name: &'static str, dims: &str, dtype: DType, shape: &[usize]) -> Result<()> {
                if self.shape() != shape {
                    return Err(Error::Shape {
                        tensor: name,
                        expected: format!("{dims} = {shape:?}"),
                        actual: self.shape().to_vec(),
                    });
                }
                if self.dtype() != dtype {
                    return Err(Error::DType { tensor: name, expected: dtype, actual: self.dtype() });
                }
                Ok(())
            }
            /// For a rank-2 view with unit inner stride: the row stride in elements.
            /// Rows may be padded (stride > cols), never overlapping or negative.
            pub fn row_stride(&self, name: &'static str) -> Result<usize> {
                let s = self.strides();
                if self.rank() != 2 || s[1] != 1 || s[0] < self.shape()[1] as isize {
                    return Err(Error::Stride {
                        tensor: name,
                        strides: s.to_vec(),
                        reason: "expected rank 2 with unit inner stride and row stride >= columns".into(),
                    });
                }
                Ok(s[0] as usize)
            }
            /// The byte range `[start, end)` the view's elements lie in (empty for no elements).
            pub fn byte_span(&self) -> (u64, u64) {
                let es = self.dtype().size_bytes() as u64;
                if self.numel() == 0 {
                    return (self.ptr(), self.ptr());
                }
                let last: u64 = self.shape().iter().zip(self.strides()).map(|(&n, &s)| (n as u64 - 1) * s as u64).sum();
                (self.ptr(), self.ptr() + (last + 1) * es)
            }
            /// True when the pointer and every non-unit stride are multiples of `bytes`.
            pub fn is_aligned(&self, bytes: usize) -> bool {
                let es = self.dtype().size_bytes() as isize;
                self.ptr() % bytes as u64 == 0
                    && self
                        .strides()
                        .iter()
                        .zip(self.shape())
                        .all(|(&s, &n)| n <= 1 || s == 1 || (s * es) % bytes as isize == 0)
            }
            /// Splits the last dimension (which must have unit stride) into consecutive groups of
            /// `widths` elements (their sum must be its size): e.g. a fused QKV projection's
            /// `[T, (H + 2·Hkv)·D]` output into its Q, K and V columns. A view whose elements
            /// overlap (some stride shorter than the dimensions inside it) is an error, so the
            /// parts are disjoint and a writable view splits into writable parts.
            pub fn split_last(self, widths: &[usize]) -> Result<Vec<Self>> {
                let r = self.rank();
                let total = if r == 0 { 0 } else { self.shape()[r - 1] };
                if r == 0 || (total > 1 && self.strides()[r - 1] != 1) || widths.iter().sum::<usize>() != total {
                    return Err(Error::Shape {
                        tensor: "view",
                        expected: format!(
                            "a last dimension of unit stride and size {} (the widths {widths:?})",
                            widths.iter().sum::<usize>()
                        ),
                        actual: self.shape().to_vec(),
                    });
                }
                if !non_overlapping(self.shape(), self.strides()) {
                    return Err(Error::Stride {
                        tensor: "view",
                        strides: self.strides().to_vec(),
                        reason:
                            "elements overlap (a stride shorter than the dimensions inside it): its parts would too"
                                .into(),
                    });
                }
                let es = self.dtype().size_bytes() as u64;
                let mut off = 0usize;
                let mut parts = Vec::with_capacity(widths.len());
                for &w in widths {
                    let mut shape = self.shape().to_vec();
                    shape[r - 1] = w;
                    let mut strides = self.strides().to_vec();
                    strides[r - 1] = 1;
                    let extent = self.l.extent.map(|e| e.saturating_sub(off));
                    let l = Layout::new(self.l.ptr + off as u64 * es, &shape, &strides, self.l.dtype, extent)?;
                    parts.push(Self { l, _p: PhantomData });
                    off += w;
                }
                Ok(parts)
            }
            /// Splits the last dimension (unit stride) into `dims` (their product must be its
            /// size), row-major: e.g. `[T, H·D]` into `[T, H, D]`.
            pub fn unflatten_last(self, dims: &[usize]) -> Result<Self> {
                let r = self.rank();
                let total = if r == 0 { 0 } else { self.shape()[r - 1] };
                if r == 0 || (total > 1 && self.strides()[r - 1] != 1) || dims.iter().product::<usize>() != total {
                    return Err(Error::Shape {
                        tensor: "view",
                        expected: format!(
                            "a last dimension of unit stride and size {} ({dims:?})",
                            dims.iter().product::<usize>()
                        ),
                        actual: self.shape().to_vec(),
                    });
                }
                let mut shape = self.shape()[..r - 1].to_vec();
                shape.extend_from_slice(dims);
                let mut strides = self.strides()[..r - 1].to_vec();
                strides.extend(contiguous_strides(dims));
                let l = Layout::new(self.l.ptr, &shape, &strides, self.l.dtype, self.l.extent)?;
                Ok(Self { l, _p: PhantomData })
            }
            /// Errors with [`Error::Stride`] unless the view is contiguous (row-major, no
            /// padding: the strides of [`contiguous_strides`]).
            pub fn require_contiguous(&self, name: &'static str) -> Result<()> {
                if self.strides() == contiguous_strides(self.shape()).as_slice() {
                    return Ok(());
                }
                Err(Error::Stride {
                    tensor: name,
                    strides: self.strides().to_vec(),
                    reason: "must be contiguous".into(),
                })
            }
            /// Errors with [`Error::Misaligned`] unless [`Self::is_aligned`].
            pub fn require_aligned(&self, name: &'static str, bytes: usize) -> Result<()> {
                if self.is_aligned(bytes) {
                    return Ok(());
                }
                let rs = if self.rank() >= 2 { self.strides()[0] as usize * self.dtype().size_bytes() } else { 0 };
                Err(Error::Misaligned { tensor: name, align: bytes, ptr: self.ptr(), row_stride_bytes: rs })
            }
        }
    };
}

/// A read-only device tensor view.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    l: Layout,
    _p: PhantomData<&'a ()>,
}

/// A writable device tensor view.
#[derive(Debug)]
pub struct TensorMut<'a> {
    l: Layout,
    _p: PhantomData<&'a mut ()>,
}

view_common!(TensorRef);
view_common!(TensorMut);

impl<'a> TensorRef<'a> {
    /// Contiguous row-major view of a cudarc slice.
    pub fn from_slice<T: Element>(s: &'a CudaSlice<T>, shape: &[usize]) -> Result<Self> {
        let (ptr, _sync) = s.device_ptr(s.stream());
        Ok(Self { l: Layout::contiguous(ptr, shape, T::DTYPE, s.len())?, _p: PhantomData })
    }
    /// Contiguous row-major view of a cudarc view.
    pub fn from_view<T: Element>(s: &'a CudaView<'_, T>, shape: &[usize]) -> Result<Self> {
        let (ptr, _sync) = s.device_ptr(s.stream());
        Ok(Self { l: Layout::contiguous(ptr, shape, T::DTYPE, s.len())?, _p: PhantomData })
    }
    /// View of raw device memory.
    ///
    /// # Safety
    /// `ptr` must address device memory of this context, valid for every element the shape and
    /// strides reach, for as long as the view (and any launch using it) lives.
    pub unsafe fn from_raw(ptr: u64, shape: &[usize], strides: &[isize], dtype: DType) -> Result<Self> {
        Ok(Self { l: Layout::new(ptr, shape, strides, dtype, None)?, _p: PhantomData })
    }
}

impl<'a> TensorMut<'a> {
    pub fn from_slice<T: Element>(s: &'a mut CudaSlice<T>, shape: &[usize]) -> Result<Self> {
        let len = s.len();
        let stream = s.stream().clone();
        let (ptr, _sync) = s.device_ptr_mut(&stream);
        Ok(Self { l: Layout::contiguous(ptr, shape, T::DTYPE, len)?, _p: PhantomData })
    }
    pub fn from_view<T: Element>(s: &'a mut CudaViewMut<'_, T>, shape: &[usize]) -> Result<Self> {
        let len = s.len();
        let stream = s.stream().clone();
        let (ptr, _sync) = s.device_ptr_mut(&stream);
        Ok(Self { l: Layout::contiguous(ptr, shape, T::DTYPE, len)?, _p: PhantomData })
    }
    /// Writable view of raw device memory.
    ///
    /// # Safety
    /// As [`TensorRef::from_raw`], and nothing else may access the memory while the view lives.
    pub unsafe fn from_raw(ptr: u64, shape: &[usize], strides: &[isize], dtype: DType) -> Result<Self> {
        Ok(Self { l: Layout::new(ptr, shape, strides, dtype, None)?, _p: PhantomData })
    }
    /// Reborrows as a read-only view.
    pub fn as_ref(&self) -> TensorRef<'_> {
        TensorRef { l: self.l, _p: PhantomData }
    }
    /// Reborrows mutably for a shorter lifetime.
    pub fn reborrow(&mut self) -> TensorMut<'_> {
        TensorMut { l: self.l, _p: PhantomData }
    }
}

/// Errors with [`Error::Aliasing`] when the byte ranges of `a` and `b` overlap. Ops call it for
/// every output against every input (and output) it must not share memory with.
pub fn require_disjoint(a: (&'static str, (u64, u64)), b: (&'static str, (u64, u64))) -> Result<()> {
    let ((na, (a0, a1)), (nb, (b0, b1))) = (a, b);
    if a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1 {
        let reason = format!("[0x{a0:x}, 0x{a1:x}) and [0x{b0:x}, 0x{b1:x})");
        return Err(Error::Aliasing { a: na, b: nb, reason });
    }
    Ok(())
}

/// Whether no two elements of a view share an address: ordered by stride, each dimension's
/// stride covers everything the smaller ones span (a sufficient test; dimensions of size ≤ 1
/// never overlap).
fn non_overlapping(shape: &[usize], strides: &[isize]) -> bool {
    let mut dims: Vec<(usize, usize)> =
        shape.iter().zip(strides).filter(|(&n, _)| n > 1).map(|(&n, &s)| (s.max(0) as usize, n)).collect();
    dims.sort_unstable();
    let mut extent = 1usize;
    for (s, n) in dims {
        if s < extent {
            return false;
        }
        extent = s.saturating_mul(n - 1).saturating_add(extent);
    }
    true
}

/// Like [`require_disjoint`], but exact for two row-strided views that interleave, e.g. the Q
/// and K columns of one fused QKV buffer (whose byte ranges overlap while their elements do
/// not): views of rank ≥ 2 with the same outer stride are disjoint when, modulo that stride,
/// each row's bytes of one lie outside the other's. Any other pair falls back to the byte ranges.
pub fn require_disjoint_views(a: (&'static str, &TensorRef<'_>), b: (&'static str, &TensorRef<'_>)) -> Result<()> {
    let ((na, va), (nb, vb)) = (a, b);
    let (sa, sb) = (va.byte_span(), vb.byte_span());
    if require_disjoint((na, sa), (nb, sb)).is_ok() {
        return Ok(());
    }
    let row = |v: &TensorRef<'_>| -> Option<(u64, u64)> {
        if v.rank() < 2 || v.shape()[0] < 2 {
            return None;
        }
        let es = v.dtype().size_bytes() as u64;
        let stride = v.strides()[0] as u64 * es;
        let inner: u64 = v.shape()[1..].iter().zip(&v.strides()[1..]).map(|(&n, &s)| (n as u64 - 1) * s as u64).sum();
        Some((stride, (inner + 1) * es))
    };
    if let (Some((s, wa)), Some((s2, wb))) = (row(va), row(vb)) {
        if s == s2 && wa <= s && wb <= s && va.numel() > 0 && vb.numel() > 0 {
            let d = (vb.ptr() as i128 - va.ptr() as i128).rem_euclid(s as i128) as u64;
            if d >= wa && d + wb <= s {
                return Ok(());
            }
        }
    }
    require_disjoint((na, sa), (nb, sb))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_and_alignment() {
        assert_eq!(contiguous_strides(&[3, 4, 5]), vec![20, 5, 1]);
        let v = unsafe { TensorRef::from_raw(0x1000, &[4, 8], &[8, 1], DType::BF16) }.unwrap();
        assert!(v.is_aligned(16));
        assert_eq!(v.row_stride("x").unwrap(), 8);
        let odd = v.with_strides(&[9, 1]).unwrap();
        assert!(!odd.is_aligned(16));
        assert!(matches!(odd.require_aligned("x", 16), Err(Error::Misaligned { row_stride_bytes: 18, .. })));
        let bad = v.with_strides(&[4, 1]).unwrap();
        assert!(matches!(bad.row_stride("x"), Err(Error::Stride { .. })));
        assert!(matches!(v.with_strides(&[-8, 1]), Err(Error::Stride { .. })));
        assert!(matches!(v.with_strides(&[isize::MAX, 1]), Err(Error::Stride { .. })));
        assert!(matches!(v.expect("x", "[T, D]", DType::BF16, &[4, 9]), Err(Error::Shape { .. })));
        assert!(matches!(v.expect("x", "[T, D]", DType::F32, &[4, 8]), Err(Error::DType { .. })));
        let msg = v.expect("x", "[T, D]", DType::BF16, &[4, 9]).unwrap_err().to_string();
        assert_eq!(msg, "`x` must have shape [T, D] = [4, 9], got [4, 8]");
    }

    #[test]
    fn overlap_is_detected_on_byte_ranges() {
        let a = unsafe { TensorRef::from_raw(0x1000, &[2, 8], &[16, 1], DType::BF16) }.unwrap();
        assert_eq!(a.byte_span(), (0x1000, 0x1000 + 2 * (16 + 7 + 1)));
        let b = unsafe { TensorRef::from_raw(0x1000 + 48, &[1, 8], &[8, 1], DType::BF16) }.unwrap();
        assert!(require_disjoint(("a", a.byte_span()), ("b", b.byte_span())).is_ok());
        let c = unsafe { TensorRef::from_raw(0x1000 + 46, &[1, 8], &[8, 1], DType::BF16) }.unwrap();
        assert!(matches!(require_disjoint(("a", a.byte_span()), ("c", c.byte_span())), Err(Error::Aliasing { .. })));
        let empty = unsafe { TensorRef::from_raw(0x1000, &[0, 8], &[8, 1], DType::BF16) }.unwrap();
        assert!(require_disjoint(("a", a.byte_span()), ("e", empty.byte_span())).is_ok());
    }

    #[test]
    fn split_and_unflatten_make_disjoint_interleaved_views() {
        // A fused [3, 4 + 2 + 2] buffer of 24 elements: Q (4 wide), K and V (2 wide each).
        let l = Layout::contiguous(0x1000, &[3, 8], DType::BF16, 24).unwrap();
        let v = TensorMut { l, _p: PhantomData };
        let mut parts = v.split_last(&[4, 2, 2]).unwrap();
        assert_eq!(parts.len(), 3);
        let vv = parts.pop().unwrap();
        let k = parts.pop().unwrap();
        let q = parts.pop().unwrap().unflatten_last(&[2, 2]).unwrap();
        assert_eq!(q.shape(), &[3, 2, 2]);
        assert_eq!(q.strides(), &[8, 2, 1]);
        assert_eq!((k.ptr(), k.shape(), k.strides()), (0x1000 + 8, &[3usize, 2][..], &[8isize, 1][..]));
        assert_eq!(vv.ptr(), 0x1000 + 12);
        assert!(require_disjoint(("q", q.byte_span()), ("k", k.byte_span())).is_err());
        assert!(require_disjoint_views(("q", &q.as_ref()), ("k", &k.as_ref())).is_ok());
        assert!(require_disjoint_views(("k", &k.as_ref()), ("v", &vv.as_ref())).is_ok());
        // Overlapping columns are caught, in either order.
        let q2 = unsafe { TensorRef::from_raw(0x1000 + 6, &[3, 2], &[8, 1], DType::BF16) }.unwrap();
        assert!(matches!(require_disjoint_views(("q", &q.as_ref()), ("x", &q2)), Err(Error::Aliasing { .. })));
        assert!(matches!(require_disjoint_views(("x", &q2), ("q", &q.as_ref())), Err(Error::Aliasing { .. })));
        // Widths that do not add up, or a strided last dimension, are errors.
        let w = TensorRef { l, _p: PhantomData };
        assert!(matches!(w.split_last(&[4, 2]), Err(Error::Shape { .. })));
        assert!(matches!(w.unflatten_last(&[3, 3]), Err(Error::Shape { .. })));
        let t = w.with_strides(&[1, 3]).unwrap();
        assert!(matches!(t.split_last(&[8]), Err(Error::Shape { .. })));
        // Rows that overlap (stride 4 < 8 columns) cannot be split into writable parts.
        let overlapping = TensorMut { l, _p: PhantomData }.with_strides(&[4, 1]).unwrap();
        assert!(matches!(overlapping.split_last(&[4, 4]), Err(Error::Stride { .. })));
        assert!(non_overlapping(&[3, 2, 4], &[8, 4, 1]) && !non_overlapping(&[3, 2, 4], &[8, 3, 1]));
        assert!(non_overlapping(&[1, 8], &[0, 1]) && non_overlapping(&[5, 1], &[1, 0]));
    }

    #[test]
    fn views_of_buffers_stay_inside_them() {
        // A buffer of 16 elements: a [4, 4] view fits, any wider stride does not.
        let l = Layout::contiguous(0x1000, &[4, 4], DType::BF16, 16).unwrap();
        let v = TensorRef { l, _p: PhantomData };
        assert!(v.with_strides(&[4, 1]).is_ok());
        assert!(matches!(v.with_strides(&[5, 1]), Err(Error::Shape { .. })));
        assert!(matches!(v.with_strides(&[1 << 40, 1]), Err(Error::Shape { .. })));
        assert!(matches!(Layout::contiguous(0, &[4, 5], DType::BF16, 16), Err(Error::Shape { .. })));
        assert!(matches!(Layout::contiguous(0, &[usize::MAX, 4], DType::BF16, 16), Err(Error::Stride { .. })));
        // Empty views span nothing.
        assert!(Layout::contiguous(0, &[0, 4096], DType::BF16, 0).is_ok());
    }
}
