//! `quantization.nvfp4`: BF16/FP16 rows → E2M1 pairs + UE4M3 scales (one per 16 elements) + the
//! f32 encode scale `enc` (b12x's `global_scale`; dequantize as `x̂ = e2m1 · f32(s) / enc`).
//!
//! - Math: exactly [`crate::block::quantize_nvfp4`], bit for bit: `enc` given (weights,
//!   calibrated activations) or computed on the device in the same op (activations:
//!   `A = max |x|` over the finite elements, `enc = min(2688 / A, 2^126)`, 1 when A = 0); per
//!   block, each step one f32 operation: `s = ue4m3(enc · (amax / 6))`, `r = 1 / (f32(s) · (1 /
//!   enc))`, `q = e2m1(x · r)`; a block with NaN/Inf gets scale 0x7F and zero codes.
//! - Tensors: `x [M, K]` bf16/f16 (rows 16-byte aligned); `codes [M, K/2]` u8 (element 2i in
//!   the low nibble, rows 4-byte aligned); scales row-major `[M, K/16]` and/or swizzled 128×4
//!   ([`crate::layout`], padding rows written 0); `enc_in [1]` f32 (given mode; device memory, so
//!   a captured graph sees updates) or `enc_out [1]` f32 (computed mode, written by the op).
//! - Constraints: `K % 16 == 0` (`K % 64 == 0` with the swizzled layout); `M ≤ max_rows`.
//! - Computed mode uses 4 bytes of scratch (`"amax"`), zeroed by a memset inside `run`, then two
//!   kernels (amax pass, quantize pass): graph-capturable.
//! - Performance: unpadded rows (`x`, `codes` and row-major `scales` with row strides K, K/2
//!   and K/16) take the kernels' dense path, which addresses each block by its flat index;
//!   padded rows take the general path, which computes row and block per slot (given scale,
//!   M = 32768, K = 4096: 90% of the H200's read ceiling on the dense path). Computed mode reads
//!   x twice (every code depends on the global amax, and x does not fit on chip), so it moves up
//!   to twice the bytes of the given mode for the same output: 43–52% of the read ceiling at
//!   M ≥ 8192, where even an L2 that fed the whole second pass would bound it at 60–78% (README
//!   status table). Calibrated (given) scales are the fast path for large activations.
//!
//! **Status: validated on the H200 (sm_90a)**: bit-exact GPU suite, memcheck and racecheck clean
//! (`bench-results/2026-11-30-h200-c`; the current kernels, with both paths, in
//! `bench-results/2026-12-01-h200-f/nvfp4-dense`; the below-7 encoder and the u4 register cap:
//! suite, memcheck and racecheck in `bench-results/2026-12-01-h200-k/final`); sm_120a/sm_121a
//! compiled, not run. On those targets the
//! E2M1 encoding is the hardware `cvt.rn.satfinite.e2m1x2.f32` instead of the software encoder
//! sm_90 runs (same rounding by specification; the GPU suite there is what would confirm it).

use crate::flat::{self, FlatConfig};
use crate::layout::swizzled_len;
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::{
    memset_u32, require_disjoint, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchDims, OpPlan,
    PlanSlot, RaceBuffer, Result, Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::mem::{offset_of, size_of};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "quantization.nvfp4";
/// Elements per scale.
pub const BLOCK: usize = 16;
/// CTA size and CTAs per SM of the amax pass.
const AMAX_THREADS: u32 = 256;
const AMAX_CTAS_PER_SM: u32 = 4;
/// Loads in flight per thread of the amax pass (`U` of `amax_pass` in `kernels/nvfp4.cu`).
const AMAX_UNROLL: u32 = 4;
const RACE_MAX_ROWS: usize = 16384;

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "quantization",
        entry_points: &["plan", "run"],
        dtypes: &["bf16|f16 x; e2m1 codes (packed pairs); ue4m3 scales (row-major and/or swizzled 128x4); f32 enc"],
        // GPU suite passed on the H200 (bench-results/2026-11-30-h200-c; the current kernels in
        // h200-j), also under memcheck and racecheck.
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-quant",
        summary: "NVFP4 quantizer: E2M1 + UE4M3 per 16 + f32 encode scale (given or computed on device)",
    }
}

/// Mirrors `Nvfp4Params` in `kernels/nvfp4.cu` (size asserted on both sides).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Nvfp4Params {
    pub x: u64,
    pub codes: u64,
    pub scales: u64,
    pub scales_sw: u64,
    /// Given encode scale `[1]` f32, or 0 (computed mode).
    pub enc_in: u64,
    /// Computed encode scale output `[1]` f32, or 0 (given mode).
    pub enc_out: u64,
    /// Scratch `[1]` u32 (computed mode).
    pub amax: u64,
    pub ldx: i64,
    pub ldq: i64,
    pub lds: i64,
    pub rows: i32,
    pub rows_sw: i32,
    pub k: i32,
    pub pad: i32,
}

const _: () = {
    assert!(size_of::<Nvfp4Params>() == 96);
    assert!(offset_of!(Nvfp4Params, amax) == 48);
    assert!(offset_of!(Nvfp4Params, ldx) == 56);
    assert!(offset_of!(Nvfp4Params, rows) == 80);
};

/// Where the encode scale comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GlobalScale {
    /// `Args::enc_in` holds it (device f32 `[1]`).
    Given,
    /// Computed from the tensor's finite amax and written to `Args::enc_out`.
    Computed,
}

/// The static problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// K: a multiple of 16 (of 64 with `swizzled`).
    pub k: usize,
    /// dtype of `x`: bf16 or f16.
    pub dtype: DType,
    pub max_rows: usize,
    pub row_major: bool,
    pub swizzled: bool,
    pub global: GlobalScale,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if !matches!(self.dtype, DType::BF16 | DType::F16) {
            return bad("dtype", format!("must be bf16 or f16, got {}", self.dtype));
        }
        let multiple = if self.swizzled { 64 } else { BLOCK };
        if self.k == 0 || self.k % multiple != 0 || self.k > i32::MAX as usize {
            return bad("k", format!("(K) must be a positive multiple of {multiple}, got {}", self.k));
        }
        flat::check_max_rows(OP, self.k, if self.swizzled { 128 } else { 1 }, self.max_rows)?;
        if !self.row_major && !self.swizzled {
            return bad("row_major", "at least one scale layout (row_major or swizzled) must be written".into());
        }
        Ok(())
    }

    /// Checks `args` against the query and builds the kernel parameters (scratch pointer left
    /// 0); nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<Nvfp4Params> {
        let (k, cols) = (self.k, self.k / BLOCK);
        let m = args.x.shape().first().copied().unwrap_or(0);
        args.x.expect("x", "[M, K]", self.dtype, &[m, k])?;
        args.codes.expect("codes", "[M, K/2]", DType::U8, &[m, k / 2])?;
        if m > self.max_rows {
            return Err(Error::Capacity { what: "M (rows of x)", got: m, capacity: self.max_rows });
        }
        let presence = |name, present: bool, wanted: bool, dims: String| -> Result<()> {
            if present == wanted {
                return Ok(());
            }
            let expected = if wanted { dims } else { "no tensor (the plan does not use it)".into() };
            Err(Error::Shape { tensor: name, expected, actual: vec![] })
        };
        presence("scales", args.scales.is_some(), self.row_major, format!("[M, K/16] = [{m}, {cols}]"))?;
        let sw_len = swizzled_len(m, cols);
        presence("scales_swizzled", args.scales_swizzled.is_some(), self.swizzled, format!("[{sw_len}]"))?;
        presence("enc_in", args.enc_in.is_some(), self.global == GlobalScale::Given, "[1] f32".into())?;
        presence("enc_out", args.enc_out.is_some(), self.global == GlobalScale::Computed, "[1] f32".into())?;
        args.x.require_aligned("x", 16)?;
        args.codes.require_aligned("codes", 4)?;
        let mut p = Nvfp4Params {
            x: args.x.ptr(),
            codes: args.codes.ptr(),
            ldx: args.x.row_stride("x")? as i64,
            ldq: args.codes.row_stride("codes")? as i64,
            rows: m as i32,
            rows_sw: m as i32,
            k: k as i32,
            ..Nvfp4Params::default()
        };
        let x_span = ("x", args.x.byte_span());
        let q_span = ("codes", args.codes.byte_span());
        require_disjoint(q_span, x_span)?;
        // Every output, fixed-size (run allocates nothing): codes, scales, swizzled, enc_out.
        let mut outputs = [Some(q_span), None, None, None];
        if let Some(s) = &args.scales {
            s.expect("scales", "[M, K/16]", DType::U8, &[m, cols])?;
            p.scales = s.ptr();
            p.lds = s.row_stride("scales")? as i64;
            outputs[1] = Some(("scales", s.byte_span()));
        }
        if let Some(s) = &args.scales_swizzled {
            s.expect("scales_swizzled", "[swizzled_len(M, K/16)]", DType::U8, &[sw_len])?;
            if s.strides() != [1] {
                let reason = "the swizzled scales must be contiguous".into();
                return Err(Error::Stride { tensor: "scales_swizzled", strides: s.strides().to_vec(), reason });
            }
            p.scales_sw = s.ptr();
            p.rows_sw = m.div_ceil(128) as i32 * 128;
            outputs[2] = Some(("scales_swizzled", s.byte_span()));
        }
        if let Some(e) = &args.enc_in {
            e.expect("enc_in", "[1]", DType::F32, &[1])?;
            p.enc_in = e.ptr();
        }
        if let Some(e) = &args.enc_out {
            e.expect("enc_out", "[1]", DType::F32, &[1])?;
            p.enc_out = e.ptr();
            outputs[3] = Some(("enc_out", e.byte_span()));
        }
        for (i, a) in outputs.iter().enumerate().filter_map(|(i, o)| o.map(|o| (i, o))) {
            require_disjoint(a, x_span)?;
            for b in outputs[i + 1..].iter().flatten() {
                require_disjoint(a, *b)?;
            }
        }
        Ok(p)
    }
}

/// The quantize-pass kernel of one config, e.g. `b12x_nvfp4_t256_u2_bf16`.
pub fn symbol(dtype: DType, config: &FlatConfig) -> String {
    format!("b12x_nvfp4_{}_{}", config.id(), dtype.name())
}

/// The amax-pass kernel of a dtype, e.g. `b12x_nvfp4_amax_bf16`.
pub fn amax_symbol(dtype: DType) -> String {
    format!("b12x_nvfp4_amax_{}", dtype.name())
}

/// A validated query bound to a device.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    configs: Vec<FlatConfig>,
    scratch: ScratchLayout,
    slot: PlanSlot,
}

/// Validates `query`; one bucket `1..=max_rows`. Allocates, compiles and launches nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    let mut scratch = ScratchLayout::new();
    if query.global == GlobalScale::Computed {
        scratch.add("amax", 4);
    }
    Ok(Plan {
        query: query.clone(),
        device: device.clone(),
        buckets: vec![Bucket { lo: 1, hi: query.max_rows }],
        configs: FlatConfig::all(),
        scratch,
        slot: PlanSlot::default(),
    })
}

impl Plan {
    pub fn query(&self) -> &Query {
        &self.query
    }
    /// Computed mode: `"amax"`, 4 bytes (zeroed by `run`); given mode: nothing.
    pub fn scratch_layout(&self) -> ScratchLayout {
        self.scratch.clone()
    }
}

/// The tensors of one call (module docs).
#[derive(Debug)]
pub struct Args<'a> {
    /// `[M, K]` bf16 or f16.
    pub x: TensorRef<'a>,
    /// `[M, K/2]` u8: E2M1 pairs.
    pub codes: TensorMut<'a>,
    /// `[M, K/16]` u8 UE4M3, row-major; `Some` exactly when the plan has `row_major`.
    pub scales: Option<TensorMut<'a>>,
    /// `[swizzled_len(M, K/16)]` u8; `Some` exactly when the plan has `swizzled`.
    pub scales_swizzled: Option<TensorMut<'a>>,
    /// `[1]` f32 given encode scale; `Some` exactly in `GlobalScale::Given` mode. The caller
    /// guarantees a finite value > 0 (it lives on the device, so `run` cannot check it; the CPU
    /// codec rejects anything else).
    pub enc_in: Option<TensorRef<'a>>,
    /// `[1]` f32, receives the computed encode scale; `Some` exactly in `GlobalScale::Computed` mode.
    pub enc_out: Option<TensorMut<'a>>,
}

/// Quantizes `args.x` on `stream`: every check before the first launch; no allocation, no
/// synchronization. `M = 0` launches nothing (in computed mode `enc_out` is then not written).
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let mut params = plan.query.kernel_params(&args)?;
    // The plan's own layout: binding it allocates nothing.
    let bound = plan.scratch.bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.rows == 0 {
        return Ok(());
    }
    if plan.query.global == GlobalScale::Computed {
        params.amax = bound.ptr("amax");
    }
    let selected = resolve(plan, 0, stream)?;
    launch(&plan.device, &selected, &params, stream)
}

fn launch(device: &Device, selected: &Selected, p: &Nvfp4Params, stream: &CudaStream) -> Result<()> {
    let config = flat::selected_config(selected, OP)?;
    if p.enc_in == 0 {
        let amax = selected.kernels.first().ok_or_else(|| flat::unknown_config(selected, OP))?;
        memset_u32(stream, p.amax, 0, 1)?;
        let live = p.rows as u64 * (p.k as u64 / 8);
        let ctas =
            live.div_ceil(u64::from(AMAX_THREADS * AMAX_UNROLL)).min(u64::from(device.sm_count() * AMAX_CTAS_PER_SM));
        let dims = LaunchDims { grid: (ctas.max(1) as u32, 1, 1), block: (AMAX_THREADS, 1, 1), smem_bytes: 0 };
        // SAFETY: Nvfp4Params mirrors the kernel's struct; `p` passed `Query::kernel_params`
        // (or is the race's own buffer) and `p.amax` is the bound scratch cell.
        unsafe { amax.launch(stream, dims, p) }?;
    }
    let quantize = selected.kernels.last().ok_or_else(|| flat::unknown_config(selected, OP))?;
    // The quantize pass takes one NVFP4 block (16 elements) per slot.
    let dims = config.dims(flat::slots(p.rows_sw as u64, p.k as u64));
    // SAFETY: as above.
    unsafe { quantize.launch(stream, dims, p) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        let q = &self.query;
        format!(
            "K={} dtype={} max_rows={} row_major={} swizzled={} global={:?}",
            q.k, q.dtype, q.max_rows, q.row_major, q.swizzled, q.global
        )
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::NVFP4_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        self.configs.iter().map(FlatConfig::id).collect()
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        let Some(c) = self.configs.get(config_index) else { return vec![] };
        match self.query.global {
            GlobalScale::Computed => vec![amax_symbol(self.query.dtype), symbol(self.query.dtype, c)],
            GlobalScale::Given => vec![symbol(self.query.dtype, c)],
        }
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        // One zeroed buffer: x, codes, scales, swizzled scales, enc (given: 1.0), scratch.
        let q = &self.query;
        let rows = q.max_rows.min(RACE_MAX_ROWS);
        let cols = q.k / BLOCK;
        let sizes = [rows * q.k * 2, rows * q.k / 2, rows * cols, swizzled_len(rows, cols), 4, 4];
        let stream = self.device.stream();
        let race = RaceBuffer::new(&self.device, &sizes)?;
        race.fill_inputs(&self.device, 0, q.dtype)?;
        let at = &race.ptrs;
        if q.global == GlobalScale::Given {
            memset_u32(stream, at[4], 1.0f32.to_bits(), 1)?;
        }
        let params = Nvfp4Params {
            x: at[0],
            codes: at[1],
            scales: if q.row_major { at[2] } else { 0 },
            scales_sw: if q.swizzled { at[3] } else { 0 },
            enc_in: if q.global == GlobalScale::Given { at[4] } else { 0 },
            enc_out: if q.global == GlobalScale::Computed { at[4] } else { 0 },
            amax: at[5],
            ldx: q.k as i64,
            ldq: (q.k / 2) as i64,
            lds: cols as i64,
            rows: rows as i32,
            rows_sw: if q.swizzled { rows.div_ceil(128) as i32 * 128 } else { rows as i32 },
            k: q.k as i32,
            pad: 0,
        };
        Ok(Box::new(RaceCase { device: self.device.clone(), params, _buffer: race.buffer }))
    }
}

struct RaceCase {
    device: Arc<Device>,
    params: Nvfp4Params,
    _buffer: CudaSlice<u8>,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(&self.device, selected, &self.params, stream)
    }
}
