//! `quantization.fp8_block`: BF16/FP16 rows → E4M3 codes + one scale per 1×G group along K
//! (G ∈ {32, 64, 128}; DeepSeek's block-FP8 activations, what its linears quantize inline).
//!
//! - Math: exactly [`crate::block::quantize_block_fp8`] with tile `(1, G)`, bit for bit: per
//!   group `amax = max(max |x|, 1e-4)`, `p = amax · (1/448)`, `s = p` (f32 scales) or
//!   `ceil_pow2(p)` (UE8M0 scales), `q = e4m3_satfinite(x / s)` (IEEE division); a group with
//!   NaN/Inf gets scale NaN (f32) / 0xFF (UE8M0) and zero codes.
//! - Tensors: `x [M, K]` bf16/f16 (rows 16-byte aligned); `codes [M, K]` u8 (rows 8-byte
//!   aligned); `scales [M, K/G]` f32 or u8 (row-major).
//! - Constraints: `K % G == 0`; `M ≤ max_rows`.
//! - Kernel: G/16 lanes per group, 16 elements per lane (two 16-byte loads); configs are the
//!   CTA size and slots per thread of [`crate::flat`] (`"t256_u2"`, …). With f32 scales the
//!   division takes two instructions per element (`div_by_block_scale` in `b12x/quant.cuh`: a
//!   round-down reciprocal — `rcp_rd_normal`, the fast path of `__frcp_rd` without its range
//!   test — and its remainder term per group); the quotient can differ from IEEE
//!   `x / s` in its last bit, but never its E4M3 code, which `tests/block_fp8_division.rs`
//!   proves on every bf16 and f16 pair (x, amax). Groups with s ≥ 2^64 (amax ≳ 2^73) take the
//!   three-instruction exact division.
//!
//! **Status: validated on the H200 (sm_90a)**: bit-exact GPU suite, memcheck and racecheck clean
//! (`bench-results/2026-11-30-h200-c`, the current kernels again in
//! `bench-results/2026-11-30-h200-j`; the two-instruction division: suite and memcheck in
//! `bench-results/2026-12-01-h200-g/fp8-div2`; `rcp_rd_normal`: suite and memcheck in
//! `bench-results/2026-12-01-h200-k/fused-fp4`, suite again in `…/final`; the session-23 kernels —
//! bf16x2 UE8M0 scaling, HMNMX2 amax — suite, memcheck and racecheck in
//! `bench-results/2026-12-02-h200-a/quant-ab` and `…/rq-regcap`); sm_120a/sm_121a compiled, not run.

use crate::block::Fp8ScaleKind;
use crate::flat::{self, FlatConfig};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::{
    require_disjoint, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, OpPlan, PlanSlot, RaceBuffer,
    Result, Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::mem::size_of;
use std::sync::Arc;

/// The op id.
pub const OP: &str = "quantization.fp8_block";
/// Group sizes instantiated in `kernels/fp8_block.cu`.
pub const GROUPS: [usize; 3] = [32, 64, 128];
const RACE_MAX_ROWS: usize = 16384;

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "quantization",
        entry_points: &["plan", "run"],
        dtypes: &["bf16|f16 x; e4m3 codes; f32 or ue8m0 scales per 1xG (G = 32, 64, 128)"],
        // GPU suite passed on the H200 (bench-results/2026-11-30-h200-c; the current kernels in
        // h200-j), also under memcheck and racecheck.
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-quant",
        summary: "block-FP8 activation quantizer (DeepSeek 1xG groups), bit-exact with the CPU codec",
    }
}

/// Mirrors `Fp8BlockParams` in `kernels/fp8_block.cu` (size asserted on both sides).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Fp8BlockParams {
    pub x: u64,
    pub codes: u64,
    pub scales: u64,
    pub ldx: i64,
    /// Bytes between rows of `codes`.
    pub ldq: i64,
    /// Elements (of the scale type) between rows of `scales`.
    pub lds: i64,
    pub rows: i32,
    pub k: i32,
}

const _: () = assert!(size_of::<Fp8BlockParams>() == 56);

/// The static problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// G: elements per scale, 32, 64 or 128.
    pub group: usize,
    /// K: a multiple of G.
    pub k: usize,
    /// dtype of `x`: bf16 or f16.
    pub dtype: DType,
    pub max_rows: usize,
    /// f32 scales or UE8M0 codes.
    pub scale: Fp8ScaleKind,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if !matches!(self.dtype, DType::BF16 | DType::F16) {
            return bad("dtype", format!("must be bf16 or f16, got {}", self.dtype));
        }
        if !GROUPS.contains(&self.group) {
            return bad("group", format!("must be 32, 64 or 128, got {}", self.group));
        }
        if self.k == 0 || self.k % self.group != 0 || self.k > i32::MAX as usize {
            return bad("k", format!("(K) must be a positive multiple of G = {}, got {}", self.group, self.k));
        }
        flat::check_max_rows(OP, self.k, 1, self.max_rows)?;
        Ok(())
    }

    fn scale_dtype(&self) -> DType {
        match self.scale {
            Fp8ScaleKind::F32 => DType::F32,
            Fp8ScaleKind::Ue8m0 => DType::U8,
        }
    }

    /// Checks `args` against the query and builds the kernel parameters; nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<Fp8BlockParams> {
        let (k, groups) = (self.k, self.k / self.group);
        let m = args.x.shape().first().copied().unwrap_or(0);
        args.x.expect("x", "[M, K]", self.dtype, &[m, k])?;
        args.codes.expect("codes", "[M, K]", DType::U8, &[m, k])?;
        args.scales.expect("scales", "[M, K/G]", self.scale_dtype(), &[m, groups])?;
        if m > self.max_rows {
            return Err(Error::Capacity { what: "M (rows of x)", got: m, capacity: self.max_rows });
        }
        args.x.require_aligned("x", 16)?;
        args.codes.require_aligned("codes", 8)?;
        if args.scales.dtype() == DType::F32 {
            args.scales.require_aligned("scales", 4)?;
        }
        let x_span = ("x", args.x.byte_span());
        let q_span = ("codes", args.codes.byte_span());
        let s_span = ("scales", args.scales.byte_span());
        require_disjoint(q_span, x_span)?;
        require_disjoint(s_span, x_span)?;
        require_disjoint(s_span, q_span)?;
        Ok(Fp8BlockParams {
            x: args.x.ptr(),
            codes: args.codes.ptr(),
            scales: args.scales.ptr(),
            ldx: args.x.row_stride("x")? as i64,
            ldq: args.codes.row_stride("codes")? as i64,
            lds: args.scales.row_stride("scales")? as i64,
            rows: m as i32,
            k: k as i32,
        })
    }
}

/// The kernel symbol of one config, e.g. `b12x_fp8_block_g128_ue8m0_t256_u2_bf16`.
pub fn symbol(query: &Query, config: &FlatConfig) -> String {
    let s = match query.scale {
        Fp8ScaleKind::F32 => "f32",
        Fp8ScaleKind::Ue8m0 => "ue8m0",
    };
    format!("b12x_fp8_block_g{}_{s}_{}_{}", query.group, config.id(), query.dtype.name())
}

/// A validated query bound to a device.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    configs: Vec<FlatConfig>,
    slot: PlanSlot,
}

/// Validates `query`; one bucket `1..=max_rows`. Allocates, compiles and launches nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    Ok(Plan {
        query: query.clone(),
        device: device.clone(),
        buckets: vec![Bucket { lo: 1, hi: query.max_rows }],
        configs: FlatConfig::all(),
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
    /// `[M, K]` bf16 or f16.
    pub x: TensorRef<'a>,
    /// `[M, K]` u8: E4M3 codes.
    pub codes: TensorMut<'a>,
    /// `[M, K/G]`: f32 scales or UE8M0 codes (u8), as the plan says.
    pub scales: TensorMut<'a>,
}

/// Quantizes `args.x` on `stream`: every check before the launch; no allocation, no
/// synchronization. `M = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let params = plan.query.kernel_params(&args)?;
    plan.scratch_layout().bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.rows == 0 {
        return Ok(());
    }
    let selected = resolve(plan, 0, stream)?;
    launch(&selected, &params, stream)
}

fn launch(selected: &Selected, p: &Fp8BlockParams, stream: &CudaStream) -> Result<()> {
    let config = flat::selected_config(selected, OP)?;
    let kernel = selected.kernels.first().ok_or_else(|| flat::unknown_config(selected, OP))?;
    let dims = config.dims(flat::slots(p.rows as u64, p.k as u64));
    // SAFETY: Fp8BlockParams mirrors the kernel's struct (asserted on both sides); `p` passed
    // `Query::kernel_params` or describes the race's own buffer.
    unsafe { kernel.launch(stream, dims, p) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        let q = &self.query;
        format!("G={} K={} dtype={} max_rows={} scale={:?}", q.group, q.k, q.dtype, q.max_rows, q.scale)
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::FP8_BLOCK_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        self.configs.iter().map(FlatConfig::id).collect()
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        self.configs.get(config_index).map(|c| vec![symbol(&self.query, c)]).unwrap_or_default()
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        let q = &self.query;
        let rows = q.max_rows.min(RACE_MAX_ROWS);
        let groups = q.k / q.group;
        let sizes = [rows * q.k * 2, rows * q.k, rows * groups * q.scale_dtype().size_bytes()];
        let race = RaceBuffer::new(&self.device, &sizes)?;
        race.fill_inputs(&self.device, 0, q.dtype)?;
        let at = &race.ptrs;
        let params = Fp8BlockParams {
            x: at[0],
            codes: at[1],
            scales: at[2],
            ldx: q.k as i64,
            ldq: q.k as i64,
            lds: groups as i64,
            rows: rows as i32,
            k: q.k as i32,
        };
        Ok(Box::new(RaceCase { params, _buffer: race.buffer }))
    }
}

struct RaceCase {
    params: Fp8BlockParams,
    _buffer: CudaSlice<u8>,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(selected, &self.params, stream)
    }
}
