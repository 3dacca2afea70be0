//! `gemm.l2_warm`: reads a byte range (a weight, or the part of it a later GEMM reads last)
//! through L2, so that the GEMM finds those bytes there instead of in HBM.
//!
//! Why: a decode step has latency-bound phases — at B = 1 the attention reads 16.8 MB with 64
//! CTAs and leaves most of the HBM bandwidth idle for ~10 µs — followed by a bandwidth-bound
//! GEMV whose late CTAs only start reading their weight once the phase ends. Launched on a second
//! stream beside such a phase (forked from the main stream, joined later), this op spends the
//! idle bandwidth on the next weight's bytes. `b12x-layers` uses it for the O projection of its
//! decoder layer (`LayerOptions::warm_o_proj`). It helps only where a latency-bound kernel runs
//! beside it; beside a bandwidth-bound one it takes bandwidth away.
//!
//! - Tensors: `src`, any dtype, contiguous, 16-byte aligned, a whole number of 16-byte vectors;
//!   its bytes are read and nothing is written anywhere.
//! - Kernel (`kernels/l2_warm.cu`): a grid-stride loop, four 16-byte loads in flight per thread,
//!   L1 bypassed, L2 lines allocated with an evict-last policy ([`Query::evict_last`]: they then
//!   outlive the normal-priority lines a streaming kernel beside it brings in) or normal
//!   priority. The grid ([`Query::ctas`], [`Query::threads`]) is the caller's: how much
//!   bandwidth the op may take beside the kernel it overlaps. No PDL (it runs on its own stream).
//! - One config per plan (the grid of the query): the session does not race it, since its speed
//!   alone says nothing about how well it overlaps.
//!
//! **Status: run on an H100 only (sm_90a), not validated**: `tests/gpu_l2_warm.rs` (nothing
//! changes, on a forked stream and in a captured fork/join graph; the range is read faster after
//! the op than after an L2 flush; typed errors; no allocation): 5 of 6 trials pass, memcheck and
//! racecheck clean (`bench-results/2026-12-05-h200-e/` call 5); the speed trial failed on the
//! test's own timing-disabled events (fixed, not rerun). In the decoder step
//! (`LayerOptions::warm_o_proj`) it did not pay on that H100. Nothing on the H200; sm_120a /
//! sm_121a compiled, not run.
//!
//! ```no_run
//! use b12x_core::{Device, PreparationSession, Scratch, TensorRef};
//! use b12x_gemm::l2_warm::{self, Args, Query};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let w = dev.stream().alloc_zeros::<b12x_core::half::bf16>(4096 * 4096)?;
//! let plan = l2_warm::plan(&Query::beside_attention(4096 * 4096 * 2, &dev), &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! session.freeze();
//! // The last 1229 of W's 4096 rows (30%), on a second stream (forked from the main one in real
//! // use). The range must start 16-byte aligned and hold whole 16-byte vectors: whole rows here.
//! let side = dev.stream().fork()?;
//! let tail = w.slice((4096 - 1229) * 4096..);
//! l2_warm::run(&plan, Args { src: TensorRef::from_view(&tail, &[1229, 4096])? }, Scratch::none(), &side)?;
//! # Ok(()) }
//! ```

use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::{
    resolve, BenchCase, Bucket, Device, Error, KernelModule, LaunchDims, OpPlan, PlanSlot, RaceBuffer, Result, Scratch,
    ScratchLayout, Selected, TensorRef,
};
use std::mem::{offset_of, size_of};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "gemm.l2_warm";
/// The kernel's launch bound (threads per CTA).
pub const MAX_THREADS: u32 = 512;
/// `L2WarmParams::flags` bit 0: evict-last L2 policy.
pub const FLAG_EVICT_LAST: i32 = 1;
/// The most bytes the plan's own race buffer holds (the session never races a single config,
/// but `bench_case` must still build one).
const RACE_MAX_BYTES: usize = 64 << 20;

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "gemm",
        entry_points: &["plan", "run"],
        dtypes: &["any (bytes)"],
        // tests/gpu_l2_warm.rs not run yet (session 48: no device after it landed).
        archs: &[
            ("sm_90a", b12x_core::Validation::CompiledOnly),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-gemm",
        summary: "reads a byte range (a GEMM's weight) through L2 beside a latency-bound kernel, so the GEMM after it finds it there",
    }
}

/// The one `__grid_constant__` argument of `b12x_l2_warm`, mirrored field for field
/// (`kernels/l2_warm.cu` asserts the same size and offsets).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct L2WarmParams {
    /// Device address of the first 16-byte vector.
    pub src: u64,
    /// 16-byte vectors to read.
    pub n_vec: u64,
    /// Bit 0 ([`FLAG_EVICT_LAST`]): evict-last L2 policy, else normal priority.
    pub flags: i32,
    /// Zero.
    pub reserved: i32,
}
const _: () = assert!(size_of::<L2WarmParams>() == 24);
const _: () = assert!(offset_of!(L2WarmParams, flags) == 16);

/// The static problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// Capacity: the most bytes one call reads.
    pub max_bytes: usize,
    /// CTAs of the grid (≥ 1).
    pub ctas: u32,
    /// Threads per CTA: a multiple of 32 in 32..=512.
    pub threads: u32,
    /// Allocate the lines with an evict-last L2 policy (else normal priority).
    pub evict_last: bool,
}

impl Query {
    /// The grid of the best point beside `attention.paged`'s B = 1 decode in `b12x-layers`' step
    /// (session 48's H100 prototype, `bench-results/2026-12-05-h200-e/`): one CTA of 256 threads
    /// per SM, evict-last lines (normal priority and 16–66 CTAs were slower).
    pub fn beside_attention(max_bytes: usize, device: &Device) -> Self {
        Query { max_bytes, ctas: device.sm_count(), threads: 256, evict_last: true }
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if self.max_bytes == 0 || self.max_bytes % 16 != 0 {
            return bad("max_bytes", format!("must be a positive multiple of 16, got {}", self.max_bytes));
        }
        if self.ctas == 0 || self.ctas > i32::MAX as u32 {
            return bad("ctas", format!("must be in 1..={}, got {}", i32::MAX, self.ctas));
        }
        if !(32..=MAX_THREADS).contains(&self.threads) || self.threads % 32 != 0 {
            return bad("threads", format!("must be a multiple of 32 in 32..={MAX_THREADS}, got {}", self.threads));
        }
        Ok(())
    }

    /// Checks `args` against the query and builds the kernel parameters; nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<L2WarmParams> {
        let src = &args.src;
        src.require_contiguous("src")?;
        src.require_aligned("src", 16)?;
        let bytes = src.numel() * src.dtype().size_bytes();
        if bytes % 16 != 0 {
            return Err(Error::Shape {
                tensor: "src",
                expected: "a whole number of 16-byte vectors".into(),
                actual: src.shape().to_vec(),
            });
        }
        if bytes > self.max_bytes {
            return Err(Error::Capacity { what: "bytes of src", got: bytes, capacity: self.max_bytes });
        }
        Ok(L2WarmParams {
            src: src.ptr(),
            n_vec: (bytes / 16) as u64,
            flags: if self.evict_last { FLAG_EVICT_LAST } else { 0 },
            reserved: 0,
        })
    }

    /// The config id: `"c{ctas}t{threads}"` with `_el` for evict-last lines.
    pub fn config_id(&self) -> String {
        format!("c{}t{}{}", self.ctas, self.threads, if self.evict_last { "_el" } else { "" })
    }
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
        buckets: vec![Bucket { lo: 1, hi: query.max_bytes }],
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

/// The tensors of one call.
#[derive(Debug)]
pub struct Args<'a> {
    /// The bytes to read: contiguous, 16-byte aligned, a whole number of 16-byte vectors, at most
    /// `Query::max_bytes`.
    pub src: TensorRef<'a>,
}

/// Reads `args.src` through L2 on `stream`: every check before the launch; no allocation, no
/// synchronization; an empty `src` launches nothing. Usually `stream` is a second stream forked
/// from the one the kernel to overlap runs on (see the module docs).
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let params = plan.query.kernel_params(&args)?;
    plan.scratch_layout().bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.n_vec == 0 {
        return Ok(());
    }
    let selected = resolve(plan, 0, stream)?;
    launch(&plan.query, &selected, &params, stream)
}

fn launch(query: &Query, selected: &Selected, p: &L2WarmParams, stream: &CudaStream) -> Result<()> {
    let kernel = selected.kernels.first().ok_or_else(|| Error::UnknownConfig {
        op: OP,
        bucket: String::new(),
        config: selected.config.clone(),
    })?;
    let dims = LaunchDims { grid: (query.ctas, 1, 1), block: (query.threads, 1, 1), smem_bytes: 0 };
    // SAFETY: L2WarmParams mirrors the kernel's struct (asserted on both sides); `p` passed
    // `Query::kernel_params` (its range lies in `src`) or describes the race's own buffer.
    unsafe { kernel.launch(stream, dims, p) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        let q = &self.query;
        format!("max_bytes={} ctas={} threads={} evict_last={}", q.max_bytes, q.ctas, q.threads, q.evict_last)
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::L2_WARM_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        vec![self.query.config_id()]
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        if config_index == 0 {
            vec!["b12x_l2_warm".into()]
        } else {
            Vec::new()
        }
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        let bytes = self.query.max_bytes.min(RACE_MAX_BYTES);
        let race = RaceBuffer::new(&self.device, &[bytes])?;
        let params = L2WarmParams {
            src: race.ptrs[0],
            n_vec: (bytes / 16) as u64,
            flags: if self.query.evict_last { FLAG_EVICT_LAST } else { 0 },
            reserved: 0,
        };
        Ok(Box::new(RaceCase { query: self.query.clone(), params, _buffer: race.buffer }))
    }
}

/// What a race would launch (the session does not race a single config).
struct RaceCase {
    query: Query,
    params: L2WarmParams,
    _buffer: CudaSlice<u8>,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(&self.query, selected, &self.params, stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q() -> Query {
        Query { max_bytes: 1 << 20, ctas: 132, threads: 256, evict_last: true }
    }

    #[test]
    fn validate_names_the_bad_field() {
        assert!(q().validate().is_ok());
        let field = |q: Query| match q.validate() {
            Err(Error::InvalidQuery { field, .. }) => field,
            other => panic!("expected InvalidQuery, got {other:?}"),
        };
        assert_eq!(field(Query { max_bytes: 0, ..q() }), "max_bytes");
        assert_eq!(field(Query { max_bytes: 24, ..q() }), "max_bytes");
        assert_eq!(field(Query { ctas: 0, ..q() }), "ctas");
        assert_eq!(field(Query { threads: 0, ..q() }), "threads");
        assert_eq!(field(Query { threads: 48, ..q() }), "threads");
        assert_eq!(field(Query { threads: 1024, ..q() }), "threads");
    }

    #[test]
    fn config_id_names_the_grid_and_policy() {
        assert_eq!(q().config_id(), "c132t256_el");
        assert_eq!(Query { evict_last: false, ctas: 66, threads: 512, ..q() }.config_id(), "c66t512");
    }
}
