//! `attention.kv_append`: writes the new tokens' K and V into their pages of a paged KV cache.
//!
//! ```text
//! for packed row r = cu[b] + i of request b:   p = L_b − q_len_b + i   (crate::paging)
//!   k_cache[page_table[b, p / P], p % P, g, :] = k[r, g, :]                       (BF16/FP16 cache)
//!                                              = e4m3(k[r, g, :] / k_scale[b, g])  (E4M3 cache)
//!   and the same for v.
//! ```
//!
//! - Tensors: `k`, `v` `[T, Hkv, D]` bf16/f16 (rows may be strided, e.g. slices of a fused QKV
//!   projection; heads contiguous within a row); caches `[num_pages, P, Hkv, D]` contiguous, of
//!   the input's dtype or E4M3 (views labelled `E4M3` or `U8`); `k_scale`, `v_scale` `[B, Hkv]` f32 (E4M3 caches only; device
//!   tensors, so a captured graph sees updated scales); `page_table [B, max_pages]`,
//!   `seq_lens [B]`, `cu_seqlens_q [B+1]` i32 on the device; `error [1]` i32 (an
//!   [`ErrorWord`](crate::paging::ErrorWord)).
//! - E4M3: `code = e4m3(x / scale)`, the f32 division rounded to nearest, then round to nearest
//!   even with saturation to ±448 (satfinite; NaN → 0x7F). Bitwise equal to
//!   [`reference::append`].
//! - Untrusted indices: the rules of [`crate::paging`]; bad rows are skipped, faults set in
//!   `error` by the rows that meet them; rows past `cu[B]` are padding and are skipped.
//! - Constraints: `D ∈ {64, 96, 128, 256}`, `P ∈ {16, 32, 64}`; 16-byte aligned rows of k and v.
//!   `B` and `T` are host values (the tensors' shapes) up to the plan's capacities; lengths and
//!   page tables are device values: a captured graph replays correctly after they change.
//! - Kernel: one thread per 8-element chunk of one (row, KV head), K and V together, their loads
//!   issued first; batches of fewer than 2048 requests keep `cu_seqlens_q` and `seq_lens` in shared
//!   memory. E4M3: one reciprocal of the scale per thread and an exact three-instruction division
//!   for scales in [2^-90, 2^100], the IEEE division for any other. One config. Each entry point
//!   first waits for the kernel before it (a PDL launch with [`Plan::with_pdl`]; on plain
//!   launches the wait returns at once), then lets a PDL-launched next kernel
//!   (`attention.paged` with `PlanOptions::pdl`) start (suite again after this:
//!   `bench-results/2026-12-04-h200-c/call4`, 77/77, memcheck 77/77; after the kernel moved
//!   into `kv_append.cuh`: `…/2026-12-04-h200-d/call3`, 77/77, memcheck 77/77).
//! - Performance (H200, `benches/kv_append.rs`, Llama-3-8B KV heads, P = 16, scattered pages):
//!   a decode step's append 4.7–5.8 µs (BF16) and 5.0–6.1 µs (E4M3) for B = 1–128, 1.8–4.6× PyTorch's
//!   `index_copy_`; 65536 new tokens 86% of the read ceiling (BF16, 0.94× a device copy of the
//!   same bytes) and 68% (E4M3).
//!
//! ```no_run
//! use b12x_attention::kv_append::{self, Args, Query};
//! use b12x_attention::paging::ErrorWord;
//! use b12x_core::{DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let (b, t, hkv, d, p, max_pages, num_pages) = (2, 2, 8, 128, 16, 64, 128);
//! let q = Query {
//!     kv_heads: hkv, head_dim: d, page_size: p, dtype: DType::BF16, cache_dtype: DType::BF16,
//!     max_batch: 8, max_tokens: 64, max_pages, num_pages,
//! };
//! let plan = kv_append::plan(&q, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let s = dev.stream();
//! let k = s.alloc_zeros::<b12x_core::half::bf16>(t * hkv * d)?;
//! let v = s.alloc_zeros::<b12x_core::half::bf16>(t * hkv * d)?;
//! let mut kc = s.alloc_zeros::<b12x_core::half::bf16>(num_pages * p * hkv * d)?;
//! let mut vc = s.alloc_zeros::<b12x_core::half::bf16>(num_pages * p * hkv * d)?;
//! let pt = s.clone_htod(&(0..(b * max_pages) as i32).collect::<Vec<_>>())?;
//! let lens = s.clone_htod(&[5i32, 9])?;
//! let cu = s.clone_htod(&[0i32, 1, 2])?; // one new token per request (decode)
//! let mut err = ErrorWord::new(s)?;
//! let args = Args {
//!     k: TensorRef::from_slice(&k, &[t, hkv, d])?,
//!     v: TensorRef::from_slice(&v, &[t, hkv, d])?,
//!     k_cache: TensorMut::from_slice(&mut kc, &[num_pages, p, hkv, d])?,
//!     v_cache: TensorMut::from_slice(&mut vc, &[num_pages, p, hkv, d])?,
//!     k_scale: None,
//!     v_scale: None,
//!     page_table: TensorRef::from_slice(&pt, &[b, max_pages])?,
//!     seq_lens: TensorRef::from_slice(&lens, &[b])?,
//!     cu_seqlens_q: TensorRef::from_slice(&cu, &[b + 1])?,
//!     error: err.view()?,
//! };
//! kv_append::run(&plan, args, Scratch::none(), s)?;
//! assert!(err.read(s)?.is_clear());
//! # Ok(()) }
//! ```

mod params;
pub mod reference;

pub use params::KvAppendParams;

use crate::paging::{check_batch_tensors, require_contiguous};
use b12x_core::cudarc::driver::CudaStream;
use b12x_core::RaceBuffer;
use b12x_core::{
    require_disjoint, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchDims, LaunchOpts, OpPlan,
    PlanSlot, Result, Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "attention.kv_append";
/// Head dims the attention ops plan for.
pub const HEAD_DIMS: [usize; 4] = [64, 96, 128, 256];
/// Page sizes (tokens per page) the attention ops plan for.
pub const PAGE_SIZES: [usize; 3] = [16, 32, 64];
/// Threads per CTA (`kKvAppendThreads`).
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
        summary: "write new tokens' K/V into a paged cache (BF16/FP16 or E4M3 with [B, Hkv] scales)",
    }
}

/// The static problem: geometry, dtypes and capacities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// Hkv.
    pub kv_heads: usize,
    /// D, one of [`HEAD_DIMS`].
    pub head_dim: usize,
    /// P (tokens per page), one of [`PAGE_SIZES`].
    pub page_size: usize,
    /// dtype of `k` and `v`: bf16 or f16.
    pub dtype: DType,
    /// dtype of the caches: `dtype` itself or E4M3.
    pub cache_dtype: DType,
    /// Capacity: the largest B (`seq_lens` entries) `run` accepts.
    pub max_batch: usize,
    /// Capacity: the largest T (packed rows of k and v) `run` accepts.
    pub max_tokens: usize,
    /// Page table entries per request (its second dimension): contexts up to `max_pages · P`.
    pub max_pages: usize,
    /// Pages in each cache (its first dimension).
    pub num_pages: usize,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if !matches!(self.dtype, DType::BF16 | DType::F16) {
            return bad("dtype", format!("must be bf16 or f16, got {}", self.dtype));
        }
        if self.cache_dtype != self.dtype && self.cache_dtype != DType::E4M3 {
            return bad(
                "cache_dtype",
                format!("must be {} (the input's) or e4m3, got {}", self.dtype, self.cache_dtype),
            );
        }
        if !HEAD_DIMS.contains(&self.head_dim) {
            return bad("head_dim", format!("must be one of {HEAD_DIMS:?}, got {}", self.head_dim));
        }
        if !PAGE_SIZES.contains(&self.page_size) {
            return bad("page_size", format!("must be one of {PAGE_SIZES:?}, got {}", self.page_size));
        }
        let max = i32::MAX as usize;
        for (field, v) in [
            ("kv_heads", self.kv_heads),
            ("max_batch", self.max_batch),
            ("max_tokens", self.max_tokens),
            ("max_pages", self.max_pages),
            ("num_pages", self.num_pages),
        ] {
            if v == 0 || v > max {
                return bad(field, format!("must be in 1..={max}, got {v}"));
            }
        }
        // Element offsets in the kernel are 64-bit; positions (max_pages · P) and rows × heads ×
        // chunks must fit i32 / the grid.
        if self.max_pages * self.page_size > max {
            return bad("max_pages", format!("· page_size must be ≤ {max}, got {}", self.max_pages * self.page_size));
        }
        if self.max_tokens * self.kv_heads * self.head_dim / 8 > max {
            return bad("max_tokens", "· kv_heads · head_dim / 8 must fit a 32-bit grid".into());
        }
        Ok(())
    }

    fn e4m3(&self) -> bool {
        self.cache_dtype == DType::E4M3
    }

    /// Checks `args` against the query and builds the kernel parameters; nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<KvAppendParams> {
        let (hkv, d, p) = (self.kv_heads, self.head_dim, self.page_size);
        let (b, pt_stride) =
            check_batch_tensors(&args.page_table, &args.seq_lens, &args.cu_seqlens_q, self.max_pages, self.max_batch)?;
        let t = args.k.shape().first().copied().unwrap_or(0);
        args.k.expect("k", "[T, Hkv, D]", self.dtype, &[t, hkv, d])?;
        args.v.expect("v", "[T, Hkv, D]", self.dtype, &[t, hkv, d])?;
        let cache = [self.num_pages, p, hkv, d];
        for (name, c) in [("k_cache", &args.k_cache), ("v_cache", &args.v_cache)] {
            // An E4M3 cache may be labelled E4M3 or U8 (raw codes, as the quantizers write them).
            let dtype = if self.e4m3() && c.dtype() == DType::U8 { DType::U8 } else { self.cache_dtype };
            c.expect(name, "[num_pages, P, Hkv, D]", dtype, &cache)?;
        }
        args.error.expect("error", "[1]", DType::I32, &[1])?;
        if t > self.max_tokens {
            return Err(Error::Capacity { what: "T (rows of k and v)", got: t, capacity: self.max_tokens });
        }
        let scales = [("k_scale", &args.k_scale), ("v_scale", &args.v_scale)];
        for (name, s) in scales {
            match (s, self.e4m3()) {
                (Some(s), true) => {
                    s.expect(name, "[B, Hkv]", DType::F32, &[b, hkv])?;
                    require_contiguous(name, s)?;
                }
                (None, false) => {}
                (s, e4m3) => {
                    let expected = if e4m3 { format!("[B, Hkv] = [{b}, {hkv}] (E4M3 cache)") } else { "none".into() };
                    let actual = s.map(|s| s.shape().to_vec()).unwrap_or_default();
                    return Err(Error::Shape { tensor: name, expected, actual });
                }
            }
        }
        let row_stride = |name: &'static str, x: &TensorRef<'_>| -> Result<i64> {
            let s = x.strides();
            if s[2] != 1 || s[1] != d as isize || (t > 1 && s[0] < (hkv * d) as isize) {
                let reason = "heads must be contiguous within a row ([s, D, 1], s ≥ Hkv·D)".into();
                return Err(Error::Stride { tensor: name, strides: s.to_vec(), reason });
            }
            Ok(s[0] as i64)
        };
        let (k_stride, v_stride) = (row_stride("k", &args.k)?, row_stride("v", &args.v)?);
        args.k.require_aligned("k", 16)?;
        args.v.require_aligned("v", 16)?;
        for (name, c) in [("k_cache", &args.k_cache), ("v_cache", &args.v_cache)] {
            require_contiguous(name, &c.as_ref())?;
            c.require_aligned(name, 16)?;
        }
        // The caches and the error word are written (the error by atomicOr): none may overlap
        // another or anything read. An absent scale is an empty span.
        let span = |s: &Option<TensorRef<'_>>| s.map_or((0, 0), |s| s.byte_span());
        let (kc, vc) = (("k_cache", args.k_cache.byte_span()), ("v_cache", args.v_cache.byte_span()));
        let error = ("error", args.error.byte_span());
        require_disjoint(kc, vc)?;
        for out in [kc, vc, error] {
            for input in [
                ("k", args.k.byte_span()),
                ("v", args.v.byte_span()),
                ("page_table", args.page_table.byte_span()),
                ("seq_lens", args.seq_lens.byte_span()),
                ("cu_seqlens_q", args.cu_seqlens_q.byte_span()),
                ("k_scale", span(&args.k_scale)),
                ("v_scale", span(&args.v_scale)),
            ] {
                require_disjoint(out, input)?;
            }
        }
        for out in [kc, vc] {
            require_disjoint(out, error)?;
        }
        Ok(KvAppendParams {
            k: args.k.ptr(),
            v: args.v.ptr(),
            k_cache: args.k_cache.ptr(),
            v_cache: args.v_cache.ptr(),
            k_scale: args.k_scale.map_or(0, |s| s.ptr()),
            v_scale: args.v_scale.map_or(0, |s| s.ptr()),
            page_table: args.page_table.ptr(),
            seq_lens: args.seq_lens.ptr(),
            cu_seqlens_q: args.cu_seqlens_q.ptr(),
            error: args.error.ptr(),
            k_stride,
            v_stride,
            tokens: t as i32,
            batch: b as i32,
            max_pages: self.max_pages as i32,
            pt_stride: pt_stride as i32,
            num_pages: self.num_pages as i32,
            kv_heads: hkv as i32,
            head_dim: d as i32,
            page_size: p as i32,
        })
    }

    /// The kernel symbol, e.g. `b12x_kv_append_bf16_e4m3`.
    pub fn symbol(&self) -> String {
        let e4m3 = if self.e4m3() { "_e4m3" } else { "" };
        format!("b12x_kv_append_{}{e4m3}", self.dtype.name())
    }
}

/// A validated query bound to a device; a cheap handle whose prepared state a session fills.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    slot: PlanSlot,
    pdl: bool,
}

/// Validates `query`. Allocates, compiles and launches nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    Ok(Plan {
        query: query.clone(),
        device: device.clone(),
        buckets: vec![Bucket { lo: 1, hi: query.max_tokens }],
        slot: PlanSlot::default(),
        pdl: false,
    })
}

impl Plan {
    /// Launches every call of this plan with programmatic dependent launch (PDL) when `pdl`.
    /// The kernel waits (`griddepcontrol.wait`) for the work before it before touching
    /// anything, then lets a PDL-launched next kernel start, so in a stream or a captured graph
    /// of PDL launches (e.g. `gemm.bf16_gemv` with `Query::pdl`) its launch overlaps the
    /// previous kernel's tail. Results are the same either way; the tuning race times plain
    /// launches.
    pub fn with_pdl(mut self, pdl: bool) -> Self {
        self.pdl = pdl;
        self
    }
    /// Whether calls launch with PDL ([`Plan::with_pdl`]).
    pub fn pdl(&self) -> bool {
        self.pdl
    }
    pub fn query(&self) -> &Query {
        &self.query
    }
    /// The op needs no scratch.
    pub fn scratch_layout(&self) -> ScratchLayout {
        ScratchLayout::new()
    }
}

/// The tensors of one call. Shapes and dtypes as in the module docs.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[T, Hkv, D]`: the new tokens' keys (packed rows, `cu_seqlens_q` order).
    pub k: TensorRef<'a>,
    /// `[T, Hkv, D]`: their values.
    pub v: TensorRef<'a>,
    /// `[num_pages, P, Hkv, D]`, written at the new tokens' slots.
    pub k_cache: TensorMut<'a>,
    /// `[num_pages, P, Hkv, D]`.
    pub v_cache: TensorMut<'a>,
    /// `[B, Hkv]` f32, E4M3 caches only.
    pub k_scale: Option<TensorRef<'a>>,
    /// `[B, Hkv]` f32, E4M3 caches only.
    pub v_scale: Option<TensorRef<'a>>,
    /// `[B, max_pages]` i32 (rows may be strided).
    pub page_table: TensorRef<'a>,
    /// `[B]` i32: context lengths including the new tokens.
    pub seq_lens: TensorRef<'a>,
    /// `[B + 1]` i32.
    pub cu_seqlens_q: TensorRef<'a>,
    /// `[1]` i32 fault bits (`crate::paging::ErrorWord::view`).
    pub error: TensorMut<'a>,
}

/// Appends `args.k` / `args.v` into the caches on `stream`. Every check happens before the
/// launch; no allocation, no synchronization. `T = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let params = plan.query.kernel_params(&args)?;
    plan.scratch_layout().bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.tokens == 0 {
        return Ok(());
    }
    let selected = resolve(plan, 0, stream)?;
    launch(&selected, &params, stream, plan.pdl)
}

fn launch(selected: &Selected, p: &KvAppendParams, stream: &CudaStream, pdl: bool) -> Result<()> {
    let kernel = selected.kernels.first().ok_or_else(|| Error::UnknownConfig {
        op: OP,
        bucket: String::new(),
        config: selected.config.clone(),
    })?;
    let threads = p.tokens as usize * p.kv_heads as usize * p.head_dim as usize / 8;
    let dims =
        LaunchDims { grid: (threads.div_ceil(THREADS) as u32, 1, 1), block: (THREADS as u32, 1, 1), smem_bytes: 0 };
    // SAFETY: KvAppendParams mirrors the kernel's struct (asserted on both sides) and passed
    // `Query::kernel_params` (or describes the race's own buffer); the kernel bounds every
    // index read from the device before using it.
    unsafe { kernel.launch_ex(stream, dims, p, LaunchOpts { pdl, cluster_x: 0 }) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        let q = &self.query;
        format!(
            "Hkv={} D={} P={} dtype={} cache={} max_batch={} max_tokens={} max_pages={} num_pages={}",
            q.kv_heads,
            q.head_dim,
            q.page_size,
            q.dtype,
            q.cache_dtype,
            q.max_batch,
            q.max_tokens,
            q.max_pages,
            q.num_pages
        )
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::KV_APPEND_MODULE
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
        // One config: the session never races it; this case still runs (one request of one
        // token into page 0) for tools that time every op.
        let q = &self.query;
        let stream = self.device.stream();
        let row = q.kv_heads * q.head_dim;
        let page = q.page_size * row * q.cache_dtype.size_bytes();
        let (input, scales) = (row * q.dtype.size_bytes(), q.kv_heads * 4);
        // k, v, k_cache page, v_cache page, scales ×2, page_table row, seq_len, cu, error.
        let sizes = [input, input, page, page, scales, scales, q.max_pages * 4, 4, 8, 4];
        let race = RaceBuffer::new(&self.device, &sizes)?;
        // Zeros elsewhere make a valid batch (page 0; zero scales give saturated or NaN codes,
        // fine for timing): seq_lens = [1], cu_seqlens_q = [0, 1].
        b12x_core::memset_u32(stream, race.ptrs[7], 1, 1)?;
        b12x_core::memset_u32(stream, race.ptrs[8] + 4, 1, 1)?;
        let at = |i: usize| race.ptrs[i];
        let e4m3 = q.e4m3();
        let params = KvAppendParams {
            k: at(0),
            v: at(1),
            k_cache: at(2),
            v_cache: at(3),
            k_scale: if e4m3 { at(4) } else { 0 },
            v_scale: if e4m3 { at(5) } else { 0 },
            page_table: at(6),
            seq_lens: at(7),
            cu_seqlens_q: at(8),
            error: at(9),
            k_stride: row as i64,
            v_stride: row as i64,
            tokens: 1,
            batch: 1,
            max_pages: q.max_pages as i32,
            pt_stride: q.max_pages as i32,
            num_pages: 1,
            kv_heads: q.kv_heads as i32,
            head_dim: q.head_dim as i32,
            page_size: q.page_size as i32,
        };
        Ok(Box::new(RaceCase { params, _buffer: race }))
    }
}

/// What a timing tool launches.
struct RaceCase {
    params: KvAppendParams,
    _buffer: RaceBuffer,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(selected, &self.params, stream, false)
    }
}
