//! `norm.rmsnorm`: RMSNorm over the rows of a matrix, optionally fused with a residual add.
//!
//! ```text
//! plain:  y[t,:] = x[t,:] · rsqrt(mean(x[t,:]²) + eps) · w[:]
//! fused:  r = round(x[t,:] + residual[t,:]);  residual[t,:] ← r;  y[t,:] = r · rsqrt(mean(r²) + eps) · w[:]
//! ```
//!
//! - Tensors (row-major, strides in elements): `x [T, D]`, `residual [T, D]`, `w [D]`,
//!   `y [T, D]`, all of one dtype: bf16, f16 or f32.
//! - Math in f32 with one rounding to the dtype. The fused form normalizes the *rounded* sum,
//!   the value written back to `residual` and read by the next layer (the usual fused
//!   add-RMSNorm convention). [`reference`](mod@reference) lists every rounding point; GPU
//!   results are within [`reference::ulp_bound`] ULPs of it, the updated residual bitwise equal.
//! - Constraints: `D % 8 == 0`, `D ≤ 16384`; every row 16-byte aligned (pointer and row stride);
//!   `w` contiguous; rows may be padded (row stride ≥ D); `T ≤ Query::max_tokens`.
//! - Aliasing: `y` may alias `x` exactly (same pointer and strides, views built with
//!   `from_raw`): each thread reads the elements it writes before writing them. `residual` must
//!   not overlap `x` or `y`.
//! - Kernel: one CTA per row, the row held in registers as 16-byte vectors; the config is how
//!   many vectors each thread holds (`"v1"`, `"v2"`, `"v4"`, `"v8"`), tuned per bucket of T.
//!   Each entry point first lets a PDL-launched next kernel (a GEMV streaming its weight) start;
//!   on the op's plain launches its own wait returns at once (suite again after this:
//!   `bench-results/2026-12-04-h200-c/call4`, 83/83, memcheck 77/77).
//!
//! ```no_run
//! use b12x_core::{DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! use b12x_norm::rmsnorm::{self, Args, Query};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let query = Query { cols: 4096, dtype: DType::BF16, max_tokens: 256, eps: 1e-6, residual: false };
//! let plan = rmsnorm::plan(&query, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let x = dev.stream().alloc_zeros::<b12x_core::half::bf16>(8 * 4096)?;
//! let w = dev.stream().alloc_zeros::<b12x_core::half::bf16>(4096)?;
//! let mut y = dev.stream().alloc_zeros::<b12x_core::half::bf16>(8 * 4096)?;
//! let args = Args {
//!     x: TensorRef::from_slice(&x, &[8, 4096])?,
//!     residual: None,
//!     w: TensorRef::from_slice(&w, &[4096])?,
//!     y: TensorMut::from_slice(&mut y, &[8, 4096])?,
//! };
//! rmsnorm::run(&plan, args, Scratch::none(), dev.stream())?;
//! # Ok(()) }
//! ```

mod params;
pub mod reference;

pub use params::{RmsnormParams, FLAG_RELEASE_AT_ENTRY};

use b12x_core::cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};
use b12x_core::plan::bucket_of;
use b12x_core::{
    require_disjoint, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchDims, LaunchOpts, OpPlan,
    PlanSlot, Result, Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "norm.rmsnorm";
/// Largest D (`kMaxCols` in the kernel, which sizes each variant's launch bound from it).
pub const MAX_COLS: usize = 16384;
/// D must be a multiple of this: one 16-byte vector of bf16/f16 (two of f32).
pub const COL_MULTIPLE: usize = 8;
/// The variant table: `kVecsPerThread` values instantiated in `kernels/rmsnorm.cu`.
pub const VECS_PER_THREAD: [usize; 4] = [1, 2, 4, 8];
const MAX_BLOCK_THREADS: usize = 1024;
/// Most rows the autotune race allocates (see `bench_case`).
const RACE_MAX_ROWS: usize = 16384;
/// Upper edges of the buckets of T: up to 128 rows the grid is one partial wave and latency
/// decides; up to 2048 a few waves; beyond, sustained bandwidth.
const BUCKET_EDGES: [usize; 2] = [128, 2048];

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "norm",
        entry_points: &["plan", "run"],
        dtypes: &["bf16", "f16", "f32"],
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-norm",
        summary: "RMSNorm over rows, optionally fused with a residual add",
    }
}

/// The static problem: geometry, dtype, form and capacity.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// D: elements per row.
    pub cols: usize,
    /// dtype of `x`, `residual`, `w` and `y`: bf16, f16 or f32.
    pub dtype: DType,
    /// Capacity: the largest T `run` accepts.
    pub max_tokens: usize,
    /// Added to `mean(x²)` before the rsqrt (finite, ≥ 0). With 0, an all-zero row gives NaN.
    pub eps: f32,
    /// The fused form: `residual ← round(x + residual)`, then normalize that.
    pub residual: bool,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if !matches!(self.dtype, DType::BF16 | DType::F16 | DType::F32) {
            return bad("dtype", format!("must be bf16, f16 or f32, got {}", self.dtype));
        }
        if self.cols == 0 || self.cols % COL_MULTIPLE != 0 || self.cols > MAX_COLS {
            return bad(
                "cols",
                format!("(D) must be a multiple of {COL_MULTIPLE} in 8..={MAX_COLS}, got {}", self.cols),
            );
        }
        // The grid has one CTA per row: gridDim.x ≤ 2^31 - 1.
        if self.max_tokens == 0 || self.max_tokens > i32::MAX as usize {
            return bad("max_tokens", format!("must be in 1..={}, got {}", i32::MAX, self.max_tokens));
        }
        if !(self.eps.is_finite() && self.eps >= 0.0) {
            return bad("eps", format!("must be finite and >= 0, got {}", self.eps));
        }
        Ok(())
    }

    /// Checks `args` against the query and builds the kernel parameters; nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<RmsnormParams> {
        let (d, dtype) = (self.cols, self.dtype);
        let t = args.x.shape().first().copied().unwrap_or(0);
        args.x.expect("x", "[T, D]", dtype, &[t, d])?;
        args.y.expect("y", "[T, D]", dtype, &[t, d])?;
        args.w.expect("w", "[D]", dtype, &[d])?;
        if t > self.max_tokens {
            return Err(Error::Capacity { what: "T (rows of x)", got: t, capacity: self.max_tokens });
        }
        if args.residual.is_some() != self.residual {
            let expected = match self.residual {
                true => format!("[T, D] = [{t}, {d}] (the plan has residual = true)"),
                false => "no tensor (the plan has residual = false)".into(),
            };
            let actual = args.residual.as_ref().map(|r| r.shape().to_vec()).unwrap_or_default();
            return Err(Error::Shape { tensor: "residual", expected, actual });
        }
        if let Some(r) = &args.residual {
            r.expect("residual", "[T, D]", dtype, &[t, d])?;
        }
        if args.w.strides() != [1] {
            let reason = "w must be contiguous".into();
            return Err(Error::Stride { tensor: "w", strides: args.w.strides().to_vec(), reason });
        }
        let mut p = RmsnormParams {
            x: args.x.ptr(),
            w: args.w.ptr(),
            y: args.y.ptr(),
            x_stride: args.x.row_stride("x")? as i64,
            y_stride: args.y.row_stride("y")? as i64,
            rows: t as i32,
            cols: d as i32,
            eps: self.eps,
            ..RmsnormParams::default()
        };
        // The kernel moves whole 16-byte vectors: every row must start on a 16-byte boundary.
        args.x.require_aligned("x", 16)?;
        args.y.require_aligned("y", 16)?;
        args.w.require_aligned("w", 16)?;
        if let Some(r) = &args.residual {
            p.residual = r.ptr();
            p.residual_stride = r.row_stride("residual")? as i64;
            r.require_aligned("residual", 16)?;
            // residual is read and rewritten row by row: it must not share memory with x or y.
            require_disjoint(("residual", r.byte_span()), ("x", args.x.byte_span()))?;
            require_disjoint(("residual", r.byte_span()), ("y", args.y.byte_span()))?;
        }
        // y may be x itself (same address and strides: each row is read before it is written),
        // never a partial overlap; nor may y overlap the weight.
        let exact_alias = args.y.ptr() == args.x.ptr() && args.y.strides() == args.x.strides();
        if !exact_alias {
            require_disjoint(("y", args.y.byte_span()), ("x", args.x.byte_span()))?;
        }
        require_disjoint(("y", args.y.byte_span()), ("w", args.w.byte_span()))?;
        Ok(p)
    }

    /// 16-byte vectors per row.
    fn vecs(&self) -> usize {
        self.cols * self.dtype.size_bytes() / 16
    }
}

/// One kernel variant: each thread holds `vecs_per_thread` 16-byte vectors of its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    pub vecs_per_thread: usize,
}

impl Config {
    /// The config id used in pins and caches: `"v2"`.
    pub fn id(&self) -> String {
        format!("v{}", self.vecs_per_thread)
    }
    /// Parses an id made by [`Config::id`].
    pub fn parse(id: &str) -> Option<Self> {
        let v = id.strip_prefix('v')?.parse().ok()?;
        VECS_PER_THREAD.contains(&v).then_some(Config { vecs_per_thread: v })
    }
    /// Threads per CTA: whole warps covering the row.
    pub fn block_threads(&self, query: &Query) -> usize {
        query.vecs().div_ceil(self.vecs_per_thread).next_multiple_of(32)
    }
    /// The kernel symbol, e.g. `b12x_rmsnorm_add_v2_bf16`.
    pub fn symbol(&self, query: &Query) -> String {
        let form = if query.residual { "_add" } else { "" };
        format!("b12x_rmsnorm{form}_v{}_{}", self.vecs_per_thread, query.dtype.name())
    }
}

/// The legal configs of a valid `query`, default first.
pub fn configs(query: &Query) -> Vec<Config> {
    let mut legal: Vec<Config> = VECS_PER_THREAD
        .iter()
        .map(|&v| Config { vecs_per_thread: v })
        // The block must fit the hardware (the kernel's launch bound then holds too, see kMaxCols).
        .filter(|c| c.block_threads(query) <= MAX_BLOCK_THREADS)
        // A larger variant whose half-size sibling already fits one warp only idles registers.
        .filter(|c| c.vecs_per_thread == 1 || query.vecs().div_ceil(c.vecs_per_thread / 2) > 32)
        .collect();
    // Default: the first block of ≤ 256 threads (enough warps to hide the reduction, several CTAs
    // per SM to overlap their barriers), else the smallest block.
    if let Some(i) = legal.iter().position(|c| c.block_threads(query) <= 256).or(legal.len().checked_sub(1)) {
        legal[..=i].rotate_right(1);
    }
    legal
}

/// Buckets of T for a capacity: `1..=128`, `129..=2048`, `2049..=capacity`, cut at capacity.
pub fn buckets(capacity: usize) -> Vec<Bucket> {
    b12x_core::edge_buckets(&BUCKET_EDGES, capacity)
}

/// A validated query bound to a device; a cheap handle whose prepared state a session fills.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    configs: Vec<Config>,
    slot: PlanSlot,
    pdl: bool,
    early_release: bool,
}

/// Validates `query` and enumerates its configs. Allocates, compiles and launches nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    Ok(Plan {
        query: query.clone(),
        device: device.clone(),
        buckets: buckets(query.max_tokens),
        configs: configs(query),
        slot: PlanSlot::default(),
        pdl: false,
        early_release: false,
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
    /// With PDL ([`Plan::with_pdl`]), lets the next PDL kernel launch as this kernel starts,
    /// before its `griddepcontrol.wait` (otherwise right after it). The next kernel's own wait
    /// still waits for this grid, which waits for the kernel before it, so results are the
    /// same; what changes is that the next kernel's **pre-wait part** (a PDL GEMV's first
    /// weight stages, a PDL `attention.paged`'s lengths, page table and old keys) may then run
    /// while the kernel *before this one* still runs. Use it only where that kernel does not
    /// write what the next kernel reads before its wait (in a decode step: weights, the
    /// host-written lengths and page tables, keys of earlier steps). Its point: a big kernel
    /// after this small one gets its SMs, and starts streaming, while the big kernel before
    /// this one drains, instead of after this one's wait. No effect on plain launches.
    ///
    /// ```
    /// # use b12x_norm::rmsnorm;
    /// # fn f(dev: &std::sync::Arc<b12x_core::Device>) -> b12x_core::Result<()> {
    /// let q = rmsnorm::Query { cols: 4096, dtype: b12x_core::DType::BF16, max_tokens: 8, eps: 1e-6, residual: true };
    /// let plan = rmsnorm::plan(&q, dev)?.with_pdl(true).with_early_release(true);
    /// assert!(plan.early_release());
    /// # Ok(()) }
    /// ```
    pub fn with_early_release(mut self, early: bool) -> Self {
        self.early_release = early;
        self
    }
    /// Whether a PDL launch releases the next kernel at entry ([`Plan::with_early_release`]).
    pub fn early_release(&self) -> bool {
        self.early_release
    }
    pub fn query(&self) -> &Query {
        &self.query
    }
    pub fn configs(&self) -> &[Config] {
        &self.configs
    }
    /// The op needs no scratch: the layout is empty and any buffer (or [`Scratch::none`]) does.
    pub fn scratch_layout(&self) -> ScratchLayout {
        ScratchLayout::new()
    }
}

/// The plans `cargo xtask prepare` tunes by default: bf16, plain and fused, for the hidden
/// sizes of the shared model table (2048, 2880, 4096, 7168), capacity 4096 tokens.
pub fn default_profile_plans(device: &Arc<Device>) -> Result<Vec<Box<dyn OpPlan>>> {
    let mut out: Vec<Box<dyn OpPlan>> = Vec::new();
    for cols in [2048, 2880, 4096, 7168] {
        for residual in [false, true] {
            let q = Query { cols, dtype: DType::BF16, max_tokens: 4096, eps: 1e-6, residual };
            out.push(Box::new(plan(&q, device)?));
        }
    }
    Ok(out)
}

/// The tensors of one call. Shapes and dtypes as in the module docs.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[T, D]`, the input rows.
    pub x: TensorRef<'a>,
    /// `[T, D]`, read and overwritten with `x + residual`; `Some` exactly when the plan has
    /// `residual = true`.
    pub residual: Option<TensorMut<'a>>,
    /// `[D]`, the weight (contiguous).
    pub w: TensorRef<'a>,
    /// `[T, D]`, the output.
    pub y: TensorMut<'a>,
}

/// Normalizes `args.x` into `args.y` on `stream`. Every check happens before the launch; no
/// allocation, no synchronization. `T = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let mut params = plan.query.kernel_params(&args)?;
    if plan.pdl && plan.early_release {
        params.flags |= FLAG_RELEASE_AT_ENTRY;
    }
    plan.scratch_layout().bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.rows == 0 {
        return Ok(());
    }
    let rows = params.rows as usize;
    let capacity = Error::Capacity { what: "T (rows of x)", got: rows, capacity: plan.query.max_tokens };
    let bucket = bucket_of(&plan.buckets, rows).ok_or(capacity)?;
    let selected = resolve(plan, bucket, stream)?;
    launch(&plan.query, &selected, &params, stream, plan.pdl)
}

fn launch(query: &Query, selected: &Selected, params: &RmsnormParams, stream: &CudaStream, pdl: bool) -> Result<()> {
    let unknown = || Error::UnknownConfig { op: OP, bucket: String::new(), config: selected.config.clone() };
    let config = Config::parse(&selected.config).ok_or_else(unknown)?;
    let kernel = selected.kernels.first().ok_or_else(unknown)?;
    let dims = LaunchDims {
        grid: (params.rows as u32, 1, 1),
        block: (config.block_threads(query) as u32, 1, 1),
        smem_bytes: 0,
    };
    // SAFETY: RmsnormParams mirrors the kernel's struct (asserted on both sides), and `params`
    // passed the checks of `Query::kernel_params` or describes the race's own buffer.
    unsafe { kernel.launch_ex(stream, dims, params, LaunchOpts { pdl, cluster_x: 0 }) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        // eps is a kernel argument that does not change speed: not part of the key.
        let q = &self.query;
        format!("D={} dtype={} residual={} max_tokens={}", q.cols, q.dtype, q.residual, q.max_tokens)
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::RMSNORM_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        self.configs.iter().map(Config::id).collect()
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        self.configs.get(config_index).map(|c| vec![c.symbol(&self.query)]).unwrap_or_default()
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        // The bucket's largest T, capped: at 16384 rows every config already runs many full
        // waves (its steady state), and a huge capacity must not make the race allocate GBs.
        let rows = self.buckets.get(bucket).map_or(1, |b| b.hi.min(RACE_MAX_ROWS));
        let (d, residual) = (self.query.cols, self.query.residual);
        // One zeroed buffer holds w, then x, y (and residual) as contiguous [rows, D] tensors.
        // Zeros are a valid input (rsqrt(eps) is finite); speed does not depend on values.
        let stream = self.device.stream();
        let row_bytes = d * self.query.dtype.size_bytes();
        let tensors = if residual { 3 } else { 2 };
        let mut buffer = stream.alloc_zeros::<u8>((1 + tensors * rows) * row_bytes)?;
        let at = |base: u64, i: usize| base + (row_bytes * (1 + i * rows)) as u64;
        let base = buffer.device_ptr_mut(stream).0;
        let params = RmsnormParams {
            w: base,
            x: at(base, 0),
            y: at(base, 1),
            residual: if residual { at(base, 2) } else { 0 },
            x_stride: d as i64,
            residual_stride: d as i64,
            y_stride: d as i64,
            rows: rows as i32,
            cols: d as i32,
            eps: self.query.eps,
            flags: 0,
        };
        Ok(Box::new(RaceCase { query: self.query.clone(), params, _buffer: buffer }))
    }
}

/// What the autotune race launches each candidate on.
struct RaceCase {
    query: Query,
    params: RmsnormParams,
    _buffer: CudaSlice<u8>,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(&self.query, selected, &self.params, stream, false)
    }
}
