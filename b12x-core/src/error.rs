//! The one error enum of the workspace.

use crate::DType;

/// Every fallible b12x call returns this. Messages name the tensor and both shapes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No CUDA driver library, or no device with that ordinal.
    #[error("no CUDA device available: {0}")]
    NoDevice(String),
    /// The crate was built without nvcc, so its fatbin is empty.
    #[error(
        "kernels of `{module}` not built: nvcc was not found at build time — run `cargo xtask toolchain` \
         (or `pip install --target .b12x/toolchain nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 \
         nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85`, or set B12X_NVCC / \
         CUDA_HOME) and rebuild"
    )]
    KernelsNotBuilt { module: &'static str },
    /// A kernel symbol is missing from the loaded fatbin (a variant-table / kernel mismatch).
    #[error("kernel `{symbol}` not found in module `{module}`: {source}")]
    KernelMissing { module: &'static str, symbol: String, source: cudarc::driver::DriverError },
    /// A query field is out of the op's supported range.
    #[error("invalid query for `{op}`: {field} {reason}")]
    InvalidQuery { op: &'static str, field: &'static str, reason: String },
    /// The op has no config that runs on this device (e.g. shared memory limit).
    #[error("`{op}` has no config that runs on {device}: {reason}")]
    Unsupported { op: &'static str, device: String, reason: String },
    #[error("`{tensor}` must have shape {expected}, got {actual:?}")]
    Shape { tensor: &'static str, expected: String, actual: Vec<usize> },
    #[error("`{tensor}` must have dtype {expected}, got {actual}")]
    DType { tensor: &'static str, expected: DType, actual: DType },
    #[error("`{tensor}` has unsupported strides {strides:?}: {reason}")]
    Stride { tensor: &'static str, strides: Vec<isize>, reason: String },
    /// Two tensors share memory where the op needs them apart (an output over an input).
    #[error("`{a}` and `{b}` overlap in device memory: {reason}")]
    Aliasing { a: &'static str, b: &'static str, reason: String },
    #[error("`{tensor}` must be {align}-byte aligned (pointer 0x{ptr:x}, row stride {row_stride_bytes} bytes)")]
    Misaligned { tensor: &'static str, align: usize, ptr: u64, row_stride_bytes: usize },
    /// A live count exceeds the capacity the plan was made for.
    #[error("`{what}` = {got} exceeds the plan's capacity {capacity}")]
    Capacity { what: &'static str, got: usize, capacity: usize },
    #[error("scratch too small: region `{region}` needs {need} bytes in total, buffer has {have}")]
    ScratchTooSmall { region: &'static str, need: usize, have: usize },
    /// A kernel would have to be loaded or selected after `freeze()` or during graph capture.
    #[error(
        "kernel resolution for `{op}` ({key}) is frozen: prepare this plan with a PreparationSession before \
         freezing or capturing"
    )]
    KernelResolutionFrozen { op: &'static str, key: String },
    /// A prepared-only entry point was called with a plan (bucket) no session prepared.
    #[error("`{op}` ({key}) runs prepared plans only: prepare it with a PreparationSession before the first call")]
    NotPrepared { op: &'static str, key: String },
    /// The session is in a state where the call makes no sense.
    #[error("preparation session is {state}: {what}")]
    SessionState { state: &'static str, what: String },
    /// A pinned config is not legal for the plan.
    #[error("config `{config}` is not legal for `{op}` bucket `{bucket}`")]
    UnknownConfig { op: &'static str, bucket: String, config: String },
    #[error("plan was made for device {expected}, used with device {actual}")]
    WrongDevice { expected: usize, actual: usize },
    #[error("CUDA driver error: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    #[error("I/O error on {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// Workspace result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
