//! The fixed linears: `gemm.block_fp8_linear`, `gemm.mxfp8_linear`, `gemm.tensor_fp8_linear` —
//! prepared-only entry points with one weight and activation format each, on `gemm.blockscaled`'s
//! kernels ([`super::gemv`]). What an engine calls for a checkpoint's FP8 linear layers:
//!
//! | op | weight ([`PackedWeight`]) | activation | math |
//! |---|---|---|---|
//! | `gemm.block_fp8_linear` | block FP8, 128 × 128 or 32 × 32 tiles, f32 or UE8M0 scales | bf16 x quantized in the call to block FP8 1 × 128 (1 × 32 for 32 × 32 weights), UE8M0 scales | DeepSeek-V3/V4's `wq_a`, `wq_b`, `wkv`, `wo_b`, shared expert |
//! | `gemm.mxfp8_linear` | MXFP8 (E4M3, UE8M0 per 1 × 32) | bf16 x quantized in the call to MXFP8 | MXFP8 × MXFP8 |
//! | `gemm.tensor_fp8_linear` | per-tensor E4M3 | already-quantized E4M3 x with a device f32 scale | `y = alpha · s_x · s_w · (x_q · W_qᵀ)` |
//!
//! `y = alpha · x̂ · Ŵᵀ (+ bias)` exactly as [`super::gemv`] computes it (the same kernels, buckets,
//! configs and oracle, [`super::reference`]); the activation quantization is bit-identical to
//! running b12x-quant's quantizer first (`quantization.fp8_block` with UE8M0 scales,
//! `quantization.mxfp8`). **Prepared-only**: `run` never loads a kernel — a plan no
//! [`PreparationSession`](b12x_core::PreparationSession) prepared is [`Error::NotPrepared`] (the
//! generic op would prepare its default config on first use). The scratch is the caller's
//! ([`Plan::scratch_layout`]: x̂ for `max_rows` rows of K bf16, plus split-K partials).
//!
//! ```no_run
//! use b12x_core::{DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! use b12x_gemm::blockscaled::linear::{self, block_fp8_linear};
//! use b12x_gemm::blockscaled::{pack::pack_weight, Weight};
//! use b12x_quant::block::{quantize_block_fp8, Fp8ScaleKind};
//! # fn main() -> b12x_core::Result<()> {
//! // DeepSeek's wq_a: a [1536, 7168] block-FP8 weight with 128 × 128 f32 scales, packed once.
//! let (n, k) = (1536, 7168);
//! let w = quantize_block_fp8(&vec![0.01f32; n * k], n, k, (128, 128), Fp8ScaleKind::F32).expect("shape");
//! let dev = Device::new(0)?;
//! let s = dev.stream();
//! let w = pack_weight(&Weight::BlockFp8(w), &s)?;
//! let q = block_fp8_linear::Query { n, k, tile: 128, weight_scale: Fp8ScaleKind::F32,
//!                                   out_dtype: DType::BF16, bias: None, max_rows: 64 };
//! let plan = block_fp8_linear::plan(&q, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?; // required: run never prepares
//! session.freeze();
//! let x = s.alloc_zeros::<b12x_core::half::bf16>(4 * k)?;
//! let mut y = s.alloc_zeros::<b12x_core::half::bf16>(4 * n)?;
//! let mut scratch = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes())?;
//! let args = linear::Args {
//!     x: TensorRef::from_slice(&x, &[4, k])?,
//!     x_scale: None,
//!     w: &w,
//!     bias: None,
//!     y: TensorMut::from_slice(&mut y, &[4, n])?,
//!     alpha: 1.0,
//! };
//! linear::run(&plan, args, Scratch::from_slice(&mut scratch), &s)?;
//! # Ok(()) }
//! ```

use super::gemv::{self, XFormat, XQuant};
use super::pack::{PackedWeight, WeightFormat};
use b12x_core::cudarc::driver::CudaStream;
use b12x_core::plan::bucket_of;
use b12x_core::{
    resolve_prepared, BenchCase, Bucket, DType, Device, Error, KernelModule, OpPlan, PlanSlot, Result, Scratch,
    ScratchLayout, TensorMut, TensorRef,
};
use std::sync::Arc;

/// `gemm.block_fp8_linear`'s op id.
pub const BLOCK_FP8_LINEAR: &str = "gemm.block_fp8_linear";
/// `gemm.mxfp8_linear`'s op id.
pub const MXFP8_LINEAR: &str = "gemm.mxfp8_linear";
/// `gemm.tensor_fp8_linear`'s op id.
pub const TENSOR_FP8_LINEAR: &str = "gemm.tensor_fp8_linear";

const ARCHS: &[(&str, b12x_core::Validation)] = &[
    ("sm_90a", b12x_core::Validation::Validated),
    ("sm_120a", b12x_core::Validation::CompiledOnly),
    ("sm_121a", b12x_core::Validation::CompiledOnly),
];

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: BLOCK_FP8_LINEAR,
        group: "gemm",
        entry_points: &["plan", "run (prepared only)"],
        dtypes: &["block fp8 w (128x128 | 32x32 tiles, f32 | ue8m0 scales, packed); bf16 x quantized in the call to block fp8 1x128 | 1x32 ue8m0; bf16|f16|f32 y; bf16|f32 bias"],
        archs: ARCHS,
        krate: "b12x-gemm",
        summary: "DeepSeek's FP8 linear: bf16 x → block FP8 (UE8M0) in the call × block-FP8 weight, on gemm.blockscaled's kernels",
    }
}

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: MXFP8_LINEAR,
        group: "gemm",
        entry_points: &["plan", "run (prepared only)"],
        dtypes: &["mxfp8 w (packed); bf16 x quantized in the call to mxfp8; bf16|f16|f32 y; bf16|f32 bias"],
        archs: ARCHS,
        krate: "b12x-gemm",
        summary: "MXFP8 linear: bf16 x → MXFP8 in the call × packed MXFP8 weight, on gemm.blockscaled's kernels",
    }
}

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: TENSOR_FP8_LINEAR,
        group: "gemm",
        entry_points: &["plan", "run (prepared only)"],
        dtypes: &["per-tensor e4m3 w (packed); e4m3 x (u8|e4m3) + f32 [1] device scale; bf16|f16|f32 y; bf16|f32 bias"],
        archs: ARCHS,
        krate: "b12x-gemm",
        summary: "per-tensor FP8 linear: E4M3 x × E4M3 weight, the combined scale in the f32 epilogue, on gemm.blockscaled's kernels",
    }
}

/// The `gemm.blockscaled` query of a fixed linear: its `(N, K, out dtype, bias, max_rows)` with
/// the linear's weight format and activation handling.
fn fixed(
    (n, k, out_dtype, bias, max_rows): (usize, usize, DType, Option<DType>, usize),
    weight: WeightFormat,
    x_format: XFormat,
    x_quant: Option<XQuant>,
) -> gemv::Query {
    gemv::Query { n, k, weight, x_format, out_dtype, bias, max_rows, x_quant }
}

/// `gemm.block_fp8_linear`'s query.
pub mod block_fp8_linear {
    use super::*;
    use b12x_quant::block::Fp8ScaleKind;

    /// The static problem: a block-FP8 `[N, K]` weight with `tile × tile` scale tiles; x quantized
    /// in the call per `1 × tile` group with UE8M0 scales.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Query {
        pub n: usize,
        /// K: a multiple of `tile`.
        pub k: usize,
        /// 128 (DeepSeek-V3/V4) or 32 (the 32 × 32-block V4.1 weights).
        pub tile: usize,
        /// The weight's scales: f32 or UE8M0.
        pub weight_scale: Fp8ScaleKind,
        pub out_dtype: DType,
        pub bias: Option<DType>,
        /// The largest M `run` accepts.
        pub max_rows: usize,
    }

    impl Query {
        /// The `gemm.blockscaled` query it runs.
        pub fn blockscaled(&self) -> Result<gemv::Query> {
            if !matches!(self.tile, 32 | 128) {
                let reason = format!("must be 128 or 32 (128 × 128 or 32 × 32 weight tiles), got {}", self.tile);
                return Err(Error::InvalidQuery { op: BLOCK_FP8_LINEAR, field: "tile", reason });
            }
            if self.k % self.tile != 0 {
                let reason =
                    format!("(K) must be a multiple of the 1 × {} activation group, got {}", self.tile, self.k);
                return Err(Error::InvalidQuery { op: BLOCK_FP8_LINEAR, field: "k", reason });
            }
            let weight = WeightFormat::BlockFp8 { tile: self.tile, scale: self.weight_scale };
            let x_quant = Some(XQuant::BlockFp8Ue8m0 { group: self.tile });
            Ok(fixed((self.n, self.k, self.out_dtype, self.bias, self.max_rows), weight, XFormat::Bf16, x_quant))
        }
    }

    /// Validates `query`; allocates, compiles and launches nothing.
    pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
        Plan::new(BLOCK_FP8_LINEAR, query.blockscaled(), device)
    }
}

/// `gemm.mxfp8_linear`'s query.
pub mod mxfp8_linear {
    use super::*;

    /// The static problem: an MXFP8 `[N, K]` weight, x quantized to MXFP8 in the call.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Query {
        pub n: usize,
        /// K: a multiple of 32.
        pub k: usize,
        pub out_dtype: DType,
        pub bias: Option<DType>,
        /// The largest M `run` accepts.
        pub max_rows: usize,
    }

    impl Query {
        /// The `gemm.blockscaled` query it runs.
        pub fn blockscaled(&self) -> Result<gemv::Query> {
            let shape = (self.n, self.k, self.out_dtype, self.bias, self.max_rows);
            Ok(fixed(shape, WeightFormat::Mxfp8, XFormat::Bf16, Some(XQuant::Mxfp8)))
        }
    }

    /// Validates `query`; allocates, compiles and launches nothing.
    pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
        Plan::new(MXFP8_LINEAR, query.blockscaled(), device)
    }
}

/// `gemm.tensor_fp8_linear`'s query.
pub mod tensor_fp8_linear {
    use super::*;

    /// The static problem: a per-tensor E4M3 `[N, K]` weight × an already-quantized E4M3 x.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Query {
        pub n: usize,
        /// K: a multiple of 32.
        pub k: usize,
        pub out_dtype: DType,
        pub bias: Option<DType>,
        /// The largest M `run` accepts.
        pub max_rows: usize,
    }

    impl Query {
        /// The `gemm.blockscaled` query it runs.
        pub fn blockscaled(&self) -> Result<gemv::Query> {
            let shape = (self.n, self.k, self.out_dtype, self.bias, self.max_rows);
            Ok(fixed(shape, WeightFormat::TensorFp8, XFormat::TensorFp8, None))
        }
    }

    /// Validates `query`; allocates, compiles and launches nothing.
    pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
        Plan::new(TENSOR_FP8_LINEAR, query.blockscaled(), device)
    }
}

/// A fixed linear's plan: a `gemm.blockscaled` plan under the linear's op id (its own tuning
/// records), prepared by a session like any plan.
#[derive(Clone, Debug)]
pub struct Plan {
    op: &'static str,
    inner: gemv::Plan,
}

impl Plan {
    fn new(op: &'static str, query: Result<gemv::Query>, device: &Arc<Device>) -> Result<Plan> {
        // Errors name the linear, not the generic op.
        let rename = |e: Error| match e {
            Error::InvalidQuery { field, reason, .. } => Error::InvalidQuery { op, field, reason },
            Error::Unsupported { device, reason, .. } => Error::Unsupported { op, device, reason },
            other => other,
        };
        let inner = gemv::plan(&query?, device).map_err(rename)?;
        Ok(Plan { op, inner })
    }
    /// The `gemm.blockscaled` plan it runs (its query, buckets and configs).
    pub fn blockscaled(&self) -> &gemv::Plan {
        &self.inner
    }
    /// The scratch every call needs (`gemm.blockscaled`'s: x̂ and split-K partials).
    pub fn scratch_layout(&self) -> ScratchLayout {
        self.inner.scratch_layout()
    }
}

/// The tensors of one call.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[M, K]`: bf16 (block FP8 and MXFP8 linears; 16-byte aligned rows) or E4M3 codes as u8 or
    /// e4m3 (tensor FP8 linear; 8-byte aligned rows).
    pub x: TensorRef<'a>,
    /// The tensor FP8 linear's activation scale, `[1]` f32 on the device (`x = code · scale`;
    /// a captured graph sees updates); `None` for the other linears.
    pub x_scale: Option<TensorRef<'a>>,
    /// The packed `[N, K]` weight in the linear's format.
    pub w: &'a PackedWeight,
    /// `[N]` contiguous, `Some` exactly when the query has a bias.
    pub bias: Option<TensorRef<'a>>,
    /// `[M, N]`, the output.
    pub y: TensorMut<'a>,
    /// The output scale (finite).
    pub alpha: f32,
}

/// Computes `args.y` on `stream` with a prepared plan: [`Error::NotPrepared`] if no session
/// prepared it (nothing is loaded or launched); then exactly `gemm.blockscaled`'s `run` (every
/// check before any launch, no allocation, no synchronization; `M = 0` launches nothing).
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let m = args.x.shape().first().copied().unwrap_or(0);
    let bucket = bucket_of(plan.buckets(), m.max(1)).unwrap_or(0);
    resolve_prepared(plan, bucket)?;
    let tensor = plan.inner.query().x_format == XFormat::TensorFp8;
    if tensor != args.x_scale.is_some() {
        let expected = if tensor { "[1] f32 (the activation's scale, on the device)" } else { "no tensor" };
        let actual = args.x_scale.as_ref().map(|t| t.shape().to_vec()).unwrap_or_default();
        return Err(Error::Shape { tensor: "x_scale", expected: expected.into(), actual });
    }
    let args = gemv::Args {
        x: args.x,
        x_scales: None,
        x_global: args.x_scale,
        w: args.w,
        bias: args.bias,
        y: args.y,
        alpha: args.alpha,
    };
    gemv::run(&plan.inner, args, scratch, stream)
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        self.op
    }
    fn query_key(&self) -> String {
        self.inner.query_key()
    }
    fn device(&self) -> &Arc<Device> {
        self.inner.device()
    }
    fn module(&self) -> &'static KernelModule {
        self.inner.module()
    }
    fn buckets(&self) -> &[Bucket] {
        self.inner.buckets()
    }
    fn candidates(&self, bucket: usize) -> Vec<String> {
        self.inner.candidates(bucket)
    }
    fn symbols(&self, bucket: usize, config_index: usize) -> Vec<String> {
        self.inner.symbols(bucket, config_index)
    }
    fn dynamic_smem(&self, bucket: usize, config_index: usize) -> u32 {
        self.inner.dynamic_smem(bucket, config_index)
    }
    /// The inner plan's slot: what a session prepares here is what `gemm.blockscaled`'s run uses.
    fn slot(&self) -> &PlanSlot {
        self.inner.slot()
    }
    fn bench_case(&self, bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        self.inner.bench_case(bucket)
    }
}
