//! The device buffers of a batch, and the host's page allocator.

use super::Config;
use b12x_attention::paging::ErrorWord;
use b12x_core::cudarc::driver::sys::CUevent_flags;
use b12x_core::cudarc::driver::{CudaEvent, CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::{Error, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// The device buffers of one batch (see the module docs). Public fields are the layer's inputs
/// and outputs: write `x` and `residual` before a step; read `y` and `residual` after it.
pub struct State {
    pub b: usize,
    /// `[B, hidden]`: the layer's input (the previous layer's output).
    pub x: CudaSlice<bf16>,
    /// `[B, hidden]`: the residual stream, updated in place (twice per step).
    pub residual: CudaSlice<bf16>,
    /// `[B, hidden]` with [`LayerOptions::fold_norms`](super::LayerOptions::fold_norms): the
    /// residual between the two folded norms (the QKV projection writes it, the gate/up
    /// projection reads it); `None` otherwise.
    pub residual_mid: Option<CudaSlice<bf16>>,
    /// The step leaves the residual in `residual_mid` (an odd number of folded or split norms:
    /// `FoldNorms::First`, or `norm2_in_o_proj` alone), not `residual`.
    pub residual_out_mid: bool,
    /// `[B, ⌈hidden/16⌉]` f32 with `LayerOptions::norm2_in_o_proj`: the O projection's 16-row
    /// sums of squares of the new residual, read by the gate/up projection.
    pub(super) sum_sq: Option<CudaSlice<f32>>,
    pub(super) h: CudaSlice<bf16>,
    pub(super) qkv: CudaSlice<bf16>,
    pub(super) o: CudaSlice<bf16>,
    pub(super) proj: CudaSlice<bf16>,
    pub(super) gate_up: CudaSlice<bf16>,
    pub(super) act: CudaSlice<bf16>,
    /// `[B, hidden]`: the layer's output (the MLP's; add it to `residual` in the next layer).
    pub y: CudaSlice<bf16>,
    /// `[num_pages, P, Hkv, D]`.
    pub k_cache: CudaSlice<bf16>,
    pub v_cache: CudaSlice<bf16>,
    pub(super) page_table: CudaSlice<i32>,
    pub(super) seq_lens: CudaSlice<i32>,
    pub(super) cu_seqlens_q: CudaSlice<i32>,
    pub(super) positions: CudaSlice<i32>,
    pub(super) scratch: Vec<Option<CudaSlice<u8>>>,
    /// The attention ops' fault bits (rope_kv_append, paged).
    pub error: ErrorWord,
    /// The second stream of `LayerOptions::warm_o_proj` (`None` without it).
    pub(super) side: Option<SideStream>,
}

/// A second stream the step forks work onto and joins back, with its two events (made once, at
/// `Layer::state`: a step creates nothing).
pub(crate) struct SideStream {
    stream: Arc<CudaStream>,
    fork: CudaEvent,
    join: CudaEvent,
    /// Work was forked and not joined yet.
    pending: bool,
}

impl SideStream {
    pub(crate) fn new(main: &Arc<CudaStream>) -> Result<Self> {
        let flags = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
        Ok(SideStream {
            stream: main.fork()?,
            fork: main.context().new_event(flags)?,
            join: main.context().new_event(flags)?,
            pending: false,
        })
    }
    /// The second stream, made to wait for everything enqueued on `main` so far.
    pub(crate) fn fork(&mut self, main: &Arc<CudaStream>) -> Result<Arc<CudaStream>> {
        self.fork.record(main)?;
        self.stream.wait(&self.fork)?;
        Ok(self.stream.clone())
    }
    /// Marks the work enqueued on `side` (the stream `fork` returned) as pending.
    pub(crate) fn forked(&mut self, side: &Arc<CudaStream>) -> Result<()> {
        self.join.record(side)?;
        self.pending = true;
        Ok(())
    }
    /// `main` waits for the pending work (nothing when none is pending).
    pub(crate) fn join(&mut self, main: &Arc<CudaStream>) -> Result<()> {
        if self.pending {
            main.wait(&self.join)?;
            self.pending = false;
        }
        Ok(())
    }
}

impl State {
    /// Writes the batch's lengths (including the new token), positions (`L_b − 1`) and page
    /// table into the device buffers a captured step reads.
    pub fn upload_batch(&mut self, batch: &Batch, stream: &Arc<CudaStream>) -> Result<()> {
        if batch.lens.len() != self.b {
            return Err(Error::Shape {
                tensor: "batch",
                expected: format!("{} requests", self.b),
                actual: vec![batch.lens.len()],
            });
        }
        stream.memcpy_htod(&batch.lens, &mut self.seq_lens)?;
        let pos: Vec<i32> = batch.lens.iter().map(|&l| l - 1).collect();
        stream.memcpy_htod(&pos, &mut self.positions)?;
        stream.memcpy_htod(&batch.page_table(), &mut self.page_table)?;
        Ok(())
    }
    /// Uploads `[B, hidden]` values (rounded to bf16) into `x` and `residual`.
    pub fn upload_inputs(&mut self, x: &[f32], residual: &[f32], stream: &Arc<CudaStream>) -> Result<()> {
        let bf = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
        stream.memcpy_htod(&bf(x), &mut self.x)?;
        stream.memcpy_htod(&bf(residual), &mut self.residual)?;
        Ok(())
    }
    /// Fills `[cache tokens]` of both caches from host bf16 values (`[num_pages, P, Hkv, D]`).
    pub fn upload_cache(&mut self, k: &[bf16], v: &[bf16], stream: &Arc<CudaStream>) -> Result<()> {
        stream.memcpy_htod(k, &mut self.k_cache)?;
        stream.memcpy_htod(v, &mut self.v_cache)?;
        Ok(())
    }
    /// `(y, residual)` as f32 (synchronizes the stream); the residual from wherever the step
    /// leaves it (`residual_mid` when `residual_out_mid`).
    pub fn outputs(&self, stream: &Arc<CudaStream>) -> Result<(Vec<f32>, Vec<f32>)> {
        let f = |v: Vec<bf16>| v.into_iter().map(f32::from).collect::<Vec<_>>();
        let res = match (&self.residual_mid, self.residual_out_mid) {
            (Some(mid), true) => mid,
            _ => &self.residual,
        };
        Ok((f(stream.clone_dtoh(&self.y)?), f(stream.clone_dtoh(res)?)))
    }
}

/// The host's view of a batch: context lengths and page lists, with a free-page pool.
#[derive(Clone, Debug)]
pub struct Batch {
    /// Context lengths including the newest token (what `seq_lens` holds).
    pub lens: Vec<i32>,
    /// Each request's pages, in order.
    pub pages: Vec<Vec<i32>>,
    free: Vec<i32>,
    max_pages: usize,
    page_size: usize,
}

impl Batch {
    /// Requests with `contexts[b]` tokens already cached (before the first step), pages drawn
    /// from a seeded shuffle of all `num_pages` pages (scattered, never shared).
    pub fn new(contexts: &[usize], page_size: usize, max_pages: usize, num_pages: usize, seed: u64) -> Result<Self> {
        let mut free: Vec<i32> = (0..num_pages as i32).collect();
        free.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        let mut pages = Vec::new();
        for &c in contexts {
            if c.div_ceil(page_size) > max_pages {
                return Err(Error::Capacity { what: "context pages", got: c.div_ceil(page_size), capacity: max_pages });
            }
            let mut mine = Vec::new();
            for _ in 0..c.div_ceil(page_size) {
                mine.push(free.pop().ok_or(Error::Capacity {
                    what: "pages",
                    got: num_pages + 1,
                    capacity: num_pages,
                })?);
            }
            pages.push(mine);
        }
        let lens = contexts.iter().map(|&c| c as i32).collect();
        Ok(Batch { lens, pages, free, max_pages, page_size })
    }
    /// One new token per request: a fresh page where the last one is full. On an error (no page
    /// left, or a page table full) nothing changes.
    pub fn advance(&mut self) -> Result<()> {
        let need = self.lens.iter().filter(|&&l| l as usize % self.page_size == 0).count();
        if need > self.free.len() {
            return Err(Error::Capacity { what: "free pages", got: need, capacity: self.free.len() });
        }
        if let Some(p) = self
            .lens
            .iter()
            .zip(&self.pages)
            .find(|(&l, p)| l as usize % self.page_size == 0 && p.len() == self.max_pages)
        {
            return Err(Error::Capacity { what: "context pages", got: p.1.len() + 1, capacity: self.max_pages });
        }
        for (l, pages) in self.lens.iter_mut().zip(&mut self.pages) {
            if *l as usize % self.page_size == 0 {
                if pages.len() == self.max_pages {
                    return Err(Error::Capacity {
                        what: "context pages",
                        got: pages.len() + 1,
                        capacity: self.max_pages,
                    });
                }
                pages.push(self.free.pop().ok_or(Error::Capacity { what: "free pages", got: 1, capacity: 0 })?);
            }
            *l += 1;
        }
        Ok(())
    }
    /// `[B, max_pages]`, unused entries −1.
    pub fn page_table(&self) -> Vec<i32> {
        let mut t = vec![-1i32; self.lens.len() * self.max_pages];
        for (b, pages) in self.pages.iter().enumerate() {
            t[b * self.max_pages..][..pages.len()].copy_from_slice(pages);
        }
        t
    }
    /// Bytes of KV the step's attention reads (every context token's K and V, bf16).
    pub fn kv_bytes(&self, cfg: &Config) -> usize {
        self.lens.iter().map(|&l| l as usize).sum::<usize>() * cfg.kv_heads * cfg.head_dim * 2 * 2
    }
}
