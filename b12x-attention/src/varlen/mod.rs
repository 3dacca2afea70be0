//! `attention.varlen`: prefill attention over packed variable-length sequences (FlashAttention's
//! varlen layout): sequence b has query rows `cu_seqlens_q[b]..cu_seqlens_q[b+1]` and key / value
//! rows `cu_seqlens_k[b]..cu_seqlens_k[b+1]` of the packed tensors.
//!
//! ```text
//! query i of sequence b (q_len, k_len) sits at position t = k_len − q_len + i (bottom-right
//! aligned) and sees keys p with  p ≤ t (causal; every key otherwise)  and  p ≥ t − W (W = window_left ≥ 0):
//!   s_p = scale · q·k_p,   L = log(Σ_p exp(s_p) + exp(σ_h)),   o = Σ_p exp(s_p − L) · v_p,   lse = L
//! ```
//!
//! The sink `σ_h` (`sinks [H]`, when the query has them) joins the denominator only, and `lse`
//! includes it. A row that sees no key (causal with `q_len > k_len`, or an empty window) gets
//! `o = 0` and `lse = σ_h` (sinks) or `−inf`. Head h reads KV head `h / (H / Hkv)`.
//!
//! - Tensors: `q [total_q, H, D]`, `k`, `v [total_k, Hkv, D]` bf16 or f16 (rows may be strided,
//!   heads contiguous, 16-byte aligned), `cu_seqlens_q`, `cu_seqlens_k [B + 1]` i32 on the
//!   device, `sinks [H]` f32; outputs `o [total_q, H, D]` (q's dtype) and optional
//!   `lse [total_q, H]` f32; `error [1]` i32 (an [`ErrorWord`](crate::paging::ErrorWord)).
//! - Untrusted packing: unless both `cu_seqlens` arrays are non-decreasing from `cu[0] ≥ 0` to
//!   `cu[B] ≤` their tensor's rows, every row of `o` is written as 0 and `lse` as `−inf` and
//!   [`FAULT_QUERY_LAYOUT`](crate::paging::FAULT_QUERY_LAYOUT) is set; nothing outside the
//!   tensors is read or written. Rows past `cu_seqlens_q[B]` are not written.
//! - Grid: `(H, ⌈max_seqlen_q / BM⌉, B)`, with `max_seqlen_q` a host hint of the call's longest
//!   query sequence ([`Args::max_seqlen_q`]; the plan's capacity when absent). It only sizes
//!   the grid: a CTA loops over further query blocks, so a longer sequence is still computed in
//!   full (with less parallelism), and a captured graph replays any packing within capacity.
//! - Accuracy: f32 accumulation, probabilities rounded to q's dtype for the P·V product, one
//!   rounding of o: cosine difference ≤ 1e-5 against the f64 oracle ([`reference`](mod@reference)).
//! - Constraints: `D ∈ {64, 128, 256}`, `H / Hkv` any integer.
//! - Kernel ([`KERNEL_NOTE`]): FlashAttention-2's forward: a CTA of 4 or 8 warps holds a block of BM
//!   query rows of one head in shared memory and streams the sequence's visible key blocks of BN
//!   keys through a 2-stage `cp.async` ring (swizzled, no padding: ≤ 96 KB, so it fits SM120's
//!   99 KB), `S = Q Kᵀ` and `O += P V` with `mma.sync` m16n8k16, online softmax in base 2 in
//!   registers; masks only on the blocks that cross the causal diagonal, the window edge or the
//!   sequence end; causal CTAs go heaviest first. Configs ([`Config`], raced by the session):
//!   BM × BN × warps.
//!
//! ```no_run
//! use b12x_attention::paging::ErrorWord;
//! use b12x_attention::varlen::{self, Args, Query};
//! use b12x_core::{DType, Device, PreparationSession, TensorMut, TensorRef};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let (h, hkv, d) = (32, 8, 128);
//! let q = Query {
//!     heads: h, kv_heads: hkv, head_dim: d, dtype: DType::BF16, scale: 1.0 / (d as f32).sqrt(),
//!     causal: true, window_left: -1, sinks: false,
//!     max_batch: 4, max_tokens_q: 4096, max_tokens_k: 4096, max_seqlen_q: 4096,
//! };
//! let plan = varlen::plan(&q, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let s = dev.stream();
//! let t = 300; // two sequences: 100 and 200 tokens
//! let qx = s.alloc_zeros::<b12x_core::half::bf16>(t * h * d)?;
//! let kx = s.alloc_zeros::<b12x_core::half::bf16>(t * hkv * d)?;
//! let vx = s.alloc_zeros::<b12x_core::half::bf16>(t * hkv * d)?;
//! let cu = s.clone_htod(&[0i32, 100, 300])?;
//! let mut o = s.alloc_zeros::<b12x_core::half::bf16>(t * h * d)?;
//! let mut err = ErrorWord::new(s)?;
//! let args = Args {
//!     q: TensorRef::from_slice(&qx, &[t, h, d])?,
//!     k: TensorRef::from_slice(&kx, &[t, hkv, d])?,
//!     v: TensorRef::from_slice(&vx, &[t, hkv, d])?,
//!     sinks: None,
//!     cu_seqlens_q: TensorRef::from_slice(&cu, &[3])?,
//!     cu_seqlens_k: TensorRef::from_slice(&cu, &[3])?,
//!     max_seqlen_q: Some(200),
//!     o: TensorMut::from_slice(&mut o, &[t, h, d])?,
//!     lse: None,
//!     error: err.view()?,
//! };
//! varlen::run(&plan, args, s)?;
//! # Ok(()) }
//! ```

mod params;
pub mod reference;

pub use params::VarlenParams;

use b12x_core::cudarc::driver::CudaStream;
use b12x_core::RaceBuffer;
use b12x_core::{
    resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchDims, OpPlan, PlanSlot, Result, Selected,
    TensorMut, TensorRef,
};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "attention.varlen";
/// What the kernel does, in one line (for docs and `cargo xtask ops`).
pub const KERNEL_NOTE: &str =
    "FlashAttention-2 forward: BM query rows x BN-key blocks, 2-stage swizzled cp.async ring, mma.sync, online softmax";
/// Head dims with a kernel.
pub const HEAD_DIMS: [usize; 3] = [64, 128, 256];
/// Keys of the race's timing case (one causal sequence, capped by the plan's capacity).
const RACE_TOKENS: usize = 4096;

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "attention",
        entry_points: &["plan", "run"],
        dtypes: &["bf16", "f16"],
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-attention",
        summary: "prefill attention over packed variable-length sequences (causal or not, GQA, sinks, window)",
    }
}

/// A tile config of the kernel: BM query rows per CTA, BN keys per block, warps per CTA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The config name (`m{BM}_n{BN}_w{warps}`), as sessions record it.
    pub name: &'static str,
    pub bm: usize,
    pub bn: usize,
    pub warps: usize,
}

const fn cfg(name: &'static str, bm: usize, bn: usize, warps: usize) -> Config {
    Config { name, bm, bn, warps }
}

/// The configs of a head dim; the first is the default. Each warp owns 16 or 32 query rows
/// (`BM / warps`); every config fits 99 KB of shared memory and compiles without spills (at
/// D = 128, 32 rows per warp fit the register file only with 32-key blocks; D = 256 keeps 16).
fn configs(head_dim: usize) -> &'static [Config] {
    const D64: [Config; 2] = [cfg("m128_n64_w4", 128, 64, 4), cfg("m64_n64_w4", 64, 64, 4)];
    const D128: [Config; 5] = [
        cfg("m64_n64_w4", 64, 64, 4),
        cfg("m64_n32_w4", 64, 32, 4),
        cfg("m128_n64_w8", 128, 64, 8),
        cfg("m128_n32_w8", 128, 32, 8),
        cfg("m128_n32_w4", 128, 32, 4),
    ];
    const D256: [Config; 1] = [cfg("m64_n32_w4", 64, 32, 4)];
    match head_dim {
        64 => &D64,
        128 => &D128,
        _ => &D256,
    }
}

/// The static problem.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// H: query heads.
    pub heads: usize,
    /// Hkv: KV heads (divides H).
    pub kv_heads: usize,
    /// D, one of [`HEAD_DIMS`].
    pub head_dim: usize,
    /// dtype of q, k, v and o: bf16 or f16.
    pub dtype: DType,
    /// Softmax scale (finite, > 0), usually 1/√D.
    pub scale: f32,
    /// Bottom-right aligned causal mask.
    pub causal: bool,
    /// Sliding window: a row at position t sees keys `p ≥ t − window_left`; −1 = off.
    pub window_left: i32,
    /// Per-head sink logits (`sinks [H]`) join the softmax denominator.
    pub sinks: bool,
    /// Capacity: the largest B.
    pub max_batch: usize,
    /// Capacity: the largest total_q (rows of q and o).
    pub max_tokens_q: usize,
    /// Capacity: the largest total_k (rows of k and v).
    pub max_tokens_k: usize,
    /// The longest query sequence the grid is sized for when a call gives no hint (≤ `max_tokens_q`).
    pub max_seqlen_q: usize,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if !matches!(self.dtype, DType::BF16 | DType::F16) {
            return bad("dtype", format!("must be bf16 or f16, got {}", self.dtype));
        }
        if !HEAD_DIMS.contains(&self.head_dim) {
            return bad("head_dim", format!("must be one of {HEAD_DIMS:?}, got {}", self.head_dim));
        }
        if self.kv_heads == 0 || self.heads == 0 || self.heads % self.kv_heads != 0 {
            return bad(
                "heads",
                format!("must be a multiple of kv_heads, got H = {} Hkv = {}", self.heads, self.kv_heads),
            );
        }
        if self.heads > 65535 {
            return bad("heads", format!("must be ≤ 65535 (grid x), got {}", self.heads));
        }
        crate::checks::scale_and_window(OP, self.scale, self.window_left)?;
        crate::checks::capacities(
            OP,
            &[
                ("max_batch", self.max_batch),
                ("max_tokens_q", self.max_tokens_q),
                ("max_tokens_k", self.max_tokens_k),
                ("max_seqlen_q", self.max_seqlen_q),
            ],
        )?;
        let max = i32::MAX as usize;
        if self.max_batch > 65535 {
            return bad("max_batch", format!("must be ≤ 65535 (grid z), got {}", self.max_batch));
        }
        if self.max_seqlen_q > self.max_tokens_q {
            return bad(
                "max_seqlen_q",
                format!("must be ≤ max_tokens_q = {}, got {}", self.max_tokens_q, self.max_seqlen_q),
            );
        }
        if self.max_tokens_q * self.heads * self.head_dim > max {
            return bad("max_tokens_q", "· H · D must fit 32-bit indices".into());
        }
        if self.max_tokens_k * self.kv_heads * self.head_dim > max {
            return bad("max_tokens_k", "· Hkv · D must fit 32-bit indices".into());
        }
        Ok(())
    }

    /// The tile configs of this head dim (the first is the default).
    pub fn configs(&self) -> &'static [Config] {
        configs(self.head_dim)
    }

    /// Dynamic shared memory of a config: the Q block and two stages of K and V.
    pub fn smem_bytes(&self, c: &Config) -> u32 {
        let row = self.head_dim * 2;
        (c.bm * row + 2 * 2 * c.bn * row) as u32
    }

    /// The kernel symbol of a config, e.g. `b12x_varlen_bf16_d128_m64_n64_w4`.
    pub fn symbol(&self, c: &Config) -> String {
        format!("b12x_varlen_{}_d{}_{}", self.dtype.name(), self.head_dim, c.name)
    }

    /// Checks `args` against the query and builds the kernel parameters (`m_blocks` left 0);
    /// nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<VarlenParams> {
        let (h, hkv, d) = (self.heads, self.kv_heads, self.head_dim);
        let b = args.cu_seqlens_q.shape().first().copied().unwrap_or(0).saturating_sub(1);
        args.cu_seqlens_q.expect("cu_seqlens_q", "[B + 1]", DType::I32, &[b + 1])?;
        args.cu_seqlens_k.expect("cu_seqlens_k", "[B + 1]", DType::I32, &[b + 1])?;
        crate::paging::require_contiguous("cu_seqlens_q", &args.cu_seqlens_q)?;
        crate::paging::require_contiguous("cu_seqlens_k", &args.cu_seqlens_k)?;
        if b > self.max_batch {
            return Err(Error::Capacity {
                what: "B (entries of cu_seqlens_q − 1)", got: b, capacity: self.max_batch
            });
        }
        let tq = args.q.shape().first().copied().unwrap_or(0);
        let tk = args.k.shape().first().copied().unwrap_or(0);
        args.q.expect("q", "[total_q, H, D]", self.dtype, &[tq, h, d])?;
        args.o.expect("o", "[total_q, H, D]", self.dtype, &[tq, h, d])?;
        args.k.expect("k", "[total_k, Hkv, D]", self.dtype, &[tk, hkv, d])?;
        args.v.expect("v", "[total_k, Hkv, D]", self.dtype, &[tk, hkv, d])?;
        if tq > self.max_tokens_q {
            return Err(Error::Capacity { what: "total_q (rows of q)", got: tq, capacity: self.max_tokens_q });
        }
        if tk > self.max_tokens_k {
            return Err(Error::Capacity { what: "total_k (rows of k)", got: tk, capacity: self.max_tokens_k });
        }
        if let Some(m) = args.max_seqlen_q {
            if m == 0 || m > self.max_tokens_q {
                return Err(Error::Capacity { what: "max_seqlen_q (hint)", got: m, capacity: self.max_tokens_q });
            }
        }
        crate::checks::sinks(&args.sinks, self.sinks, h)?;
        let q_stride = crate::checks::heads_row_stride("q", args.q.strides(), tq, h, d)?;
        let k_stride = crate::checks::heads_row_stride("k", args.k.strides(), tk, hkv, d)?;
        let v_stride = crate::checks::heads_row_stride("v", args.v.strides(), tk, hkv, d)?;
        let o_stride = crate::checks::heads_row_stride("o", args.o.strides(), tq, h, d)?;
        args.q.require_aligned("q", 16)?;
        args.k.require_aligned("k", 16)?;
        args.v.require_aligned("v", 16)?;
        args.o.require_aligned("o", 16)?;
        let lse_stride = crate::checks::lse_row_stride(&args.lse, tq, h)?;
        args.error.expect("error", "[1]", DType::I32, &[1])?;
        // Outputs must not overlap any input or each other (absent tensors: empty spans, no
        // allocation on this path).
        let sinks_span = args.sinks.as_ref().map_or((0, 0), |s| s.byte_span());
        let inputs = [
            ("q", args.q.byte_span()),
            ("k", args.k.byte_span()),
            ("v", args.v.byte_span()),
            ("cu_seqlens_q", args.cu_seqlens_q.byte_span()),
            ("cu_seqlens_k", args.cu_seqlens_k.byte_span()),
            ("sinks", sinks_span),
        ];
        let lse_span = args.lse.as_ref().map_or((0, 0), |l| l.byte_span());
        let outputs = [("o", args.o.byte_span()), ("error", args.error.byte_span()), ("lse", lse_span)];
        crate::checks::outputs_disjoint(&inputs, &outputs)?;
        Ok(VarlenParams {
            q: args.q.ptr(),
            k: args.k.ptr(),
            v: args.v.ptr(),
            sinks: args.sinks.map_or(0, |s| s.ptr()),
            cu_seqlens_q: args.cu_seqlens_q.ptr(),
            cu_seqlens_k: args.cu_seqlens_k.ptr(),
            o: args.o.ptr(),
            lse: args.lse.as_ref().map_or(0, |l| l.ptr()),
            error: args.error.ptr(),
            q_stride,
            k_stride,
            v_stride,
            o_stride,
            lse_stride,
            total_q: tq as i32,
            total_k: tk as i32,
            batch: b as i32,
            heads: h as i32,
            kv_heads: hkv as i32,
            m_blocks: 0,
            causal: i32::from(self.causal),
            window_left: self.window_left,
            scale_log2: self.scale * std::f32::consts::LOG2_E,
            reserved: 0,
        })
    }
}

/// A validated query bound to a device; a cheap handle whose prepared state a session fills.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    slot: PlanSlot,
}

/// Validates `query`. Allocates, compiles and launches nothing; the op needs no scratch.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    let buckets = vec![Bucket { lo: 1, hi: query.max_tokens_q }];
    Ok(Plan { query: query.clone(), device: device.clone(), buckets, slot: PlanSlot::default() })
}

impl Plan {
    pub fn query(&self) -> &Query {
        &self.query
    }
}

/// The plans `cargo xtask prepare` prepares by default: Llama-3-8B prefill (H 32, Hkv 8,
/// D 128, causal, BF16) up to 16k tokens, and gpt-oss-120b's windowed layers with sinks (64/8/64,
/// window 127).
pub fn default_profile_plans(device: &Arc<Device>) -> Result<Vec<Box<dyn OpPlan>>> {
    let llama = Query {
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        dtype: DType::BF16,
        scale: 1.0 / 128f32.sqrt(),
        causal: true,
        window_left: -1,
        sinks: false,
        max_batch: 16,
        max_tokens_q: 16384,
        max_tokens_k: 16384,
        max_seqlen_q: 16384,
    };
    let gpt_oss =
        Query { heads: 64, kv_heads: 8, head_dim: 64, scale: 0.125, window_left: 127, sinks: true, ..llama.clone() };
    Ok(vec![Box::new(plan(&llama, device)?), Box::new(plan(&gpt_oss, device)?)])
}

/// The tensors of one call. Shapes and dtypes as in the module docs.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[total_q, H, D]`.
    pub q: TensorRef<'a>,
    /// `[total_k, Hkv, D]`.
    pub k: TensorRef<'a>,
    /// `[total_k, Hkv, D]`.
    pub v: TensorRef<'a>,
    /// `[H]` f32, exactly when the plan has sinks.
    pub sinks: Option<TensorRef<'a>>,
    /// `[B + 1]` i32.
    pub cu_seqlens_q: TensorRef<'a>,
    /// `[B + 1]` i32.
    pub cu_seqlens_k: TensorRef<'a>,
    /// Host hint: the longest query sequence of this call (sizes the grid; `None`: the plan's
    /// `max_seqlen_q`). A longer sequence is still computed correctly, with fewer CTAs.
    pub max_seqlen_q: Option<usize>,
    /// `[total_q, H, D]`, q's dtype.
    pub o: TensorMut<'a>,
    /// `[total_q, H]` f32, optional.
    pub lse: Option<TensorMut<'a>>,
    /// `[1]` i32 fault bits.
    pub error: TensorMut<'a>,
}

/// Computes `args.o` (and `args.lse`) on `stream`. Every check happens before the launch; no
/// allocation, no synchronization. `B = 0` or `total_q = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let hint = args.max_seqlen_q;
    let params = plan.query.kernel_params(&args)?;
    plan.device.check_stream(stream)?;
    if params.batch == 0 || params.total_q == 0 {
        return Ok(());
    }
    let selected = resolve(plan, 0, stream)?;
    launch(&plan.query, &selected, params, hint.unwrap_or(plan.query.max_seqlen_q), stream)
}

fn launch(q: &Query, selected: &Selected, mut p: VarlenParams, max_seqlen_q: usize, stream: &CudaStream) -> Result<()> {
    let unknown = || Error::UnknownConfig { op: OP, bucket: String::new(), config: selected.config.clone() };
    let kernel = selected.kernels.first().ok_or_else(unknown)?;
    let c = q.configs().iter().find(|c| c.name == selected.config).ok_or_else(unknown)?;
    // Grid y ≤ 65535: longer sequences are covered by the CTAs' loop over query blocks.
    p.m_blocks = max_seqlen_q.div_ceil(c.bm).clamp(1, 65535) as i32;
    let dims = LaunchDims {
        grid: (q.heads as u32, p.m_blocks as u32, p.batch as u32),
        block: (32 * c.warps as u32, 1, 1),
        smem_bytes: q.smem_bytes(c),
    };
    // SAFETY: VarlenParams mirrors the kernel's struct (asserted on both sides) and passed
    // `Query::kernel_params` (shapes, strides, dtypes, alignment, capacities, disjoint
    // outputs); the kernel checks the device-side packing before any indexed access.
    unsafe { kernel.launch(stream, dims, &p) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        let q = &self.query;
        format!(
            "H={} Hkv={} D={} dtype={} causal={} window={} sinks={} max_batch={} max_tokens_q={} max_tokens_k={} \
             max_seqlen_q={}",
            q.heads,
            q.kv_heads,
            q.head_dim,
            q.dtype,
            q.causal,
            q.window_left,
            q.sinks,
            q.max_batch,
            q.max_tokens_q,
            q.max_tokens_k,
            q.max_seqlen_q
        )
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::VARLEN_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        self.query.configs().iter().map(|c| c.name.to_string()).collect()
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        self.query.configs().get(config_index).map(|c| vec![self.query.symbol(c)]).unwrap_or_default()
    }
    fn dynamic_smem(&self, _bucket: usize, config_index: usize) -> u32 {
        self.query.configs().get(config_index).map_or(0, |c| self.query.smem_bytes(c))
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        // One sequence of min(capacity, 4096) query and key tokens (non-zero inputs), the plan's mask.
        let q = &self.query;
        let (h, hkv, d) = (q.heads, q.kv_heads, q.head_dim);
        let tq = q.max_seqlen_q.min(RACE_TOKENS);
        let tk = q.max_tokens_k.min(RACE_TOKENS);
        let es = q.dtype.size_bytes();
        let sizes = [tq * h * d * es, tk * hkv * d * es, tk * hkv * d * es, h * 4, 8, 8, tq * h * d * es, 4];
        let race = RaceBuffer::new(&self.device, &sizes)?;
        for region in 0..3 {
            race.fill_inputs(&self.device, region, q.dtype)?;
        }
        let stream = self.device.stream();
        b12x_core::memset_u32(stream, race.ptrs[4] + 4, tq as u32, 1)?;
        b12x_core::memset_u32(stream, race.ptrs[5] + 4, tk as u32, 1)?;
        let at = |i: usize| race.ptrs[i];
        let params = VarlenParams {
            q: at(0),
            k: at(1),
            v: at(2),
            sinks: if q.sinks { at(3) } else { 0 },
            cu_seqlens_q: at(4),
            cu_seqlens_k: at(5),
            o: at(6),
            lse: 0,
            error: at(7),
            q_stride: (h * d) as i64,
            k_stride: (hkv * d) as i64,
            v_stride: (hkv * d) as i64,
            o_stride: (h * d) as i64,
            lse_stride: 0,
            total_q: tq as i32,
            total_k: tk as i32,
            batch: 1,
            heads: h as i32,
            kv_heads: hkv as i32,
            m_blocks: 0,
            causal: i32::from(q.causal),
            window_left: q.window_left,
            scale_log2: q.scale * std::f32::consts::LOG2_E,
            reserved: 0,
        };
        Ok(Box::new(RaceCase { query: q.clone(), params, tq, _buffer: race }))
    }
}

/// What a timing tool launches.
struct RaceCase {
    query: Query,
    params: VarlenParams,
    tq: usize,
    _buffer: RaceBuffer,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(&self.query, selected, self.params, self.tq, stream)
    }
}
