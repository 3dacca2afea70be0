//! `norm.rmsnorm_quant`: RMSNorm (optionally fused with the residual add) whose output is
//! quantized in the same kernel — MXFP8 (E4M3 + UE8M0 per 32), DeepSeek block FP8 (E4M3 + an
//! f32 or UE8M0 scale per 1×128) or NVFP4 (E2M1 pairs + UE4M3 per 16, with a given f32 encode
//! scale) — so the next GEMM reads 1-byte (or half-byte) codes instead of bf16.
//!
//! - Rounding point: `y` is computed exactly as `norm.rmsnorm` computes it and **rounded to the
//!   dtype (bf16/f16) first**; the quantizer then sees those rounded values. The result is bit
//!   for bit "`norm.rmsnorm`, then `quantization.mxfp8` / `.fp8_block` / `.nvfp4` (given)" (b12x-quant)
//!   on the GPU. (Against a CPU oracle it inherits rmsnorm's ≤ 1-ULP tolerance on `y`, so compare
//!   GPU with GPU.) `y` itself is not written; the fused residual is, as in `norm.rmsnorm`.
//! - Tensors: `x [T, D]`, `residual [T, D]` (fused form), `w [D]` — bf16 or f16, as in
//!   `norm.rmsnorm`; `codes` u8 `[T, D]` (E4M3, rows 8-byte aligned) or `[T, D/2]` (NVFP4, rows
//!   4-byte aligned); `scales [T, D/32]` u8 (MXFP8), `[T, D/128]` f32 or u8 (block FP8),
//!   `[T, D/16]` u8 (NVFP4); `enc [1]` f32 on the device (NVFP4 only; finite, > 0).
//! - Constraints: those of `norm.rmsnorm`, and D a multiple of the block (32, 128 or 16).
//! - Kernel: `norm.rmsnorm`'s row kernel with a quantizing epilogue; the lanes holding a block's
//!   consecutive 16-byte vectors reduce its amax with shuffles. Configs ([`Config`]): those of
//!   `norm.rmsnorm` (one row per CTA), and for the plain form `"v4r2"`, two rows per CTA.
//!
//! **Status: validated on the H200 (sm_90a)**: bit-exact GPU suite, memcheck and racecheck clean
//! (`bench-results/2026-11-30-h200-c`, again after the row-base stores of
//! `bench-results/2026-12-01-h200-b/rowbase`, and for the session-21 kernels: suite in
//! `bench-results/2026-12-01-h200-k/final`, memcheck and racecheck in `…/yof`; the session-23
//! kernels — bf16x2 scaling, HMNMX2 amax, register caps — and the extreme-weight trials: suite,
//! memcheck and racecheck in `bench-results/2026-12-02-h200-a/rq-v8cap`; the two-row `v4r2`
//! configs and the shared epilogue of session 24: `bench-results/2026-12-02-h200-b/rq-two-rows`);
//! sm_120a/sm_121a compiled, not run (there the NVFP4
//! output's E2M1 encoding is the hardware `cvt.rn.satfinite.e2m1x2.f32`). The existing
//! `norm.rmsnorm` entry points compile to the same SASS as before this op was added.

use crate::rmsnorm::{self, RmsnormParams};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::plan::bucket_of;
use b12x_core::{
    require_disjoint, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchDims, OpPlan, PlanSlot,
    RaceBuffer, Result, Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::mem::size_of;
use std::sync::Arc;

/// The op id.
pub const OP: &str = "norm.rmsnorm_quant";

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "norm",
        entry_points: &["plan", "run"],
        dtypes: &["bf16|f16 x, residual, w; e4m3 codes + ue8m0 (MXFP8) or f32|ue8m0 per 1x128 (block FP8) scales; e2m1 pairs + ue4m3 (NVFP4, given f32 encode scale)"],
        // GPU suite passed on the H200 (bench-results/2026-11-30-h200-c), also under memcheck and racecheck.
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-norm",
        summary: "RMSNorm (+ residual add) with the output quantized to MXFP8, block FP8 or NVFP4 in the same kernel",
    }
}

/// The quantized output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantOut {
    /// E4M3 + UE8M0 scale per 32 (`quantization.mxfp8`).
    Mxfp8,
    /// E4M3 + f32 scale per 1×128 (`quantization.fp8_block`, f32 scales).
    Fp8Block128F32,
    /// E4M3 + UE8M0 scale per 1×128 (`quantization.fp8_block`, UE8M0 scales).
    Fp8Block128Ue8m0,
    /// E2M1 pairs + UE4M3 scale per 16, given encode scale (`quantization.nvfp4`, given mode).
    Nvfp4,
}

impl QuantOut {
    /// Elements per scale.
    pub fn block(self) -> usize {
        match self {
            QuantOut::Mxfp8 => 32,
            QuantOut::Fp8Block128F32 | QuantOut::Fp8Block128Ue8m0 => 128,
            QuantOut::Nvfp4 => 16,
        }
    }
    /// Bytes of codes per row of D elements.
    pub fn code_bytes(self, d: usize) -> usize {
        if self == QuantOut::Nvfp4 {
            d / 2
        } else {
            d
        }
    }
    /// dtype of the scales.
    pub fn scale_dtype(self) -> DType {
        match self {
            QuantOut::Fp8Block128F32 => DType::F32,
            QuantOut::Mxfp8 | QuantOut::Fp8Block128Ue8m0 | QuantOut::Nvfp4 => DType::U8,
        }
    }
    /// Checks a quantized output of `t` rows of `cols` values — `codes`, `scales`, and `enc`
    /// exactly for NVFP4: shapes, dtypes, alignment (codes
    /// rows 8 bytes, 4 for NVFP4; f32 scales and `enc` 4), disjoint from each other and from
    /// `inputs` — and returns their addresses and row strides. `dims` names the shapes of codes
    /// and scales in errors. Shared by `norm.rmsnorm_quant` and `activation.silu_and_mul`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_outputs(
        self,
        t: usize,
        cols: usize,
        codes: &TensorMut<'_>,
        scales: &TensorMut<'_>,
        dims: (&str, &str),
        enc: Option<&TensorRef<'_>>,
        inputs: &[(&'static str, (u64, u64))],
    ) -> Result<QuantTensors> {
        codes.expect("codes", dims.0, DType::U8, &[t, self.code_bytes(cols)])?;
        if enc.is_some() != (self == QuantOut::Nvfp4) {
            let expected = if self == QuantOut::Nvfp4 { "[1] f32" } else { "no tensor (not NVFP4)" };
            return Err(Error::Shape { tensor: "enc", expected: expected.into(), actual: vec![] });
        }
        if let Some(e) = enc {
            e.expect("enc", "[1]", DType::F32, &[1])?;
        }
        scales.expect("scales", dims.1, self.scale_dtype(), &[t, cols / self.block()])?;
        codes.require_aligned("codes", if self == QuantOut::Nvfp4 { 4 } else { 8 })?;
        if self.scale_dtype() == DType::F32 {
            scales.require_aligned("scales", 4)?;
        }
        let outs = [("codes", codes.byte_span()), ("scales", scales.byte_span())];
        require_disjoint(outs[0], outs[1])?;
        for o in outs {
            for &input in inputs {
                require_disjoint(o, input)?;
            }
            if let Some(e) = enc {
                require_disjoint(o, ("enc", e.byte_span()))?;
            }
        }
        if let Some(e) = enc {
            e.require_aligned("enc", 4)?;
        }
        Ok(QuantTensors {
            codes: codes.ptr(),
            scales: scales.ptr(),
            ldq: codes.row_stride("codes")? as i64,
            lds: scales.row_stride("scales")? as i64,
            enc: enc.map_or(0, TensorRef::ptr),
        })
    }
    fn name(self) -> &'static str {
        match self {
            QuantOut::Mxfp8 => "mxfp8",
            QuantOut::Fp8Block128F32 => "fp8b128f32",
            QuantOut::Fp8Block128Ue8m0 => "fp8b128ue8m0",
            QuantOut::Nvfp4 => "nvfp4",
        }
    }
}

/// A checked quantized output ([`QuantOut::check_outputs`]): addresses and row strides.
pub(crate) struct QuantTensors {
    pub codes: u64,
    pub scales: u64,
    pub ldq: i64,
    pub lds: i64,
    pub enc: u64,
}

/// Mirrors `RmsnormQuantParams` in `kernels/rmsnorm.cu` (size asserted on both sides).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RmsnormQuantParams {
    /// The `norm.rmsnorm` parameters (`y` unused, 0).
    pub base: RmsnormParams,
    /// `[T, D]` e4m3 codes.
    pub codes: u64,
    /// `[T, D/block]` scales.
    pub scales: u64,
    /// Bytes between rows of `codes`.
    pub ldq: i64,
    /// Elements between rows of `scales`.
    pub lds: i64,
    /// `[1]` f32 NVFP4 encode scale, or 0.
    pub enc: u64,
}

const _: () = assert!(size_of::<RmsnormQuantParams>() == 112);

/// The static problem.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// D.
    pub cols: usize,
    /// bf16 or f16.
    pub dtype: DType,
    pub max_tokens: usize,
    pub eps: f32,
    /// The fused residual-add form.
    pub residual: bool,
    pub out: QuantOut,
}

impl Query {
    /// The `norm.rmsnorm` query with the same geometry (configs and buckets come from it).
    pub fn rmsnorm_query(&self) -> rmsnorm::Query {
        rmsnorm::Query {
            cols: self.cols,
            dtype: self.dtype,
            max_tokens: self.max_tokens,
            eps: self.eps,
            residual: self.residual,
        }
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if !matches!(self.dtype, DType::BF16 | DType::F16) {
            return bad("dtype", format!("must be bf16 or f16, got {}", self.dtype));
        }
        self.rmsnorm_query().validate().map_err(|e| match e {
            Error::InvalidQuery { field, reason, .. } => Error::InvalidQuery { op: OP, field, reason },
            other => other,
        })?;
        if self.cols % self.out.block() != 0 {
            return bad(
                "cols",
                format!("(D) must be a multiple of {} for {:?}, got {}", self.out.block(), self.out, self.cols),
            );
        }
        Ok(())
    }

    /// Checks `args` and builds the kernel parameters; nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<RmsnormQuantParams> {
        let (d, dtype) = (self.cols, self.dtype);
        let t = args.x.shape().first().copied().unwrap_or(0);
        args.x.expect("x", "[T, D]", dtype, &[t, d])?;
        args.w.expect("w", "[D]", dtype, &[d])?;
        let dims = if self.out == QuantOut::Nvfp4 { "[T, D/2]" } else { "[T, D]" };
        let mut inputs = vec![("x", args.x.byte_span()), ("w", args.w.byte_span())];
        if let Some(r) = &args.residual {
            inputs.push(("residual", r.byte_span()));
        }
        let dims = (dims, "[T, D/block]");
        let q = self.out.check_outputs(t, d, &args.codes, &args.scales, dims, args.enc.as_ref(), &inputs)?;
        if t > self.max_tokens {
            return Err(Error::Capacity { what: "T (rows of x)", got: t, capacity: self.max_tokens });
        }
        if args.residual.is_some() != self.residual {
            let expected = if self.residual { format!("[T, D] = [{t}, {d}]") } else { "no tensor".into() };
            return Err(Error::Shape { tensor: "residual", expected, actual: vec![] });
        }
        if args.w.strides() != [1] {
            let reason = "w must be contiguous".into();
            return Err(Error::Stride { tensor: "w", strides: args.w.strides().to_vec(), reason });
        }
        args.x.require_aligned("x", 16)?;
        args.w.require_aligned("w", 16)?;
        let mut base = RmsnormParams {
            x: args.x.ptr(),
            w: args.w.ptr(),
            x_stride: args.x.row_stride("x")? as i64,
            rows: t as i32,
            cols: d as i32,
            eps: self.eps,
            ..RmsnormParams::default()
        };
        if let Some(r) = &args.residual {
            r.expect("residual", "[T, D]", dtype, &[t, d])?;
            r.require_aligned("residual", 16)?;
            base.residual = r.ptr();
            base.residual_stride = r.row_stride("residual")? as i64;
            require_disjoint(("residual", r.byte_span()), ("x", args.x.byte_span()))?;
        }
        Ok(RmsnormQuantParams { base, codes: q.codes, scales: q.scales, ldq: q.ldq, lds: q.lds, enc: q.enc })
    }
}

/// One fused kernel variant: `norm.rmsnorm`'s row layout [`Config::row`] (its vectors per thread,
/// hence its reduction order) and one or two rows per CTA.
///
/// Ids: `"v1"` … `"v8"` (one row per CTA, as `norm.rmsnorm`) and `"v4r2"`: two rows per CTA in
/// v4's layout (plain form only), w loaded once for both rows and both rows' loads in flight
/// together; the grid has ⌈T / 2⌉ CTAs. Every config's codes and scales equal
/// `norm.rmsnorm` with [`Config::row`], then the quantizer, bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// The row layout: `norm.rmsnorm`'s config with the same reduction order.
    pub row: rmsnorm::Config,
    /// Rows per CTA: 1, or 2 (with `row.vecs_per_thread` = [`TWO_ROWS_VECS`]).
    pub rows_per_cta: usize,
}

/// The vectors per thread of the two-rows-per-CTA configs.
pub const TWO_ROWS_VECS: usize = 4;

impl Config {
    /// One row per CTA with `vecs_per_thread` vectors per thread (`"v2"`).
    pub fn one_row(vecs_per_thread: usize) -> Self {
        Config { row: rmsnorm::Config { vecs_per_thread }, rows_per_cta: 1 }
    }
    /// Two rows per CTA (`"v4r2"`).
    pub fn two_rows() -> Self {
        Config { row: rmsnorm::Config { vecs_per_thread: TWO_ROWS_VECS }, rows_per_cta: 2 }
    }
    /// The config id used in pins and caches: `"v2"`, `"v4r2"`.
    pub fn id(&self) -> String {
        if self.rows_per_cta == 2 {
            format!("{}r2", self.row.id())
        } else {
            self.row.id()
        }
    }
    /// Parses an id made by [`Config::id`].
    pub fn parse(id: &str) -> Option<Self> {
        match id.strip_suffix("r2") {
            Some(row) => (rmsnorm::Config::parse(row)? == Config::two_rows().row).then(Config::two_rows),
            None => Some(Config { row: rmsnorm::Config::parse(id)?, rows_per_cta: 1 }),
        }
    }
    /// CTAs for `rows` rows.
    pub fn grid(&self, rows: usize) -> usize {
        rows.div_ceil(self.rows_per_cta)
    }
    /// The kernel symbol, e.g. `b12x_rmsnorm_add_mxfp8_v2_bf16`, `b12x_rmsnorm_nvfp4_v4r2_bf16`.
    pub fn symbol(&self, query: &Query) -> String {
        let form = if query.residual { "_add" } else { "" };
        format!("b12x_rmsnorm{form}_{}_{}_{}", query.out.name(), self.id(), query.dtype.name())
    }
}

/// The legal configs of a valid `query`, default first: `norm.rmsnorm`'s for the same row, then
/// for the plain form `"v4r2"` where v4 is legal with a CTA of ≤ 512 threads (D ≤ 16384 for
/// bf16/f16: within the 64–80 registers per thread the two-row kernels are capped at).
pub fn configs(query: &Query) -> Vec<Config> {
    let rq = query.rmsnorm_query();
    let rows = rmsnorm::configs(&rq);
    let two = !query.residual
        && rows.iter().any(|c| c.vecs_per_thread == TWO_ROWS_VECS && c.block_threads(&rq) <= TWO_ROWS_MAX_THREADS);
    let mut out: Vec<Config> = rows.into_iter().map(|c| Config { row: c, rows_per_cta: 1 }).collect();
    if two {
        out.push(Config::two_rows());
    }
    out
}

/// The largest CTA of a two-row config (its register cap allows 896 threads at 72 per thread).
const TWO_ROWS_MAX_THREADS: usize = 512;

/// A validated query bound to a device.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    configs: Vec<Config>,
    slot: PlanSlot,
}

/// Validates `query` and enumerates its configs ([`configs`]).
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    Ok(Plan {
        query: query.clone(),
        device: device.clone(),
        buckets: rmsnorm::buckets(query.max_tokens),
        configs: configs(query),
        slot: PlanSlot::default(),
    })
}

impl Plan {
    pub fn query(&self) -> &Query {
        &self.query
    }
    /// The op needs no scratch.
    pub fn scratch_layout(&self) -> ScratchLayout {
        ScratchLayout::new()
    }
}

/// The tensors of one call (module docs).
#[derive(Debug)]
pub struct Args<'a> {
    pub x: TensorRef<'a>,
    /// `Some` exactly when the plan has `residual = true`; read and overwritten with `x + residual`.
    pub residual: Option<TensorMut<'a>>,
    pub w: TensorRef<'a>,
    /// `[T, D]` u8 E4M3 codes.
    pub codes: TensorMut<'a>,
    /// `[T, D/32]` u8 (MXFP8), `[T, D/128]` f32 / u8 (block FP8) or `[T, D/16]` u8 (NVFP4).
    pub scales: TensorMut<'a>,
    /// `[1]` f32 encode scale on the device: `Some` exactly for NVFP4 (the caller guarantees a
    /// finite value > 0).
    pub enc: Option<TensorRef<'a>>,
}

/// Normalizes and quantizes on `stream`: every check before the launch; no allocation, no
/// synchronization. `T = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let params = plan.query.kernel_params(&args)?;
    plan.scratch_layout().bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.base.rows == 0 {
        return Ok(());
    }
    let rows = params.base.rows as usize;
    let capacity = Error::Capacity { what: "T (rows of x)", got: rows, capacity: plan.query.max_tokens };
    let bucket = bucket_of(&plan.buckets, rows).ok_or(capacity)?;
    let selected = resolve(plan, bucket, stream)?;
    launch(&plan.query, &selected, &params, stream)
}

fn launch(query: &Query, selected: &Selected, p: &RmsnormQuantParams, stream: &CudaStream) -> Result<()> {
    let unknown = || Error::UnknownConfig { op: OP, bucket: String::new(), config: selected.config.clone() };
    let config = Config::parse(&selected.config).ok_or_else(unknown)?;
    let kernel = selected.kernels.first().ok_or_else(unknown)?;
    let dims = LaunchDims {
        grid: (config.grid(p.base.rows as usize) as u32, 1, 1),
        block: (config.row.block_threads(&query.rmsnorm_query()) as u32, 1, 1),
        smem_bytes: 0,
    };
    // SAFETY: RmsnormQuantParams mirrors the kernel's struct (asserted on both sides); `p` passed
    // `Query::kernel_params` or describes the race's own buffer.
    unsafe { kernel.launch(stream, dims, p) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        let q = &self.query;
        format!("D={} dtype={} residual={} max_tokens={} out={:?}", q.cols, q.dtype, q.residual, q.max_tokens, q.out)
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
        let q = &self.query;
        let rows = self.buckets.get(bucket).map_or(1, |b| b.hi.min(16384));
        let d = q.cols;
        let row_bytes = d * q.dtype.size_bytes();
        let groups = d / q.out.block();
        let sizes = [
            row_bytes,
            rows * row_bytes,
            rows * row_bytes,
            rows * q.out.code_bytes(d),
            rows * groups * q.out.scale_dtype().size_bytes(),
            4,
        ];
        let stream = self.device.stream();
        let race = RaceBuffer::new(&self.device, &sizes)?;
        // w and x non-zero: a zero y would take the quantizers' all-zero shortcut.
        race.fill_inputs(&self.device, 0, q.dtype)?;
        race.fill_inputs(&self.device, 1, q.dtype)?;
        let at = &race.ptrs;
        let params = RmsnormQuantParams {
            base: RmsnormParams {
                w: at[0],
                x: at[1],
                residual: if q.residual { at[2] } else { 0 },
                x_stride: d as i64,
                residual_stride: d as i64,
                rows: rows as i32,
                cols: d as i32,
                eps: q.eps,
                ..RmsnormParams::default()
            },
            codes: at[3],
            scales: at[4],
            ldq: q.out.code_bytes(d) as i64,
            lds: groups as i64,
            enc: at[5],
        };
        if q.out == QuantOut::Nvfp4 {
            b12x_core::memset_u32(stream, at[5], 1.0f32.to_bits(), 1)?;
        }
        Ok(Box::new(RaceCase { query: q.clone(), params, _buffer: race.buffer }))
    }
}

struct RaceCase {
    query: Query,
    params: RmsnormQuantParams,
    _buffer: CudaSlice<u8>,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(&self.query, selected, &self.params, stream)
    }
}
