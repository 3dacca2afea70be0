//! `activation.silu_and_mul`: the SiLU-gated product of an MLP's fused gate/up projection (the
//! SwiGLU activation), written as bf16/f16 or quantized in the same kernel for the next GEMM.
//!
//! ```text
//! g = x[t, j],  u = x[t, I + j]   (j < I: the gate half first)
//! with a limit L:  g ← min(g, L),  u ← clamp(u, −L, L)   (the DeepSeek / gpt-oss "swiglu limit")
//! y[t, j] = round(g / (1 + exp(−g)) · u)                 (f32 math, one rounding to the dtype)
//! ```
//!
//! - Tensors (row-major): `x [T, 2I]` bf16 or f16, rows strided (row stride ≥ 2I elements) and
//!   16-byte aligned. Output ([`Query::out`]) either `y [T, I]` in the dtype of `x`, or the
//!   quantized `y` of `norm.rmsnorm_quant`'s formats ([`QuantOut`], the same layouts): `codes` u8
//!   `[T, I]` (E4M3, rows 8-byte aligned) or `[T, I/2]` (NVFP4 E2M1 pairs, rows 4-byte aligned),
//!   `scales [T, I/32]` u8 (MXFP8), `[T, I/128]` f32 or u8 (block FP8 1×128), `[T, I/16]` u8
//!   (NVFP4, UE4M3) and `enc [1]` f32 on the device (NVFP4's given encode scale; finite, > 0).
//! - Math: [`reference`](mod@reference) lists every rounding point. `y` is within
//!   [`reference::ULP_BOUND`] (1) ULP of the oracle (only `expf` differs). Quantized outputs:
//!   `y` is **rounded to the dtype first** and the quantizer sees those rounded values, so the
//!   codes and scales are bit for bit "`activation.silu_and_mul` to bf16/f16, then
//!   `quantization.mxfp8` / `.fp8_block` / `.nvfp4` (given)" (b12x-quant). Every config computes
//!   the same bits (no reduction).
//! - Constraints: `I` a multiple of 8 (and of the block, 32 / 128 / 16, for quantized outputs),
//!   `I ≤` [`MAX_INTER`]; `T ≤ Query::max_tokens`; outputs must not overlap `x` (or each other).
//!   `T = 0` launches nothing.
//! - Why in b12x-norm: the kernel is `norm.rmsnorm`'s row kernel without the reduction, and its
//!   quantized outputs reuse `norm.rmsnorm_quant`'s quantizing epilogue (`quantize_row`,
//!   `kernels/quant_row.cuh`, over `b12x/quant.cuh`) unchanged.
//! - Kernel (`kernels/silu_and_mul.cu`): CTA `(t, c)` holds chunk `c` of row `t` (its g and u
//!   vectors) in registers, 16-byte loads all in flight before any math. [`Config`]: vectors per
//!   thread (1, 2, 4, 8) and chunks per row (1, 2, 4, 8: more CTAs when T is small), raced per
//!   bucket of T. The per-vector math is `silu_mul_vec` of `b12x/activation.cuh` (b12x-core),
//!   which `gemm.bf16_gemv`'s fused SwiGLU x load (`XAct::SiluMul`) runs too: that GEMV sees
//!   exactly the bits this op writes.
//!
//! - Each entry point first lets a PDL-launched next kernel start (`pdl_wait_then_release`; its
//!   own wait returns at once on the op's plain launches): the GEMV after it can stream its
//!   weight meanwhile (`b12x-layers`).
//!
//! **Status: validated on the H200 (sm_90a)**: `tests/gpu_silu_and_mul.rs` 109/109 (every config
//! pinned; y within 1 ULP, quantized outputs bit-equal to the CPU codecs on the GPU's own y),
//! compute-sanitizer memcheck 69/69 and racecheck 47/47 on the reduced profile
//! (`bench-results/2026-12-04-h200-c/call1`; suite and memcheck again after the PDL release,
//! `…/call4`); sm_120a/sm_121a compiled and ptxas-checked (no spills), not run.
//!
//! **Performance** (H200, `benches/silu_and_mul.rs`, `bench-results/2026-12-04-h200-c/call3`,
//! PyTorch peer `F.silu(x[:, :I]) * x[:, I:]` in the same job): bf16 out at T = 4096 / 32768,
//! I = 12288: 83.2% / 86.4% of the read ceiling (3.49× / 3.53× PyTorch; size-matched read
//! probes 94.0% / 100.2%); I = 18432: 84.0% / 86.0% (3.49× / 3.52×); decode T ≤ 64: 4.5–6.4 µs,
//! 1.34–2.31× PyTorch. Quantized outputs at T = 32768, I = 12288: MXFP8 70.8%, block FP8 (f32
//! scales) 69.0%, NVFP4 54.9% (issue-bound: SM90 has no E2M1 conversion; the same epilogue as
//! `norm.rmsnorm_quant`'s).
//!
//! ```no_run
//! use b12x_core::{DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! use b12x_norm::silu_and_mul::{self, Args, Query};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let query = Query { intermediate: 12288, dtype: DType::BF16, max_tokens: 256, limit: None, out: None };
//! let plan = silu_and_mul::plan(&query, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let x = dev.stream().alloc_zeros::<b12x_core::half::bf16>(8 * 2 * 12288)?;
//! let mut y = dev.stream().alloc_zeros::<b12x_core::half::bf16>(8 * 12288)?;
//! let args = Args {
//!     x: TensorRef::from_slice(&x, &[8, 2 * 12288])?,
//!     y: Some(TensorMut::from_slice(&mut y, &[8, 12288])?),
//!     codes: None,
//!     scales: None,
//!     enc: None,
//! };
//! silu_and_mul::run(&plan, args, Scratch::none(), dev.stream())?;
//! # Ok(()) }
//! ```

mod params;
pub mod reference;

pub use crate::rmsnorm_quant::QuantOut;
pub use params::SiluAndMulParams;

use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::plan::bucket_of;
use b12x_core::{
    require_disjoint, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchDims, LaunchOpts, OpPlan,
    PlanSlot, RaceBuffer, Result, Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "activation.silu_and_mul";
/// Largest I (16-byte vectors per row ≤ 8 · [`MAX_BLOCK_THREADS`]).
pub const MAX_INTER: usize = 32768;
/// I must be a multiple of this: one 16-byte vector of bf16/f16.
pub const COL_MULTIPLE: usize = 8;
/// The variant table: `kVecsPerThread` values instantiated in `kernels/silu_and_mul.cu`.
pub const VECS_PER_THREAD: [usize; 4] = [1, 2, 4, 8];
/// Chunks per row a config may split a row into (runtime: grid.y).
pub const SPLITS: [usize; 4] = [1, 2, 4, 8];
/// The kernels' launch bound (`kSiluMaxThreads`).
pub const MAX_BLOCK_THREADS: usize = 512;
/// Most rows the autotune race allocates.
const RACE_MAX_ROWS: usize = 16384;
/// Upper edges of the buckets of T: ≤ 16 rows (decode: chunking decides), ≤ 128 (one partial
/// wave), ≤ 2048 (a few waves), beyond (sustained bandwidth).
const BUCKET_EDGES: [usize; 3] = [16, 128, 2048];

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "activation",
        entry_points: &["plan", "run"],
        dtypes: &["bf16|f16 x, y; or e4m3 codes + ue8m0 (MXFP8) or f32|ue8m0 per 1x128 (block FP8) scales; e2m1 pairs + ue4m3 (NVFP4, given f32 encode scale)"],
        // GPU suite 109/109 on the H200, memcheck 69/69 and racecheck 47/47 (reduced profile):
        // bench-results/2026-12-04-h200-c/call1, again after the PDL release in call4.
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-norm",
        summary: "SiLU(gate) * up (optional swiglu limit), bf16/f16 out or quantized to MXFP8, block FP8 or NVFP4",
    }
}

/// The static problem.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// I: output columns (`x` has 2I).
    pub intermediate: usize,
    /// dtype of `x` (and `y`): bf16 or f16.
    pub dtype: DType,
    /// Capacity: the largest T `run` accepts.
    pub max_tokens: usize,
    /// The swiglu limit L (finite, > 0): `g ← min(g, L)`, `u ← clamp(u, −L, L)`; `None` disables.
    pub limit: Option<f32>,
    /// `None`: `y` in the dtype; `Some`: the quantized `y` only.
    pub out: Option<QuantOut>,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if !matches!(self.dtype, DType::BF16 | DType::F16) {
            return bad("dtype", format!("must be bf16 or f16, got {}", self.dtype));
        }
        let i = self.intermediate;
        if i == 0 || i % COL_MULTIPLE != 0 || i > MAX_INTER {
            return bad(
                "intermediate",
                format!("(I) must be a multiple of {COL_MULTIPLE} in 8..={MAX_INTER}, got {i}"),
            );
        }
        if let Some(q) = self.out {
            if i % q.block() != 0 {
                return bad("intermediate", format!("(I) must be a multiple of {} for {q:?}, got {i}", q.block()));
            }
        }
        // The grid has T CTAs per chunk on x: gridDim.x ≤ 2^31 - 1.
        if self.max_tokens == 0 || self.max_tokens > i32::MAX as usize {
            return bad("max_tokens", format!("must be in 1..={}, got {}", i32::MAX, self.max_tokens));
        }
        if let Some(l) = self.limit {
            if !(l.is_finite() && l > 0.0) {
                return bad("limit", format!("must be finite and > 0 (None disables it), got {l}"));
            }
        }
        Ok(())
    }

    /// Checks `args` against the query and builds the kernel parameters; nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<SiluAndMulParams> {
        let (i, dtype) = (self.intermediate, self.dtype);
        let t = args.x.shape().first().copied().unwrap_or(0);
        args.x.expect("x", "[T, 2I]", dtype, &[t, 2 * i])?;
        if t > self.max_tokens {
            return Err(Error::Capacity { what: "T (rows of x)", got: t, capacity: self.max_tokens });
        }
        // Each row's g and u halves are read as 16-byte vectors (I is a multiple of 8).
        args.x.require_aligned("x", 16)?;
        let x_span = ("x", args.x.byte_span());
        let mut p = SiluAndMulParams {
            x: args.x.ptr(),
            x_stride: args.x.row_stride("x")? as i64,
            rows: t as i32,
            cols: i as i32,
            limit: self.limit.unwrap_or(f32::INFINITY),
            ..SiluAndMulParams::default()
        };
        let absent = |tensor, present: bool, why: &str| -> Result<()> {
            if present {
                return Err(Error::Shape { tensor, expected: format!("no tensor ({why})"), actual: vec![] });
            }
            Ok(())
        };
        let Some(out) = self.out else {
            absent("codes", args.codes.is_some(), "the plan writes y")?;
            absent("scales", args.scales.is_some(), "the plan writes y")?;
            absent("enc", args.enc.is_some(), "the plan writes y")?;
            let y = args.y.as_ref().ok_or_else(|| missing("y", format!("[T, I] = [{t}, {i}]")))?;
            y.expect("y", "[T, I]", dtype, &[t, i])?;
            y.require_aligned("y", 16)?;
            require_disjoint(("y", y.byte_span()), x_span)?;
            p.y = y.ptr();
            p.y_stride = y.row_stride("y")? as i64;
            return Ok(p);
        };
        absent("y", args.y.is_some(), "the plan writes a quantized y")?;
        let (code_bytes, groups) = (out.code_bytes(i), i / out.block());
        let codes = args.codes.as_ref().ok_or_else(|| missing("codes", format!("[T, {code_bytes}] u8")))?;
        let scales = args.scales.as_ref().ok_or_else(|| missing("scales", format!("[T, {groups}]")))?;
        let dims = if out == QuantOut::Nvfp4 { "[T, I/2]" } else { "[T, I]" };
        let q = out.check_outputs(t, i, codes, scales, (dims, "[T, I/block]"), args.enc.as_ref(), &[x_span])?;
        (p.codes, p.scales, p.ldq, p.lds, p.enc) = (q.codes, q.scales, q.ldq, q.lds, q.enc);
        Ok(p)
    }

    /// 16-byte vectors per row of `y` (and per half row of `x`).
    fn vecs(&self) -> usize {
        self.intermediate / COL_MULTIPLE
    }
}

fn missing(tensor: &'static str, expected: String) -> Error {
    Error::Shape { tensor, expected, actual: vec![] }
}

/// One kernel variant: `vecs_per_thread` 16-byte vectors of g (and of u) per thread, each row
/// split into `split` chunks of one CTA each (at most: the block is whole warps).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    pub vecs_per_thread: usize,
    pub split: usize,
}

impl Config {
    /// The config id used in pins and caches: `"v4s2"`.
    pub fn id(&self) -> String {
        format!("v{}s{}", self.vecs_per_thread, self.split)
    }
    /// Parses an id made by [`Config::id`].
    pub fn parse(id: &str) -> Option<Self> {
        let (v, s) = id.strip_prefix('v')?.split_once('s')?;
        let c = Config { vecs_per_thread: v.parse().ok()?, split: s.parse().ok()? };
        (VECS_PER_THREAD.contains(&c.vecs_per_thread) && SPLITS.contains(&c.split)).then_some(c)
    }
    /// Threads per CTA: whole warps covering a 1/split of the row.
    pub fn block_threads(&self, query: &Query) -> usize {
        query.vecs().div_ceil(self.vecs_per_thread * self.split).next_multiple_of(32)
    }
    /// CTAs per row (grid.y): ≤ `split`.
    pub fn chunks(&self, query: &Query) -> usize {
        query.vecs().div_ceil(self.block_threads(query) * self.vecs_per_thread)
    }
    /// The kernel symbol, e.g. `b12x_silu_and_mul_v4_bf16`, `b12x_silu_and_mul_nvfp4_v2_f16`.
    pub fn symbol(&self, query: &Query) -> String {
        let out = match query.out {
            None => "",
            Some(QuantOut::Mxfp8) => "_mxfp8",
            Some(QuantOut::Fp8Block128F32) => "_fp8b128f32",
            Some(QuantOut::Fp8Block128Ue8m0) => "_fp8b128ue8m0",
            Some(QuantOut::Nvfp4) => "_nvfp4",
        };
        format!("b12x_silu_and_mul{out}_v{}_{}", self.vecs_per_thread, query.dtype.name())
    }
}

/// The legal configs of a valid `query`, default first.
pub fn configs(query: &Query) -> Vec<Config> {
    let mut legal: Vec<Config> = Vec::new();
    for v in VECS_PER_THREAD {
        for s in SPLITS {
            let c = Config { vecs_per_thread: v, split: s };
            let threads = c.block_threads(query);
            // The block must fit the kernels' launch bound.
            let fits = threads <= MAX_BLOCK_THREADS;
            // Splitting into one-warp CTAs buys nothing over a larger unsplit one.
            let useful_split = s == 1 || threads >= 64;
            // An unsplit variant whose half-size sibling already fits one warp only idles registers.
            let useful_v = s > 1 || v == 1 || query.vecs().div_ceil(v / 2) > 32;
            // Another split with the same block (and so the same chunks) is the same launch.
            let dup = legal.iter().any(|o| o.vecs_per_thread == v && o.block_threads(query) == threads);
            if fits && useful_split && useful_v && !dup {
                legal.push(c);
            }
        }
    }
    // Default: the first unsplit config with a block of ≤ 256 threads (as norm.rmsnorm), else the
    // smallest unsplit block, else the first.
    let unsplit = |c: &Config| c.split == 1;
    let default = legal
        .iter()
        .position(|c| unsplit(c) && c.block_threads(query) <= 256)
        .or_else(|| legal.iter().rposition(unsplit))
        .unwrap_or(0);
    if !legal.is_empty() {
        let d = legal.remove(default);
        legal.insert(0, d);
    }
    legal
}

/// Buckets of T for a capacity: `1..=16`, `17..=128`, `129..=2048`, `2049..=capacity`, cut at
/// capacity.
pub fn buckets(capacity: usize) -> Vec<Bucket> {
    b12x_core::edge_buckets(&BUCKET_EDGES, capacity)
}

/// A validated query bound to a device.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    configs: Vec<Config>,
    slot: PlanSlot,
    pdl: bool,
}

/// Validates `query` and enumerates its configs ([`configs`]). Allocates, compiles and launches
/// nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    Ok(Plan {
        query: query.clone(),
        device: device.clone(),
        buckets: buckets(query.max_tokens),
        configs: configs(query),
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
    pub fn configs(&self) -> &[Config] {
        &self.configs
    }
    /// The op needs no scratch.
    pub fn scratch_layout(&self) -> ScratchLayout {
        ScratchLayout::new()
    }
}

/// The plans `cargo xtask prepare` tunes by default: bf16 to bf16, for the MLP widths of
/// Qwen3-8B (12288) and DeepSeek-V3's dense layers (18432), capacity 4096 tokens.
pub fn default_profile_plans(device: &Arc<Device>) -> Result<Vec<Box<dyn OpPlan>>> {
    let mut out: Vec<Box<dyn OpPlan>> = Vec::new();
    for intermediate in [12288, 18432] {
        let q = Query { intermediate, dtype: DType::BF16, max_tokens: 4096, limit: None, out: None };
        out.push(Box::new(plan(&q, device)?));
    }
    Ok(out)
}

/// The tensors of one call (module docs). Exactly the plan's output tensors are `Some`.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[T, 2I]`: gate half, then up half of each row.
    pub x: TensorRef<'a>,
    /// `[T, I]` in the dtype of `x`: `Some` exactly when the plan has `out: None`.
    pub y: Option<TensorMut<'a>>,
    /// `[T, I]` u8 E4M3 codes or `[T, I/2]` NVFP4 pairs: `Some` exactly for a quantized output.
    pub codes: Option<TensorMut<'a>>,
    /// `[T, I/32]` u8 (MXFP8), `[T, I/128]` f32 / u8 (block FP8) or `[T, I/16]` u8 (NVFP4).
    pub scales: Option<TensorMut<'a>>,
    /// `[1]` f32 encode scale on the device: `Some` exactly for NVFP4 (the caller guarantees a
    /// finite value > 0).
    pub enc: Option<TensorRef<'a>>,
}

/// Computes `silu(g) · u` on `stream`: every check before the launch; no allocation, no
/// synchronization. `T = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let params = plan.query.kernel_params(&args)?;
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

fn launch(query: &Query, selected: &Selected, p: &SiluAndMulParams, stream: &CudaStream, pdl: bool) -> Result<()> {
    let unknown = || Error::UnknownConfig { op: OP, bucket: String::new(), config: selected.config.clone() };
    let config = Config::parse(&selected.config).ok_or_else(unknown)?;
    let kernel = selected.kernels.first().ok_or_else(unknown)?;
    let dims = LaunchDims {
        grid: (p.rows as u32, config.chunks(query) as u32, 1),
        block: (config.block_threads(query) as u32, 1, 1),
        smem_bytes: 0,
    };
    // SAFETY: SiluAndMulParams mirrors the kernel's struct (asserted on both sides); `p` passed
    // `Query::kernel_params` or describes the race's own buffer.
    unsafe { kernel.launch_ex(stream, dims, p, LaunchOpts { pdl, cluster_x: 0 }) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        // The limit is a kernel argument that does not change speed: not part of the key.
        let q = &self.query;
        format!("I={} dtype={} max_tokens={} out={:?}", q.intermediate, q.dtype, q.max_tokens, q.out)
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::SILU_AND_MUL_MODULE
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
        // The bucket's largest T, capped (every config runs many full waves by then).
        let q = &self.query;
        let rows = self.buckets.get(bucket).map_or(1, |b| b.hi.min(RACE_MAX_ROWS));
        let i = q.intermediate;
        let es = q.dtype.size_bytes();
        let (code_bytes, groups) = match q.out {
            None => (i * es, 1),
            Some(o) => (o.code_bytes(i), i / o.block() * o.scale_dtype().size_bytes()),
        };
        let race = RaceBuffer::new(&self.device, &[rows * 2 * i * es, rows * code_bytes, rows * groups, 4])?;
        // Non-zero x: a zero y would take the quantizers' all-zero shortcut.
        race.fill_inputs(&self.device, 0, q.dtype)?;
        let at = &race.ptrs;
        let mut params = SiluAndMulParams {
            x: at[0],
            x_stride: 2 * i as i64,
            rows: rows as i32,
            cols: i as i32,
            limit: q.limit.unwrap_or(f32::INFINITY),
            ..SiluAndMulParams::default()
        };
        match q.out {
            None => (params.y, params.y_stride) = (at[1], i as i64),
            Some(o) => {
                (params.codes, params.ldq) = (at[1], o.code_bytes(i) as i64);
                (params.scales, params.lds) = (at[2], (i / o.block()) as i64);
                if o == QuantOut::Nvfp4 {
                    params.enc = at[3];
                    b12x_core::memset_u32(self.device.stream(), at[3], 1.0f32.to_bits(), 1)?;
                }
            }
        }
        Ok(Box::new(RaceCase { query: q.clone(), params, _buffer: race.buffer }))
    }
}

/// What the autotune race launches each candidate on.
struct RaceCase {
    query: Query,
    params: SiluAndMulParams,
    _buffer: CudaSlice<u8>,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(&self.query, selected, &self.params, stream, false)
    }
}
