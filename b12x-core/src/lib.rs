//! `b12x-core` — the lifecycle every b12x op follows, and what ops share.
//!
//! * [`Device`]: context, stream and the properties plans key on.
//! * [`TensorRef`] / [`TensorMut`]: device tensor views (pointer, shape, strides, dtype) over
//!   cudarc buffers or raw pointers.
//! * [`OpPlan`]: the contract of every op's plan; [`PreparationSession`] loads kernels, selects
//!   one config per bucket (pin > cached > race > default) and fills plans; `freeze()` turns any
//!   later kernel resolution into [`Error::KernelResolutionFrozen`].
//! * [`ScratchLayout`] / [`Scratch`]: caller-owned scratch, named 1024-byte-aligned regions.
//! * [`mod@bench`] and [`testing`]: the one benchmark method and the shared test helpers.
//! * [`list_ops`]: every linked op with its dtypes, archs and validation status.
//!
//! The lifecycle, with any op (here `norm.rmsnorm` from `b12x-norm`):
//!
//! ```ignore
//! let plan = rmsnorm::plan(&query, &device)?;      // validates; allocates nothing
//! let mut session = PreparationSession::new(&device)?;
//! session.prepare(&[&plan])?;                       // loads kernels, tunes, caches the choice
//! session.freeze();
//! rmsnorm::run(&plan, &args, device.stream())?;    // launch only
//! ```

pub mod autotune;
pub mod bench;
pub mod cache;
mod device;
mod dtype;
pub mod env;
mod error;
mod kernel;
pub mod plan;
mod registry;
mod scratch;
pub mod session;
mod tensor;
pub mod testing;
pub mod tma;

pub use device::{cuda_available, is_capturing, Arch, Device};
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use kernel::{Kernel, KernelModule, LaunchDims, LaunchOpts, LoadedModule};
pub use plan::{
    edge_buckets, pow2_buckets, resolve, resolve_prepared, BenchCase, Bucket, OpPlan, PlanSlot, RaceBuffer, Selected,
    SelectionSource,
};
pub use registry::{list_ops, OpInfo, Validation};
pub use scratch::{BoundScratch, Region, Scratch, ScratchLayout, SCRATCH_ALIGN, SCRATCH_BASE_ALIGN};
pub use session::{CapturedGraph, PreparationSession, SelectionRecord, SessionState};
pub use tensor::{contiguous_strides, require_disjoint, require_disjoint_views, TensorMut, TensorRef, MAX_RANK};

/// Re-exported cudarc (the pinned version b12x is built against).
pub use cudarc;
/// Re-exported `half` (bf16 / f16 host types).
pub use half;
/// Re-exported so op crates can `b12x_core::inventory::submit!` their [`OpInfo`].
pub use inventory;

/// Sets `count` 32-bit words at device address `ptr` to `value`, enqueued on `stream`
/// (capturable; used e.g. to reset split-K arrival counters inside `run`).
pub fn memset_u32(stream: &cudarc::driver::CudaStream, ptr: u64, value: u32, count: usize) -> Result<()> {
    unsafe { cudarc::driver::sys::cuMemsetD32Async(ptr, value, count, stream.cu_stream()) }.result()?;
    Ok(())
}
