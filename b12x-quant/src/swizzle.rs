//! `quantization.swizzle_scales`: block scales between row-major `[rows, cols]` u8 and the
//! swizzled 128×4 layout of [`crate::layout`] (padding bytes written 0), on the GPU — for
//! checkpoint scales loaded row-major that a block-scaled GEMM wants swizzled, and back.
//!
//! - Tensors: `rm [rows, cols]` u8 (row stride ≥ cols) and `sw [swizzled_len(rows, cols)]` u8
//!   (contiguous); they must not overlap. Equal to [`crate::layout::to_swizzled`] /
//!   [`crate::layout::from_swizzled`] byte for byte.
//! - One kernel per direction, one thread per output byte; a single config (`"t256"`).
//!
//! **Status: validated on the H200 (sm_90a)**: bit-exact GPU suite, memcheck and racecheck clean
//! (`bench-results/2026-11-30-h200-c`); sm_120a/sm_121a compiled, not run.

use crate::layout::swizzled_len;
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::{
    require_disjoint, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchDims, OpPlan, PlanSlot,
    RaceBuffer, Result, Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::mem::size_of;
use std::sync::Arc;

/// The op id.
pub const OP: &str = "quantization.swizzle_scales";
const THREADS: u32 = 256;

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "quantization",
        entry_points: &["plan", "run"],
        dtypes: &["u8 scales: row-major <-> swizzled 128x4"],
        // GPU suite passed on the H200 (bench-results/2026-11-30-h200-c), also under memcheck and racecheck.
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-quant",
        summary: "block-scale layout reorder: row-major <-> swizzled 128x4 (cuBLASLt / CUTLASS layout)",
    }
}

/// Mirrors `SwizzleParams` in `kernels/swizzle.cu` (size asserted on both sides).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SwizzleParams {
    pub rm: u64,
    pub sw: u64,
    /// Bytes between rows of `rm`.
    pub ld: i64,
    /// Bytes of the output.
    pub total: i64,
    pub rows: i32,
    pub cols: i32,
}

const _: () = assert!(size_of::<SwizzleParams>() == 40);

/// Which way the bytes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Row-major → swizzled.
    ToSwizzled,
    /// Swizzled → row-major.
    FromSwizzled,
}

/// The static problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    pub direction: Direction,
    /// Scale columns (K / block).
    pub cols: usize,
    /// Capacity in rows.
    pub max_rows: usize,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if self.cols == 0 || self.cols > (i32::MAX as usize) / 4 {
            return bad("cols", format!("must be in 1..={}, got {}", i32::MAX / 4, self.cols));
        }
        let cap = (i32::MAX as usize) / self.cols.next_multiple_of(4) / 2;
        if self.max_rows == 0 || self.max_rows > cap {
            return bad("max_rows", format!("must be in 1..={cap}, got {}", self.max_rows));
        }
        Ok(())
    }

    /// Checks `args` and builds the kernel parameters; nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<SwizzleParams> {
        let (rm, sw) = (args.row_major.view(), args.swizzled.view());
        let rows = rm.shape().first().copied().unwrap_or(0);
        rm.expect("row_major", "[rows, cols]", DType::U8, &[rows, self.cols])?;
        let len = swizzled_len(rows, self.cols);
        sw.expect("swizzled", "[swizzled_len(rows, cols)]", DType::U8, &[len])?;
        if rows > self.max_rows {
            return Err(Error::Capacity { what: "rows of the scales", got: rows, capacity: self.max_rows });
        }
        if sw.strides() != [1] {
            let reason = "the swizzled buffer must be contiguous".into();
            return Err(Error::Stride { tensor: "swizzled", strides: sw.strides().to_vec(), reason });
        }
        require_disjoint(("swizzled", sw.byte_span()), ("row_major", rm.byte_span()))?;
        let total = match self.direction {
            Direction::ToSwizzled => len,
            Direction::FromSwizzled => rows * self.cols,
        };
        Ok(SwizzleParams {
            rm: rm.ptr(),
            sw: sw.ptr(),
            ld: rm.row_stride("row_major")? as i64,
            total: total as i64,
            rows: rows as i32,
            cols: self.cols as i32,
        })
    }
}

/// A tensor that is read or written depending on the direction.
#[derive(Debug)]
pub enum Side<'a> {
    In(TensorRef<'a>),
    Out(TensorMut<'a>),
}

impl Side<'_> {
    fn view(&self) -> TensorRef<'_> {
        match self {
            Side::In(t) => *t,
            Side::Out(t) => t.as_ref(),
        }
    }
    fn is_out(&self) -> bool {
        matches!(self, Side::Out(_))
    }
}

/// The tensors of one call: the source as [`Side::In`], the destination as [`Side::Out`].
#[derive(Debug)]
pub struct Args<'a> {
    /// `[rows, cols]` u8.
    pub row_major: Side<'a>,
    /// `[swizzled_len(rows, cols)]` u8.
    pub swizzled: Side<'a>,
}

/// A validated query bound to a device.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    slot: PlanSlot,
}

/// Validates `query`. Allocates, compiles and launches nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    Ok(Plan {
        query: query.clone(),
        device: device.clone(),
        buckets: vec![Bucket { lo: 1, hi: query.max_rows }],
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

/// Reorders on `stream`: every check before the launch; no allocation, no synchronization.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let wants_out = match plan.query.direction {
        Direction::ToSwizzled => (args.swizzled.is_out(), "swizzled"),
        Direction::FromSwizzled => (args.row_major.is_out(), "row_major"),
    };
    if !wants_out.0 {
        let expected = "the destination as Side::Out (the plan's direction)".into();
        return Err(Error::Shape { tensor: wants_out.1, expected, actual: vec![] });
    }
    let params = plan.query.kernel_params(&args)?;
    plan.scratch_layout().bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.rows == 0 {
        return Ok(());
    }
    let selected = resolve(plan, 0, stream)?;
    launch(&selected, &params, stream)
}

fn launch(selected: &Selected, p: &SwizzleParams, stream: &CudaStream) -> Result<()> {
    let unknown = || Error::UnknownConfig { op: OP, bucket: String::new(), config: selected.config.clone() };
    let kernel = selected.kernels.first().ok_or_else(unknown)?;
    let dims = LaunchDims {
        grid: ((p.total as u64).div_ceil(u64::from(THREADS)) as u32, 1, 1),
        block: (THREADS, 1, 1),
        smem_bytes: 0,
    };
    // SAFETY: SwizzleParams mirrors the kernel's struct; `p` passed `Query::kernel_params` (or is
    // the race's own buffer): every index the kernel forms is inside rm / sw.
    unsafe { kernel.launch(stream, dims, p) }
}

/// The kernel symbol of a direction.
pub fn symbol(direction: Direction) -> &'static str {
    match direction {
        Direction::ToSwizzled => "b12x_swizzle_scales_to",
        Direction::FromSwizzled => "b12x_swizzle_scales_from",
    }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        let q = &self.query;
        format!("direction={:?} cols={} max_rows={}", q.direction, q.cols, q.max_rows)
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::SWIZZLE_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        vec!["t256".into()]
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        if config_index == 0 {
            vec![symbol(self.query.direction).into()]
        } else {
            vec![]
        }
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        let q = &self.query;
        let rows = q.max_rows.min(16384);
        let len = swizzled_len(rows, q.cols);
        let race = RaceBuffer::new(&self.device, &[rows * q.cols, len])?;
        let total = match q.direction {
            Direction::ToSwizzled => len,
            Direction::FromSwizzled => rows * q.cols,
        };
        let params = SwizzleParams {
            rm: race.ptrs[0],
            sw: race.ptrs[1],
            ld: q.cols as i64,
            total: total as i64,
            rows: rows as i32,
            cols: q.cols as i32,
        };
        Ok(Box::new(RaceCase { params, _buffer: race.buffer }))
    }
}

struct RaceCase {
    params: SwizzleParams,
    _buffer: CudaSlice<u8>,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(selected, &self.params, stream)
    }
}
