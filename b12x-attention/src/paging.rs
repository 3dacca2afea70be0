//! The batch description every attention op shares, the untrusted-index rules, and the error
//! word the kernels report into.
//!
//! # A batch (device tensors, values only known on the device)
//!
//! ```text
//! page_table   [B, max_pages] i32   page id of each P-token block of request b's context
//! seq_lens     [B] i32              context length L_b, including the new tokens
//! cu_seqlens_q [B+1] i32            the new tokens of request b are packed rows cu[b]..cu[b+1]
//! cache        [num_pages, P, Hkv, D]  token p of request b lives at
//!                                      page_table[b, p / P], slot p % P
//! ```
//!
//! New token i of request b (`q_len_b = cu[b+1] − cu[b]`) sits at context position
//! `t = L_b − q_len_b + i`: the new tokens are the last `q_len_b` positions of the context.
//!
//! # Untrusted indices (checked on the device, [`Faults`] bits)
//!
//! - [`FAULT_QUERY_LAYOUT`]: `cu_seqlens_q` is not non-decreasing from `cu[0] ≥ 0` to
//!   `cu[B] ≤ total_q` (the packed rows of the tensors), or some request has `q_len_b > L_b`.
//!   A bad `cu_seqlens_q` masks the whole batch; `q_len_b > L_b` masks request b.
//! - [`FAULT_LENGTH`]: some `L_b < 0` or `L_b > max_pages · P`: request b is masked.
//! - [`FAULT_PAGE_ID`]: a page id the op had to use lies outside `[0, num_pages)`: the token
//!   (kv_append) or the rows that would read it are masked.
//! - [`FAULT_POSITION`] (`attention.rope`): a position outside `[0, max_position)`; its row of
//!   q and k is left as it was.
//!
//! Masked rows are never written (kv_append) and nothing outside the tensors is read or
//! written. Packed rows at or past `cu[B]` belong to no request (batch padding) and are not
//! touched. Bits accumulate (atomic OR) until the caller clears the word.

use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::{DType, Error, Result, TensorMut, TensorRef};
use std::fmt;
use std::sync::Arc;

/// A page id outside `[0, num_pages)` was met; the rows that needed it are masked.
pub const FAULT_PAGE_ID: u32 = 1;
/// A context length outside `[0, max_pages · P]`; the request is masked.
pub const FAULT_LENGTH: u32 = 2;
/// `cu_seqlens_q` is not a valid packing of the rows, or a request has more new tokens than
/// context; the batch (or the request) is masked.
pub const FAULT_QUERY_LAYOUT: u32 = 4;
/// A position outside `[0, max_position)` (`attention.rope`); its row is left unrotated.
pub const FAULT_POSITION: u32 = 8;

/// The bits of an error word (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults(pub u32);

impl Faults {
    /// No fault recorded.
    pub fn is_clear(self) -> bool {
        self.0 == 0
    }
    /// Whether every bit of `bits` is set.
    pub fn has(self, bits: u32) -> bool {
        self.0 & bits == bits
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_clear() {
            return write!(f, "no faults");
        }
        let names = [
            (FAULT_PAGE_ID, "page id out of range"),
            (FAULT_LENGTH, "context length out of range"),
            (FAULT_QUERY_LAYOUT, "bad cu_seqlens_q / q_len > seq_len"),
            (FAULT_POSITION, "position out of range"),
        ];
        let set: Vec<&str> = names.iter().filter(|(b, _)| self.0 & b != 0).map(|(_, n)| *n).collect();
        let unknown = self.0 & !(FAULT_PAGE_ID | FAULT_LENGTH | FAULT_QUERY_LAYOUT | FAULT_POSITION);
        write!(f, "{}", set.join(", "))?;
        if unknown != 0 {
            write!(f, " (unknown bits 0x{unknown:x})")?;
        }
        Ok(())
    }
}

/// A device-resident error word (one `i32` holding [`Faults`] bits) the attention kernels OR
/// into. Create one per stream or per graph, pass [`ErrorWord::view`] as the ops' `error`
/// argument, and read it whenever convenient (reading synchronizes the stream; `run` never does).
#[derive(Debug)]
pub struct ErrorWord {
    word: CudaSlice<i32>,
}

impl ErrorWord {
    /// A zeroed word on `stream`'s device.
    pub fn new(stream: &Arc<CudaStream>) -> Result<Self> {
        Ok(Self { word: stream.alloc_zeros::<i32>(1)? })
    }
    /// The `[1] i32` view the ops take as their `error` argument.
    pub fn view(&mut self) -> Result<TensorMut<'_>> {
        TensorMut::from_slice(&mut self.word, &[1])
    }
    /// Copies the word to the host (synchronizes `stream`).
    pub fn read(&self, stream: &Arc<CudaStream>) -> Result<Faults> {
        let v = stream.clone_dtoh(&self.word)?;
        Ok(Faults(v.first().copied().unwrap_or(0) as u32))
    }
    /// Zeroes the word (enqueued on `stream`).
    pub fn clear(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        stream.memset_zeros(&mut self.word)?;
        Ok(())
    }
}

/// Whether `cu [B + 1]` packs `rows` rows validly: `0 ≤ cu[0] ≤ … ≤ cu[B] ≤ rows` (the CPU side
/// of `packing_ok` in `kernels/paging.cuh`).
pub fn packing_ok(cu: &[i32], batch: usize, rows: usize) -> bool {
    cu.len() == batch + 1 && cu[0] >= 0 && cu.windows(2).all(|w| w[0] <= w[1]) && (cu[batch] as i64) <= rows as i64
}

/// Host copies of a batch's index tensors: the CPU side of the rules above, shared by the
/// oracles (and usable by engines to validate a batch before uploading it).
#[derive(Clone, Copy, Debug)]
pub struct HostBatch<'a> {
    /// `[B, max_pages]`, row-major.
    pub page_table: &'a [i32],
    pub max_pages: usize,
    /// `[B]`.
    pub seq_lens: &'a [i32],
    /// `[B + 1]`.
    pub cu_seqlens_q: &'a [i32],
    /// Rows of the packed tensors (`total_q`).
    pub total_q: usize,
    pub page_size: usize,
    pub num_pages: usize,
}

/// Where the new tokens of one valid request are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// First packed row.
    pub row0: usize,
    /// New tokens (`q_len_b`).
    pub q_len: usize,
    /// Context length `L_b`.
    pub seq_len: usize,
}

impl HostBatch<'_> {
    pub fn batch(&self) -> usize {
        self.seq_lens.len()
    }
    /// Whether `cu_seqlens_q` packs the rows validly (else the whole batch is masked).
    pub fn layout_ok(&self) -> bool {
        packing_ok(self.cu_seqlens_q, self.batch(), self.total_q)
    }
    /// Request b when it is valid, with the faults it raises otherwise (the layout is assumed ok).
    pub fn request(&self, b: usize) -> std::result::Result<Request, u32> {
        let (lo, hi) = (self.cu_seqlens_q[b], self.cu_seqlens_q[b + 1]);
        let l = self.seq_lens[b];
        if l < 0 || l as i64 > (self.max_pages * self.page_size) as i64 {
            return Err(FAULT_LENGTH);
        }
        let q_len = (hi - lo) as usize;
        if q_len > l as usize {
            return Err(FAULT_QUERY_LAYOUT);
        }
        Ok(Request { row0: lo as usize, q_len, seq_len: l as usize })
    }
    /// The page id holding context position `p` of request b, or `None` (a [`FAULT_PAGE_ID`])
    /// when the table's entry is outside `[0, num_pages)`. `p < L_b ≤ max_pages · P`.
    pub fn page(&self, b: usize, p: usize) -> Option<usize> {
        let id = self.page_table[b * self.max_pages + p / self.page_size];
        (id >= 0 && (id as usize) < self.num_pages).then_some(id as usize)
    }
}

/// Errors with [`Error::Stride`] unless `x` is contiguous.
pub(crate) fn require_contiguous(name: &'static str, x: &TensorRef<'_>) -> Result<()> {
    x.require_contiguous(name)
}

/// Checks a batch's index tensors (`seq_lens [B]`, `cu_seqlens_q [B+1]` contiguous,
/// `page_table [B, max_pages]` with any row stride, all i32) against the plan's capacities;
/// returns `(B, page_table row stride)`.
pub(crate) fn check_batch_tensors(
    page_table: &TensorRef<'_>,
    seq_lens: &TensorRef<'_>,
    cu_seqlens_q: &TensorRef<'_>,
    max_pages: usize,
    max_batch: usize,
) -> Result<(usize, usize)> {
    let b = seq_lens.shape().first().copied().unwrap_or(0);
    seq_lens.expect("seq_lens", "[B]", DType::I32, &[b])?;
    cu_seqlens_q.expect("cu_seqlens_q", "[B + 1]", DType::I32, &[b + 1])?;
    page_table.expect("page_table", "[B, max_pages]", DType::I32, &[b, max_pages])?;
    if b > max_batch {
        return Err(Error::Capacity { what: "B (entries of seq_lens)", got: b, capacity: max_batch });
    }
    require_contiguous("seq_lens", seq_lens)?;
    require_contiguous("cu_seqlens_q", cu_seqlens_q)?;
    let pt_stride = page_table.row_stride("page_table")?;
    Ok((b, pt_stride))
}
