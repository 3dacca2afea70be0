//! `quantization.mxfp8` and `quantization.mxfp4`: BF16/FP16 rows → E4M3 (MXFP8) or E2M1
//! (MXFP4) codes + UE8M0 scales (one per 32 elements).
//!
//! - Math: exactly [`crate::block::quantize_mx`] with `Element::E4M3` / `Element::E2M1`,
//!   `ScaleRule::CeilPow2` and no amax floor — bit for bit (per block: NaN/Inf → scale 0xFF and
//!   zero codes; amax 0 → scale 0 and zero codes; else `code = ceil_pow2(amax · (1/448 or 1/6))`,
//!   `q = encode_satfinite(x · 2^(127 − code))`). The input is read as is (bf16/f16 → f32 is
//!   exact). E2M1 is encoded in software on sm_90 (no E2M1 `cvt` there) and by the hardware
//!   `cvt.rn.satfinite.e2m1x2.f32` on sm_120a / sm_121a (same rounding by specification;
//!   compiled, never run: no SM120 hardware yet).
//! - Tensors: `x [M, K]` bf16 or f16 (rows 16-byte aligned, row stride ≥ K); `codes` u8:
//!   `[M, K]` for MXFP8 (rows 8-byte aligned), `[M, K/2]` packed pairs for MXFP4 (element 2i in
//!   the low nibble, rows 4-byte aligned); scales in either or both layouts of [`crate::layout`]: row-major
//!   `scales [M, K/32]` u8 and/or `scales_swizzled [swizzled_len(M, K/32)]` u8 (contiguous; the
//!   padding rows up to the next multiple of 128 are written as 0).
//! - Constraints: `K % 32 == 0`; with the swizzled layout `K % 128 == 0` (whole 4-column tiles);
//!   `M ≤ Query::max_rows`. Outputs must not overlap each other or `x`.
//! - Kernel: 2 lanes per block, 16 elements per lane (two 16-byte loads: per warp instruction
//!   the scale, shuffle and address work covers 512 elements). Configs are the CTA size and
//!   slots per thread of [`crate::flat`] (`"t256_u2"`, …).
//! - Performance: unpadded rows (`x`, `codes` and row-major `scales` with row strides K, K or
//!   K/2, and K/32) take the kernels' dense path, which addresses each block by its flat index;
//!   padded rows take the general path, which computes row and block per slot. On the H200 at
//!   M = 8192: MXFP4 80% (K = 4096) and 86–87% (K = 7168) of the read ceiling, MXFP8 86% and 91%
//!   (`bench-results/2026-12-01-h200-g/wip-ab`).
//!
//! **Status: validated on the H200 (sm_90a)**: bit-exact GPU suite (both paths: the `padded_rows`
//! trials take the general one) and memcheck clean (`bench-results/2026-12-01-h200-g/wip-ab`;
//! the session-23 kernels — bf16x2 E4M3 scaling, HMNMX2 amax — suite, memcheck and racecheck in
//! `bench-results/2026-12-02-h200-a/quant-ab` and `…/rq-regcap`); sm_120a/sm_121a compiled, not run.
//!
//! ```no_run
//! use b12x_core::{RaceBuffer, DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! use b12x_quant::mx::{self, Args, MxFormat, Query};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let query = Query { format: MxFormat::Fp8, k: 4096, dtype: DType::BF16, max_rows: 16, row_major: true, swizzled: false };
//! let plan = mx::plan(&query, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let s = dev.stream();
//! let x = s.alloc_zeros::<b12x_core::half::bf16>(16 * 4096)?;
//! let (mut codes, mut scales) = (s.alloc_zeros::<u8>(16 * 4096)?, s.alloc_zeros::<u8>(16 * 128)?);
//! let args = Args {
//!     x: TensorRef::from_slice(&x, &[16, 4096])?,
//!     codes: TensorMut::from_slice(&mut codes, &[16, 4096])?,
//!     scales: Some(TensorMut::from_slice(&mut scales, &[16, 128])?),
//!     scales_swizzled: None,
//! };
//! mx::run(&plan, args, Scratch::none(), s)?;
//! # Ok(()) }
//! ```

use crate::flat::{self, FlatConfig};
use crate::layout::swizzled_len;
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::{
    require_disjoint, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, OpPlan, PlanSlot, RaceBuffer,
    Result, Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::mem::{offset_of, size_of};
use std::sync::Arc;

/// The op id of MXFP8.
pub const OP_FP8: &str = "quantization.mxfp8";
/// The op id of MXFP4.
pub const OP_FP4: &str = "quantization.mxfp4";
/// Elements per scale.
pub const BLOCK: usize = 32;
/// Most rows the autotune race allocates.
const RACE_MAX_ROWS: usize = 16384;

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP_FP8,
        group: "quantization",
        entry_points: &["plan", "run"],
        dtypes: &["bf16|f16 x; e4m3 codes; ue8m0 scales (row-major and/or swizzled 128x4)"],
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-quant",
        summary: "MXFP8 quantizer: E4M3 codes + UE8M0 scales per 32, bit-exact with the CPU codec",
    }
}

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP_FP4,
        group: "quantization",
        entry_points: &["plan", "run"],
        dtypes: &["bf16|f16 x; e2m1 codes (packed pairs); ue8m0 scales (row-major and/or swizzled 128x4)"],
        // GPU suite passed on the H200 (bench-results/2026-11-30-h200-c; the current kernels in
        // h200-j), also under memcheck and racecheck.
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-quant",
        summary: "MXFP4 quantizer: E2M1 codes + UE8M0 scales per 32, bit-exact with the CPU codec",
    }
}

/// The element format of an MX quantizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MxFormat {
    /// MXFP8: E4M3 elements, one byte each.
    Fp8,
    /// MXFP4: E2M1 elements, two per byte.
    Fp4,
}

impl MxFormat {
    /// The op id.
    pub fn op(self) -> &'static str {
        match self {
            MxFormat::Fp8 => OP_FP8,
            MxFormat::Fp4 => OP_FP4,
        }
    }
    /// The element codec.
    pub fn element(self) -> crate::codec::Element {
        match self {
            MxFormat::Fp8 => crate::codec::Element::E4M3,
            MxFormat::Fp4 => crate::codec::Element::E2M1,
        }
    }
    /// `"fp8"` / `"fp4"` (kernel symbols).
    pub fn name(self) -> &'static str {
        match self {
            MxFormat::Fp8 => "fp8",
            MxFormat::Fp4 => "fp4",
        }
    }
    /// Bytes of codes per row of K elements.
    pub fn code_bytes(self, k: usize) -> usize {
        match self {
            MxFormat::Fp8 => k,
            MxFormat::Fp4 => k / 2,
        }
    }
}

/// The one `__grid_constant__` argument of every `b12x_mx*` entry point (mirrors `MxParams` in
/// `kernels/mx.cu`, size asserted on both sides).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MxParams {
    /// `[M, K]` bf16|f16, row stride `ldx` elements.
    pub x: u64,
    /// `[M, K]` (E4M3) or `[M, K/2]` (E2M1 pairs) u8, row stride `ldq` bytes.
    pub codes: u64,
    /// `[M, K/32]` u8, row stride `lds` bytes; 0 when not written.
    pub scales: u64,
    /// Swizzled 128×4 scales (contiguous); 0 when not written.
    pub scales_sw: u64,
    pub ldx: i64,
    pub ldq: i64,
    pub lds: i64,
    /// M.
    pub rows: i32,
    /// Rows the grid covers: M, or ⌈M/128⌉·128 with the swizzled layout (padding rows).
    pub rows_sw: i32,
    /// K.
    pub k: i32,
    pub pad: i32,
}

const _: () = {
    assert!(size_of::<MxParams>() == 72);
    assert!(offset_of!(MxParams, ldx) == 32);
    assert!(offset_of!(MxParams, rows) == 56);
    assert!(offset_of!(MxParams, k) == 64);
};

/// The static problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// MXFP8 or MXFP4.
    pub format: MxFormat,
    /// K: elements per row, a multiple of 32 (of 128 with `swizzled`).
    pub k: usize,
    /// dtype of `x`: bf16 or f16.
    pub dtype: DType,
    /// Capacity: the largest M `run` accepts.
    pub max_rows: usize,
    /// Write row-major scales `[M, K/32]`.
    pub row_major: bool,
    /// Write the swizzled 128×4 scale layout.
    pub swizzled: bool,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let op = self.format.op();
        let bad = |field, reason: String| Err(Error::InvalidQuery { op, field, reason });
        if !matches!(self.dtype, DType::BF16 | DType::F16) {
            return bad("dtype", format!("must be bf16 or f16, got {}", self.dtype));
        }
        let multiple = if self.swizzled { 128 } else { BLOCK };
        if self.k == 0 || self.k % multiple != 0 || self.k > i32::MAX as usize {
            let why = if self.swizzled { " (whole 4-column tiles of the swizzled layout)" } else { "" };
            return bad("k", format!("(K) must be a positive multiple of {multiple}{why}, got {}", self.k));
        }
        // The grid covers ⌈M/128⌉·128 rows × K/16 slots (checked as K/8), indexed in 32 bits on
        // the device.
        flat::check_max_rows(op, self.k, if self.swizzled { 128 } else { 1 }, self.max_rows)?;
        if !self.row_major && !self.swizzled {
            return bad("row_major", "at least one scale layout (row_major or swizzled) must be written".into());
        }
        Ok(())
    }

    /// Checks `args` against the query and builds the kernel parameters; nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<MxParams> {
        let (k, cols) = (self.k, self.k / BLOCK);
        let m = args.x.shape().first().copied().unwrap_or(0);
        args.x.expect("x", "[M, K]", self.dtype, &[m, k])?;
        let code_bytes = self.format.code_bytes(k);
        let dims = if self.format == MxFormat::Fp8 { "[M, K]" } else { "[M, K/2]" };
        args.codes.expect("codes", dims, DType::U8, &[m, code_bytes])?;
        if m > self.max_rows {
            return Err(Error::Capacity { what: "M (rows of x)", got: m, capacity: self.max_rows });
        }
        let presence = |name, present: bool, wanted: bool, dims: String| -> Result<()> {
            if present == wanted {
                return Ok(());
            }
            let expected = if wanted { dims } else { "no tensor (the plan does not write it)".into() };
            Err(Error::Shape { tensor: name, expected, actual: vec![] })
        };
        presence("scales", args.scales.is_some(), self.row_major, format!("[M, K/32] = [{m}, {cols}]"))?;
        let sw_len = swizzled_len(m, cols);
        presence("scales_swizzled", args.scales_swizzled.is_some(), self.swizzled, format!("[{sw_len}]"))?;
        args.x.require_aligned("x", 16)?;
        args.codes.require_aligned("codes", if self.format == MxFormat::Fp8 { 8 } else { 4 })?;
        let mut p = MxParams {
            x: args.x.ptr(),
            codes: args.codes.ptr(),
            ldx: args.x.row_stride("x")? as i64,
            ldq: args.codes.row_stride("codes")? as i64,
            rows: m as i32,
            rows_sw: m as i32,
            k: k as i32,
            ..MxParams::default()
        };
        let x_span = ("x", args.x.byte_span());
        let q_span = ("codes", args.codes.byte_span());
        require_disjoint(q_span, x_span)?;
        if let Some(s) = &args.scales {
            s.expect("scales", "[M, K/32]", DType::U8, &[m, cols])?;
            p.scales = s.ptr();
            p.lds = s.row_stride("scales")? as i64;
            require_disjoint(("scales", s.byte_span()), x_span)?;
            require_disjoint(("scales", s.byte_span()), q_span)?;
        }
        if let Some(s) = &args.scales_swizzled {
            s.expect("scales_swizzled", "[swizzled_len(M, K/32)]", DType::U8, &[sw_len])?;
            if s.strides() != [1] {
                let reason = "the swizzled scales must be contiguous".into();
                return Err(Error::Stride { tensor: "scales_swizzled", strides: s.strides().to_vec(), reason });
            }
            p.scales_sw = s.ptr();
            p.rows_sw = m.div_ceil(128) as i32 * 128;
            require_disjoint(("scales_swizzled", s.byte_span()), x_span)?;
            require_disjoint(("scales_swizzled", s.byte_span()), q_span)?;
            if let Some(r) = &args.scales {
                require_disjoint(("scales_swizzled", s.byte_span()), ("scales", r.byte_span()))?;
            }
        }
        Ok(p)
    }
}

/// The kernel symbol of one config, e.g. `b12x_mxfp8_t256_u2_bf16`.
pub fn symbol(format: MxFormat, dtype: DType, config: &FlatConfig) -> String {
    format!("b12x_mx{}_{}_{}", format.name(), config.id(), dtype.name())
}

/// A validated query bound to a device; a cheap handle whose prepared state a session fills.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    configs: Vec<FlatConfig>,
    slot: PlanSlot,
}

/// Validates `query`. One bucket (`1..=max_rows`): the kernel is a flat grid over elements.
/// Allocates, compiles and launches nothing.
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
    pub fn configs(&self) -> &[FlatConfig] {
        &self.configs
    }
    /// The op needs no scratch.
    pub fn scratch_layout(&self) -> ScratchLayout {
        ScratchLayout::new()
    }
}

/// The plans `cargo xtask prepare` tunes by default: MXFP8 (the GPU-validated format) of bf16
/// activations with K ∈ {4096, 7168}, capacity 4096 rows, row-major scales. MXFP4 joins once its
/// GPU suite has run.
pub fn default_profile_plans(device: &Arc<Device>) -> Result<Vec<Box<dyn OpPlan>>> {
    let mut out: Vec<Box<dyn OpPlan>> = Vec::new();
    for k in [4096, 7168] {
        let q =
            Query { format: MxFormat::Fp8, k, dtype: DType::BF16, max_rows: 4096, row_major: true, swizzled: false };
        out.push(Box::new(plan(&q, device)?));
    }
    Ok(out)
}

/// The tensors of one call (module docs).
#[derive(Debug)]
pub struct Args<'a> {
    /// `[M, K]` bf16 or f16.
    pub x: TensorRef<'a>,
    /// `[M, K]` u8: E4M3 codes.
    pub codes: TensorMut<'a>,
    /// `[M, K/32]` u8 UE8M0, row-major; `Some` exactly when the plan has `row_major`.
    pub scales: Option<TensorMut<'a>>,
    /// `[swizzled_len(M, K/32)]` u8 UE8M0, swizzled 128×4; `Some` exactly when the plan has
    /// `swizzled`.
    pub scales_swizzled: Option<TensorMut<'a>>,
}

/// Quantizes `args.x` on `stream`. Every check happens before the launch; no allocation, no
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

fn launch(selected: &Selected, params: &MxParams, stream: &CudaStream) -> Result<()> {
    let config = flat::selected_config(selected, "quantization.mx*")?;
    let kernel = selected.kernels.first().ok_or_else(|| flat::unknown_config(selected, "quantization.mx*"))?;
    let dims = config.dims(flat::slots(params.rows_sw as u64, params.k as u64));
    // SAFETY: MxParams mirrors the kernel's struct (asserted on both sides); `params` passed
    // `Query::kernel_params` or describes the race's own buffer.
    unsafe { kernel.launch(stream, dims, params) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        self.query.format.op()
    }
    fn query_key(&self) -> String {
        let q = &self.query;
        format!("K={} dtype={} max_rows={} row_major={} swizzled={}", q.k, q.dtype, q.max_rows, q.row_major, q.swizzled)
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::MX_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        self.configs.iter().map(FlatConfig::id).collect()
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        self.configs.get(config_index).map(|c| vec![symbol(self.query.format, self.query.dtype, c)]).unwrap_or_default()
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        // One buffer: x (filled with non-zero values: all-zero blocks skip the conversion),
        // codes, row-major scales, swizzled scales.
        let q = &self.query;
        let rows = q.max_rows.min(RACE_MAX_ROWS);
        let cols = q.k / BLOCK;
        let sizes = [rows * q.k * 2, rows * q.format.code_bytes(q.k), rows * cols, swizzled_len(rows, cols)];
        let race = RaceBuffer::new(&self.device, &sizes)?;
        race.fill_inputs(&self.device, 0, q.dtype)?;
        let at = &race.ptrs;
        let params = MxParams {
            x: at[0],
            codes: at[1],
            scales: if q.row_major { at[2] } else { 0 },
            scales_sw: if q.swizzled { at[3] } else { 0 },
            ldx: q.k as i64,
            ldq: q.format.code_bytes(q.k) as i64,
            lds: cols as i64,
            rows: rows as i32,
            rows_sw: if q.swizzled { rows.div_ceil(128) as i32 * 128 } else { rows as i32 },
            k: q.k as i32,
            pad: 0,
        };
        Ok(Box::new(RaceCase { params, _buffer: race.buffer }))
    }
}

/// What the autotune race launches each candidate on.
struct RaceCase {
    params: MxParams,
    _buffer: CudaSlice<u8>,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(selected, &self.params, stream)
    }
}
