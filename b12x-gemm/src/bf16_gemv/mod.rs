//! `gemm.bf16_gemv`: `y = x · Wᵀ (+ bias)` for a few rows of x against BF16 weights (decode).
//!
//! - Tensors (row-major, strides in elements): `x [M, K]` bf16 or f32, `w [N, K]` bf16,
//!   `bias [N]` bf16 or f32 (contiguous, optional), `y [M, N]` bf16 or f32. Rows may be padded.
//! - Math: f32 accumulation; the bias (either dtype, independent of the output's) is added in
//!   f32 before the one rounding to the output dtype. f32 x is never rounded to bf16.
//!   [`reference`](mod@reference) is the oracle and states the GPU tolerance.
//! - Capacity and buckets: `Query::max_rows` (≤ 64) splits into `{1}, {2}, {3-4}, {5-8},
//!   {9-16}, {17-32}, {33-64}` (cut at capacity); each bucket gets one tuned config; the live M
//!   of a call picks its bucket.
//! - Alignment: `Query::aligned` promises 16-byte aligned `x`/`w` base pointers and row
//!   strides (checked at run); otherwise slower fallbacks with 2/4-byte loads are used.
//! - Fused SwiGLU ([`Query::x_act`] = [`XAct::SiluMul`] `{ limit }`): `x` is `[M, 2K]` bf16 =
//!   `[gate | up]` (a fused gate/up projection's output, row stride ≥ 2K) and the GEMV's input is
//!   `act[m, k] = bf16(silu(min(g, L)) · clamp(u, −L, L))`, `g = x[m, k]`, `u = x[m, K + k]`,
//!   formed where the kernel loads x's 16-byte piece (both halves read after the PDL wait, as x
//!   is) by `silu_mul_vec` of `b12x/activation.cuh`, the very code `activation.silu_and_mul`
//!   runs (or element by element by `silu_mul_f32`, its loop body's operations). So `y` is **bit for bit** that op (BF16 out, the same limit) followed by this GEMV with
//!   the same config (the fused id without `_silu`): the MMAs, merges, bias and rounding are
//!   unchanged. Configs: the `mma` and `mmad` variants with NT = 1, instantiated again as
//!   `…_silu` for BF16 output (6 entry points); no `tma`, `simt` or unaligned config. Hence bf16
//!   x and y, `aligned`, K % 8 == 0 and `max_rows ≤ 8` (`validate` says which). Every warp
//!   forms the activation of the pieces it reads, so each row block recomputes it (an `expf`
//!   and an IEEE division per element, ~40 SASS instructions, on the warp's issue slots while
//!   its W streams). With at most 4 live rows a warp forms each live element once (lane `L`
//!   takes element `L` of a row's 32 per k step, by shuffles: ~70 instructions per live row and
//!   step); with 5–8 every lane forms its own eight (~320 per step). RT = 2 variants spend half
//!   as many per byte of W. Validated on the H200 (`tests/gpu_bf16_gemv.rs`, M ∈ {1, 3, 8}, both
//!   forms, bit for bit, also under memcheck: `bench-results/2026-12-04-h200-g/call1`), and
//!   **slower than the two launches it replaces**: the Qwen3-8B down projection (N 4096,
//!   K 12288) at M = 1 took 35.65 µs fused against 27.97 µs plain (PDL, alone in a graph), and
//!   the decoder layer's step 136.88 µs against 116.42 with `silu_and_mul` launched (which costs
//!   ~1.8 µs there). The recomputation per row block, not the loads, is the cost. Keep it for
//!   shapes with few row blocks; the form that recomputes nothing is the activation in the
//!   gate/up GEMV's epilogue (gate and up rows interleaved so that one lane holds both), not
//!   built.
//! - Fused add+RMSNorm ([`Query::x_act`] = [`XAct::AddRmsNorm`] `{ eps }`, [`Args::add_norm`]):
//!   x `[M, K]` bf16 is a sublayer's output and the GEMV's input is `norm.rmsnorm`'s fused add
//!   form of x and the residual: `r = bf16(x + residual)`, `h = bf16((r · rrms) · w)`,
//!   `rrms = rsqrtf(Σ r² / K + eps)` (rmsnorm.cu's operations), formed per 8-element piece where
//!   the kernel loads x (the residual piece and the norm weight's piece beside it: a ring
//!   stage holds three piece sets). Every CTA first computes its live tokens' rrms from their whole rows (after the
//!   PDL wait; 2·K·2 bytes per token from L2, four loads per thread in flight, warp sums added
//!   in warp order, so every CTA gets the same bits), and CTA (0, 0) writes `r` to
//!   `residual_out` (which may overlap nothing the call reads: typed error). `residual_out`
//!   is bit for bit rmsnorm's residual; `h` is within rmsnorm's oracle bound (1 bf16 ULP: rrms
//!   is summed in another order), so `y` is within the GEMV bound widened by Σ|w|·ulp(h)
//!   (what `tests/gpu_bf16_gemv.rs` checks). Configs: the `mma` / `mmad` NT = 1 variants as
//!   `…_addnorm` (6 entry points, BF16 out, MINB 1); bf16 x and y, `aligned`, K % 8 == 0,
//!   `max_rows ≤ 8`; combines with the SwiGLU epilogue. Validated on an H100 (SM90: every
//!   candidate pinned, memcheck and racecheck clean; `bench-results/2026-12-05-h200-f/`), not
//!   yet on the H200. Measured in the decoder layer (b12x-layers' `FoldNorms`): it pays in the
//!   QKV projection and costs in the 201 MB gate/up projection (its 768 CTAs each redo the
//!   prologue, and the fused ring is larger than the plain config the race picks there).
//! - SwiGLU epilogue ([`Query::y_act`] = [`YAct::SiluMul`] `{ limit }`): a fused gate/up
//!   projection whose W rows come in 16-row groups (8 gate rows, then the 8 matching up rows;
//!   [`interleave_gate_up`] lays out `[gate rows | up rows]` so) stores `y [M, N/2]` =
//!   `bf16(silu(min(g, L)) · clamp(u, −L, L))` of its own bf16 outputs `g`, `u` (bias included):
//!   every path that finishes a 16-row tile holds both rows of a pair in one thread (MMA
//!   fragment rows g and g + 8; shared-memory tiles and split-K merges walk the pairs), so the
//!   activation is `silu_mul_f32` of `b12x/activation.cuh` once per output, nothing recomputed.
//!   `y` is **bit for bit** this GEMV (same config, BF16 out, the same W) followed by
//!   `activation.silu_and_mul` on its de-interleaved output. bf16 x and y, N % 16 == 0, any M;
//!   every config but the `tma` cluster ones (their ranks finish fragments apart). A runtime
//!   flag (`FLAG_Y_SILU`), no extra entry points.
//! - Rope + KV-append epilogue ([`Query::y_act`] = [`YAct::RopeAppend`], [`Args::rope`]): a
//!   decode step's fused QKV projection (W's rows in [`rope_row_order`]: each rotary pair's two
//!   dims are fragment rows g and g + 8 of one 16-row group) whose finishing thread rounds the
//!   pair's sums to bf16, rotates q and k heads with `attention.rope`'s operations
//!   (`b12x/rope_math.cuh`, shared with the attention kernels), stores y in the plain column
//!   order (q rotated, k and v as projected) and the rotated k and the v into the paged cache slot
//!   of `seq_lens[m] − 1`, with `attention.kv_append`'s checks and fault bits. **Bit for bit**
//!   the plain GEMV (same config without `_rope`, W in plain order) followed by
//!   `attention.rope_kv_append`. Configs: the `mma` ring NT = 1 rows as `…_rope` and
//!   `…_addnorm_rope` (6 entry points, BF16 out), unsplit. Validated on an H100 (SM90;
//!   `b12x-attention/tests/gpu_qkv_rope.rs`: every candidate pinned, NeoX / GPT-J, computed /
//!   table, with the add+RMSNorm x load, faults; memcheck and racecheck clean;
//!   `bench-results/2026-12-06-h200-b/`), not on the H200. In the Qwen3-8B decoder step at B = 1
//!   (b12x-layers' `rope_in_qkv`) it takes `rope_kv_append`'s launch out: 0.5–3.9 µs off the
//!   step on the H100.
//! - Split add+RMSNorm ([`YAct::ResidualRms`] on one GEMV, [`XAct::RmsScale`] on the next,
//!   [`Args::rms`]): a decoder layer's second norm without a launch of its own and without any
//!   CTA recomputing it. The O projection's finishing thread adds the residual to its bf16 output
//!   (`r = bf16(bf16(v) + residual)`, `norm.rmsnorm`'s new residual bit for bit, stored as y) and
//!   each 16-row group's Σ r² goes to `sum_sq [M, ⌈N/16⌉]` (a fixed butterfly: the same bits for
//!   every config); the gate/up projection reads `r` as x, its W's columns pre-multiplied by
//!   the norm weight ([`fold_norm_weight`]), sums those partials per token after its PDL wait
//!   (one warp per token, fixed order) while its first ring stages fly, and multiplies each
//!   finished sum by `rrms = rsqrtf(Σ / K + eps)` before the bias and the SwiGLU epilogue.
//!   Not bit for bit `norm.rmsnorm` + GEMV (the norm weight is rounded into W once, `h` is never
//!   rounded, another order of Σ r²): the decoder layer's cosine bound is the check, and
//!   `tests/gpu_bf16_gemv.rs` checks each half against its plain twin (bitwise: the residual,
//!   the sums, the SwiGLU) and the f64 oracle. Configs: the `mma` ring NT = 1 rows as `…_resrms`
//!   and `…_rmsx` (6 entry points, BF16 out), unsplit. Validated on the H200 and an H100 (every
//!   config pinned; memcheck and racecheck clean on the H100; `bench-results/2026-12-06-h200-c/`).
//!   In the Qwen3-8B decoder step at B = 1 (b12x-layers' `norm2_in_o_proj`) it takes the norm's
//!   launch out: 3.0–3.5 µs off the step on the H200, 2.0–2.8 on the H100.
//! - A whole add+RMSNorm as a scale ([`XAct::AddRmsScale`], [`RmsArgs::Add`]): a decoder
//!   layer's first norm folded into its QKV projection with nothing before it to wait for. x is
//!   the sublayer output; the ring stages carry its pieces and the residual's (as the SwiGLU x
//!   load carries gate and up), each lane forms `r = bf16(x + residual)` per piece right before
//!   its MMAs (CTA row block 0 stores it to `residual_out`: `norm.rmsnorm`'s new residual bit
//!   for bit), the lanes of row-warp 0 add up r² as they go (every element once per CTA), and
//!   after the loop the 4 lanes of a token and the k warps add theirs in a fixed order into
//!   `rrms = rsqrtf(Σ / K + eps)`, which multiplies every finished sum before the bias and the
//!   store, the SwiGLU or the rope epilogue. W's columns carry the norm weight
//!   ([`fold_norm_weight`]). Unlike [`XAct::AddRmsNorm`] (the exact form), no CTA waits for a
//!   prologue over the whole rows before its first MMA. Not bit for bit rmsnorm + GEMV (as the
//!   split form): `tests/gpu_bf16_gemv.rs` checks y against the f64 oracle
//!   `rrms · Σ r·(w·nw)` and the residual bitwise; `b12x-attention/tests/gpu_qkv_rope.rs`
//!   checks `…_addrms_rope` bitwise against `…_addrms` + `attention.rope_kv_append`. Configs:
//!   the `mma` ring NT = 1 rows as `…_addrms` and `…_addrms_rope` (6 entry points, BF16 out),
//!   unsplit (each CTA needs the whole row's Σ r²). The 110 entry points before them have
//!   byte-identical sm_90a SASS.
//! - Determinism: no float atomics. Warps merge through shared memory in warp order; with
//!   `ksplit > 1` every CTA writes its partial tile to scratch and the last CTA of a row block
//!   to arrive (an 8-byte arrival counter in scratch, tagged with the launch's grid id so
//!   that it needs no zeroing: `run` is one kernel launch, and any scratch bits are fine)
//!   sums the partials in split order; `tma` stream-K configs merge the row blocks two CTAs
//!   share the same way (per consumer warp, in CTA order). Same inputs and config → same bits,
//!   eager or replayed.
//! - Programmatic dependent launch: `Query::pdl` launches every call with PDL, so in a stream
//!   or graph of back-to-back kernels (a decode step) the call starts while the kernel before
//!   it finishes: the `tma` configs stream their first ring of W before `griddepcontrol.wait`,
//!   the aligned `mma` / `mmad` feeds copy their first ring stages of W into shared memory /
//!   load their first register group of W (an L2 prefetch hint there did not speed up the
//!   later read on the H200: `bench/proto/l2_prefetch_proto.cu`), and everything else (x, both
//!   halves of a fused SwiGLU's x, bias, y, scratch; all of `simt` and the unaligned feeds)
//!   comes after the wait. Each call lets the next PDL kernel launch only after its own wait,
//!   so only the kernel right before it can still be running. **W must not be written by
//!   that kernel** (weights normally are not); x may be: it is read after the wait. Configs
//!   that merge touch their scratch only after the wait (no memset node between calls, so
//!   merging configs keep the overlap too).
//!
//! Configs (`Config::id`, e.g. `mmad_nt1_rt1_u4_wr1_wk8_ks1`):
//! - `mmad_nt{NT}_rt{RT}_u{U}` — BF16 x, tensor cores (`mma.sync` m16n8k16, swap-AB: 16 W
//!   rows are the MMA's M, 8 tokens its N). A warp owns 16·RT rows and 8·NT tokens and walks
//!   K in groups of U 32-wide steps, loading the next group of W (16-byte streaming loads
//!   that skip L1) and x (through L1, shared by the SM's warps) straight into registers while
//!   the current group's MMAs run. Wins some 58 MB buckets on the H200 (within noise of `tma`).
//! - `mma_nt{NT}_rt{RT}_u{U}_s{S}` — the same MMAs fed through an S-stage cp.async ring per
//!   warp in shared memory (W copied row-contiguously into a swizzled tile, x pieces by the
//!   lanes that use them), S−1 groups in flight. Wins the LM head at M ≤ 2 and the small
//!   shapes on the H200.
//! - `tma_nt{NT}_rt{RT}_cw{CW}_kb{KB}_s{S}_{sk|rb|c2|c4|c8}_{ef|nh}` — the same MMAs fed from
//!   shared memory: a producer warp keeps an S-stage ring of TMA boxes (KB 64-wide k boxes of
//!   16·RT·CW W rows and of x, 128-byte swizzled, zero-filled past N, M and K) in flight while
//!   CW consumer warps read fragments with `ldmatrix`. `sk`: the flat (row block, k-stage) list
//!   is split evenly over one CTA per SM (stream-K), each CTA walking the row block it shares
//!   with the next CTA first, row blocks shared by two CTAs merged by the last to arrive, in
//!   CTA order; `rb`: one CTA per row block; `c{C}`: a cluster of C CTAs per row
//!   block splitting its k-stages, partial tiles summed in rank order through distributed
//!   shared memory (no scratch; wins the router). `ef`/`nh`: L2 evict-first hint on W or
//!   none. Descriptors are encoded in `run` (a host-only driver call). Wins the 58 MB shapes at
//!   M = 16 and (144-row blocks, RT = 3, CW = 3) every M of 18432×7168 on the H200
//!   (`src/bf16_gemv/README.md`).
//! - NT is the smallest token tile covering the bucket (M ≤ 8 → NT = 1, …).
//! - `…_silu` (`mma_nt1_rt1_u4_s4_silu_wr1_wk2_ks1`): the fused SwiGLU x load (above); a ring
//!   stage holds the gate and the up pieces, so fewer ring CTA shapes fit in shared memory.
//! - `…_addnorm` (`mma_nt1_rt2_u4_s3_addnorm_wr2_wk2_ks1`): the fused add+RMSNorm x load
//!   (above); a ring stage holds the x, the residual and the norm weight's pieces.
//! - `…_rope`, `…_resrms`, `…_rmsx` (`mma_nt1_rt1_u4_s4_resrms_wr2_wk4_ks1`): the ring rows
//!   with the rope + KV-append epilogue, the residual + Σ r² epilogue, the rrms scale (above).
//! - `…_addrms`, `…_addrms_rope` (`mma_nt1_rt1_u8_s3_addrms_rope_wr1_wk2_ks1`): the ring rows
//!   with the add+RMSNorm scale x load (above), plain or with the rope epilogue; a ring stage
//!   holds the x and the residual pieces.
//! - `simt_mt{MT}_rs{RS}` — f32 x, CUDA cores: a warp owns RS rows, lanes stride K with
//!   16-byte loads, MT tokens per pass (larger M loops over passes).
//! - `*_unaligned` — the same math with 2/4-byte loads for unaligned views.
//! - `wr{R}_wk{W}`: warps per CTA along N (R) and K (W); `ks{S}`: CTAs along K. Split-K keeps
//!   every SM busy when N is small (the (384, 7168) router runs 24 row blocks × 8 splits).
//!
//! ```no_run
//! use b12x_core::{DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! use b12x_gemm::bf16_gemv::{self, Args, Query, XAct, YAct};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let query = Query { n: 4096, k: 7168, x_dtype: DType::BF16, out_dtype: DType::BF16, bias: None, max_rows: 8, aligned: true, pdl: false, x_act: XAct::None, y_act: YAct::None };
//! let plan = bf16_gemv::plan(&query, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let s = dev.stream();
//! let (w, x) = (s.alloc_zeros::<b12x_core::half::bf16>(4096 * 7168)?, s.alloc_zeros::<b12x_core::half::bf16>(7168)?);
//! let mut y = s.alloc_zeros::<b12x_core::half::bf16>(4096)?;
//! let mut scratch = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes().max(1))?;
//! let args = Args {
//!     x: TensorRef::from_slice(&x, &[1, 7168])?,
//!     w: TensorRef::from_slice(&w, &[4096, 7168])?,
//!     bias: None,
//!     y: TensorMut::from_slice(&mut y, &[1, 4096])?,
//!     add_norm: None,
//!     rope: None,
//!     rms: None,
//! };
//! bf16_gemv::run(&plan, args, Scratch::from_slice(&mut scratch), s)?;
//! # Ok(()) }
//! ```

mod config;
mod dispatch;
mod params;
pub mod reference;

pub use config::{
    all_symbols, enumerate, Config, Geometry, MmaEpi, TmaMode, TmaSchedule, TmaWork, Variant, XLoad, MAX_ROWS, SILU_NT,
    TMA_CLUSTERS, TMA_MAX_STAGES,
};
pub use params::{
    Bf16GemvActParams, Bf16GemvNormParams, Bf16GemvParams, Bf16GemvRmsParams, Bf16GemvRopeParams, Bf16GemvTmaParams,
    GemvRmsEpi, GemvRopeEpi, ROPE_MAX_PAIRS,
};

use b12x_core::cudarc::driver::CudaStream;
use b12x_core::plan::bucket_of;
use b12x_core::{
    pow2_buckets, require_disjoint, resolve, Bucket, DType, Device, Error, PlanSlot, Result, Scratch, ScratchLayout,
    TensorMut, TensorRef,
};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "gemm.bf16_gemv";
/// Static shared memory of every entry point (`s_is_last` of the split-K merge), padded to the
/// 128-byte alignment of the dynamic region that follows it.
const KERNEL_STATIC_SMEM: u32 = 128;

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "gemm",
        entry_points: &["plan", "run"],
        dtypes: &["bf16 w; bf16|f32 x, or bf16 [gate | up] with the fused SwiGLU; bf16|f32 y"],
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-gemm",
        summary: "y = x · Wᵀ (+ bias) for M ≤ 64 rows of x against BF16 weights, split-K, deterministic; optional SwiGLU epilogue (interleaved gate/up rows, y = silu(g)·u), rope + paged KV-append epilogue for a decode QKV projection (M ≤ 8), fused add+RMSNorm or SwiGLU on x (M ≤ 8), add+RMSNorm split between two GEMVs (residual epilogue + rrms scale, M ≤ 8)",
    }
}

/// An activation applied to x as the kernel loads it ([`Query::x_act`]).
#[derive(Clone, Copy, Debug, Default)]
pub enum XAct {
    /// x is the GEMV's input as it is, `[M, K]`.
    #[default]
    None,
    /// x is `[M, 2K]` bf16 = `[gate | up]` (a fused gate/up projection's output) and the GEMV's
    /// input is `act[m, k] = bf16(silu(min(g, L)) · clamp(u, −L, L))`, `g = x[m, k]`,
    /// `u = x[m, K + k]`: bit for bit what `activation.silu_and_mul` (b12x-norm, BF16 out, the
    /// same limit) writes, so `y` equals that op followed by this GEMV with the same config.
    SiluMul {
        /// The swiglu limit L (finite, > 0); `None` disables it.
        limit: Option<f32>,
    },
    /// `norm.rmsnorm`'s fused add form on the x load (a decoder layer's add+RMSNorm folded into
    /// the projection after it): x is `[M, K]` bf16 (the sublayer output), [`Args::add_norm`]
    /// brings the residual `[M, K]`, the norm weight `[K]` and where the new residual goes, and
    /// the GEMV's input is `h = bf16((r · rrms) · w)`, `r = bf16(x + residual)` (written to
    /// `residual_out`), `rrms = 1 / sqrt(Σ r² / K + eps)` — rmsnorm's steps, so `h` is within
    /// its oracle's bound (1 bf16 ULP) of what `norm.rmsnorm` writes, and `residual_out` equals
    /// its residual bit for bit.
    AddRmsNorm {
        /// ε (finite, ≥ 0).
        eps: f32,
    },
    /// The second half of a split add+RMSNorm (the first is [`YAct::ResidualRms`] on the GEMV
    /// before this one): x `[M, K]` bf16 is the new residual `r` that GEMV stored, W's columns
    /// are pre-multiplied by the norm weight ([`fold_norm_weight`]: `bf16(W[n, k] · w[k])`), and
    /// every finished sum `v` of token m becomes `v · rrms[m]` before the bias and the store (or
    /// the SwiGLU epilogue), `rrms[m] = rsqrtf(S / K + eps)` with `S` the sum of
    /// [`RmsArgs::Scale`]'s `sum_sq[m, 0..⌈K/16⌉)` in a fixed order (lane l of a warp adds
    /// entries l, l + 32, … in turn, then a butterfly over the lanes). So y is
    /// `rrms · (W·diag(w)) · r + bias`: `norm.rmsnorm`'s output fed to this GEMV up to the
    /// rounding points (rmsnorm rounds `h = bf16(r · rrms · w)` per element and this GEMV
    /// rounds `W · w` once at upload; another summation order of `S`). Not bit for bit either
    /// path: a layer checks it by its cosine bound. Configs: the `mma` ring NT = 1 rows as
    /// `…_rmsx` (3 entry points, BF16 out), unsplit; bf16 x and y, `aligned`, K % 8 == 0,
    /// `max_rows ≤ 8`; combines with [`YAct::SiluMul`] only.
    RmsScale {
        /// ε (finite, ≥ 0).
        eps: f32,
    },
    /// A whole add+RMSNorm folded into the projection after it as a scale (a decoder layer's
    /// first norm in its QKV projection, with no kernel before it): x `[M, K]` bf16 is the
    /// sublayer output, [`RmsArgs::Add`] brings the residual and where the new one goes, W's
    /// columns are pre-multiplied by the norm weight ([`fold_norm_weight`]), and the GEMV's input
    /// is `r = bf16(x + residual)` — written to `residual_out` (CTA row block 0), `norm.rmsnorm`'s
    /// new residual bit for bit — with every finished sum `v` of token m becoming `v · rrms[m]`
    /// before the bias and the store (or the rope epilogue), `rrms[m] = rsqrtf(S / K + eps)`, `S`
    /// the Σ r² each CTA adds up itself as it streams x (lanes in element order, then the 4
    /// lanes of a token and the k warps in a fixed order: the same bits in every CTA of a
    /// config; another config may differ in the last bits). Nothing waits for `S` before the last
    /// MMA: no prologue and no kernel before. So y is `rrms · (W·diag(w)) · r + bias`: the
    /// rmsnorm-then-GEMV result up to the rounding points (as [`XAct::RmsScale`]: `W · w`
    /// rounded once at upload, `h` never rounded, another order of `S`); a layer checks it by
    /// its cosine bound. Configs: the `mma` ring NT = 1 rows as `…_addrms` / `…_addrms_rope`
    /// (6 entry points, BF16 out), unsplit; bf16 x and y, `aligned`, K % 8 == 0,
    /// `max_rows ≤ 8`; combines with [`YAct::None`], [`YAct::SiluMul`] and
    /// [`YAct::RopeAppend`].
    AddRmsScale {
        /// ε (finite, ≥ 0).
        eps: f32,
    },
}

/// The limit a SwiGLU kernel takes: L, or +∞ without one (the clamps then pass every value, as
/// `activation.silu_and_mul`'s kernel does).
fn swiglu_kernel_limit(limit: Option<f32>) -> f32 {
    limit.unwrap_or(f32::INFINITY)
}

/// SwiGLU limits compare by their bits, so a query stays `Eq`.
fn same_limit(a: Option<f32>, b: Option<f32>) -> bool {
    a.map(f32::to_bits) == b.map(f32::to_bits)
}

impl XAct {
    /// The limit the fused kernels take: L, or +∞ without one.
    pub fn kernel_limit(self) -> f32 {
        match self {
            XAct::SiluMul { limit } => swiglu_kernel_limit(limit),
            XAct::None | XAct::AddRmsNorm { .. } | XAct::RmsScale { .. } | XAct::AddRmsScale { .. } => f32::INFINITY,
        }
    }
}

impl PartialEq for XAct {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (XAct::None, XAct::None) => true,
            (XAct::SiluMul { limit: a }, XAct::SiluMul { limit: b }) => same_limit(*a, *b),
            (XAct::AddRmsNorm { eps: a }, XAct::AddRmsNorm { eps: b })
            | (XAct::RmsScale { eps: a }, XAct::RmsScale { eps: b })
            | (XAct::AddRmsScale { eps: a }, XAct::AddRmsScale { eps: b }) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}
impl Eq for XAct {}

impl XAct {
    /// The x load of the kernels that serve it.
    pub fn x_load(self) -> XLoad {
        match self {
            XAct::None => XLoad::Plain,
            XAct::SiluMul { .. } => XLoad::SiluMul,
            XAct::AddRmsNorm { .. } => XLoad::AddNorm,
            XAct::RmsScale { .. } => XLoad::RmsScale,
            XAct::AddRmsScale { .. } => XLoad::AddRms,
        }
    }
}

/// An activation applied to y as the kernel stores it ([`Query::y_act`]).
// `RopeAppend` carries rope's inverse frequencies by value (≈ 0.6 KB) so that a query stays
// `Copy` and comparable; queries are plan-time values, never stored in bulk.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, Default)]
pub enum YAct {
    /// y is the GEMV's output as it is, `[M, N]`.
    #[default]
    None,
    /// SwiGLU epilogue of a fused gate/up projection: W's `N = 2I` rows come in 16-row groups,
    /// 8 gate rows then the 8 matching up rows (group j: gate rows `8j..8j+7`, up rows
    /// `8j..8j+7`; [`interleave_gate_up`] makes this layout from `[gate rows | up rows]`), and
    /// y is `[M, I]`: `y[m, 8j + i] = bf16(silu(min(g, L)) · clamp(u, −L, L))` with `g`, `u` the
    /// bf16 outputs this GEMV would store for rows `16j + i` and `16j + 8 + i` (bias included).
    /// Bit for bit that GEMV (same config, BF16 out) followed by `activation.silu_and_mul` on
    /// its de-interleaved output: the activation is `b12x/activation.cuh`'s `silu_mul_f32`, on
    /// the rounded sums, in the thread that finishes both rows. No recomputation, and y is half
    /// as wide.
    SiluMul {
        /// The swiglu limit L (finite, > 0); `None` disables it.
        limit: Option<f32>,
    },
    /// The rope + KV-append epilogue of a decode step's QKV projection (see [`RopeAppend`]):
    /// y keeps the projection's `[M, (H + 2·Hkv)·D]` layout with the q heads rotated by
    /// `attention.rope`, and the new token's rotated k and its v go into a paged cache, as
    /// `attention.rope_kv_append` does — bit for bit that op after this GEMV.
    RopeAppend(RopeAppend),
    /// The first half of a split add+RMSNorm (a decoder layer's O projection; the second half
    /// is [`XAct::RmsScale`] on the gate/up projection after it), with [`RmsArgs::Residual`]:
    /// `y[m, n] = r = bf16(bf16(v) + residual[m, n])` with `v` the sum this GEMV would store
    /// (bias included) — `norm.rmsnorm`'s new residual bit for bit, written to y (not over the
    /// residual) — and `sum_sq[m, g] = Σ r²` over the 16 rows of group g (`rows 16g..16g+15`
    /// below N; f32, added in a fixed butterfly), `[M, ⌈N/16⌉]`: the same bits whatever the
    /// config. Configs: the `mma` ring NT = 1 rows as `…_resrms` (3 entry points, BF16 out),
    /// unsplit; bf16 x and y, `aligned`, `max_rows ≤ 8`, plain x.
    ResidualRms,
}

impl YAct {
    /// The limit the kernels take: L, or +∞ without one.
    pub fn kernel_limit(self) -> f32 {
        match self {
            YAct::SiluMul { limit } => swiglu_kernel_limit(limit),
            YAct::None | YAct::RopeAppend(_) | YAct::ResidualRms => f32::INFINITY,
        }
    }
}

impl PartialEq for YAct {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (YAct::None, YAct::None) => true,
            (YAct::SiluMul { limit: a }, YAct::SiluMul { limit: b }) => same_limit(*a, *b),
            (YAct::RopeAppend(a), YAct::RopeAppend(b)) => a == b,
            (YAct::ResidualRms, YAct::ResidualRms) => true,
            _ => false,
        }
    }
}
impl Eq for YAct {}

/// The static side of [`YAct::RopeAppend`]: a decode step's fused QKV projection whose epilogue
/// is `attention.rope_kv_append` (full rotary dim, no offset, BF16 cache).
///
/// - W is `[(H + 2·Hkv)·D, K]`: the q heads' rows, the k heads', the v heads', **each head's rows
///   in the epilogue's pair order** ([`rope_row_order`]; the bias, if any, in the same order):
///   16-row groups whose rows `i` and `i + 8` are the two dims of rotary pair `8j + i` (NeoX:
///   dims `f` and `f + D/2`; GPT-J: `2f` and `2f + 1`), so one thread finishes both.
/// - Per token m (a decode batch: token m is request m's one new token) y gets the plain
///   GEMV's `[M, N]` output in the usual column order with every q head rotated (the pair's
///   cos / sin at `positions[m]`, `attention.rope`'s operations and rounding; a position outside
///   `[0, max_position)` stays unrotated and sets `FAULT_POSITION`); the k heads are stored
///   unrotated in y and rotated into `k_cache`, the v heads into y and `v_cache`, at cache
///   position `seq_lens[m] − 1` of request m's pages (`page_table[m]`), with
///   `attention.kv_append`'s checks and fault bits (`FAULT_LENGTH`, `FAULT_QUERY_LAYOUT` for a
///   length below 1, `FAULT_PAGE_ID`) in [`RopeArgs::error`]; a faulting token writes no cache.
/// - So y and both caches are bit for bit this GEMV on W in its plain row order followed by
///   `attention.rope_kv_append` (same rope, `cu_seqlens_q = [0, 1, …, M]`) on y's q, k and v
///   columns. cos / sin: `sincosf(pos · inv_freq[f])` (rope's computed mode, `inv_freq` given) or
///   read from rope's table ([`RopeArgs::cos_sin`], `inv_freq` `None`), times `scale`.
/// - Configs: the `mma` ring NT = 1 rows as `…_rope` (`…_addnorm_rope` with
///   [`XAct::AddRmsNorm`]), unsplit; bf16 x and y, `aligned`, `max_rows ≤ 8`.
#[derive(Clone, Copy, Debug)]
pub struct RopeAppend {
    /// H: query heads.
    pub heads: usize,
    /// Hkv: key / value heads.
    pub kv_heads: usize,
    /// D: head dim = rotary dim (a multiple of 16, ≤ 256).
    pub head_dim: usize,
    /// P: tokens per page.
    pub page_size: usize,
    /// Pages in each cache.
    pub num_pages: usize,
    /// Columns of the page table: a length may not pass `max_pages · P`.
    pub max_pages: usize,
    /// Positions must lie in `[0, max_position)` (the table's rows in table mode).
    pub max_position: usize,
    /// NeoX halves (`true`) or GPT-J interleaved pairs.
    pub neox: bool,
    /// Multiplies cos and sin (YaRN's mscale ratio; 1 otherwise): `rope::Frequencies::scale`.
    pub scale: f32,
    /// Computed mode: rope's `D/2` inverse frequencies (`rope::Frequencies::inv_freq`), the rest
    /// zeros; `None`: table mode ([`RopeArgs::cos_sin`]).
    pub inv_freq: Option<[f32; params::ROPE_MAX_PAIRS]>,
}

impl PartialEq for RopeAppend {
    fn eq(&self, o: &Self) -> bool {
        let bits = |f: &Option<[f32; params::ROPE_MAX_PAIRS]>| f.map(|a| a.map(f32::to_bits));
        (self.heads, self.kv_heads, self.head_dim, self.page_size, self.num_pages, self.max_pages)
            == (o.heads, o.kv_heads, o.head_dim, o.page_size, o.num_pages, o.max_pages)
            && (self.max_position, self.neox, self.scale.to_bits()) == (o.max_position, o.neox, o.scale.to_bits())
            && bits(&self.inv_freq) == bits(&o.inv_freq)
    }
}
impl Eq for RopeAppend {}

impl RopeAppend {
    /// The kernel's epilogue parameters: `read` = the device pointers of positions, lengths,
    /// page table and table (0: computed mode), `written` = of the k cache, the v cache and the
    /// error word; `pt_stride` = elements between page-table rows.
    pub(crate) fn epilogue(&self, read: [u64; 4], written: [u64; 3], pt_stride: usize) -> GemvRopeEpi {
        let [positions, seq_lens, page_table, cos_sin] = read;
        let [k_cache, v_cache, error] = written;
        GemvRopeEpi {
            positions,
            seq_lens,
            page_table,
            cos_sin,
            k_cache,
            v_cache,
            error,
            pt_stride: pt_stride as i64,
            heads: self.heads as i32,
            kv_heads: self.kv_heads as i32,
            head_dim: self.head_dim as i32,
            page_size: self.page_size as i32,
            num_pages: self.num_pages as i32,
            max_pages: self.max_pages as i32,
            max_position: self.max_position as i32,
            neox: i32::from(self.neox),
            scale: self.scale,
            reserved: 0,
            inv_freq: self.inv_freq.unwrap_or([0.0; params::ROPE_MAX_PAIRS]),
        }
    }
}

/// `w` `[N, K]` row-major with its rows in `order` (`out[i] = w[order[i]]`, e.g.
/// [`rope_row_order`]'s order for [`YAct::RopeAppend`]).
pub fn reorder_rows<T: Copy>(w: &[T], k: usize, order: &[usize]) -> Vec<T> {
    order.iter().flat_map(|&r| w[r * k..(r + 1) * k].iter().copied()).collect()
}

/// Rows of W (and of a bias) in [`YAct::RopeAppend`]'s order: entry `i` is the plain row that
/// goes to position `i` of the epilogue's W (`w_rope[i] = w[order[i]]`). Each head of the
/// `heads + 2·kv_heads` heads keeps its rows; inside a head, 16-row group j holds the first dims
/// of pairs `8j..8j+7`, then their second dims (NeoX: dims `f`, `f + D/2`; GPT-J: `2f`, `2f + 1`).
/// `head_dim` must be a multiple of 16.
pub fn rope_row_order(heads: usize, kv_heads: usize, head_dim: usize, neox: bool) -> Vec<usize> {
    assert!(head_dim > 0 && head_dim % 16 == 0, "head_dim must be a positive multiple of 16");
    let mut out = Vec::with_capacity((heads + 2 * kv_heads) * head_dim);
    for h in 0..heads + 2 * kv_heads {
        for j in 0..head_dim / 16 {
            for second in [false, true] {
                for i in 0..8 {
                    let f = 8 * j + i;
                    let d = match (neox, second) {
                        (true, false) => f,
                        (true, true) => f + head_dim / 2,
                        (false, false) => 2 * f,
                        (false, true) => 2 * f + 1,
                    };
                    out.push(h * head_dim + d);
                }
            }
        }
    }
    out
}

/// Rows of W for [`YAct::SiluMul`]: `w` is `[2I, K]` row-major = `[gate rows | up rows]` (the
/// usual fused gate/up weight, I a multiple of 8); returns the rows in the epilogue's order
/// (16-row groups: 8 gate rows, then the same 8 up rows).
pub fn interleave_gate_up<T: Copy>(w: &[T], k: usize) -> Vec<T> {
    assert!(k > 0 && w.len() % (16 * k) == 0, "w must be [2I, K] with I a multiple of 8");
    let i = w.len() / k / 2;
    let mut out = Vec::with_capacity(w.len());
    for j in 0..i / 8 {
        for half in [0, i] {
            let r0 = half + 8 * j;
            out.extend_from_slice(&w[r0 * k..(r0 + 8) * k]);
        }
    }
    out
}

/// W for [`XAct::RmsScale`]: `w` `[N, K]` row-major with column k multiplied by the RMSNorm
/// weight `norm_w[k]`, each product rounded to bf16 once (`bf16(w[n, k] · norm_w[k])`, f32
/// product).
pub fn fold_norm_weight(w: &[b12x_core::half::bf16], norm_w: &[b12x_core::half::bf16]) -> Vec<b12x_core::half::bf16> {
    let k = norm_w.len();
    assert!(k > 0 && w.len() % k == 0, "w must be [N, K] with K = norm_w.len()");
    w.chunks_exact(k)
        .flat_map(|row| row.iter().zip(norm_w).map(|(a, b)| b12x_core::half::bf16::from_f32(a.to_f32() * b.to_f32())))
        .collect()
}

/// Entries per token of the sums of squares the split add+RMSNorm passes between its two GEMVs
/// ([`YAct::ResidualRms`] writes `[M, rms_groups(N)]`, [`XAct::RmsScale`] reads
/// `[M, rms_groups(K)]`): one per 16 rows.
pub fn rms_groups(rows: usize) -> usize {
    rows.div_ceil(16)
}

/// The static problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// N: rows of W, columns of y.
    pub n: usize,
    /// K: the reduction length.
    pub k: usize,
    /// dtype of x: bf16 (tensor cores) or f32 (CUDA cores).
    pub x_dtype: DType,
    /// dtype of y: bf16 or f32.
    pub out_dtype: DType,
    /// dtype of the bias (bf16 or f32), `None` for no bias.
    pub bias: Option<DType>,
    /// Capacity: the largest M `run` accepts (1..=64).
    pub max_rows: usize,
    /// `x` and `w` have 16-byte aligned base pointers and row strides (checked at run).
    pub aligned: bool,
    /// Launch with programmatic dependent launch (see the module docs): the call may start
    /// reading W before the kernel right before it on the stream completes. Set it only when
    /// that kernel does not write W. A PDL plan races up to eight back-to-back PDL calls, each
    /// on its own copy of W (so preparing it takes up to eight W-sized buffers; fewer calls,
    /// at least two, when the extra copies would pass 1 GiB), and caches its selections under
    /// its own key.
    pub pdl: bool,
    /// An activation fused into the x load ([`XAct::SiluMul`]: x is `[M, 2K]` = `[gate | up]`;
    /// [`XAct::AddRmsNorm`]: add+RMSNorm of x and [`Args::add_norm`]'s residual); `XAct::None`
    /// for plain x. Both need bf16 x and y, `aligned`, K % 8 == 0 and `max_rows ≤ 8`.
    pub x_act: XAct,
    /// An activation fused into the y store ([`YAct::SiluMul`]: W's rows interleaved gate/up,
    /// y is `[M, N/2]`); `YAct::None` for plain y. SwiGLU needs bf16 x and y, N % 16 == 0 and
    /// no SwiGLU `x_act` (`XAct::AddRmsNorm` combines with it).
    pub y_act: YAct,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        let float = |d: DType| matches!(d, DType::BF16 | DType::F32);
        // Row indices, K offsets and the padded row count are 32-bit in the kernel.
        // The kernel forms k_begin + k_per_split in 32-bit: K plus up to 32 splits of 32-wide
        // granules (and a 16-byte vector) must still fit.
        let limit = i32::MAX as usize - 32 * 32 - 8;
        if self.n == 0 || self.n > limit {
            return bad("n", format!("(N) must be in 1..={limit}, got {}", self.n));
        }
        if self.k == 0 || self.k > limit {
            return bad("k", format!("(K) must be in 1..={limit}, got {}", self.k));
        }
        if !float(self.x_dtype) {
            return bad("x_dtype", format!("must be bf16 or f32, got {}", self.x_dtype));
        }
        if !float(self.out_dtype) {
            return bad("out_dtype", format!("must be bf16 or f32, got {}", self.out_dtype));
        }
        if let Some(b) = self.bias.filter(|&b| !float(b)) {
            return bad("bias", format!("must be bf16 or f32, got {b}"));
        }
        if self.max_rows == 0 || self.max_rows > MAX_ROWS {
            return bad("max_rows", format!("(M capacity) must be in 1..={MAX_ROWS}, got {}", self.max_rows));
        }
        // The fused x loads (SwiGLU, add+RMSNorm) run only in the NT = 1 `mma` / `mmad`
        // variants with BF16 x and y and 16-byte vectors of every row.
        let fused = match self.x_act {
            XAct::None => None,
            XAct::SiluMul { .. } => Some(("SiluMul", "[gate | up], as activation.silu_and_mul", "a down projection")),
            XAct::AddRmsNorm { .. } => Some(("AddRmsNorm", "as norm.rmsnorm's fused form", "a layer's projections")),
            XAct::RmsScale { .. } => Some(("RmsScale", "(a residual stream)", "a layer's projections")),
            XAct::AddRmsScale { .. } => Some(("AddRmsScale", "(a residual stream)", "a layer's projections")),
        };
        if let Some((name, x_why, y_why)) = fused {
            let act = |reason: String| bad("x_act", format!("{name} {reason}"));
            if self.x_dtype != DType::BF16 {
                return act(format!("needs bf16 x ({x_why}), got {}", self.x_dtype));
            }
            if self.out_dtype != DType::BF16 {
                return act(format!("is built for bf16 y only ({y_why}), got out_dtype {}", self.out_dtype));
            }
            if !self.aligned {
                return act("needs aligned = true (the fused loads are 16-byte vectors)".into());
            }
            if self.k % 8 != 0 {
                return act(format!("needs K % 8 == 0 (16-byte vectors of every row), got K = {}", self.k));
            }
            let most = 8 * SILU_NT as usize;
            if self.max_rows > most {
                return act(format!(
                    "serves at most {most} rows: max_rows must be in 1..={most}, got {}",
                    self.max_rows
                ));
            }
            match self.x_act {
                XAct::SiluMul { limit: Some(l) } if !(l.is_finite() && l > 0.0) => {
                    return act(format!("limit must be finite and > 0 (None disables it), got {l}"));
                }
                XAct::AddRmsNorm { eps } | XAct::RmsScale { eps } | XAct::AddRmsScale { eps }
                    if !(eps.is_finite() && eps >= 0.0) =>
                {
                    return act(format!("eps must be finite and >= 0, got {eps}"));
                }
                XAct::RmsScale { .. } if !matches!(self.y_act, YAct::None | YAct::SiluMul { .. }) => {
                    return act("combines with y_act None or SiluMul only".into());
                }
                XAct::AddRmsScale { .. }
                    if !matches!(self.y_act, YAct::None | YAct::SiluMul { .. } | YAct::RopeAppend(_)) =>
                {
                    return act("combines with y_act None, SiluMul or RopeAppend only".into());
                }
                _ => {}
            }
        }
        if let YAct::SiluMul { limit } = self.y_act {
            let act = |reason: String| bad("y_act", format!("SiluMul {reason}"));
            if self.x_dtype != DType::BF16 {
                return act(format!("needs bf16 x (the tensor-core configs), got {}", self.x_dtype));
            }
            if self.out_dtype != DType::BF16 {
                return act(format!(
                    "stores bf16 y (activation.silu_and_mul's output), got out_dtype {}",
                    self.out_dtype
                ));
            }
            if self.n % 16 != 0 {
                return act(format!("needs N % 16 == 0 (16-row gate/up groups), got N = {}", self.n));
            }
            if let XAct::SiluMul { .. } = self.x_act {
                return act("cannot be combined with x_act SiluMul".into());
            }
            if let Some(l) = limit.filter(|l| !(l.is_finite() && *l > 0.0)) {
                return act(format!("limit must be finite and > 0 (None disables it), got {l}"));
            }
        }
        if let YAct::ResidualRms = self.y_act {
            let act = |reason: String| bad("y_act", format!("ResidualRms {reason}"));
            if let Some(reason) = self.ring_epilogue_reason("a BF16 residual stream") {
                return act(reason);
            }
            if self.x_act != XAct::None {
                return act("needs x_act None (its configs load x as it is)".into());
            }
        }
        if let YAct::RopeAppend(r) = self.y_act {
            let act = |reason: String| bad("y_act", format!("RopeAppend {reason}"));
            if let Some(reason) = self.ring_epilogue_reason("a BF16 QKV projection and cache") {
                return act(reason);
            }
            if let XAct::SiluMul { .. } = self.x_act {
                return act("cannot be combined with x_act SiluMul".into());
            }
            if r.heads == 0 || r.kv_heads == 0 {
                return act(format!("needs heads and kv_heads >= 1, got {} and {}", r.heads, r.kv_heads));
            }
            if r.head_dim == 0 || r.head_dim % 16 != 0 || r.head_dim > 2 * params::ROPE_MAX_PAIRS {
                return act(format!(
                    "needs head_dim a multiple of 16 in 16..={} (16-row pair groups), got {}",
                    2 * params::ROPE_MAX_PAIRS,
                    r.head_dim
                ));
            }
            let rows = (r.heads + 2 * r.kv_heads).checked_mul(r.head_dim);
            if rows != Some(self.n) {
                return act(format!(
                    "needs N = (heads + 2 kv_heads) head_dim = ({} + 2·{})·{}, got N = {}",
                    r.heads, r.kv_heads, r.head_dim, self.n
                ));
            }
            let i32max = i32::MAX as usize;
            if r.page_size == 0 || r.num_pages == 0 || r.max_pages == 0 || r.max_position == 0 {
                return act("needs page_size, num_pages, max_pages and max_position >= 1".into());
            }
            if r.page_size.checked_mul(r.max_pages).is_none_or(|t| t > i32max)
                || r.num_pages > i32max
                || r.max_position.checked_mul(r.head_dim).is_none_or(|t| t > i32max)
            {
                return act("needs max_pages · page_size, num_pages and max_position · head_dim within i32".into());
            }
            if !(r.scale.is_finite() && r.scale > 0.0) {
                return act(format!("scale must be finite and > 0, got {}", r.scale));
            }
            if let Some(f) = &r.inv_freq {
                if let Some(bad_f) = f[..r.head_dim / 2].iter().find(|v| !v.is_finite()) {
                    return act(format!("inv_freq must be finite, got {bad_f}"));
                }
            }
        }
        Ok(())
    }

    /// What the ring-only y epilogues (`RopeAppend`, `ResidualRms`) need of every query: bf16 x
    /// and y (`why`: what they serve), `aligned`, at most 8 rows. The first reason that fails.
    fn ring_epilogue_reason(&self, why: &str) -> Option<String> {
        if self.x_dtype != DType::BF16 || self.out_dtype != DType::BF16 {
            return Some(format!("needs bf16 x and y ({why}), got x {} y {}", self.x_dtype, self.out_dtype));
        }
        if !self.aligned {
            return Some("needs aligned = true (its configs are the 16-byte ring feeds)".into());
        }
        let most = 8 * SILU_NT as usize;
        if self.max_rows > most {
            return Some(format!("serves at most {most} rows: max_rows must be in 1..={most}, got {}", self.max_rows));
        }
        None
    }

    /// Checks `args` against the query and builds the kernel parameters (without the launch
    /// geometry); nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<Bf16GemvParams> {
        let (n, k) = (self.n, self.k);
        let m = args.x.shape().first().copied().unwrap_or(0);
        match self.x_act {
            XAct::None | XAct::AddRmsNorm { .. } | XAct::RmsScale { .. } | XAct::AddRmsScale { .. } => {
                args.x.expect("x", "[M, K]", self.x_dtype, &[m, k])?
            }
            XAct::SiluMul { .. } => args.x.expect("x", "[M, 2K] ([gate | up])", self.x_dtype, &[m, 2 * k])?,
        }
        if args.add_norm.is_some() != matches!(self.x_act, XAct::AddRmsNorm { .. }) {
            let expected = if args.add_norm.is_some() {
                "no add_norm (the plan's x_act is not AddRmsNorm)"
            } else {
                "add_norm (residual, residual_out, norm_w: the plan's x_act is AddRmsNorm)"
            };
            return Err(Error::Shape { tensor: "add_norm", expected: expected.into(), actual: vec![] });
        }
        args.w.expect("w", "[N, K]", DType::BF16, &[n, k])?;
        match self.y_act {
            YAct::None | YAct::RopeAppend(_) | YAct::ResidualRms => {
                args.y.expect("y", "[M, N]", self.out_dtype, &[m, n])?
            }
            YAct::SiluMul { .. } => {
                args.y.expect("y", "[M, N/2] (SwiGLU of the gate/up pairs)", self.out_dtype, &[m, n / 2])?
            }
        }
        if m > self.max_rows {
            return Err(Error::Capacity { what: "M (rows of x)", got: m, capacity: self.max_rows });
        }
        if args.bias.is_some() != self.bias.is_some() {
            let expected = match self.bias {
                Some(d) => format!("[N] = [{n}] {d} (the plan has a bias)"),
                None => "no tensor (the plan has no bias)".into(),
            };
            let actual = args.bias.as_ref().map(|b| b.shape().to_vec()).unwrap_or_default();
            return Err(Error::Shape { tensor: "bias", expected, actual });
        }
        let mut p = Bf16GemvParams {
            w: args.w.ptr(),
            x: args.x.ptr(),
            y: args.y.ptr(),
            ldw: args.w.row_stride("w")? as i64,
            ldx: args.x.row_stride("x")? as i64,
            ldy: args.y.row_stride("y")? as i64,
            n: n as i32,
            k: k as i32,
            m: m as i32,
            ..Bf16GemvParams::default()
        };
        if let (Some(b), Some(dtype)) = (&args.bias, self.bias) {
            b.expect("bias", "[N]", dtype, &[n])?;
            if n > 1 && b.strides() != [1] {
                let reason = "bias must be contiguous".into();
                return Err(Error::Stride { tensor: "bias", strides: b.strides().to_vec(), reason });
            }
            b.require_aligned("bias", dtype.size_bytes())?;
            p.bias = b.ptr();
            p.flags = if dtype == DType::F32 { params::FLAG_BIAS_F32 } else { 0 };
        }
        if let YAct::SiluMul { .. } = self.y_act {
            p.flags |= params::FLAG_Y_SILU;
            p.y_limit = self.y_act.kernel_limit();
        }
        if args.rope.is_some() != matches!(self.y_act, YAct::RopeAppend(_)) {
            let expected = if args.rope.is_some() {
                "no rope (the plan's y_act is not RopeAppend)"
            } else {
                "rope (positions, seq_lens, page_table, caches, error: the plan's y_act is RopeAppend)"
            };
            return Err(Error::Shape { tensor: "rope", expected: expected.into(), actual: vec![] });
        }
        let rms_wanted = match (self.x_act, self.y_act) {
            (XAct::RmsScale { .. }, _) => Some("rms Scale { sum_sq } (the plan's x_act is RmsScale)"),
            (XAct::AddRmsScale { .. }, _) => {
                Some("rms Add { residual, residual_out } (the plan's x_act is AddRmsScale)")
            }
            (_, YAct::ResidualRms) => Some("rms Residual { residual, sum_sq } (the plan's y_act is ResidualRms)"),
            _ => None,
        };
        let rms_given = match &args.rms {
            Some(RmsArgs::Scale { .. }) => Some(matches!(self.x_act, XAct::RmsScale { .. })),
            Some(RmsArgs::Add { .. }) => Some(matches!(self.x_act, XAct::AddRmsScale { .. })),
            Some(RmsArgs::Residual { .. }) => Some(matches!(self.y_act, YAct::ResidualRms)),
            None => None,
        };
        if rms_given != rms_wanted.map(|_| true) {
            let expected = rms_wanted
                .unwrap_or("no rms (the plan's x_act is not RmsScale or AddRmsScale, its y_act not ResidualRms)");
            return Err(Error::Shape { tensor: "rms", expected: expected.into(), actual: vec![] });
        }
        // Aligned variants move 16-byte vectors of x and W rows; every path needs element alignment.
        let (ax, aw) = if self.aligned { (16, 16) } else { (self.x_dtype.size_bytes(), 2) };
        args.x.require_aligned("x", ax)?;
        args.w.require_aligned("w", aw)?;
        args.y.require_aligned("y", self.out_dtype.size_bytes())?;
        // y is written while x, W (and bias) are still being read by other CTAs.
        let y = ("y", args.y.byte_span());
        require_disjoint(y, ("x", args.x.byte_span()))?;
        require_disjoint(y, ("w", args.w.byte_span()))?;
        if let Some(b) = &args.bias {
            require_disjoint(y, ("bias", b.byte_span()))?;
        }
        // A folded add+RMSNorm's tensors: the exact fold's (`add_norm`, with the norm weight) or
        // the scale fold's (`rms: Add`); `kernel_params` checked above that only the plan's kind
        // is given.
        let fold = match (&args.add_norm, &args.rms) {
            (Some(a), _) => Some((&a.residual, &a.residual_out, Some(&a.norm_w))),
            (None, Some(RmsArgs::Add { residual, residual_out })) => Some((residual, residual_out, None)),
            _ => None,
        };
        if let Some((residual, residual_out, norm_w)) = fold {
            residual.expect("residual", "[M, K]", DType::BF16, &[m, k])?;
            residual_out.expect("residual_out", "[M, K]", DType::BF16, &[m, k])?;
            if let Some(nw) = norm_w {
                nw.expect("norm_w", "[K]", DType::BF16, &[k])?;
                if k > 1 && nw.strides() != [1] {
                    let reason = "norm_w must be contiguous".into();
                    return Err(Error::Stride { tensor: "norm_w", strides: nw.strides().to_vec(), reason });
                }
            }
            residual.require_aligned("residual", 16)?;
            residual_out.require_aligned("residual_out", 16)?;
            if let Some(nw) = norm_w {
                nw.require_aligned("norm_w", 16)?;
            }
            residual.row_stride("residual")?;
            residual_out.row_stride("residual_out")?;
            // CTA row block 0 writes residual_out while every CTA reads x, the residual, the
            // norm weight and the weights; y is written while they are read.
            let out = ("residual_out", residual_out.byte_span());
            let norm_w = ("norm_w", norm_w.map_or((0, 0), |nw| nw.byte_span()));
            for other in [
                ("x", args.x.byte_span()),
                ("residual", residual.byte_span()),
                norm_w,
                ("w", args.w.byte_span()),
                ("bias", args.bias.as_ref().map_or((0, 0), |b| b.byte_span())),
                y,
            ] {
                require_disjoint(out, other)?;
            }
            require_disjoint(y, ("residual", residual.byte_span()))?;
            require_disjoint(y, norm_w)?;
        }
        Ok(p)
    }

    /// The rope + KV-append epilogue's parameters; `None` without [`YAct::RopeAppend`]. Checks
    /// the tensors of [`Args::rope`] (shapes, dtypes, contiguity, that the caches, the error word
    /// and y overlap nothing else the call touches); call after [`Query::kernel_params`].
    pub fn rope_params(&self, args: &Args<'_>) -> Result<Option<GemvRopeEpi>> {
        let (YAct::RopeAppend(r), Some(a)) = (self.y_act, &args.rope) else { return Ok(None) };
        let m = args.x.shape().first().copied().unwrap_or(0);
        let cache = [r.num_pages, r.page_size, r.kv_heads, r.head_dim];
        a.positions.expect("positions", "[M]", DType::I32, &[m])?;
        a.seq_lens.expect("seq_lens", "[M]", DType::I32, &[m])?;
        a.page_table.expect("page_table", "[M, max_pages]", DType::I32, &[m, r.max_pages])?;
        a.k_cache.expect("k_cache", "[num_pages, P, Hkv, D]", DType::BF16, &cache)?;
        a.v_cache.expect("v_cache", "[num_pages, P, Hkv, D]", DType::BF16, &cache)?;
        a.error.expect("error", "[1]", DType::I32, &[1])?;
        a.positions.require_contiguous("positions")?;
        a.seq_lens.require_contiguous("seq_lens")?;
        a.k_cache.require_contiguous("k_cache")?;
        a.v_cache.require_contiguous("v_cache")?;
        let pt_stride = if m > 0 { a.page_table.row_stride("page_table")? } else { r.max_pages };
        let table = match (&a.cos_sin, r.inv_freq) {
            (Some(t), None) => {
                t.expect("cos_sin", "[max_position, D] (table mode)", DType::F32, &[r.max_position, r.head_dim])?;
                t.require_contiguous("cos_sin")?;
                Some(t)
            }
            (None, Some(_)) => None,
            (got, _) => {
                let expected = if got.is_some() {
                    "no table (the plan computes cos / sin: inv_freq is set)"
                } else {
                    "[max_position, D] f32 (the plan's inv_freq is None: table mode)"
                };
                let actual = got.as_ref().map(|t| t.shape().to_vec()).unwrap_or_default();
                return Err(Error::Shape { tensor: "cos_sin", expected: expected.into(), actual });
            }
        };
        // (Absent tensors are empty spans: fixed arrays, nothing allocated.)
        let none = (0, 0);
        let an = args.add_norm.as_ref();
        let add = match &args.rms {
            Some(RmsArgs::Add { residual, residual_out }) => Some((residual.byte_span(), residual_out.byte_span())),
            _ => None,
        };
        // Written: both caches, y, the error word and a folded norm's new residual; read:
        // everything else.
        let written = [
            ("k_cache", a.k_cache.byte_span()),
            ("v_cache", a.v_cache.byte_span()),
            ("error", a.error.byte_span()),
            ("y", args.y.byte_span()),
            ("residual_out", an.map_or(none, |n| n.residual_out.byte_span())),
            ("residual_out", add.map_or(none, |a| a.1)),
        ];
        let read = [
            ("x", args.x.byte_span()),
            ("w", args.w.byte_span()),
            ("positions", a.positions.byte_span()),
            ("seq_lens", a.seq_lens.byte_span()),
            ("page_table", a.page_table.byte_span()),
            ("cos_sin", table.map_or(none, |t| t.byte_span())),
            ("bias", args.bias.as_ref().map_or(none, |b| b.byte_span())),
            ("residual", an.map_or(none, |n| n.residual.byte_span())),
            ("norm_w", an.map_or(none, |n| n.norm_w.byte_span())),
            ("residual", add.map_or(none, |a| a.0)),
        ];
        for (i, &w) in written.iter().enumerate() {
            for &o in written[i + 1..].iter().chain(&read) {
                require_disjoint(w, o)?;
            }
        }
        let cos_sin = table.map_or(0, |t| t.ptr());
        let ptrs = [a.positions.ptr(), a.seq_lens.ptr(), a.page_table.ptr(), cos_sin];
        Ok(Some(r.epilogue(ptrs, [a.k_cache.ptr(), a.v_cache.ptr(), a.error.ptr()], pt_stride)))
    }

    /// The split add+RMSNorm's parameters ([`YAct::ResidualRms`], [`XAct::RmsScale`]); `None`
    /// without either. Checks [`Args::rms`]'s tensors (shapes, dtypes, alignment, row
    /// contiguity, that what the call writes overlaps nothing else it touches); call after
    /// [`Query::kernel_params`] accepted `args`.
    pub fn rms_params(&self, args: &Args<'_>) -> Result<Option<GemvRmsEpi>> {
        let m = args.x.shape().first().copied().unwrap_or(0);
        let y = ("y", args.y.byte_span());
        let none = (0, 0);
        let read = [
            ("x", args.x.byte_span()),
            ("w", args.w.byte_span()),
            ("bias", args.bias.as_ref().map_or(none, |b| b.byte_span())),
        ];
        match (&args.rms, self.x_act, self.y_act) {
            (Some(RmsArgs::Residual { residual, sum_sq }), _, YAct::ResidualRms) => {
                let groups = rms_groups(self.n);
                residual.expect("residual", "[M, N]", DType::BF16, &[m, self.n])?;
                sum_sq.expect("sum_sq", "[M, ceil(N / 16)]", DType::F32, &[m, groups])?;
                residual.require_aligned("residual", 2)?;
                sum_sq.require_aligned("sum_sq", 4)?;
                let ldr = if m > 0 { residual.row_stride("residual")? } else { self.n };
                let lds = if m > 0 { sum_sq.row_stride("sum_sq")? } else { groups };
                // Written: y and sum_sq; read: x, W, bias and the residual.
                let s = ("sum_sq", sum_sq.byte_span());
                let r = ("residual", residual.byte_span());
                for w in [y, s] {
                    for &o in read.iter().chain([&r]) {
                        require_disjoint(w, o)?;
                    }
                }
                require_disjoint(y, s)?;
                Ok(Some(GemvRmsEpi {
                    residual: residual.ptr(),
                    sum_sq: sum_sq.ptr(),
                    ldr: ldr as i64,
                    lds: lds as i64,
                    groups: groups as i32,
                    eps: 0.0,
                }))
            }
            (Some(RmsArgs::Scale { sum_sq }), XAct::RmsScale { eps }, _) => {
                let groups = rms_groups(self.k);
                sum_sq.expect("sum_sq", "[M, ceil(K / 16)]", DType::F32, &[m, groups])?;
                sum_sq.require_aligned("sum_sq", 4)?;
                let lds = if m > 0 { sum_sq.row_stride("sum_sq")? } else { groups };
                require_disjoint(y, ("sum_sq", sum_sq.byte_span()))?;
                Ok(Some(GemvRmsEpi {
                    residual: 0,
                    sum_sq: sum_sq.ptr(),
                    ldr: 0,
                    lds: lds as i64,
                    groups: groups as i32,
                    eps,
                }))
            }
            _ => Ok(None),
        }
    }

    /// The add+RMSNorm part of a fused call's parameters (`g` left default: the launch fills
    /// it): [`XAct::AddRmsNorm`]'s from [`Args::add_norm`], [`XAct::AddRmsScale`]'s from
    /// [`RmsArgs::Add`] (`norm_w` 0: W carries the norm weight); `None` without either. Call
    /// after [`Query::kernel_params`] accepted `args`.
    pub fn norm_params(&self, args: &Args<'_>) -> Result<Option<Bf16GemvNormParams>> {
        let (residual, residual_out, norm_w, eps) = match (self.x_act, &args.add_norm, &args.rms) {
            (XAct::AddRmsNorm { eps }, Some(a), _) => (&a.residual, &a.residual_out, a.norm_w.ptr(), eps),
            (XAct::AddRmsScale { eps }, _, Some(RmsArgs::Add { residual, residual_out })) => {
                (residual, residual_out, 0, eps)
            }
            _ => return Ok(None),
        };
        Ok(Some(Bf16GemvNormParams {
            residual: residual.ptr(),
            residual_out: residual_out.ptr(),
            norm_w,
            ldr: residual.row_stride("residual")? as i64,
            ldro: residual_out.row_stride("residual_out")? as i64,
            eps,
            ..Bf16GemvNormParams::default()
        }))
    }

    /// The autotune cache key of this query's plans (`OpPlan::query_key`): selections are
    /// cached per key, so queries with other candidates or other races get other keys.
    pub fn key(&self) -> String {
        let bias = self.bias.map_or("none", DType::name);
        // PDL plans race differently (back-to-back calls), so they keep their own selections;
        // plain plans keep their key unchanged. `pdl=race8`: the race times up to
        // PDL_RACE_CALLS calls (earlier races with fewer calls are not reused).
        let pdl = if self.pdl { " pdl=race8" } else { "" };
        // A fused activation has its own candidates; plain keys stay unchanged. The limit is
        // left out: the same kernels run at the same speed whatever it is.
        let act = match self.x_act {
            XAct::None => "",
            XAct::SiluMul { .. } => " x_act=silu_mul",
            XAct::AddRmsNorm { .. } => " x_act=add_rmsnorm",
            XAct::RmsScale { .. } => " x_act=rms_scale",
            XAct::AddRmsScale { .. } => " x_act=add_rms_scale",
        };
        let yact = match self.y_act {
            YAct::None => "",
            YAct::SiluMul { .. } => " y_act=silu_mul",
            // The shape of the epilogue's work, not its values (same kernels, same speed).
            YAct::RopeAppend(_) => " y_act=rope_append",
            YAct::ResidualRms => " y_act=residual_rms",
        };
        format!(
            "N={} K={} x={} out={} bias={bias} max_rows={} aligned={}{pdl}{act}{yact}",
            self.n, self.k, self.x_dtype, self.out_dtype, self.max_rows, self.aligned
        )
    }

    fn geometry(&self, device: &Device, bucket: &Bucket) -> Geometry {
        Geometry {
            n: self.n,
            k: self.k,
            x_f32: self.x_dtype == DType::F32,
            aligned: self.aligned,
            x: self.x_act.x_load(),
            y_silu: matches!(self.y_act, YAct::SiluMul { .. }),
            y_rope: matches!(self.y_act, YAct::RopeAppend(_)),
            y_res: matches!(self.y_act, YAct::ResidualRms),
            rows_hi: bucket.hi,
            sm_count: device.sm_count(),
            smem_optin: device.smem_optin(),
        }
    }
}

/// A validated query bound to a device; a cheap handle whose prepared state a session fills.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    /// Legal configs per bucket, default first.
    configs: Vec<Vec<Config>>,
    scratch: ScratchLayout,
    slot: PlanSlot,
}

/// Validates `query` and enumerates its configs per bucket. Allocates, compiles and launches
/// nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    let buckets = pow2_buckets(query.max_rows);
    let configs: Vec<Vec<Config>> = buckets.iter().map(|b| enumerate(&query.geometry(device, b))).collect();
    if configs.iter().any(Vec::is_empty) {
        let reason = format!("no config fits {} bytes of shared memory per CTA", device.smem_optin());
        return Err(Error::Unsupported { op: OP, device: device.name().to_string(), reason });
    }
    // Scratch for whichever config a session selects: the largest of every candidate.
    let (mut partials, mut counters) = (0, 0);
    for (b, cs) in buckets.iter().zip(&configs) {
        for c in cs {
            let (p, n) = c.scratch_bytes(query.n, query.k, b.hi, device.sm_count());
            (partials, counters) = (partials.max(p), counters.max(n));
        }
    }
    let mut scratch = ScratchLayout::new();
    if partials > 0 {
        // f32 [ksplit, m_pad, n_pad]: one partial tile per (row block, split); `tma`: two
        // [tokens, rows per CTA] slots per CTA.
        scratch.add("partials", partials);
        // [row blocks] (`tma`: [row blocks, consumer warps]) 8-byte tagged arrival counters
        // of the merge; any initial bits (the kernel keys arrivals by its launch's grid id).
        scratch.add("counters", counters);
    }
    let slot = PlanSlot::default();
    Ok(Plan { query: query.clone(), device: device.clone(), buckets, configs, scratch, slot })
}

impl Plan {
    pub fn query(&self) -> &Query {
        &self.query
    }
    /// Legal configs of bucket `bucket`, default first.
    pub fn configs(&self, bucket: usize) -> &[Config] {
        self.configs.get(bucket).map_or(&[], Vec::as_slice)
    }
    /// The scratch every call needs: `partials` (f32 split-K partial tiles) and `counters`
    /// (8-byte tagged arrival counters, no zeroing needed), or nothing when no candidate
    /// splits K.
    pub fn scratch_layout(&self) -> ScratchLayout {
        self.scratch.clone()
    }
}

/// The tensors of one call. Shapes and dtypes as in the module docs.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[M, K]`, bf16 or f32 (`Query::x_dtype`); `[M, 2K]` bf16 = `[gate | up]` with
    /// [`XAct::SiluMul`].
    pub x: TensorRef<'a>,
    /// `[N, K]` bf16.
    pub w: TensorRef<'a>,
    /// `[N]` contiguous, `Some` exactly when the query has a bias.
    pub bias: Option<TensorRef<'a>>,
    /// `[M, N]`, the output.
    pub y: TensorMut<'a>,
    /// `Some` exactly when the query's `x_act` is [`XAct::AddRmsNorm`].
    pub add_norm: Option<AddNorm<'a>>,
    /// `Some` exactly when the query's `y_act` is [`YAct::RopeAppend`].
    pub rope: Option<RopeArgs<'a>>,
    /// [`RmsArgs::Residual`] exactly when the query's `y_act` is [`YAct::ResidualRms`],
    /// [`RmsArgs::Scale`] exactly when its `x_act` is [`XAct::RmsScale`], [`RmsArgs::Add`]
    /// exactly when it is [`XAct::AddRmsScale`].
    pub rms: Option<RmsArgs<'a>>,
}

/// The tensors of a split add+RMSNorm ([`YAct::ResidualRms`] on one GEMV, [`XAct::RmsScale`] on
/// the next).
#[derive(Debug)]
pub enum RmsArgs<'a> {
    /// [`YAct::ResidualRms`]: `residual` `[M, N]` bf16 (rows contiguous) is added to y; `sum_sq`
    /// `[M, ⌈N/16⌉]` f32 (rows contiguous) receives the 16-row sums of squares. Neither may
    /// overlap y, x, W or the bias.
    Residual { residual: TensorRef<'a>, sum_sq: TensorMut<'a> },
    /// [`XAct::RmsScale`]: `sum_sq` `[M, ⌈K/16⌉]` f32 (rows contiguous), what the GEMV before
    /// wrote (it may not overlap y).
    Scale { sum_sq: TensorRef<'a> },
    /// [`XAct::AddRmsScale`]: `residual` `[M, K]` bf16 (16-byte aligned rows) is added to x;
    /// `residual_out` `[M, K]` bf16 (16-byte aligned rows) receives `bf16(x + residual)`. It
    /// may not overlap x, the residual, W or y: every CTA reads those while one writes it.
    Add { residual: TensorRef<'a>, residual_out: TensorMut<'a> },
}

/// The tensors of [`YAct::RopeAppend`] (a decode batch of M requests, one new token each).
#[derive(Debug)]
pub struct RopeArgs<'a> {
    /// `[M]` i32 contiguous: each token's rope position (untrusted: checked in the kernel).
    pub positions: TensorRef<'a>,
    /// `[M]` i32 contiguous: each request's context length including its new token (untrusted).
    pub seq_lens: TensorRef<'a>,
    /// `[M, max_pages]` i32, rows contiguous: page ids (untrusted).
    pub page_table: TensorRef<'a>,
    /// `[max_position, D]` f32 contiguous (`attention.rope`'s `Plan::cos_sin_table`), exactly in
    /// table mode (`RopeAppend::inv_freq` `None`).
    pub cos_sin: Option<TensorRef<'a>>,
    /// `[num_pages, P, Hkv, D]` bf16 contiguous: the new keys' slots are written.
    pub k_cache: TensorMut<'a>,
    /// `[num_pages, P, Hkv, D]` bf16 contiguous: the new values' slots are written.
    pub v_cache: TensorMut<'a>,
    /// `[1]` i32: fault bits are ORed in (`attention.kv_append`'s `FAULT_*`).
    pub error: TensorMut<'a>,
}

/// The add+RMSNorm tensors of a fused call ([`XAct::AddRmsNorm`]), all bf16, 16-byte aligned.
#[derive(Debug)]
pub struct AddNorm<'a> {
    /// `[M, K]`, the residual stream before this sublayer's output x is added.
    pub residual: TensorRef<'a>,
    /// `[M, K]`, receives `bf16(x + residual)` (the residual `norm.rmsnorm` would write back in
    /// place). Must not overlap x, the residual, W, the norm weight, the bias or y: every CTA
    /// reads those while one CTA writes this.
    pub residual_out: TensorMut<'a>,
    /// `[K]` contiguous, the RMSNorm weight.
    pub norm_w: TensorRef<'a>,
}

/// Computes `args.y` on `stream`. Every check happens before any launch; no allocation, no
/// synchronization. `M = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let mut params = plan.query.kernel_params(&args)?;
    let norm = plan.query.norm_params(&args)?;
    let rope = plan.query.rope_params(&args)?;
    let rms = plan.query.rms_params(&args)?;
    let bound = plan.scratch.bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.m == 0 {
        return Ok(());
    }
    let m = params.m as usize;
    let capacity = Error::Capacity { what: "M (rows of x)", got: m, capacity: plan.query.max_rows };
    let bucket = bucket_of(&plan.buckets, m).ok_or(capacity)?;
    let selected = resolve(plan, bucket, stream)?;
    params.partials = bound.ptr("partials");
    params.counters = bound.ptr("counters");
    let epi = dispatch::Epilogues { norm: norm.as_ref(), rope: rope.as_ref(), rms: rms.as_ref() };
    dispatch::launch(plan, bucket, &selected, &mut params, epi, stream)
}

/// The plans `cargo xtask prepare` tunes by default: the issue's decode shapes (BF16 out:
/// (4096, 7168), (7168, 4096), (18432, 7168), (1024, 4096), the 129280×7168 LM head; FP32 out:
/// the 384×7168 router), bf16 x, no bias, capacity 16 rows.
pub fn default_profile_plans(device: &Arc<Device>) -> Result<Vec<Box<dyn b12x_core::OpPlan>>> {
    let bf16 = [(4096, 7168), (7168, 4096), (18432, 7168), (1024, 4096), (129280, 7168)];
    let shapes = bf16.iter().map(|&(n, k)| (n, k, DType::BF16)).chain([(384, 7168, DType::F32)]);
    let mut out: Vec<Box<dyn b12x_core::OpPlan>> = Vec::new();
    for (n, k, out_dtype) in shapes {
        let q = Query {
            n,
            k,
            x_dtype: DType::BF16,
            out_dtype,
            bias: None,
            max_rows: 16,
            aligned: true,
            pdl: false,
            x_act: XAct::None,
            y_act: YAct::None,
        };
        out.push(Box::new(plan(&q, device)?));
    }
    Ok(out)
}
