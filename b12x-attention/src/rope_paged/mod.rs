//! `attention.rope_paged`: [`attention.rope`](crate::rope) on Q and K,
//! [`attention.kv_append`](crate::kv_append) of the new K and V and
//! [`attention.paged`](crate::paged) in **one launch** — a decode step's rope → append →
//! attention without the kernel boundary (and the dependent-launch latency) between them.
//!
//! ```text
//! k_cache[slot(r)] ← rope(k)[r],  v_cache[slot(r)] ← v[r]      (as attention.kv_append stores them)
//! o, lse ← paged(rope(q), k_cache, v_cache, …)                 (as attention.paged computes them)
//! ```
//!
//! - The result is **bitwise** that of [`rope_kv_append::run`](crate::rope_kv_append::run)
//!   followed by [`paged::run`] with the same [`paged::PlanOptions`] (the
//!   same rotation code rounded at the same point, the same stores, the same attention kernel
//!   reading the cache back) — except that `q` is only read: the attention uses the rotated
//!   rows, the input keeps the unrotated ones. `tests/gpu_rope_paged.rs` checks the equality on
//!   the GPU (o, lse, every byte of both caches, the error word).
//! - [`Query`] is the rope's and the attention's query (the same heads, head dim, dtype and
//!   token capacity); the append's geometry is the attention's (page size, cache dtype, pages).
//!   [`Args`] is the union of the three ops' tensors with one error word. Every rule of the three
//!   ops holds: a position outside `[0, max_position)` leaves its q row and its new key unrotated
//!   and sets [`FAULT_POSITION`](crate::paging::FAULT_POSITION); lengths, page ids and the packing
//!   are checked as the attention checks them (a new token whose page id is out of range is not
//!   stored, and its block is skipped and reported).
//! - Constraints: the attention's 8-row (decode) tiles only
//!   ([`paged::Query::eight_row_tiles`]: `max_q_len · H / Hkv ≤ 8`, `D ≤ 128`); NeoX pairs
//!   need `R % 16 == 0`; otherwise both ops'. Bigger tiles are an `InvalidQuery` error: use
//!   `rope_kv_append` then `paged` there.
//! - Kernel (`kernels/paged_rope.cu`): the attention kernel's 8-row variants with two steps
//!   added after the PDL wait — the CTA whose chunk of keys holds the new positions stores their
//!   rotated K and V into the cache and passes a barrier before its ring issues their blocks,
//!   and every CTA rotates its Q tile in shared memory before it takes its fragments. Before
//!   the wait a PDL call reads what a plain `paged` call reads (lengths, page table, scales and
//!   the old keys' first blocks) and, as `rope_kv_append`'s PDL plans do, the positions and the
//!   table (each thread's first Q unit's cos / sin are formed there); q, k and v after it.
//! - Untrusted batches: rows and keys the attention masks (a bad length or packing, padding
//!   rows) are neither rotated nor appended, and their bad positions are not reported
//!   (`rope_kv_append` reports every row's); their outputs are zeros either way. A request
//!   whose `cu_seqlens_q` gives it more new tokens than the plan's `max_q_len` (more rows than
//!   its 8-row tile) is attended, as by `paged`, for the rows its tile holds, and its keys past
//!   them are **not appended, with no fault bit** — keep `cu_seqlens_q` within the plan.
//! - Plan: [`plan_with`] takes `paged`'s [`paged::PlanOptions`] (PDL, split cap, ring depth,
//!   warps, cluster merge) and derives the same variant `paged` would.
//!
//! **Status: validated on an H100 (sm_90a), not yet run on the H200**: `tests/gpu_rope_paged.rs`
//! 33/33 (bitwise equal to the pair on every case above, PDL behind a long kernel writing the
//! QKV buffer, graph replay, typed errors), compute-sanitizer memcheck 33/33 and racecheck 13/13
//! (decode, extend and variant trials) clean (`bench-results/2026-12-06-h200-a/call2`);
//! sm_120a/sm_121a compiled, not run.
//!
//! **Performance** (H100, `benches/rope_paged.rs`, PDL plans, 8 calls per graph, µs per call,
//! against `rope_kv_append` then `paged` in the same graph): B = 1 × 2k 9.85 against 10.46, B = 1
//! × 8k 19.25 against 19.26 (`call2`); B = 8 × 2k 26.65 against 29.97, B = 8 × 8k 92.93 against
//! 95.72, B = 64 × 2k 185.98 against 186.51 (`call1`, the kernel before call 2's change: B = 1 ×
//! 2k took 11.37 there). Inside the B = 1 × 4k decoder step it did **not** help
//! (`LayerOptions::fuse_rope_attention` in `b12x-layers`): the step took 156.7 against
//! 153.9–154.1 µs (`call2`; 154.5 against 153.7–154.3 with call 1's kernel) — there the kernel
//! before it is the QKV projection, whose last CTAs the attention's one-per-SM CTAs wait for
//! either way, and the last split's append adds a round trip to its chain.
//!
//! ```no_run
//! use b12x_attention::paging::ErrorWord;
//! use b12x_attention::rope::{CosSin, RopeStyle};
//! use b12x_attention::{paged, rope, rope_paged};
//! use b12x_core::{DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let (b, h, hkv, d, p, max_pages, num_pages) = (2, 32, 8, 128, 16, 64, 128);
//! let attention = paged::Query {
//!     heads: h, kv_heads: hkv, head_dim: d, page_size: p, q_dtype: DType::BF16, kv_dtype: DType::BF16,
//!     scale: 1.0 / (d as f32).sqrt(), window_left: -1, sinks: false,
//!     max_batch: 8, max_tokens: 8, max_q_len: 1, max_pages, num_pages,
//! };
//! let rope = rope::Query {
//!     heads: h, kv_heads: hkv, head_dim: d, rotary_dim: d, rotary_offset: 0, style: RopeStyle::Neox,
//!     base: 1e6, yarn: None, dtype: DType::BF16, max_tokens: 8, max_position: max_pages * p,
//!     cos_sin: CosSin::Computed,
//! };
//! let plan = rope_paged::plan(&rope_paged::Query { rope, attention }, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let s = dev.stream();
//! let mut scratch = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes().max(1))?;
//! let qx = s.alloc_zeros::<b12x_core::half::bf16>(b * h * d)?;
//! let kx = s.alloc_zeros::<b12x_core::half::bf16>(b * hkv * d)?;
//! let vx = s.alloc_zeros::<b12x_core::half::bf16>(b * hkv * d)?;
//! let mut kc = s.alloc_zeros::<b12x_core::half::bf16>(num_pages * p * hkv * d)?;
//! let mut vc = s.alloc_zeros::<b12x_core::half::bf16>(num_pages * p * hkv * d)?;
//! let pt = s.clone_htod(&(0..(b * max_pages) as i32).collect::<Vec<_>>())?;
//! let lens = s.clone_htod(&[5i32, 9])?;
//! let cu = s.clone_htod(&[0i32, 1, 2])?;
//! let pos = s.clone_htod(&[4i32, 8])?;
//! let mut o = s.alloc_zeros::<b12x_core::half::bf16>(b * h * d)?;
//! let mut err = ErrorWord::new(s)?;
//! let args = rope_paged::Args {
//!     q: TensorRef::from_slice(&qx, &[b, h, d])?,
//!     k: TensorRef::from_slice(&kx, &[b, hkv, d])?,
//!     v: TensorRef::from_slice(&vx, &[b, hkv, d])?,
//!     k_cache: TensorMut::from_slice(&mut kc, &[num_pages, p, hkv, d])?,
//!     v_cache: TensorMut::from_slice(&mut vc, &[num_pages, p, hkv, d])?,
//!     k_scale: None,
//!     v_scale: None,
//!     sinks: None,
//!     page_table: TensorRef::from_slice(&pt, &[b, max_pages])?,
//!     seq_lens: TensorRef::from_slice(&lens, &[b])?,
//!     cu_seqlens_q: TensorRef::from_slice(&cu, &[b + 1])?,
//!     positions: TensorRef::from_slice(&pos, &[b])?,
//!     cos_sin: None,
//!     o: TensorMut::from_slice(&mut o, &[b, h, d])?,
//!     lse: None,
//!     error: err.view()?,
//! };
//! rope_paged::run(&plan, args, Scratch::from_slice(&mut scratch), s)?;
//! # Ok(()) }
//! ```

mod params;

pub use params::PagedRopeParams;

use crate::kv_append;
use crate::paged::{self, FLAG_PDL};
use crate::rope::{self, CosSin, Frequencies, RopeParams, RopeStyle};
use b12x_core::cudarc::driver::CudaStream;
use b12x_core::{
    require_disjoint, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchOpts, OpPlan, PlanSlot,
    RaceBuffer, Result, Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "attention.rope_paged";
/// The one config (the attention's variant is derived from the plan's options).
const CONFIG: &str = "split_auto";

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "attention",
        entry_points: &["plan", "plan_with", "run"],
        dtypes: &["bf16", "f16", "bf16 q / e4m3 kv"],
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-attention",
        summary: "rope on q and k, kv_append of the new tokens and decode attention over the paged cache in one launch",
    }
}

/// The static problem: the rope's and the attention's queries.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// The rope (`kv_heads` = the attention's: every new K head is rotated on its way into the
    /// cache).
    pub rope: rope::Query,
    /// The attention; its page size, cache dtype and pages are the append's.
    pub attention: paged::Query,
}

impl Query {
    /// Checks both queries and that they describe the same rows; the error names the first bad
    /// field.
    pub fn validate(&self) -> Result<()> {
        self.rope.validate()?;
        self.attention.validate()?;
        self.append_query().validate()?;
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        let (r, a) = (&self.rope, &self.attention);
        for (field, got, want) in [
            ("rope.heads", r.heads, a.heads),
            ("rope.kv_heads", r.kv_heads, a.kv_heads),
            ("rope.head_dim", r.head_dim, a.head_dim),
            ("rope.max_tokens", r.max_tokens, a.max_tokens),
        ] {
            if got != want {
                return bad(field, format!("must equal the attention's {want}, got {got}"));
            }
        }
        if r.dtype != a.q_dtype {
            return bad("rope.dtype", format!("must equal attention.q_dtype = {}, got {}", a.q_dtype, r.dtype));
        }
        if !a.eight_row_tiles() {
            return bad(
                "attention.max_q_len",
                format!(
                    "the fused kernel has 8-row (decode) tiles only: max_q_len · H / Hkv ≤ 8 and D ≤ 128, got {} · {} \
                     at D = {} (use rope_kv_append then paged)",
                    a.max_q_len,
                    a.heads / a.kv_heads.max(1),
                    a.head_dim
                ),
            );
        }
        if r.style == RopeStyle::Neox && r.rotary_dim % 16 != 0 {
            return bad(
                "rope.rotary_dim",
                format!(
                    "must be a multiple of 16 for NeoX pairs here (a thread takes 8 of each half), got {}",
                    r.rotary_dim
                ),
            );
        }
        Ok(())
    }

    /// The append's query: the attention's geometry (what `rope_kv_append` then `paged` would
    /// be planned with).
    pub fn append_query(&self) -> kv_append::Query {
        let a = &self.attention;
        kv_append::Query {
            kv_heads: a.kv_heads,
            head_dim: a.head_dim,
            page_size: a.page_size,
            dtype: a.q_dtype,
            cache_dtype: a.kv_dtype,
            max_batch: a.max_batch,
            max_tokens: a.max_tokens,
            max_pages: a.max_pages,
            num_pages: a.num_pages,
        }
    }

    /// Checks `args` against the three ops' rules and builds the kernel parameters (scratch
    /// pointers and the split cap left 0); nothing is launched.
    pub fn kernel_params(&self, args: &mut Args<'_>) -> Result<PagedRopeParams> {
        self.kernel_params_with(args, &self.rope.frequencies())
    }

    fn kernel_params_with(&self, args: &mut Args<'_>, freqs: &Frequencies) -> Result<PagedRopeParams> {
        // The attention's checks (q, o, lse, the caches read, scales, sinks, the batch; o, lse
        // and the error word disjoint from its inputs).
        let attn = self.attention.kernel_params(&paged::Args {
            q: args.q,
            k_cache: args.k_cache.as_ref(),
            v_cache: args.v_cache.as_ref(),
            k_scale: args.k_scale,
            v_scale: args.v_scale,
            sinks: args.sinks,
            page_table: args.page_table,
            seq_lens: args.seq_lens,
            cu_seqlens_q: args.cu_seqlens_q,
            o: args.o.reborrow(),
            lse: args.lse.as_mut().map(|l| l.reborrow()),
            error: args.error.reborrow(),
        })?;
        // The append's (k, v; the caches written, disjoint from k, v, the scales and the batch).
        let append = self.append_query().kernel_params(&kv_append::Args {
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
        let t = attn.tokens as usize;
        if append.tokens != attn.tokens {
            return Err(Error::Shape {
                tensor: "k",
                expected: format!("[T, Hkv, D] with T = {t} (the rows of q)"),
                actual: args.k.shape().to_vec(),
            });
        }
        // The rope's tensors.
        let r = &self.rope;
        args.positions.expect("positions", "[T]", DType::I32, &[t])?;
        crate::paging::require_contiguous("positions", &args.positions)?;
        r.check_table(&args.cos_sin)?;
        // What the three checks above did not pair: the caches are written while q, the sinks,
        // the positions and the table are read; o, lse and the error word while k, v, the
        // positions and the table are.
        let span = |x: &Option<TensorRef<'_>>| x.as_ref().map_or((0, 0), |x| x.byte_span());
        let read = [
            ("q", args.q.byte_span()),
            ("k", args.k.byte_span()),
            ("v", args.v.byte_span()),
            ("sinks", span(&args.sinks)),
            ("positions", args.positions.byte_span()),
            ("cos_sin", span(&args.cos_sin)),
        ];
        let lse = args.lse.as_ref().map_or((0, 0), |l| l.byte_span());
        for w in [
            ("k_cache", args.k_cache.byte_span()),
            ("v_cache", args.v_cache.byte_span()),
            ("o", args.o.byte_span()),
            ("lse", lse),
            ("error", args.error.byte_span()),
        ] {
            for x in read {
                require_disjoint(w, x)?;
            }
        }
        let rope = RopeParams {
            q: 0,
            k: 0,
            positions: args.positions.ptr(),
            cos_sin: args.cos_sin.map_or(0, |x| x.ptr()),
            error: 0,
            q_stride: 0,
            k_stride: 0,
            tokens: t as i32,
            heads: r.heads as i32,
            kv_heads: 0,
            head_dim: r.head_dim as i32,
            rotary_dim: r.rotary_dim as i32,
            rotary_offset: r.rotary_offset as i32,
            max_position: r.max_position as i32,
            scale: freqs.scale,
            inv_freq: freqs.inv_freq,
        };
        Ok(PagedRopeParams {
            attn,
            rope,
            k: append.k,
            v: append.v,
            k_stride: append.k_stride,
            v_stride: append.v_stride,
            neox: (r.style == RopeStyle::Neox) as i32,
            reserved: 0,
        })
    }

    /// The kernel symbol of the attention variant with `stages`-deep rings and `warps` warps per
    /// CTA, e.g. `b12x_paged_rope_bf16_d128_s3_n8_w8`.
    pub fn symbol_for(&self, stages: usize, warps: u32) -> String {
        self.attention.symbol_for(stages, warps).replacen("b12x_paged_", "b12x_paged_rope_", 1)
    }
}

/// A validated query bound to a device: the attention's plan (its variant, split cap, merge and
/// scratch) and the rope's frequencies.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    attention: paged::Plan,
    freqs: Frequencies,
    buckets: Vec<Bucket>,
    slot: PlanSlot,
}

/// Validates `query` and derives the attention's variant as [`paged::plan`] would. Allocates,
/// compiles and launches nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    plan_with(query, device, paged::PlanOptions::default())
}

/// [`plan`] with `paged`'s [`paged::PlanOptions`] (PDL, split cap, ring depth, warps, cluster
/// merge), which mean here what they mean there. A PDL plan reads, before its wait, what a
/// PDL `paged` plan reads (lengths, `cu_seqlens_q`, the page table, `k_scale` and the old keys'
/// first blocks) and the positions and the table: **those must not be written by the kernel
/// right before the call**; q, k and v are read after it. Each CTA lets the next PDL kernel
/// launch right after its wait, before it stores the new keys: a next kernel that reads the
/// caches before its own wait may see the old slots (the decoder step's next kernel, the O
/// projection, reads only its weight there).
pub fn plan_with(query: &Query, device: &Arc<Device>, options: paged::PlanOptions) -> Result<Plan> {
    query.validate()?;
    let attention = paged::plan_with(&query.attention, device, options)?;
    Ok(Plan {
        query: query.clone(),
        attention,
        freqs: query.rope.frequencies(),
        buckets: vec![Bucket { lo: 1, hi: query.attention.max_batch }],
        slot: PlanSlot::default(),
    })
}

impl Plan {
    pub fn query(&self) -> &Query {
        &self.query
    }
    /// The attention's plan: its split cap, ring depth, warps, merge and PDL flag.
    pub fn attention(&self) -> &paged::Plan {
        &self.attention
    }
    /// Scratch for the split merges (the attention's).
    pub fn scratch_layout(&self) -> ScratchLayout {
        self.attention.scratch_layout()
    }
    /// The cos/sin table of table mode (as `rope::Plan::cos_sin_table`); upload it once.
    pub fn cos_sin_table(&self) -> Vec<f32> {
        let q = &self.query.rope;
        rope::reference::table(q.max_position, q.rotary_dim, &self.freqs.inv_freq[..q.rotary_dim / 2])
    }
    fn symbol(&self) -> String {
        self.query.symbol_for(self.attention.stages(), self.attention.warps())
    }
}

/// The tensors of one call: the attention's, the rope's (positions, table) and the new rows.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[T, H, D]`: the new tokens' queries, **unrotated** (read only).
    pub q: TensorRef<'a>,
    /// `[T, Hkv, D]`: the new keys, unrotated (read only; the cache gets them rotated).
    pub k: TensorRef<'a>,
    /// `[T, Hkv, D]`: the new values.
    pub v: TensorRef<'a>,
    /// `[num_pages, P, Hkv, D]`: read, and written at the new tokens' slots.
    pub k_cache: TensorMut<'a>,
    /// `[num_pages, P, Hkv, D]`.
    pub v_cache: TensorMut<'a>,
    /// `[B, Hkv]` f32, E4M3 caches only.
    pub k_scale: Option<TensorRef<'a>>,
    /// `[B, Hkv]` f32, E4M3 caches only.
    pub v_scale: Option<TensorRef<'a>>,
    /// `[H]` f32, exactly when the attention has sinks.
    pub sinks: Option<TensorRef<'a>>,
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
    /// `[T, H, D]`, q's dtype.
    pub o: TensorMut<'a>,
    /// `[T, H]` f32, optional.
    pub lse: Option<TensorMut<'a>>,
    /// `[1]` i32 fault bits (the three ops').
    pub error: TensorMut<'a>,
}

/// Appends the rotated new keys and values and computes `args.o` (and `args.lse`) on `stream`.
/// Every check happens before the launch; no allocation, no synchronization. `B = 0` or `T = 0`
/// launches nothing.
pub fn run(plan: &Plan, mut args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let mut params = plan.query.kernel_params_with(&mut args, &plan.freqs)?;
    let attention = &plan.attention;
    let layout = attention.scratch_layout();
    let bound = layout.bind(&scratch)?;
    attention.device().check_stream(stream)?;
    if params.attn.batch == 0 || params.attn.tokens == 0 {
        return Ok(());
    }
    params.attn.max_splits = attention.max_splits() as i32;
    params.attn.partials = bound.ptr("partials");
    params.attn.partial_ml = bound.ptr("partial_ml");
    params.attn.counters = bound.ptr("counters");
    if attention.pdl() {
        params.attn.flags |= FLAG_PDL;
    }
    let selected = resolve(plan, 0, stream)?;
    launch(plan, &selected, &params, stream)
}

fn launch(plan: &Plan, selected: &Selected, p: &PagedRopeParams, stream: &CudaStream) -> Result<()> {
    let kernel = selected.kernels.first().ok_or_else(|| Error::UnknownConfig {
        op: OP,
        bucket: String::new(),
        config: selected.config.clone(),
    })?;
    let a = &plan.attention;
    let dims = paged::launch_dims(&plan.query.attention, a.stages(), a.warps(), &p.attn);
    // SAFETY: PagedRopeParams mirrors the kernel's struct (asserted on both sides); its parts
    // passed the three ops' checks (or describe the race's own buffer); the scratch regions were
    // bound at the plan's sizes; the kernel bounds every device index before use (the new rows'
    // slots as kv_append does). A cluster spans grid x exactly. With FLAG_PDL the kernel waits
    // before every write and before reading q, k and v (see plan_with).
    let pdl = p.attn.flags & FLAG_PDL != 0;
    unsafe { kernel.launch_ex(stream, dims, p, LaunchOpts { pdl, cluster_x: a.cluster_x() }) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        format!("rope[{:?}] attention[{}]", self.query.rope, self.attention.query_key())
    }
    fn device(&self) -> &Arc<Device> {
        self.attention.device()
    }
    fn module(&self) -> &'static KernelModule {
        &crate::PAGED_ROPE_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        vec![CONFIG.into()]
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        if config_index == 0 {
            vec![self.symbol()]
        } else {
            Vec::new()
        }
    }
    fn dynamic_smem(&self, _bucket: usize, _config_index: usize) -> u32 {
        self.query.attention.smem_bytes_for(self.attention.stages(), self.attention.warps())
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        // One config: never raced. For tools that time every op: one request, one new token at
        // position 0 of page 0, zero inputs.
        let (q, r) = (&self.query.attention, &self.query.rope);
        let kv_row = q.kv_heads * q.head_dim * q.q_dtype.size_bytes();
        let table = if r.cos_sin == CosSin::Table { r.rotary_dim * 4 } else { 16 };
        // The attention's call (buffers 0–11), then the k and v rows, the position, the table.
        let (race, attn) = self.attention.race_call(&[kv_row, kv_row, 4, table])?;
        let at = |i: usize| race.ptrs[i];
        let (h, hkv, d) = (q.heads, q.kv_heads, q.head_dim);
        let rope = RopeParams {
            q: 0,
            k: 0,
            positions: at(14),
            cos_sin: if r.cos_sin == CosSin::Table { at(15) } else { 0 },
            error: 0,
            q_stride: 0,
            k_stride: 0,
            tokens: 1,
            heads: h as i32,
            kv_heads: 0,
            head_dim: d as i32,
            rotary_dim: r.rotary_dim as i32,
            rotary_offset: r.rotary_offset as i32,
            max_position: 1,
            scale: self.freqs.scale,
            inv_freq: self.freqs.inv_freq,
        };
        let params = PagedRopeParams {
            attn,
            rope,
            k: at(12),
            v: at(13),
            k_stride: (hkv * d) as i64,
            v_stride: (hkv * d) as i64,
            neox: (r.style == RopeStyle::Neox) as i32,
            reserved: 0,
        };
        Ok(Box::new(RaceCase { plan: self.clone(), params, _buffer: race }))
    }
}

/// What a timing tool launches.
struct RaceCase {
    plan: Plan,
    params: PagedRopeParams,
    _buffer: RaceBuffer,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(&self.plan, selected, &self.params, stream)
    }
}
