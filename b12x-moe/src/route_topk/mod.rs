//! `moe.route_topk`: a token's router logits → its k experts and their weights.
//!
//! ```text
//! s[t, e]   = score(z[t, e])                      computed in f64, rounded once to f32
//! key[t, e] = s[t, e] + bias[e]                   one f32 add (bias: selection only)
//! ids[t, :] = the k experts of largest key, in decreasing key order; ties → the lower id
//!             (hash routing instead: ids[t, :] = tid2eid[token_id[t], :], in table order)
//! w[t, i]   = s[t, ids[t, i]]                     (the score, never the biased key)
//! renormalize: w[t, i] = f32(w[t, i] / Σ_j w[t, j])   (sum and division in f64)
//! w[t, i]   = w[t, i] · route_scale               one f32 multiply
//! ```
//!
//! - Scores ([`ScoreFn`]): `Softmax` over the row of E logits (Qwen3-MoE; with `renormalize`
//!   it is also gpt-oss's softmax over the k selected logits, the same numbers), `Sigmoid`
//!   (DeepSeek-V3), `SqrtSoftplus` = `sqrt(softplus(z))` with PyTorch's softplus (`z` itself
//!   above 20) (DeepSeek-V4).
//! - Expert ids are global (`[0, E)`). Untrusted inputs are masked, never clamped: a hash table
//!   entry outside `[0, E)` leaves its slot masked (id −1, weight 0, excluded from the
//!   renormalizing sum) and sets [`FAULT_EXPERT_ID`]; a token id outside the table's rows masks
//!   the token's k slots and sets [`FAULT_TOKEN_ID`]. A row whose slots are all masked keeps
//!   weights 0.
//! - Non-finite logits: a NaN logit makes its score NaN (under `Softmax`, the whole row's), and
//!   NaN keys rank below every number, so they are picked only when fewer than k keys are
//!   numbers; ±∞ follow IEEE arithmetic (softmax of a row holding +∞ is NaN, as in PyTorch).
//! - The reference rounds each score once from f64; a kernel computing `expf` / `log1pf` in f32
//!   lands within a few f32 ulps, so its selection may differ from the oracle's only among
//!   experts whose keys are that close to the k-th: [`reference::check_selection`] accepts
//!   exactly those differences.
//!
//! - Kernel (`kernels/route_topk.cu`): one CTA of 256 threads per token; the row's scores and
//!   keys in shared memory (hence E ≤ 4096); k rounds of a block argmax; one config. Not
//!   launched with PDL. [`run`] never allocates or synchronizes: graph-capturable, and a
//!   captured call routes whatever logits (and token ids) the buffers hold at replay.
//!
//! **Status: validated on the H200 (sm_90a)** — `tests/gpu_route_topk.rs` (against
//! [`mod@reference`], selections through [`reference::check_selection`]) 29/29 (session 42) and
//! clean under memcheck (reduced profile, session 43); compiled and ptxas-checked (no spills)
//! for sm_120a / sm_121a, not run there.
//!
//! ```no_run
//! use b12x_core::{DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! use b12x_moe::route_topk::{self, Args, Query, Router};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let query = Query { router: Router::qwen3_moe(128, 8), max_tokens: 64 };
//! let plan = route_topk::plan(&query, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let s = dev.stream();
//! let t = 4;
//! let logits = s.clone_htod(&vec![0.5f32; t * 128])?;
//! let mut ids = s.alloc_zeros::<i32>(t * 8)?;
//! let mut weights = s.alloc_zeros::<f32>(t * 8)?;
//! let mut err = s.alloc_zeros::<i32>(1)?;
//! let args = Args {
//!     logits: TensorRef::from_slice(&logits, &[t, 128])?,
//!     bias: None,
//!     token_ids: None,
//!     tid2eid: None,
//!     ids: TensorMut::from_slice(&mut ids, &[t, 8])?,
//!     weights: TensorMut::from_slice(&mut weights, &[t, 8])?,
//!     error: TensorMut::from_slice(&mut err, &[1])?,
//! };
//! route_topk::run(&plan, args, Scratch::none(), s)?;
//! // Equal logits: experts 0..8 (ties to the lower id), each weight 1/8.
//! assert_eq!(&s.clone_dtoh(&ids)?[..8], &[0, 1, 2, 3, 4, 5, 6, 7]);
//! # let _ = DType::F32;
//! # Ok(()) }
//! ```

mod params;
pub mod reference;

pub use params::{RouteTopkParams, FLAG_BIAS, FLAG_HASH, FLAG_RENORMALIZE};

use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::{
    require_disjoint, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchDims, LaunchOpts, OpPlan,
    PlanSlot, RaceBuffer, Result, Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "moe.route_topk";
/// Fault bit: a hash-table entry outside `[0, E)` (its slot masked).
pub const FAULT_EXPERT_ID: u32 = 1;
/// Fault bit: a token id outside the hash table's rows (the token's slots masked).
pub const FAULT_TOKEN_ID: u32 = 2;
/// The most experts a router may have.
pub const MAX_EXPERTS: usize = 4096;
/// The most experts a token may pick.
pub const MAX_TOP_K: usize = 32;

/// The router's score function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoreFn {
    /// `exp(z_e − max z) / Σ_j exp(z_j − max z)` over the token's E logits.
    Softmax,
    /// `1 / (1 + exp(−z))`.
    Sigmoid,
    /// `sqrt(softplus(z))`, `softplus(z) = ln(1 + exp(z))`, or `z` when `z > 20` (PyTorch's
    /// threshold).
    SqrtSoftplus,
}

/// How tokens pick their experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Top-k of the scores, or of `scores + bias` with a per-expert f32 bias that affects the
    /// selection only (DeepSeek's correction bias).
    TopK { bias: bool },
    /// `ids = tid2eid[token_id]` from an i32 table `[vocab, k]` (DeepSeek-V4's first layers);
    /// the weights still come from the scores.
    Hash { vocab: usize },
}

/// A router: its experts, k, score function, selection and weight rules.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Router {
    /// E: the router's experts (global ids `[0, E)`).
    pub experts: usize,
    /// k: experts per token.
    pub top_k: usize,
    pub score: ScoreFn,
    pub selection: Selection,
    /// Divide the k weights by their sum.
    pub renormalize: bool,
    /// Multiplies every weight (after renormalization); finite and > 0.
    pub route_scale: f32,
}

impl Router {
    /// DeepSeek-V4: sqrtsoftplus scores, top-k of `scores + bias` (or hash routing on the first
    /// layers: `hash_vocab`), renormalized, route scale 2.5.
    pub fn deepseek_v4(experts: usize, top_k: usize, hash_vocab: Option<usize>) -> Router {
        let selection = match hash_vocab {
            Some(vocab) => Selection::Hash { vocab },
            None => Selection::TopK { bias: true },
        };
        Router { experts, top_k, score: ScoreFn::SqrtSoftplus, selection, renormalize: true, route_scale: 2.5 }
    }
    /// Qwen3-MoE: softmax over E, top-k, renormalized (`norm_topk_prob`).
    pub fn qwen3_moe(experts: usize, top_k: usize) -> Router {
        Router {
            experts,
            top_k,
            score: ScoreFn::Softmax,
            selection: Selection::TopK { bias: false },
            renormalize: true,
            route_scale: 1.0,
        }
    }
    /// gpt-oss: top-k of the logits, softmax over the k selected — the same ids and weights as
    /// softmax over E, top-k, renormalized.
    pub fn gpt_oss(experts: usize, top_k: usize) -> Router {
        Router::qwen3_moe(experts, top_k)
    }

    /// Checks the fields; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if self.experts == 0 || self.experts > MAX_EXPERTS {
            return bad("experts", format!("must be in [1, {MAX_EXPERTS}], got {}", self.experts));
        }
        if self.top_k == 0 || self.top_k > MAX_TOP_K.min(self.experts) {
            return bad(
                "top_k",
                format!("must be in [1, min({MAX_TOP_K}, experts = {})], got {}", self.experts, self.top_k),
            );
        }
        if !(self.route_scale.is_finite() && self.route_scale > 0.0) {
            return bad("route_scale", format!("must be finite and > 0, got {}", self.route_scale));
        }
        if let Selection::Hash { vocab: 0 } = self.selection {
            return bad("selection", "a hash table needs at least one row (vocab > 0)".into());
        }
        Ok(())
    }
}

/// Threads per CTA (`kRouteThreads`).
const THREADS: u32 = 256;
/// The one config.
const CONFIG: &str = "t256";

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "moe",
        entry_points: &["plan", "run"],
        dtypes: &["f32 logits (+ f32 bias, i32 token ids and hash table) -> i32 ids, f32 weights"],
        // sm_90a: the GPU suite (29/29, session 42, bench-results/2026-12-05-h200/call2) and its
        // memcheck profile (23/23, session 43, bench-results/2026-12-05-h200-b/call1). SM120:
        // compiled and ptxas-checked only.
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-moe",
        summary: "router scores (softmax, sigmoid, sqrtsoftplus), top-k with a selection-only bias or hash routing, renormalized scaled weights",
    }
}

/// The op's static problem: a router and a token capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Query {
    pub router: Router,
    /// The largest T `run` accepts.
    pub max_tokens: usize,
}

impl Query {
    /// Checks the router and the capacity; the error names the first bad field.
    pub fn validate(&self) -> Result<()> {
        self.router.validate()?;
        if self.max_tokens == 0 || self.max_tokens > i32::MAX as usize {
            return Err(Error::InvalidQuery {
                op: OP,
                field: "max_tokens",
                reason: format!("must be in [1, 2^31), got {}", self.max_tokens),
            });
        }
        Ok(())
    }

    /// Checks `args` against the query and builds the kernel parameters; nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<RouteTopkParams> {
        let r = &self.router;
        let (e, k) = (r.experts, r.top_k);
        let t = args.logits.shape().first().copied().unwrap_or(0);
        args.logits.expect("logits", "[T, E]", DType::F32, &[t, e])?;
        if t > self.max_tokens {
            return Err(Error::Capacity { what: "T (rows of logits)", got: t, capacity: self.max_tokens });
        }
        args.ids.expect("ids", "[T, k]", DType::I32, &[t, k])?;
        args.weights.expect("weights", "[T, k]", DType::F32, &[t, k])?;
        args.error.expect("error", "[1]", DType::I32, &[1])?;
        let mut p = RouteTopkParams {
            logits: args.logits.ptr(),
            ids: args.ids.ptr(),
            weights: args.weights.ptr(),
            error: args.error.ptr(),
            logits_stride: args.logits.row_stride("logits")? as i64,
            ids_stride: args.ids.row_stride("ids")? as i64,
            weights_stride: args.weights.row_stride("weights")? as i64,
            tokens: t as i32,
            experts: e as i32,
            top_k: k as i32,
            route_scale: r.route_scale,
            flags: if r.renormalize { FLAG_RENORMALIZE } else { 0 },
            ..RouteTopkParams::default()
        };
        let absent = |tensor, present: bool, why: &str| -> Result<()> {
            if present {
                return Err(Error::Shape { tensor, expected: format!("no tensor ({why})"), actual: vec![] });
            }
            Ok(())
        };
        let missing = |tensor, expected: String| Error::Shape { tensor, expected, actual: vec![] };
        let mut inputs = vec![("logits", args.logits.byte_span())];
        match r.selection {
            Selection::TopK { bias } => {
                absent("token_ids", args.token_ids.is_some(), "top-k routing")?;
                absent("tid2eid", args.tid2eid.is_some(), "top-k routing")?;
                if bias {
                    let b = args.bias.as_ref().ok_or_else(|| missing("bias", format!("[E] = [{e}] f32")))?;
                    b.expect("bias", "[E]", DType::F32, &[e])?;
                    b.require_contiguous("bias")?;
                    (p.bias, p.flags) = (b.ptr(), p.flags | FLAG_BIAS);
                    inputs.push(("bias", b.byte_span()));
                } else {
                    absent("bias", args.bias.is_some(), "the router has no bias")?;
                }
            }
            Selection::Hash { vocab } => {
                absent("bias", args.bias.is_some(), "hash routing selects by table")?;
                let ti = args.token_ids.as_ref().ok_or_else(|| missing("token_ids", format!("[T] = [{t}] i32")))?;
                let tab = args
                    .tid2eid
                    .as_ref()
                    .ok_or_else(|| missing("tid2eid", format!("[vocab, k] = [{vocab}, {k}] i32")))?;
                ti.expect("token_ids", "[T]", DType::I32, &[t])?;
                tab.expect("tid2eid", "[vocab, k]", DType::I32, &[vocab, k])?;
                ti.require_contiguous("token_ids")?;
                tab.require_contiguous("tid2eid")?;
                (p.token_ids, p.tid2eid, p.vocab) = (ti.ptr(), tab.ptr(), vocab as i32);
                p.flags |= FLAG_HASH;
                inputs.push(("token_ids", ti.byte_span()));
                inputs.push(("tid2eid", tab.byte_span()));
            }
        }
        let outputs =
            [("ids", args.ids.byte_span()), ("weights", args.weights.byte_span()), ("error", args.error.byte_span())];
        for (i, &o) in outputs.iter().enumerate() {
            for &other in outputs[i + 1..].iter().chain(&inputs) {
                require_disjoint(o, other)?;
            }
        }
        Ok(p)
    }

    /// The kernel symbol, e.g. `b12x_route_topk_sqrtsoftplus`.
    pub fn symbol(&self) -> String {
        let score = match self.router.score {
            ScoreFn::Softmax => "softmax",
            ScoreFn::Sigmoid => "sigmoid",
            ScoreFn::SqrtSoftplus => "sqrtsoftplus",
        };
        format!("b12x_route_topk_{score}")
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
        query: *query,
        device: device.clone(),
        buckets: vec![Bucket { lo: 1, hi: query.max_tokens }],
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
    /// `[T, E]` f32 router logits (rows may be padded).
    pub logits: TensorRef<'a>,
    /// `[E]` f32, exactly when the router selects by `scores + bias`.
    pub bias: Option<TensorRef<'a>>,
    /// `[T]` i32 token ids, exactly for hash routing (untrusted: masked outside the table).
    pub token_ids: Option<TensorRef<'a>>,
    /// `[vocab, k]` i32, exactly for hash routing (untrusted: masked outside `[0, E)`).
    pub tid2eid: Option<TensorRef<'a>>,
    /// `[T, k]` i32: the experts (−1 where masked).
    pub ids: TensorMut<'a>,
    /// `[T, k]` f32: their weights (0 where masked).
    pub weights: TensorMut<'a>,
    /// `[1]` i32: fault bits ([`FAULT_EXPERT_ID`], [`FAULT_TOKEN_ID`]) are ORed in.
    pub error: TensorMut<'a>,
}

/// Routes `args.logits` on `stream`. Every check happens before the launch; no allocation, no
/// synchronization. `T = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let params = plan.query.kernel_params(&args)?;
    plan.scratch_layout().bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.tokens == 0 {
        return Ok(());
    }
    let selected = resolve(plan, 0, stream)?;
    launch(&selected, &params, stream)
}

fn launch(selected: &Selected, p: &RouteTopkParams, stream: &CudaStream) -> Result<()> {
    let kernel = selected.kernels.first().ok_or_else(|| Error::UnknownConfig {
        op: OP,
        bucket: String::new(),
        config: selected.config.clone(),
    })?;
    let dims = LaunchDims { grid: (p.tokens as u32, 1, 1), block: (THREADS, 1, 1), smem_bytes: 0 };
    // SAFETY: RouteTopkParams mirrors the kernel's struct (asserted on both sides); `p` passed
    // `Query::kernel_params` (every tensor's shape, dtype and strides; outputs disjoint from the
    // inputs) or describes the race's own buffer; the kernel bounds every untrusted index.
    unsafe { kernel.launch_ex(stream, dims, p, LaunchOpts { pdl: false, cluster_x: 0 }) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        format!("{:?} max_tokens={}", self.query.router, self.query.max_tokens)
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::ROUTE_TOPK_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        vec![CONFIG.into()]
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        if config_index == 0 {
            vec![self.query.symbol()]
        } else {
            Vec::new()
        }
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        // One config: never raced; this case (one token, zero logits, a zero hash table) is for
        // tools that time every op.
        let r = &self.query.router;
        let (e, k) = (r.experts, r.top_k);
        let vocab = match r.selection {
            Selection::Hash { vocab } => vocab.min(1),
            Selection::TopK { .. } => 0,
        };
        let race = RaceBuffer::new(&self.device, &[e * 4, e * 4, 4, vocab * k * 4 + 4, k * 4, k * 4, 4])?;
        let at = &race.ptrs;
        let p = RouteTopkParams {
            logits: at[0],
            bias: if matches!(r.selection, Selection::TopK { bias: true }) { at[1] } else { 0 },
            token_ids: if vocab > 0 { at[2] } else { 0 },
            tid2eid: if vocab > 0 { at[3] } else { 0 },
            ids: at[4],
            weights: at[5],
            error: at[6],
            logits_stride: e as i64,
            ids_stride: k as i64,
            weights_stride: k as i64,
            tokens: 1,
            experts: e as i32,
            top_k: k as i32,
            vocab: vocab as i32,
            route_scale: r.route_scale,
            flags: if r.renormalize { FLAG_RENORMALIZE } else { 0 }
                | if vocab > 0 { FLAG_HASH } else { 0 }
                | if matches!(r.selection, Selection::TopK { bias: true }) { FLAG_BIAS } else { 0 },
        };
        Ok(Box::new(RaceCase { params: p, _buffer: race.buffer }))
    }
}

/// What a timing tool launches.
struct RaceCase {
    params: RouteTopkParams,
    _buffer: CudaSlice<u8>,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(selected, &self.params, stream)
    }
}
