//! `attention.rope_kv_append`: [`attention.rope`](crate::rope) on Q and
//! [`attention.kv_append`](crate::kv_append) of the rotated K (and V) in **one launch** — a
//! decode step's rope → append pair without the kernel boundary between them.
//!
//! ```text
//! q ← rope(q)                                   (in place, exactly as attention.rope)
//! k_cache[slot(r)] ← rope(k)[r],  v_cache[slot(r)] ← v[r]   (exactly as attention.kv_append
//!                                                           would store the rotated rows)
//! ```
//!
//! - The result is **bitwise** that of `rope::run` on (q, k) followed by `kv_append::run` (the
//!   same rotation code, rounded to the dtype at the same point, then the same stores), in both
//!   cos/sin modes, for BF16/FP16 and E4M3 caches — except that `k` itself is only read: the
//!   cache gets the rotated rows, the input keeps the unrotated ones (attention reads K from the
//!   cache). `tests/gpu_rope_kv_append.rs` checks the equality against the two ops on the GPU.
//! - [`Query`] is the two ops' queries (`rope.kv_heads` = `append.kv_heads`, the same head dim,
//!   dtype and token capacity); [`Args`] the union of their tensors with one error word. Every
//!   rule of the two ops holds: positions outside `[0, max_position)` leave the row unrotated
//!   (q and the appended K) and set [`FAULT_POSITION`](crate::paging::FAULT_POSITION); lengths,
//!   page ids and the packing are checked as kv_append checks them.
//! - Constraints: both ops'; NeoX pairs need `R % 16 == 0` (a thread owns a chunk of 8 dims of
//!   the first half and its partner chunk); q must not overlap k, v or the caches (it is
//!   written while they are read), checked exactly for column slices of one QKV buffer.
//! - Kernel: rope's q-only grid and kv_append's (one thread per 8-element chunk of a (row, KV
//!   head)) as the two parts of one grid. One config. Launched with PDL on request
//!   ([`Plan::with_pdl`]): then the positions, the slots (the batch) and cos / sin are read and
//!   formed while the kernel before it (the QKV projection) still runs.
//!
//! - **Warm part** ([`Plan::with_warm_cache`], off by default): extra CTAs that read the batch's
//!   cached K and V through L2 (no wait, no writes) so that the attention after the call reads
//!   its keys from L2. Measured in the B = 1 × 4k Qwen3-8B PDL step
//!   (`bench-results/2026-12-04-h200-h/call1`): the attention after it took 7.18 instead of
//!   10.19 µs, but the part did not run beside the QKV projection as intended (the projection's
//!   end did not move; the part added ~6.5 µs after it), so the step got slower (116.4 against
//!   114.3 µs; L2 prefetches instead of loads: 113.9). `bench/proto/warm_overlap_proto.cu` is
//!   the harness that times where its CTAs run (not yet run). That measurement had 16 loads in
//!   flight per lane (94 registers per thread for the whole kernel, which may have kept its CTAs
//!   off the projection's SMs); sm_120a spilled with them, so the part now keeps 8 (56–64
//!   registers, as before the part existed) — not measured since. The kernel's static shared memory
//!   is 2–4 KB (the batch is staged in shared memory below 256 requests, read in global memory
//!   above) so that its CTAs can fit beside a GEMV's.
//!
//! **Status: validated on the H200 (sm_90a)**: `tests/gpu_rope_kv_append.rs` 34/34 (bitwise
//! equal to the two ops, PDL launches behind a long kernel writing the QKV buffer included),
//! compute-sanitizer memcheck 34/34 (`bench-results/2026-12-04-h200-e/call3`) and racecheck on
//! the decode, fault, graph and PDL trials 15/15 (`call9`); with the warm part and the smaller
//! shared-memory staging 36/36 and memcheck 36/36 (`bench-results/2026-12-04-h200-h/call1`; no
//! racecheck since); sm_120a/sm_121a compiled, not run.
//!
//! **Performance** (H200, `benches/rope_kv_append.rs`, `bench-results/2026-12-04-h200-d/call8`,
//! Qwen3-8B heads): a decode step's call (one graph, L2 flushed) takes 6.16 / 6.50 / 7.17 µs at
//! B = 1 / 8 / 64 against 7.18 / 7.81 / 8.48 µs for rope then kv_append in the same graph
//! (mostly launch and dependent latency: the bytes are tiny); a 4096-token prefill the same as
//! the pair (41.1 vs 40.9 µs, 54% of the ceiling, `sincosf`-bound: use the table there). Inside
//! the B = 1 decoder step the fusion alone did not measurably shorten the step (under PDL the
//! two small kernels overlapped already); the early reads of a PDL plan did: its cost inside the
//! PDL step (the bench's `prefix/` rows) fell from 4.2 to 1.0 µs
//! (`bench-results/2026-12-04-h200-e/call2` → `call3`).
//!
//! ```no_run
//! use b12x_attention::paging::ErrorWord;
//! use b12x_attention::rope_kv_append::{self, Args, Query};
//! use b12x_attention::{kv_append, rope};
//! use b12x_core::{DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let (b, h, hkv, d, p, max_pages, num_pages) = (2, 32, 8, 128, 16, 64, 128);
//! let query = Query {
//!     rope: rope::Query {
//!         heads: h, kv_heads: hkv, head_dim: d, rotary_dim: d, rotary_offset: 0,
//!         style: rope::RopeStyle::Neox, base: 1e6, yarn: None, dtype: DType::BF16,
//!         max_tokens: 8, max_position: max_pages * p, cos_sin: rope::CosSin::Computed,
//!     },
//!     append: kv_append::Query {
//!         kv_heads: hkv, head_dim: d, page_size: p, dtype: DType::BF16, cache_dtype: DType::BF16,
//!         max_batch: 8, max_tokens: 8, max_pages, num_pages,
//!     },
//! };
//! let plan = rope_kv_append::plan(&query, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let s = dev.stream();
//! // A fused QKV projection's output [B, (H + 2·Hkv)·D], one new token per request.
//! let mut qkv = s.alloc_zeros::<b12x_core::half::bf16>(b * (h + 2 * hkv) * d)?;
//! let mut kc = s.alloc_zeros::<b12x_core::half::bf16>(num_pages * p * hkv * d)?;
//! let mut vc = s.alloc_zeros::<b12x_core::half::bf16>(num_pages * p * hkv * d)?;
//! let pt = s.clone_htod(&(0..(b * max_pages) as i32).collect::<Vec<_>>())?;
//! let lens = s.clone_htod(&[5i32, 9])?;
//! let cu = s.clone_htod(&[0i32, 1, 2])?;
//! let pos = s.clone_htod(&[4i32, 8])?; // each new token's position: its length − 1
//! let mut err = ErrorWord::new(s)?;
//! let mut parts = TensorMut::from_slice(&mut qkv, &[b, (h + 2 * hkv) * d])?.split_last(&[h * d, hkv * d, hkv * d])?;
//! let v = parts.pop().expect("v").unflatten_last(&[hkv, d])?;
//! let k = parts.pop().expect("k").unflatten_last(&[hkv, d])?;
//! let q = parts.pop().expect("q").unflatten_last(&[h, d])?;
//! let args = Args {
//!     q,
//!     k: k.as_ref(),
//!     v: v.as_ref(),
//!     k_cache: TensorMut::from_slice(&mut kc, &[num_pages, p, hkv, d])?,
//!     v_cache: TensorMut::from_slice(&mut vc, &[num_pages, p, hkv, d])?,
//!     k_scale: None,
//!     v_scale: None,
//!     page_table: TensorRef::from_slice(&pt, &[b, max_pages])?,
//!     seq_lens: TensorRef::from_slice(&lens, &[b])?,
//!     cu_seqlens_q: TensorRef::from_slice(&cu, &[b + 1])?,
//!     positions: TensorRef::from_slice(&pos, &[b])?,
//!     cos_sin: None,
//!     error: err.view()?,
//! };
//! rope_kv_append::run(&plan, args, Scratch::none(), s)?;
//! assert!(err.read(s)?.is_clear());
//! # Ok(()) }
//! ```

mod params;

pub use params::{RopeKvAppendParams, FLAG_EARLY, FLAG_RELEASE_AT_ENTRY, FLAG_WARM_EVICT_LAST, FLAG_WARM_PREFETCH};

use crate::rope::{CosSin, Frequencies, RopeStyle};
use crate::{kv_append, rope};
use b12x_core::cudarc::driver::CudaStream;
use b12x_core::{
    require_disjoint, require_disjoint_views, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule,
    LaunchDims, LaunchOpts, OpPlan, PlanSlot, RaceBuffer, Result, Scratch, ScratchLayout, Selected, TensorMut,
    TensorRef,
};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "attention.rope_kv_append";
/// Threads per CTA of both parts (`kKvAppendThreads` = `kRopeThreads`).
const THREADS: usize = 256;
/// The one config.
const CONFIG: &str = "t256";

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "attention",
        entry_points: &["plan", "run"],
        dtypes: &["bf16", "f16", "bf16->e4m3", "f16->e4m3"],
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-attention",
        summary: "attention.rope on Q and attention.kv_append of the rotated K and V in one launch",
    }
}

/// The two ops' static problems.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// The rope (its `kv_heads` is the number of K heads rotated on their way into the cache).
    pub rope: rope::Query,
    /// The append.
    pub append: kv_append::Query,
}

impl Query {
    /// Checks both queries and that they describe the same rows; the error names the first bad
    /// field.
    pub fn validate(&self) -> Result<()> {
        self.rope.validate()?;
        self.append.validate()?;
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        let (r, a) = (&self.rope, &self.append);
        if r.kv_heads != a.kv_heads {
            return bad("rope.kv_heads", format!("must equal append.kv_heads = {}, got {}", a.kv_heads, r.kv_heads));
        }
        if r.head_dim != a.head_dim {
            return bad("rope.head_dim", format!("must equal append.head_dim = {}, got {}", a.head_dim, r.head_dim));
        }
        if r.dtype != a.dtype {
            return bad("rope.dtype", format!("must equal append.dtype = {}, got {}", a.dtype, r.dtype));
        }
        if r.max_tokens != a.max_tokens {
            return bad(
                "rope.max_tokens",
                format!("must equal append.max_tokens = {}, got {}", a.max_tokens, r.max_tokens),
            );
        }
        if r.style == RopeStyle::Neox && r.rotary_dim % 16 != 0 {
            return bad(
                "rope.rotary_dim",
                format!(
                    "must be a multiple of 16 for NeoX pairs here (rope then kv_append take 8), got {}",
                    r.rotary_dim
                ),
            );
        }
        Ok(())
    }

    /// rope's query for the q part (no K heads).
    fn q_rope(&self) -> rope::Query {
        rope::Query { kv_heads: 0, ..self.rope.clone() }
    }

    /// Checks `args` against both queries and builds the kernel parameters; nothing is
    /// launched.
    pub fn kernel_params(&self, args: &mut Args<'_>) -> Result<RopeKvAppendParams> {
        self.kernel_params_with(args, &self.rope.frequencies())
    }

    fn kernel_params_with(&self, args: &mut Args<'_>, freqs: &Frequencies) -> Result<RopeKvAppendParams> {
        let rope = self.q_rope().kernel_params_with(
            &rope::Args {
                q: args.q.reborrow(),
                k: None,
                positions: args.positions,
                cos_sin: args.cos_sin,
                error: args.error.reborrow(),
            },
            freqs,
        )?;
        let append = self.append.kernel_params(&kv_append::Args {
            k: args.k,
            v: args.v,
            k_cache: args.k_cache.reborrow(),
            v_cache: args.v_cache.reborrow(),
            k_scale: args.k_scale,
            v_scale: args.v_scale,
            page_table: args.page_table,
            seq_lens: args.seq_lens,
            cu_seqlens_q: args.cu_seqlens_q,
            error: args.error.reborrow(),
        })?;
        if rope.tokens != append.tokens {
            return Err(Error::Shape {
                tensor: "q",
                expected: format!("[T, H, D] with T = {} (the rows of k and v)", append.tokens),
                actual: args.q.shape().to_vec(),
            });
        }
        // q is written while k, v, the caches and the batch are read (and the caches written).
        let q = args.q.as_ref();
        require_disjoint_views(("q", &q), ("k", &args.k))?;
        require_disjoint_views(("q", &q), ("v", &args.v))?;
        let qs = ("q", q.byte_span());
        for other in [
            ("k_cache", args.k_cache.byte_span()),
            ("v_cache", args.v_cache.byte_span()),
            ("page_table", args.page_table.byte_span()),
            ("seq_lens", args.seq_lens.byte_span()),
            ("cu_seqlens_q", args.cu_seqlens_q.byte_span()),
        ] {
            require_disjoint(qs, other)?;
        }
        for (name, s) in [("k_scale", &args.k_scale), ("v_scale", &args.v_scale)] {
            if let Some(s) = s {
                require_disjoint(qs, (name, s.byte_span()))?;
            }
        }
        // The caches are written while positions and the table are read.
        for c in [("k_cache", args.k_cache.byte_span()), ("v_cache", args.v_cache.byte_span())] {
            require_disjoint(c, ("positions", args.positions.byte_span()))?;
            if let Some(t) = &args.cos_sin {
                require_disjoint(c, ("cos_sin", t.byte_span()))?;
            }
        }
        // The error word: rope checked it against q, positions and the table, kv_append against
        // the caches, k, v, the scales and the batch.
        let q_threads = rope.tokens as usize * rope.heads as usize * rope.rotary_dim as usize / 8;
        Ok(RopeKvAppendParams {
            rope,
            append,
            q_blocks: q_threads.div_ceil(THREADS) as i32,
            flags: 0,
            warm_blocks: 0,
            reserved: 0,
        })
    }

    /// The kernel symbol, e.g. `b12x_rope_kv_append_bf16_neox_table_e4m3`.
    pub fn symbol(&self) -> String {
        let style = match self.rope.style {
            RopeStyle::Neox => "neox",
            RopeStyle::Gptj => "gptj",
        };
        let table = if self.rope.cos_sin == CosSin::Table { "_table" } else { "" };
        let e4m3 = if self.append.cache_dtype == DType::E4M3 { "_e4m3" } else { "" };
        format!("b12x_rope_kv_append_{}_{style}{table}{e4m3}", self.append.dtype.name())
    }
}

/// How the warm part reads the cached keys ([`Plan::with_warm_cache`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WarmRead {
    /// 16-byte loads (dropped) with an L2 evict-last policy.
    #[default]
    LoadEvictLast,
    /// 16-byte loads with the default policy.
    Load,
    /// `prefetch.global.L2::evict_last`, one per 128-byte line.
    PrefetchEvictLast,
}

/// The warm part of a call ([`Plan::with_warm_cache`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarmCache {
    /// Its CTAs (256 threads each, no shared memory of their own), e.g. the device's SM count.
    pub blocks: u32,
    /// How they read.
    pub read: WarmRead,
}

/// The most CTAs a warm part may have.
pub const MAX_WARM_BLOCKS: u32 = 4096;

/// A validated query bound to a device.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    freqs: Frequencies,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    slot: PlanSlot,
    pdl: bool,
    early_release: bool,
    warm: Option<WarmCache>,
}

/// Validates `query`. Allocates, compiles and launches nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    Ok(Plan {
        query: query.clone(),
        freqs: query.rope.frequencies(),
        device: device.clone(),
        buckets: vec![Bucket { lo: 1, hi: query.append.max_tokens }],
        slot: PlanSlot::default(),
        pdl: false,
        early_release: false,
        warm: None,
    })
}

impl Plan {
    /// Launches every call with programmatic dependent launch (PDL) when `pdl`, so that in a
    /// stream or graph of PDL launches (a decode step) the call starts while the kernel before
    /// it finishes. Before its `griddepcontrol.wait` for that kernel a PDL call reads only the
    /// positions, the batch (`cu_seqlens_q`, `seq_lens`, `page_table`) and the cos/sin table,
    /// and forms every thread's cos and sin; q, k, v, the scales and every write (q, the caches,
    /// the error word) come after it, and only then may the next PDL kernel launch.
    /// **Positions, the batch and the table must not be written by the kernel right before
    /// the call** (engines fill them from the host or earlier in the step, as
    /// `attention.paged`'s PDL launch also assumes). Results are the same either way; plain
    /// launches wait first (the race times them).
    pub fn with_pdl(mut self, pdl: bool) -> Self {
        self.pdl = pdl;
        self
    }
    /// Whether calls launch with PDL.
    pub fn pdl(&self) -> bool {
        self.pdl
    }
    /// With PDL ([`Plan::with_pdl`]), every CTA lets the next PDL kernel launch as it starts,
    /// before its `griddepcontrol.wait` (otherwise after it). The next kernel's own wait still
    /// waits for this grid, which waits for the kernel before it, so results are the same; but
    /// the next kernel's **pre-wait part** (a PDL `attention.paged`'s lengths, page table and
    /// old keys) may then run while the kernel *before this one* (the QKV projection) still
    /// runs: use it only where that kernel writes none of it either. Its point: the attention's
    /// CTAs take SMs, and start reading the cached keys, as the projection's CTAs drain. No
    /// effect on plain launches.
    pub fn with_early_release(mut self, early: bool) -> Self {
        self.early_release = early;
        self
    }
    /// Whether a PDL launch releases the next kernel at entry ([`Plan::with_early_release`]).
    pub fn early_release(&self) -> bool {
        self.early_release
    }
    /// Adds a **warm part** to every call (`None`: none, the default): `warm.blocks` more CTAs
    /// that read the batch's cached K and V — positions `[0, L_b − q_b)` of every request, the
    /// keys `attention.paged` will read besides the new ones — through L2 and drop them. They
    /// let the next PDL kernel launch at once and never wait, so in a PDL step
    /// (`with_pdl(true)` after a PDL QKV projection) they run beside the projection and the
    /// attention after this call finds its keys in L2 instead of HBM. The call's results are
    /// unchanged (the part writes nothing; untrusted lengths and page ids are skipped and left
    /// to the K/V part to report); its cost is the bytes it reads, so it pays only where the
    /// kernel before it leaves bandwidth unused and the keys fit in L2 beside what runs with
    /// them. Errors: `blocks` = 0 or above [`MAX_WARM_BLOCKS`] (`Error::InvalidQuery`).
    pub fn with_warm_cache(mut self, warm: Option<WarmCache>) -> Result<Self> {
        if let Some(w) = warm {
            if w.blocks == 0 || w.blocks > MAX_WARM_BLOCKS {
                return Err(Error::InvalidQuery {
                    op: OP,
                    field: "warm.blocks",
                    reason: format!("must be in [1, {MAX_WARM_BLOCKS}], got {}", w.blocks),
                });
            }
        }
        self.warm = warm;
        Ok(self)
    }
    /// The warm part ([`Plan::with_warm_cache`]).
    pub fn warm_cache(&self) -> Option<WarmCache> {
        self.warm
    }
    pub fn query(&self) -> &Query {
        &self.query
    }
    /// The op needs no scratch.
    pub fn scratch_layout(&self) -> ScratchLayout {
        ScratchLayout::new()
    }
    /// The cos/sin table of table mode (as `rope::Plan::cos_sin_table`); upload it once.
    pub fn cos_sin_table(&self) -> Vec<f32> {
        let q = &self.query.rope;
        rope::reference::table(q.max_position, q.rotary_dim, &self.freqs.inv_freq[..q.rotary_dim / 2])
    }
}

/// The tensors of one call: attention.rope's (q, positions, cos_sin) and attention.kv_append's
/// (k, v, caches, scales, batch), one error word.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[T, H, D]`, rotated in place.
    pub q: TensorMut<'a>,
    /// `[T, Hkv, D]`: the new keys, unrotated (read only; the cache gets them rotated).
    pub k: TensorRef<'a>,
    /// `[T, Hkv, D]`: the new values.
    pub v: TensorRef<'a>,
    /// `[num_pages, P, Hkv, D]`.
    pub k_cache: TensorMut<'a>,
    /// `[num_pages, P, Hkv, D]`.
    pub v_cache: TensorMut<'a>,
    /// `[B, Hkv]` f32, E4M3 caches only.
    pub k_scale: Option<TensorRef<'a>>,
    /// `[B, Hkv]` f32, E4M3 caches only.
    pub v_scale: Option<TensorRef<'a>>,
    /// `[B, max_pages]` i32.
    pub page_table: TensorRef<'a>,
    /// `[B]` i32: context lengths including the new tokens.
    pub seq_lens: TensorRef<'a>,
    /// `[B + 1]` i32.
    pub cu_seqlens_q: TensorRef<'a>,
    /// `[T]` i32: each row's rope position (untrusted).
    pub positions: TensorRef<'a>,
    /// `[max_position, R]` f32, exactly in table mode.
    pub cos_sin: Option<TensorRef<'a>>,
    /// `[1]` i32 fault bits (both ops').
    pub error: TensorMut<'a>,
}

/// Rotates `args.q` and appends the rotated `args.k` and `args.v` on `stream`. Every check
/// happens before the launch; no allocation, no synchronization. `T = 0` launches nothing.
pub fn run(plan: &Plan, mut args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let mut params = plan.query.kernel_params_with(&mut args, &plan.freqs)?;
    params.flags = if plan.pdl { FLAG_EARLY } else { 0 };
    if plan.pdl && plan.early_release {
        params.flags |= FLAG_RELEASE_AT_ENTRY;
    }
    if let Some(w) = plan.warm {
        params.warm_blocks = w.blocks as i32;
        params.flags |= match w.read {
            WarmRead::LoadEvictLast => FLAG_WARM_EVICT_LAST,
            WarmRead::Load => 0,
            WarmRead::PrefetchEvictLast => FLAG_WARM_PREFETCH | FLAG_WARM_EVICT_LAST,
        };
    }
    plan.scratch_layout().bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.append.tokens == 0 {
        return Ok(());
    }
    let selected = resolve(plan, 0, stream)?;
    launch(&selected, &params, stream, plan.pdl)
}

fn launch(selected: &Selected, p: &RopeKvAppendParams, stream: &CudaStream, pdl: bool) -> Result<()> {
    let kernel = selected.kernels.first().ok_or_else(|| Error::UnknownConfig {
        op: OP,
        bucket: String::new(),
        config: selected.config.clone(),
    })?;
    let a = &p.append;
    let kv_threads = a.tokens as usize * a.kv_heads as usize * a.head_dim as usize / 8;
    let grid = p.q_blocks as usize + kv_threads.div_ceil(THREADS) + p.warm_blocks as usize;
    let dims = LaunchDims { grid: (grid as u32, 1, 1), block: (THREADS as u32, 1, 1), smem_bytes: 0 };
    // SAFETY: RopeKvAppendParams mirrors the kernel's struct (asserted on both sides) and its two
    // parts passed the two ops' checks (or describe the race's own buffer); the kernel bounds
    // every index read from the device before using it.
    unsafe { kernel.launch_ex(stream, dims, p, LaunchOpts { pdl, cluster_x: 0 }) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        // Both parts' keys, which name every field that selects or shapes a kernel.
        format!("rope[{:?}] append[{:?}]", self.query.rope, self.query.append)
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::ROPE_KV_APPEND_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        vec![CONFIG.into()]
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        if config_index == 0 {
            vec![self.query.symbol()]
        } else {
            Vec::new()
        }
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        // One config: never raced; this case (one token of one request at position 0, page 0)
        // is for tools that time every op.
        let (r, a) = (&self.query.rope, &self.query.append);
        let es = a.dtype.size_bytes();
        let q_row = r.heads * r.head_dim * es;
        let kv_row = a.kv_heads * a.head_dim * es;
        let page = a.page_size * a.kv_heads * a.head_dim * a.cache_dtype.size_bytes();
        let table = if r.cos_sin == CosSin::Table { r.rotary_dim * 4 } else { 16 };
        let scales = a.kv_heads * 4;
        // q, k, v, k page, v page, scales ×2, page_table row, seq_len, cu, positions, table, error.
        let sizes = [q_row, kv_row, kv_row, page, page, scales, scales, a.max_pages * 4, 4, 8, 4, table, 4];
        let race = RaceBuffer::new(&self.device, &sizes)?;
        let stream = self.device.stream();
        b12x_core::memset_u32(stream, race.ptrs[8], 1, 1)?;
        b12x_core::memset_u32(stream, race.ptrs[9] + 4, 1, 1)?;
        let at = |i: usize| race.ptrs[i];
        let e4m3 = a.cache_dtype == DType::E4M3;
        let rope = rope::RopeParams {
            q: at(0),
            k: 0,
            positions: at(10),
            cos_sin: if r.cos_sin == CosSin::Table { at(11) } else { 0 },
            error: at(12),
            q_stride: (r.heads * r.head_dim) as i64,
            k_stride: 0,
            tokens: 1,
            heads: r.heads as i32,
            kv_heads: 0,
            head_dim: r.head_dim as i32,
            rotary_dim: r.rotary_dim as i32,
            rotary_offset: r.rotary_offset as i32,
            max_position: 1,
            scale: self.freqs.scale,
            inv_freq: self.freqs.inv_freq,
        };
        let append = kv_append::KvAppendParams {
            k: at(1),
            v: at(2),
            k_cache: at(3),
            v_cache: at(4),
            k_scale: if e4m3 { at(5) } else { 0 },
            v_scale: if e4m3 { at(6) } else { 0 },
            page_table: at(7),
            seq_lens: at(8),
            cu_seqlens_q: at(9),
            error: at(12),
            k_stride: (a.kv_heads * a.head_dim) as i64,
            v_stride: (a.kv_heads * a.head_dim) as i64,
            tokens: 1,
            batch: 1,
            max_pages: a.max_pages as i32,
            pt_stride: a.max_pages as i32,
            num_pages: 1,
            kv_heads: a.kv_heads as i32,
            head_dim: a.head_dim as i32,
            page_size: a.page_size as i32,
        };
        let q_blocks = (r.heads * r.rotary_dim / 8).div_ceil(THREADS) as i32;
        let params = RopeKvAppendParams { rope, append, q_blocks, flags: 0, warm_blocks: 0, reserved: 0 };
        Ok(Box::new(RaceCase { params, _buffer: race }))
    }
}

/// What a timing tool launches.
struct RaceCase {
    params: RopeKvAppendParams,
    _buffer: RaceBuffer,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(selected, &self.params, stream, false)
    }
}
