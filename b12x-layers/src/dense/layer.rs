//! Every op's plan for one configuration, and the step's ops on a stream.

use super::state::SideStream;
use super::{Config, DeviceLinear, DeviceWeights, HostWeights, State, WeightFormat, LINEARS};
use b12x_attention::paging::ErrorWord;
use b12x_attention::{kv_append, paged, rope, rope_kv_append, rope_paged};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::{DType, Device, Error, OpPlan, Result, Scratch, TensorMut, TensorRef};
use b12x_gemm::bf16_gemv;
use b12x_gemm::blockscaled::gemv as bsgemv;
use b12x_gemm::blockscaled::gemv::XFormat;
use b12x_gemm::blockscaled::pack;
use b12x_gemm::l2_warm;
use b12x_norm::{rmsnorm, silu_and_mul};
use b12x_quant::block::Fp8ScaleKind;
use std::sync::Arc;

/// What a [`Layer`] is planned for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Largest B (requests, one new token each).
    pub max_batch: usize,
    /// Page-table entries per request: contexts up to `max_pages · P`.
    pub max_pages: usize,
    /// Pages in the cache.
    pub num_pages: usize,
}

// Four per layer, made once: the size difference does not matter.
#[allow(clippy::large_enum_variant)]
enum LinearPlan {
    Bf16(bf16_gemv::Plan),
    Packed(bsgemv::Plan),
}

impl LinearPlan {
    fn op_plan(&self) -> &dyn OpPlan {
        match self {
            LinearPlan::Bf16(p) => p,
            LinearPlan::Packed(p) => p,
        }
    }
    fn scratch_bytes(&self) -> usize {
        match self {
            LinearPlan::Bf16(p) => p.scratch_layout().total_bytes(),
            LinearPlan::Packed(p) => p.scratch_layout().total_bytes(),
        }
    }
}

/// The nine ops of a step, in order (rope and the KV append are one launch,
/// `attention.rope_kv_append`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    AddNorm1,
    QkvProj,
    RopeKvAppend,
    Attention,
    OProj,
    AddNorm2,
    GateUpProj,
    SiluAndMul,
    DownProj,
}

/// The down projection's index in [`Config::linear_shapes`] (the last linear): with
/// [`LayerOptions::fuse_silu`] it reads `[gate | up]`.
const DOWN: usize = 3;
/// The gate/up projection's index: with [`LayerOptions::gate_up_silu`] it stores the activation.
const GATE_UP: usize = 2;

/// [`Op::ALL`] without [`Op::SiluAndMul`] ([`LayerOptions::fuse_silu`], [`LayerOptions::gate_up_silu`]).
const FUSED_SILU_OPS: [Op; 8] =
    [Op::AddNorm1, Op::QkvProj, Op::RopeKvAppend, Op::Attention, Op::OProj, Op::AddNorm2, Op::GateUpProj, Op::DownProj];

impl Op {
    pub const ALL: [Op; 9] = [
        Op::AddNorm1,
        Op::QkvProj,
        Op::RopeKvAppend,
        Op::Attention,
        Op::OProj,
        Op::AddNorm2,
        Op::GateUpProj,
        Op::SiluAndMul,
        Op::DownProj,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Op::AddNorm1 => "add_rmsnorm_1",
            Op::QkvProj => "qkv_proj",
            Op::RopeKvAppend => "rope_kv_append",
            Op::Attention => "attention",
            Op::OProj => "o_proj",
            Op::AddNorm2 => "add_rmsnorm_2",
            Op::GateUpProj => "gate_up_proj",
            Op::SiluAndMul => "silu_and_mul",
            Op::DownProj => "down_proj",
        }
    }
}

/// How the layer's ops launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayerOptions {
    /// Programmatic dependent launch for the ops that offer it (`gemm.bf16_gemv`'s `pdl`,
    /// `attention.paged`'s `PlanOptions::pdl`): each starts while the kernel before it finishes,
    /// reading only what that kernel does not write (weights; lengths and page tables) before
    /// its wait. Safe in this step: no op writes a weight, and only the host writes lengths and
    /// page tables (between steps). Preparing a PDL `bf16_gemv` plan races chains of calls on
    /// copies of its weight (up to eight, at most 1 GiB). The step's small ops
    /// (`norm.rmsnorm`, `attention.rope_kv_append`, `activation.silu_and_mul`)
    /// launch with PDL too (`Plan::with_pdl`): each waits for the kernel before it, then lets
    /// the next one launch, so every edge of the step's graph is programmatic and a GEMV
    /// streams its weight while the small op before it runs.
    pub pdl: bool,
    /// `attention.paged`'s split cap (`PlanOptions::max_splits`; `None`: the op's default,
    /// e.g. 8 in a cluster at B = 1, 2 in pairs at B = 8 for this layer's heads).
    pub attention_splits: Option<usize>,
    /// `attention.paged`'s ring depth (`PlanOptions::stages`; `None`: the op's default), e.g.
    /// `Some(paged::DEEP_STAGES)` for the 6-stage decode rings.
    pub attention_stages: Option<usize>,
    /// `attention.paged`'s warps per CTA (`PlanOptions::warps`; `None`: the op's default), e.g.
    /// `Some(paged::WIDE_WARPS)` for the 8-warp decode tiles.
    pub attention_warps: Option<u32>,
    /// Fold `activation.silu_and_mul` into the down projection's x load
    /// (`bf16_gemv::XAct::SiluMul`: the GEMV reads `[gate | up]` and forms `silu(g) · u` as the
    /// op would, the same bf16 values): the step launches eight ops ([`Layer::ops`]) and never
    /// writes the activation. BF16 weights and `max_batch ≤ 8` only (the fused GEMV configs);
    /// otherwise [`Layer::with_options`] returns `Error::InvalidQuery`. The step's `y` may differ
    /// from the unfused step's in the last bits: the down GEMV's session may pick another config
    /// (another summation order) among the fused candidates. Measured slower on the H200 at
    /// B = 1 (step 136.9 against 116.4 µs: the down GEMV's row blocks each recompute the
    /// activation), hence off by default.
    pub fuse_silu: bool,
    /// Fold `activation.silu_and_mul` into the gate/up projection's epilogue
    /// (`bf16_gemv::YAct::SiluMul`): the GEMV's weight rows are interleaved in 16-row (8 gate,
    /// 8 up) groups ([`Layer::upload_weights`] lays them out), each thread finishing a gate row
    /// and its up row stores `silu(g) · u`, the same bf16 values the op would write, and the
    /// step launches eight ops ([`Layer::ops`]). Nothing is recomputed. BF16 weights only, not
    /// with `fuse_silu`; otherwise [`Layer::with_options`] returns `Error::InvalidQuery`. The
    /// gate/up GEMV's session may pick another config than the unfused layer's (another
    /// summation order), so `y` may differ in the last bits. Measured on the H200 with PDL
    /// (`bench-results/2026-12-04-h200-g/`, calls 3–4): B = 1 × 4k step 112.51 against
    /// 115.22 µs, B = 8 × 4k 138.80 against 141.58, B = 64 × 2k 375.12 against 385.07.
    pub gate_up_silu: bool,
    /// `attention.rope_kv_append`'s warm part (`rope_kv_append::Plan::with_warm_cache`; `None`:
    /// none): with `pdl`, CTAs that read the batch's cached K and V through L2 while the QKV
    /// projection streams its weight, so that the attention reads its keys from L2. Measured
    /// slower on the H200 at B = 1 × 4k (step 116.4 against 114.3 µs,
    /// `bench-results/2026-12-04-h200-h/call1`: the attention gained 3 µs, the part ran after the
    /// projection instead of beside it), hence off by default.
    pub warm_kv: Option<rope_kv_append::WarmCache>,
    /// With `pdl`, the step's `norm.rmsnorm` and `attention.rope_kv_append` calls release the
    /// next kernel at entry (`Plan::with_early_release`) instead of after their waits, so that
    /// the QKV projection, the attention and the gate/up projection take their SMs and start
    /// their pre-wait streams (weights; lengths, page tables and old keys) while the big kernel
    /// before the small op drains. Safe in this step for the same reason as `pdl`: no kernel of
    /// it writes what those pre-wait parts read. Same results either way. Measured on the H200
    /// (`bench-results/2026-12-05-h200-d/call3`, BF16, gate/up epilogue, same job): B = 8 × 4k
    /// step 136.43 against 138.62 µs, B = 64 × 2k 362.77 against 371.57, but B = 1 × 4k 114.54–
    /// 114.93 against 112.77–112.94 (`step_x4` 113.6 against 110.2): there the next kernel's
    /// early weight and key reads compete with the tail of the kernel before the small op, which
    /// is on the step's critical path. Hence off by default; a per-batch choice.
    pub early_release: bool,
    /// Read the last rows of the O projection's weight through L2 while the attention runs
    /// (`gemm.l2_warm` on a second stream of the State, forked right before the attention's
    /// launch and joined at the end of the step; `None`: no second stream). At small batches
    /// the attention is latency bound (B = 1 × 4k: 16.8 MB in ~10 µs on 64 SMs) and leaves
    /// most of the HBM bandwidth idle, while the projection's last CTAs only start reading
    /// their rows once it ends (its first CTAs load their first stages during it, PDL). Same
    /// results either way (the op reads only). BF16 weights only; otherwise
    /// [`Layer::with_options`] returns `Error::InvalidQuery`. Off by default: the mechanism was
    /// measured only as a bench prototype on an H100 (session 48,
    /// `bench-results/2026-12-05-h200-e/` calls 1–3: B = 1 × 4k step 149.0–149.6 against
    /// 151.9–152.5 µs with [`WarmWeight::DEFAULT`]), but this implementation (the `gemm.l2_warm`
    /// op, the state's second stream), whose trials pass on an H100, did not gain there in the
    /// same job as the plain step (154.4–154.8 against 153.9–154.5 µs, every fraction and grid
    /// tried; `bench-results/2026-12-05-h200-e/` call 5). Not measured on the H200.
    pub warm_o_proj: Option<WarmWeight>,
    /// Fold add+RMSNorms into the projections after them (`bf16_gemv::XAct::AddRmsNorm`):
    /// [`FoldNorms::First`] folds norm 1 into the QKV projection, [`FoldNorms::Both`] also norm 2
    /// into the gate/up projection. A folded norm's GEMV reads the sublayer output and the
    /// residual, forms the norm's output as it loads x and writes the new residual to the other
    /// residual buffer (`State::residual_mid`): QKV `residual → residual_mid`, gate/up
    /// `residual_mid → residual`. So the step's residual output is in `residual` with `Both`
    /// (as unfolded) and in `residual_mid` with `First` (norm 2 then updates that buffer in
    /// place; [`State::outputs`] reads the right one). Each folded norm is one launch less and
    /// never writes `h`. Every CTA of a folded GEMV recomputes its tokens' rrms from their whole
    /// rows after its PDL wait, so the residual is bit for bit the unfolded one and the
    /// normalized input within one bf16 ULP of it (another summation order). BF16 weights and
    /// `max_batch ≤ 8` only (the fused GEMV configs; no TMA config); otherwise
    /// [`Layer::with_options`] returns `Error::InvalidQuery`. Measured on an H100 only
    /// (`bench-results/2026-12-05-h200-f/`): `Both` validated (its trials pass, memcheck clean)
    /// and not faster (B = 1 step +0.4 / +0.6 µs: folding norm 1 took 1.2–1.4 µs off the first
    /// five ops, folding norm 2 cost 2.2–3.1 in the gate/up projection); `First`'s trials pass
    /// there too (B = 1 and 8, `bench-results/2026-12-06-h200-a/call1`), its step not measured
    /// alone (with `fuse_rope_attention`: 154.8 against 153.7–154.3 µs). Off by default.
    /// [`FoldNorms::FirstScale`] folds norm 1 as an rrms scale instead (no prologue; the QKV
    /// weight folded with norm 1's weight at upload): its trials pass on an H100 (B = 1 and 8,
    /// alone and with `rope_in_qkv` + `norm2_in_o_proj`: 1 − cos y 2.7e-6–4.7e-6 and
    /// 1.4e-5–1.6e-5; `bench-results/2026-12-06-h200-d/call2`); there, with `rope_in_qkv` and
    /// `norm2_in_o_proj` (five launches), four layers in one graph take 145.7–145.9 µs per layer
    /// against 146.0–147.4 with norm 1 launched, but the single-layer graph 154.4–154.6 against
    /// 147.9–148.1 (its gate/up stage is ~5 µs longer when no small kernel starts the graph;
    /// `First` shows the same on the H200). Off by default.
    pub fold_norms: FoldNorms,
    /// Run rope, the KV append and the attention as one launch (`attention.rope_paged`: the
    /// attention kernel rotates its Q tile in shared memory and its CTA holding the new
    /// position stores the rotated K and V before reading them back): the step has no
    /// `rope_kv_append` op ([`Layer::ops`]) and the QKV buffer's q columns stay unrotated. The
    /// attention's output and the caches are bit for bit the unfused step's (the same attention
    /// variant and options). Not with `warm_kv` (its part lives in the op this removes):
    /// [`Layer::with_options`] returns `Error::InvalidQuery`. Validated on an H100 (the layer's
    /// trials at B = 1, 8, 64, with `FoldNorms::First`, NVFP4; `bench-results/2026-12-06-h200-a/`)
    /// but not faster there at B = 1 × 4k (PDL + gate/up epilogue): step 156.7 against
    /// 153.9–154.1 µs (call 2; 154.5 against 153.7–154.3 with call 1's kernel). Not measured on
    /// the H200 or at B = 8, where the op alone gains 3–11% (`attention.rope_paged`'s docs).
    /// Hence off by default. With `early_release` the fused attention is not released at
    /// entry (that flag acts on the removed op): speed only.
    pub fuse_rope_attention: bool,
    /// Run rope and the KV append in the QKV projection's epilogue (`bf16_gemv::YAct::RopeAppend`:
    /// the QKV weight's rows uploaded in the epilogue's pair order, `bf16_gemv::rope_row_order`,
    /// by [`Layer::upload_weights`]; the thread that finishes a rotary pair's two rows rotates
    /// the q and k heads and stores the new k and v into the cache): the step has no
    /// `rope_kv_append` op ([`Layer::ops`]), so the attention starts right behind the projection.
    /// The QKV buffer, the caches and therefore every output are bit for bit the unfused step's
    /// when the QKV GEMV's session picks the same config (its candidates are the `_rope` ring
    /// configs, so it may pick another: then the last bits of y may differ). BF16 weights,
    /// `max_batch ≤ 8`, not with `fuse_rope_attention` or `warm_kv` (both act on the removed
    /// op); otherwise [`Layer::with_options`] returns `Error::InvalidQuery`. Combines with
    /// `FoldNorms::First` (the `_addnorm_rope` configs). Validated on an H100 (the layer's
    /// trials at B = 1 and 8, with and without `First`; the epilogue's own suite bitwise against
    /// the GEMV + `rope_kv_append`, memcheck / racecheck clean; `bench-results/2026-12-06-h200-b/`)
    /// and the fastest B = 1 × 4k step there (PDL + gate/up epilogue): 146.3–149.6 µs against
    /// 149.9–151.6 without it (`step_x4` 144.0–147.9 against 147.7–148.6); with `First` too it
    /// is not faster (the fused QKV configs cost what the launch saves). Not measured on the
    /// H200, hence off by default.
    pub rope_in_qkv: bool,
    /// Split norm 2 (the add+RMSNorm before the MLP) between the projections around it: the O
    /// projection's epilogue adds the residual and stores the new residual `r` to the other
    /// residual buffer (`bf16_gemv::YAct::ResidualRms`: `residual → residual_mid`, or
    /// `residual_mid → residual` after `FoldNorms::First`) with each 16-row group's Σ r² into
    /// the state's `sum_sq`, and the gate/up projection reads `r` itself and scales its sums by
    /// each token's rrms from those partial sums (`bf16_gemv::XAct::RmsScale`), its weight's
    /// columns multiplied by the norm weight at upload ([`Layer::upload_weights`]:
    /// `bf16_gemv::fold_norm_weight`). So the step has no [`Op::AddNorm2`] and no CTA recomputes
    /// the norm. The residual is bit for bit the unfused one; the MLP's input differs from
    /// `norm.rmsnorm`'s by where it rounds (`W · w` rounded once at upload instead of
    /// `h = bf16(r · rrms · w)` per element) and the order of the sum of squares, within the
    /// layer's cosine bound. BF16 weights, `max_batch ≤ 8`, not with `FoldNorms::Both` (which
    /// folds norm 2 into the gate/up projection whole); otherwise [`Layer::with_options`]
    /// returns `Error::InvalidQuery`. Combines with `rope_in_qkv`, `gate_up_silu` and
    /// `FoldNorms::First`. Validated on an H100 (the layer's trials at B = 1 and 8, 1 − cos y
    /// 1.4e-5–1.5e-5 against 2.4e-6–4.1e-6 without the split, bound 1e-4; each GEMV half against
    /// its plain twin, memcheck / racecheck clean; `bench-results/2026-12-06-h200-c/`), where the
    /// B = 1 × 4k step (PDL + gate/up epilogue) is 146.2–146.5 µs with `rope_in_qkv` against
    /// 148.5–148.9 without the split in the same job (`step_x4` 144.0 against 145.0–145.3), and
    /// 146.7–147.0 with the split alone against 149.9; at B = 8 0.4–0.9 µs faster. On the H200
    /// (the trials pass there too) the B = 1 × 4k step is 110.2–110.8 µs (78.1–78.5% of the read
    /// ceiling) with `rope_in_qkv` and 110.6–110.9 alone, against 113.7–114.6 without it, and four
    /// layers in one graph 107.5–107.9 µs per layer (80.2–80.6%) against 111.3–111.4 — the
    /// fastest configuration measured. Off by default because it serves BF16 at `max_batch ≤ 8`
    /// only (a default must plan every format and batch).
    pub norm2_in_o_proj: bool,
}

impl LayerOptions {
    /// The fastest measured options for `format` weights and batches of at most `max_batch`
    /// requests, all validated together: [`pdl`](LayerOptions::pdl) everywhere; for BF16
    /// weights also [`gate_up_silu`](LayerOptions::gate_up_silu), and at `max_batch ≤ 8`
    /// [`rope_in_qkv`](LayerOptions::rope_in_qkv) and
    /// [`norm2_in_o_proj`](LayerOptions::norm2_in_o_proj) (six launches per step). Measured on
    /// the Qwen3-8B step at 4k context (`bench-results/2026-12-06-h200-c/`): at B = 1 on the
    /// H200 110.2–110.8 µs (78.1–78.5% of the read ceiling; four layers per graph 107.5–107.9 µs
    /// per layer, 80.2–80.6%) against 113.7–114.6 with `pdl` + `gate_up_silu` alone; at B = 8
    /// on an H100 185.1–185.7 against 189.6–189.8. Norm 1 stays a launch: folding it
    /// ([`FoldNorms::First`], [`FoldNorms::FirstScale`]) made the single-layer step slower
    /// (`bench-results/2026-12-06-h200-d/`). The default ([`LayerOptions::default`]) keeps
    /// every option off: plain launches, one op per kernel.
    ///
    /// ```
    /// use b12x_layers::dense::{LayerOptions, WeightFormat};
    /// let o = LayerOptions::fast_decode(WeightFormat::Bf16, 1);
    /// assert!(o.pdl && o.gate_up_silu && o.rope_in_qkv && o.norm2_in_o_proj);
    /// assert!(o.check(WeightFormat::Bf16, 1).is_ok());
    /// let o = LayerOptions::fast_decode(WeightFormat::Nvfp4, 64);
    /// assert!(o.pdl && !o.gate_up_silu);
    /// ```
    pub fn fast_decode(format: WeightFormat, max_batch: usize) -> Self {
        let bf16 = format == WeightFormat::Bf16;
        let small = bf16 && max_batch <= 8;
        LayerOptions {
            pdl: true,
            gate_up_silu: bf16,
            rope_in_qkv: small,
            norm2_in_o_proj: small,
            ..LayerOptions::default()
        }
    }

    /// Checks the options against the weight format and the batch capacity (what
    /// [`Layer::with_options`] checks first): each option that needs BF16 weights, at most 8
    /// rows or the absence of another option names itself in `Error::InvalidQuery`'s `field`.
    pub fn check(&self, format: WeightFormat, max_batch: usize) -> Result<()> {
        let (options, b) = (self, max_batch);
        if options.gate_up_silu && (format != WeightFormat::Bf16 || options.fuse_silu) {
            return Err(Error::InvalidQuery {
                op: "b12x-layers",
                field: "gate_up_silu",
                reason: format!(
                    "folds silu_and_mul into the BF16 gate/up projection, without fuse_silu; got {} weights, fuse_silu {}",
                    format.name(),
                    options.fuse_silu
                ),
            });
        }
        if let Some(w) = options.warm_o_proj {
            if format != WeightFormat::Bf16 || !(1..=100).contains(&w.percent) {
                return Err(Error::InvalidQuery {
                    op: "b12x-layers",
                    field: "warm_o_proj",
                    reason: format!(
                        "warms part of the BF16 O projection's weight: percent in 1..=100; got {} weights, percent {}",
                        format.name(),
                        w.percent
                    ),
                });
            }
        }
        let (fold1, fold2) = (options.fold_norms != FoldNorms::None, options.fold_norms == FoldNorms::Both);
        if fold1 && (format != WeightFormat::Bf16 || b > 8) {
            return Err(Error::InvalidQuery {
                op: "b12x-layers",
                field: "fold_norms",
                reason: format!(
                    "folds add+RMSNorm into the BF16 QKV and gate/up GEMVs (at most 8 rows); got {} weights, max_batch {b}",
                    format.name()
                ),
            });
        }
        if options.rope_in_qkv
            && (format != WeightFormat::Bf16 || b > 8 || options.fuse_rope_attention || options.warm_kv.is_some())
        {
            return Err(Error::InvalidQuery {
                op: "b12x-layers",
                field: "rope_in_qkv",
                reason: format!(
                    "folds rope_kv_append into the BF16 QKV GEMV (at most 8 rows), without fuse_rope_attention or \
                     warm_kv; got {} weights, max_batch {b}, fuse_rope_attention {}, warm_kv {}",
                    format.name(),
                    options.fuse_rope_attention,
                    options.warm_kv.is_some()
                ),
            });
        }
        if options.norm2_in_o_proj && (format != WeightFormat::Bf16 || b > 8 || fold2) {
            return Err(Error::InvalidQuery {
                op: "b12x-layers",
                field: "norm2_in_o_proj",
                reason: format!(
                    "splits norm 2 between the BF16 O and gate/up GEMVs (at most 8 rows), without FoldNorms::Both; \
                     got {} weights, max_batch {b}, fold_norms {:?}",
                    format.name(),
                    options.fold_norms
                ),
            });
        }
        if options.fuse_rope_attention && options.warm_kv.is_some() {
            return Err(Error::InvalidQuery {
                op: "b12x-layers",
                field: "fuse_rope_attention",
                reason: "removes attention.rope_kv_append, whose warm part warm_kv is; set one of them".into(),
            });
        }
        if options.fuse_silu && format != WeightFormat::Bf16 {
            return Err(Error::InvalidQuery {
                op: "b12x-layers",
                field: "fuse_silu",
                reason: format!(
                    "folds silu_and_mul into the BF16 down projection; {} weights have no fused GEMV",
                    format.name()
                ),
            });
        }
        Ok(())
    }
}

/// [`LayerOptions::fold_norms`]: which add+RMSNorms the projections after them fold in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FoldNorms {
    /// Both norms launch `norm.rmsnorm`.
    #[default]
    None,
    /// Norm 1 in the QKV projection; norm 2 launches (in place on `residual_mid`).
    First,
    /// Norm 1 in the QKV projection as a scale (`bf16_gemv::XAct::AddRmsScale`): the QKV
    /// weight's columns pre-multiplied by norm 1's weight at upload
    /// ([`DeviceWeights::qkv_norm_folded`]), the GEMV reads the sublayer output and the residual,
    /// writes the new residual to `residual_mid` (bit for bit norm 1's), sums r² per CTA as it
    /// streams and scales its sums by rrms — no prologue before its first MMA, so nothing
    /// before the projection in the step waits. The QKV input differs from `First`'s by its
    /// rounding points (cosine bound). Otherwise as `First` (buffers, limits).
    FirstScale,
    /// Norm 1 in the QKV projection and norm 2 in the gate/up projection.
    Both,
}

/// [`LayerOptions::warm_o_proj`]: how much of the O projection's weight `gemm.l2_warm` reads
/// beside the attention, and with how many CTAs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarmWeight {
    /// The weight's last `percent` % of rows (1..=100): the rows of the projection's last CTAs,
    /// which launch only as the attention's CTAs leave.
    pub percent: u8,
    /// CTAs of 256 threads of the warm kernel (0: one per SM).
    pub ctas: u32,
}

impl WarmWeight {
    /// The best point of session 48's prototype sweep (an H100, B = 1 × 4k, BF16, PDL + gate/up
    /// epilogue): the last 30% of the rows, one CTA per SM — step −2.5 to −3.1 µs; 10–25% and
    /// 40–50% gained less (0.0 to −2.2 µs), the whole weight lost (+1.2 to +2.6 µs). Not yet
    /// measured on the H200. The warmed lines keep their evict-last status after the projection
    /// has read them (nothing demotes them): a graph of many layers leaves ~10 MB of them per
    /// layer (Qwen3-8B shape) competing for L2 with the later layers' own; `step_x4` (four
    /// layers) is the row that would show it.
    pub const DEFAULT: WarmWeight = WarmWeight { percent: 30, ctas: 0 };

    /// Rows of an `n`-row weight it reads (the last ones).
    pub fn rows(&self, n: usize) -> usize {
        (n * self.percent as usize).div_ceil(100).min(n)
    }
}

/// Every op's plan for one configuration, weight format and capacity.
pub struct Layer {
    pub cfg: Config,
    pub format: WeightFormat,
    pub cap: Capacity,
    pub options: LayerOptions,
    norm: Option<rmsnorm::Plan>,
    linears: Vec<LinearPlan>,
    /// `None` with [`LayerOptions::fuse_rope_attention`].
    rope_append: Option<rope_kv_append::Plan>,
    /// The attention (its scratch sizes the state's either way).
    attn: paged::Plan,
    /// [`LayerOptions::fuse_rope_attention`]'s plan (rope + append + attention).
    rope_attn: Option<rope_paged::Plan>,
    /// `None` when [`LayerOptions::fuse_silu`] folds the activation into the down projection.
    act: Option<silu_and_mul::Plan>,
    /// [`LayerOptions::warm_o_proj`]'s plan.
    warm: Option<l2_warm::Plan>,
}

impl Layer {
    /// Plans every op (allocates, compiles and launches nothing).
    pub fn new(cfg: &Config, format: WeightFormat, cap: Capacity, dev: &Arc<Device>) -> Result<Self> {
        Self::with_options(cfg, format, cap, LayerOptions::default(), dev)
    }

    /// [`Layer::new`] with [`LayerOptions`].
    pub fn with_options(
        cfg: &Config,
        format: WeightFormat,
        cap: Capacity,
        options: LayerOptions,
        dev: &Arc<Device>,
    ) -> Result<Self> {
        let (h, hkv, d, p) = (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.page_size);
        let b = cap.max_batch;
        options.check(format, b)?;
        let (fold1, fold2) = (options.fold_norms != FoldNorms::None, options.fold_norms == FoldNorms::Both);
        let split2 = options.norm2_in_o_proj;
        // No norm launches when both are folded (`Both`, or `First` with norm 2 split).
        let norm = if fold2 || (fold1 && split2) {
            None
        } else {
            Some(
                rmsnorm::plan(
                    &rmsnorm::Query {
                        cols: cfg.hidden,
                        dtype: DType::BF16,
                        max_tokens: b,
                        eps: cfg.eps,
                        residual: true,
                    },
                    dev,
                )?
                .with_pdl(options.pdl)
                .with_early_release(options.early_release),
            )
        };
        let rope_q = rope::Query {
            heads: h,
            kv_heads: hkv,
            head_dim: d,
            rotary_dim: d,
            rotary_offset: 0,
            style: rope::RopeStyle::Neox,
            base: cfg.rope_theta,
            yarn: None,
            dtype: DType::BF16,
            max_tokens: b,
            max_position: cap.max_pages * p,
            cos_sin: rope::CosSin::Computed,
        };
        // `rope_in_qkv`: the QKV GEMV's epilogue (rope's computed cos / sin, its frequencies).
        let qkv_rope = if options.rope_in_qkv {
            let f = rope_q.frequencies();
            let mut inv_freq = [0.0f32; bf16_gemv::ROPE_MAX_PAIRS];
            let pairs = d / 2;
            if pairs > inv_freq.len() {
                return Err(Error::InvalidQuery {
                    op: "b12x-layers",
                    field: "rope_in_qkv",
                    reason: format!("the QKV epilogue serves head_dim <= {}, got {d}", 2 * inv_freq.len()),
                });
            }
            inv_freq[..pairs].copy_from_slice(&f.inv_freq[..pairs]);
            Some(bf16_gemv::RopeAppend {
                heads: h,
                kv_heads: hkv,
                head_dim: d,
                page_size: p,
                num_pages: cap.num_pages,
                max_pages: cap.max_pages,
                max_position: cap.max_pages * p,
                neox: true,
                scale: f.scale,
                inv_freq: Some(inv_freq),
            })
        } else {
            None
        };
        let mut linears = Vec::new();
        for (i, (n, k)) in cfg.linear_shapes().into_iter().enumerate() {
            linears.push(match format {
                WeightFormat::Bf16 => LinearPlan::Bf16(bf16_gemv::plan(
                    &bf16_gemv::Query {
                        n,
                        k,
                        x_dtype: DType::BF16,
                        out_dtype: DType::BF16,
                        bias: None,
                        max_rows: b,
                        aligned: true,
                        pdl: options.pdl,
                        x_act: if options.fuse_silu && i == DOWN {
                            bf16_gemv::XAct::SiluMul { limit: None }
                        } else if fold1 && i == 0 && options.fold_norms == FoldNorms::FirstScale {
                            bf16_gemv::XAct::AddRmsScale { eps: cfg.eps }
                        } else if (fold1 && i == 0) || (fold2 && i == GATE_UP) {
                            bf16_gemv::XAct::AddRmsNorm { eps: cfg.eps }
                        } else if split2 && i == GATE_UP {
                            bf16_gemv::XAct::RmsScale { eps: cfg.eps }
                        } else {
                            bf16_gemv::XAct::None
                        },
                        y_act: if options.gate_up_silu && i == GATE_UP {
                            bf16_gemv::YAct::SiluMul { limit: None }
                        } else if let (Some(r), 0) = (qkv_rope, i) {
                            bf16_gemv::YAct::RopeAppend(r)
                        } else if split2 && i == 1 {
                            bf16_gemv::YAct::ResidualRms
                        } else {
                            bf16_gemv::YAct::None
                        },
                    },
                    dev,
                )?),
                WeightFormat::BlockFp8 | WeightFormat::Nvfp4 => {
                    let weight = if format == WeightFormat::Nvfp4 {
                        pack::WeightFormat::Nvfp4
                    } else {
                        pack::WeightFormat::BlockFp8 { tile: 128, scale: Fp8ScaleKind::F32 }
                    };
                    LinearPlan::Packed(bsgemv::plan(
                        &bsgemv::Query {
                            n,
                            k,
                            weight,
                            x_format: XFormat::Bf16,
                            out_dtype: DType::BF16,
                            bias: None,
                            max_rows: b,
                            x_quant: None,
                        },
                        dev,
                    )?)
                }
            });
        }
        let append_q = kv_append::Query {
            kv_heads: hkv,
            head_dim: d,
            page_size: p,
            dtype: DType::BF16,
            cache_dtype: DType::BF16,
            max_batch: b,
            max_tokens: b,
            max_pages: cap.max_pages,
            num_pages: cap.num_pages,
        };
        let rope_append = if options.fuse_rope_attention || options.rope_in_qkv {
            None
        } else {
            Some(
                rope_kv_append::plan(&rope_kv_append::Query { rope: rope_q.clone(), append: append_q }, dev)?
                    .with_pdl(options.pdl)
                    .with_early_release(options.early_release)
                    .with_warm_cache(options.warm_kv)?,
            )
        };
        let attn_q = paged::Query {
            heads: h,
            kv_heads: hkv,
            head_dim: d,
            page_size: p,
            q_dtype: DType::BF16,
            kv_dtype: DType::BF16,
            scale: cfg.softmax_scale(),
            window_left: -1,
            sinks: false,
            max_batch: b,
            max_tokens: b,
            max_q_len: 1,
            max_pages: cap.max_pages,
            num_pages: cap.num_pages,
        };
        let attn_options = paged::PlanOptions {
            pdl: options.pdl,
            max_splits: options.attention_splits,
            stages: options.attention_stages,
            warps: options.attention_warps,
            ..Default::default()
        };
        let attn = paged::plan_with(&attn_q, dev, attn_options)?;
        let rope_attn = if options.fuse_rope_attention {
            Some(rope_paged::plan_with(&rope_paged::Query { rope: rope_q, attention: attn_q }, dev, attn_options)?)
        } else {
            None
        };
        let act = if options.fuse_silu || options.gate_up_silu {
            None
        } else {
            Some(
                silu_and_mul::plan(
                    &silu_and_mul::Query {
                        intermediate: cfg.intermediate,
                        dtype: DType::BF16,
                        max_tokens: b,
                        limit: None,
                        out: None,
                    },
                    dev,
                )?
                .with_pdl(options.pdl),
            )
        };
        let warm = match options.warm_o_proj {
            Some(w) => {
                let (n, k) = cfg.linear_shapes()[1];
                let q = l2_warm::Query {
                    max_bytes: (w.rows(n) * k * 2).next_multiple_of(16),
                    ctas: if w.ctas == 0 { dev.sm_count() } else { w.ctas },
                    ..l2_warm::Query::beside_attention(16, dev)
                };
                Some(l2_warm::plan(&q, dev)?)
            }
            None => None,
        };
        Ok(Layer { cfg: *cfg, format, cap, options, norm, linears, rope_append, attn, rope_attn, act, warm })
    }

    /// Every plan, for one `PreparationSession::prepare`.
    pub fn plans(&self) -> Vec<&dyn OpPlan> {
        let mut v: Vec<&dyn OpPlan> = Vec::new();
        if let Some(norm) = &self.norm {
            v.push(norm);
        }
        v.extend(self.linears.iter().map(LinearPlan::op_plan));
        match (&self.rope_append, &self.rope_attn) {
            (_, Some(fused)) => v.push(fused),
            (Some(rope_append), None) => v.extend([rope_append as &dyn OpPlan, &self.attn]),
            (None, None) => v.push(&self.attn),
        }
        if let Some(act) = &self.act {
            v.push(act);
        }
        if let Some(warm) = &self.warm {
            v.push(warm);
        }
        v
    }

    /// The layer's weights on the device in the layout its plans read: [`HostWeights::upload`],
    /// with the gate/up weight's rows interleaved (`bf16_gemv::interleave_gate_up`) when
    /// [`LayerOptions::gate_up_silu`] is set ([`DeviceLinear::Bf16GateUp`]), the QKV weight's
    /// rows in the rope epilogue's order with [`LayerOptions::rope_in_qkv`], and the gate/up
    /// weight's columns multiplied by norm 2's weight with [`LayerOptions::norm2_in_o_proj`]
    /// ([`DeviceWeights::gate_up_norm_folded`]).
    pub fn upload_weights(&self, host: &HostWeights, stream: &Arc<CudaStream>) -> Result<DeviceWeights> {
        let c = &self.cfg;
        let rope = self.options.rope_in_qkv.then(|| bf16_gemv::rope_row_order(c.heads, c.kv_heads, c.head_dim, true));
        host.upload_with(
            stream,
            self.options.gate_up_silu.then_some(GATE_UP),
            rope.as_deref(),
            self.options.norm2_in_o_proj.then_some(GATE_UP),
            self.options.fold_norms == FoldNorms::FirstScale,
        )
    }

    /// The ops one step launches, in order: [`Op::ALL`], without [`Op::SiluAndMul`] when
    /// [`LayerOptions::fuse_silu`] folds it into [`Op::DownProj`] or
    /// [`LayerOptions::gate_up_silu`] into [`Op::GateUpProj`], and without [`Op::AddNorm1`] and
    /// [`Op::AddNorm2`] when [`LayerOptions::fold_norms`] folds them into the projections, and
    /// without [`Op::RopeKvAppend`] when [`LayerOptions::fuse_rope_attention`] runs it inside
    /// [`Op::Attention`] or [`LayerOptions::rope_in_qkv`] in [`Op::QkvProj`].
    pub fn ops(&self) -> Vec<Op> {
        let all: &[Op] = if self.act.is_some() { &Op::ALL } else { &FUSED_SILU_OPS };
        all.iter()
            .copied()
            .filter(|&op| !(self.norm_folded(op) || (op == Op::RopeKvAppend && self.rope_append.is_none())))
            .collect()
    }

    /// Whether `op` is an add+RMSNorm that [`LayerOptions::fold_norms`] folds into the next
    /// projection (or [`LayerOptions::norm2_in_o_proj`] splits between the two around it).
    fn norm_folded(&self, op: Op) -> bool {
        match op {
            Op::AddNorm1 => self.options.fold_norms != FoldNorms::None,
            Op::AddNorm2 => self.options.fold_norms == FoldNorms::Both || self.options.norm2_in_o_proj,
            _ => false,
        }
    }

    /// Device buffers for a batch of `b ≤ max_batch` requests (zeroed; the KV cache zeroed).
    pub fn state(&self, stream: &Arc<CudaStream>, b: usize) -> Result<State> {
        if b == 0 || b > self.cap.max_batch {
            return Err(Error::Capacity { what: "B (requests)", got: b, capacity: self.cap.max_batch });
        }
        let c = &self.cfg;
        let z = |n: usize| -> Result<CudaSlice<bf16>> { Ok(stream.alloc_zeros::<bf16>(n)?) };
        let cache = self.cap.num_pages * c.page_size * c.kv_heads * c.head_dim;
        let mut scratch = Vec::new();
        for bytes in
            self.linears.iter().map(LinearPlan::scratch_bytes).chain([self.attn.scratch_layout().total_bytes()])
        {
            scratch.push(if bytes > 0 { Some(stream.alloc_zeros::<u8>(bytes)?) } else { None });
        }
        Ok(State {
            b,
            x: z(b * c.hidden)?,
            residual: z(b * c.hidden)?,
            // Each folded or split norm moves the residual to the other buffer.
            residual_mid: if self.norm_folded(Op::AddNorm1) || self.norm_folded(Op::AddNorm2) {
                Some(z(b * c.hidden)?)
            } else {
                None
            },
            residual_out_mid: self.norm_folded(Op::AddNorm1) ^ self.norm_folded(Op::AddNorm2),
            sum_sq: if self.options.norm2_in_o_proj {
                Some(stream.alloc_zeros::<f32>(b * bf16_gemv::rms_groups(c.hidden))?)
            } else {
                None
            },
            h: z(b * c.hidden)?,
            qkv: z(b * c.qkv_cols())?,
            o: z(b * c.heads * c.head_dim)?,
            proj: z(b * c.hidden)?,
            gate_up: z(b * 2 * c.intermediate)?,
            act: z(b * c.intermediate)?,
            y: z(b * c.hidden)?,
            k_cache: z(cache)?,
            v_cache: z(cache)?,
            page_table: stream.alloc_zeros::<i32>(b * self.cap.max_pages)?,
            seq_lens: stream.alloc_zeros::<i32>(b)?,
            cu_seqlens_q: stream.clone_htod(&(0..=b as i32).collect::<Vec<_>>())?,
            positions: stream.alloc_zeros::<i32>(b)?,
            scratch,
            error: ErrorWord::new(stream)?,
            side: if self.warm.is_some() { Some(SideStream::new(stream)?) } else { None },
        })
    }

    /// Enqueues the whole decode step on `stream`: the ops of [`Layer::ops`].
    pub fn step(&self, w: &DeviceWeights, st: &mut State, stream: &Arc<CudaStream>) -> Result<()> {
        self.run_ops(&self.ops(), w, st, stream)
    }

    /// Enqueues `ops` in order ([`Layer::run_op`] each), then [`Layer::join_side`] — also when an
    /// op failed, so no fork is left pending (the bench times parts of the step with it).
    pub fn run_ops(&self, ops: &[Op], w: &DeviceWeights, st: &mut State, stream: &Arc<CudaStream>) -> Result<()> {
        let ran = ops.iter().try_for_each(|&op| self.run_op(op, w, st, stream));
        let joined = self.join_side(st, stream);
        ran.and(joined)
    }

    /// Makes `stream` wait for the work [`Layer::run_op`] put on the state's second stream
    /// ([`LayerOptions::warm_o_proj`]: [`Op::Attention`] forks it); nothing when none is
    /// pending. [`Layer::step`] and [`Layer::run_ops`] end with it; a caller of [`Layer::run_op`] must call it
    /// before ending a graph capture (a capture with an unjoined stream fails) or before
    /// reusing the state on another stream.
    pub fn join_side(&self, st: &mut State, stream: &Arc<CudaStream>) -> Result<()> {
        if let Some(side) = st.side.as_mut() {
            side.join(stream)?;
        }
        Ok(())
    }

    /// Enqueues one op of the step (the bench times them one by one); [`Op::SiluAndMul`] of a
    /// layer that fuses it is `Error::InvalidQuery` (nothing launched).
    pub fn run_op(&self, op: Op, w: &DeviceWeights, st: &mut State, stream: &Arc<CudaStream>) -> Result<()> {
        let c = &self.cfg;
        let (b, hd) = (st.b, c.hidden);
        let (h, hkv, d) = (c.heads, c.kv_heads, c.head_dim);
        let qkv_widths = [h * d, hkv * d, hkv * d];
        let cache_shape = [self.cap.num_pages, c.page_size, hkv, d];
        match op {
            Op::AddNorm1 | Op::AddNorm2 if !self.norm_folded(op) => {
                let Some(norm) = &self.norm else { return Err(missing("norm")) };
                // Norm 2 after a folded norm 1 updates residual_mid in place.
                let res = match (&mut st.residual_mid, op) {
                    (Some(mid), Op::AddNorm2) => mid,
                    _ => &mut st.residual,
                };
                let (x, ln) = if op == Op::AddNorm1 { (&st.x, &w.ln1) } else { (&st.proj, &w.ln2) };
                let args = rmsnorm::Args {
                    x: TensorRef::from_slice(x, &[b, hd])?,
                    residual: Some(TensorMut::from_slice(res, &[b, hd])?),
                    w: TensorRef::from_slice(ln, &[hd])?,
                    y: TensorMut::from_slice(&mut st.h, &[b, hd])?,
                };
                rmsnorm::run(norm, args, Scratch::none(), stream)
            }
            Op::AddNorm1 | Op::AddNorm2 => Err(Error::InvalidQuery {
                op: "b12x-layers",
                field: "op",
                reason: format!(
                    "{} is folded into the projections in this layer (LayerOptions::fold_norms, norm2_in_o_proj)",
                    op.name()
                ),
            }),
            Op::QkvProj => {
                // FoldNorms: norm 1 on the x load (residual -> residual_mid), x the sublayer
                // output; else x is norm 1's output h.
                let folded = self.options.fold_norms != FoldNorms::None;
                let scaled = self.options.fold_norms == FoldNorms::FirstScale;
                // First: norm 1's tensors in `add_norm`; FirstScale: the same residual buffers
                // through `rms` (its norm weight is in W).
                let (an, rms) = if folded {
                    let mid = st.residual_mid.as_mut().ok_or_else(|| missing("residual_mid"))?;
                    let residual = TensorRef::from_slice(&st.residual, &[b, hd])?;
                    let residual_out = TensorMut::from_slice(mid, &[b, hd])?;
                    if scaled {
                        (None, Some(bf16_gemv::RmsArgs::Add { residual, residual_out }))
                    } else {
                        let norm_w = TensorRef::from_slice(&w.ln1, &[hd])?;
                        (Some(bf16_gemv::AddNorm { residual, residual_out, norm_w }), None)
                    }
                } else {
                    (None, None)
                };
                let rope = self.qkv_rope_args(
                    &mut st.k_cache,
                    &mut st.v_cache,
                    &st.page_table,
                    &st.seq_lens,
                    &st.positions,
                    &mut st.error,
                    b,
                )?;
                let x = if folded { &st.x } else { &st.h };
                self.linear(0, w, x, &mut st.qkv, b, &mut st.scratch[0], an, rope, rms, stream)
            }
            Op::GateUpProj if self.options.fold_norms == FoldNorms::Both => {
                // Norm 2 on the x load: residual_mid -> residual.
                let mid = st.residual_mid.as_ref().ok_or_else(|| missing("residual_mid"))?;
                let an = bf16_gemv::AddNorm {
                    residual: TensorRef::from_slice(mid, &[b, hd])?,
                    residual_out: TensorMut::from_slice(&mut st.residual, &[b, hd])?,
                    norm_w: TensorRef::from_slice(&w.ln2, &[hd])?,
                };
                let y = if self.options.gate_up_silu { &mut st.act } else { &mut st.gate_up };
                self.linear(GATE_UP, w, &st.proj, y, b, &mut st.scratch[GATE_UP], Some(an), None, None, stream)
            }
            Op::OProj if self.options.norm2_in_o_proj => {
                // Norm 2's first half: r = o_proj(o) + residual into the other residual buffer,
                // with the sums of squares.
                let mid = st.residual_mid.as_mut().ok_or_else(|| missing("residual_mid"))?;
                let (src, dst) = if self.options.fold_norms == FoldNorms::None {
                    (&st.residual, mid)
                } else {
                    (&*mid, &mut st.residual)
                };
                let sum_sq = st.sum_sq.as_mut().ok_or_else(|| missing("sum_sq"))?;
                let rms = bf16_gemv::RmsArgs::Residual {
                    residual: TensorRef::from_slice(src, &[b, hd])?,
                    sum_sq: TensorMut::from_slice(sum_sq, &[b, bf16_gemv::rms_groups(hd)])?,
                };
                self.linear(1, w, &st.o, dst, b, &mut st.scratch[1], None, None, Some(rms), stream)
            }
            Op::OProj => self.linear(1, w, &st.o, &mut st.proj, b, &mut st.scratch[1], None, None, None, stream),
            Op::GateUpProj if self.options.norm2_in_o_proj => {
                // Norm 2's second half: x is the new residual, scaled by rrms from the sums.
                let r = match (&st.residual_mid, self.options.fold_norms) {
                    (Some(mid), FoldNorms::None) => mid,
                    _ => &st.residual,
                };
                let sum_sq = st.sum_sq.as_ref().ok_or_else(|| missing("sum_sq"))?;
                let rms = bf16_gemv::RmsArgs::Scale {
                    sum_sq: TensorRef::from_slice(sum_sq, &[b, bf16_gemv::rms_groups(hd)])?,
                };
                let y = if self.options.gate_up_silu { &mut st.act } else { &mut st.gate_up };
                self.linear(GATE_UP, w, r, y, b, &mut st.scratch[GATE_UP], None, None, Some(rms), stream)
            }
            Op::GateUpProj if self.options.gate_up_silu => {
                self.linear(GATE_UP, w, &st.h, &mut st.act, b, &mut st.scratch[GATE_UP], None, None, None, stream)
            }
            Op::GateUpProj => {
                self.linear(GATE_UP, w, &st.h, &mut st.gate_up, b, &mut st.scratch[GATE_UP], None, None, None, stream)
            }
            Op::DownProj if self.options.fuse_silu => {
                self.linear(DOWN, w, &st.gate_up, &mut st.y, b, &mut st.scratch[DOWN], None, None, None, stream)
            }
            Op::DownProj => {
                self.linear(DOWN, w, &st.act, &mut st.y, b, &mut st.scratch[DOWN], None, None, None, stream)
            }
            Op::RopeKvAppend => {
                let Some(rope_append) = &self.rope_append else {
                    return Err(Error::InvalidQuery {
                        op: "b12x-layers",
                        field: "op",
                        reason: "rope_kv_append runs inside the attention or the QKV projection in this \
                                 layer (LayerOptions::fuse_rope_attention, rope_in_qkv)"
                            .into(),
                    });
                };
                let mut parts = TensorMut::from_slice(&mut st.qkv, &[b, c.qkv_cols()])?.split_last(&qkv_widths)?;
                let v = parts.pop().ok_or_else(|| missing("v"))?.unflatten_last(&[hkv, d])?;
                let k = parts.pop().ok_or_else(|| missing("k"))?.unflatten_last(&[hkv, d])?;
                let q = parts.pop().ok_or_else(|| missing("q"))?.unflatten_last(&[h, d])?;
                let args = rope_kv_append::Args {
                    q,
                    k: k.as_ref(),
                    v: v.as_ref(),
                    k_cache: TensorMut::from_slice(&mut st.k_cache, &cache_shape)?,
                    v_cache: TensorMut::from_slice(&mut st.v_cache, &cache_shape)?,
                    k_scale: None,
                    v_scale: None,
                    page_table: TensorRef::from_slice(&st.page_table, &[b, self.cap.max_pages])?,
                    seq_lens: TensorRef::from_slice(&st.seq_lens, &[b])?,
                    cu_seqlens_q: TensorRef::from_slice(&st.cu_seqlens_q, &[b + 1])?,
                    positions: TensorRef::from_slice(&st.positions, &[b])?,
                    cos_sin: None,
                    error: st.error.view()?,
                };
                rope_kv_append::run(rope_append, args, Scratch::none(), stream)
            }
            Op::Attention => {
                let parts = TensorRef::from_slice(&st.qkv, &[b, c.qkv_cols()])?.split_last(&qkv_widths)?;
                let scratch = scratch_of(&mut st.scratch[4]);
                let (page_table, seq_lens, cu_seqlens_q) = (
                    TensorRef::from_slice(&st.page_table, &[b, self.cap.max_pages])?,
                    TensorRef::from_slice(&st.seq_lens, &[b])?,
                    TensorRef::from_slice(&st.cu_seqlens_q, &[b + 1])?,
                );
                let o = TensorMut::from_slice(&mut st.o, &[b, h, d])?;
                let q = parts[0].unflatten_last(&[h, d])?;
                if let Some(fused) = &self.rope_attn {
                    let args = rope_paged::Args {
                        q,
                        k: parts[1].unflatten_last(&[hkv, d])?,
                        v: parts[2].unflatten_last(&[hkv, d])?,
                        k_cache: TensorMut::from_slice(&mut st.k_cache, &cache_shape)?,
                        v_cache: TensorMut::from_slice(&mut st.v_cache, &cache_shape)?,
                        k_scale: None,
                        v_scale: None,
                        sinks: None,
                        page_table,
                        seq_lens,
                        cu_seqlens_q,
                        positions: TensorRef::from_slice(&st.positions, &[b])?,
                        cos_sin: None,
                        o,
                        lse: None,
                        error: st.error.view()?,
                    };
                    self.warm_o_proj(w, st.side.as_mut(), stream)?;
                    return rope_paged::run(fused, args, scratch, stream);
                }
                let args = paged::Args {
                    q,
                    k_cache: TensorRef::from_slice(&st.k_cache, &cache_shape)?,
                    v_cache: TensorRef::from_slice(&st.v_cache, &cache_shape)?,
                    k_scale: None,
                    v_scale: None,
                    sinks: None,
                    page_table,
                    seq_lens,
                    cu_seqlens_q,
                    o,
                    lse: None,
                    error: st.error.view()?,
                };
                self.warm_o_proj(w, st.side.as_mut(), stream)?;
                paged::run(&self.attn, args, scratch, stream)
            }
            Op::SiluAndMul => {
                let Some(act) = &self.act else {
                    return Err(Error::InvalidQuery {
                        op: "b12x-layers",
                        field: "op",
                        reason: "silu_and_mul is folded into down_proj or gate_up_proj in this layer \
                                 (LayerOptions::fuse_silu, gate_up_silu)"
                            .into(),
                    });
                };
                let args = silu_and_mul::Args {
                    x: TensorRef::from_slice(&st.gate_up, &[b, 2 * c.intermediate])?,
                    y: Some(TensorMut::from_slice(&mut st.act, &[b, c.intermediate])?),
                    codes: None,
                    scales: None,
                    enc: None,
                };
                silu_and_mul::run(act, args, Scratch::none(), stream)
            }
        }
    }

    /// [`LayerOptions::warm_o_proj`]: the O projection's last rows read on the state's second
    /// stream beside the attention (forked here, joined by [`Layer::join_side`]); nothing
    /// without it.
    fn warm_o_proj(&self, w: &DeviceWeights, side: Option<&mut SideStream>, stream: &Arc<CudaStream>) -> Result<()> {
        if let (Some(warm), Some(side), DeviceLinear::Bf16(wo)) = (&self.warm, side, &w.linears[1]) {
            let (n, k) = self.cfg.linear_shapes()[1];
            let rows = self.options.warm_o_proj.map_or(0, |o| o.rows(n));
            let tail = wo.slice((n - rows) * k..n * k);
            let src = TensorRef::from_view(&tail, &[rows, k])?;
            // Checked before the fork: a bad range forks nothing.
            warm.query().kernel_params(&l2_warm::Args { src })?;
            let s2 = side.fork(stream)?;
            let launched = l2_warm::run(warm, l2_warm::Args { src }, Scratch::none(), &s2);
            // Joined later either way, so a failed launch leaves no stream forked.
            side.forked(&s2)?;
            launched?;
        }
        Ok(())
    }

    /// [`LayerOptions::rope_in_qkv`]: the QKV epilogue's tensors (`None` without it).
    #[allow(clippy::too_many_arguments)]
    fn qkv_rope_args<'a>(
        &self,
        k_cache: &'a mut CudaSlice<bf16>,
        v_cache: &'a mut CudaSlice<bf16>,
        page_table: &'a CudaSlice<i32>,
        seq_lens: &'a CudaSlice<i32>,
        positions: &'a CudaSlice<i32>,
        error: &'a mut b12x_attention::paging::ErrorWord,
        b: usize,
    ) -> Result<Option<bf16_gemv::RopeArgs<'a>>> {
        if !self.options.rope_in_qkv {
            return Ok(None);
        }
        let c = &self.cfg;
        let cache_shape = [self.cap.num_pages, c.page_size, c.kv_heads, c.head_dim];
        Ok(Some(bf16_gemv::RopeArgs {
            positions: TensorRef::from_slice(positions, &[b])?,
            seq_lens: TensorRef::from_slice(seq_lens, &[b])?,
            page_table: TensorRef::from_slice(page_table, &[b, self.cap.max_pages])?,
            cos_sin: None,
            k_cache: TensorMut::from_slice(k_cache, &cache_shape)?,
            v_cache: TensorMut::from_slice(v_cache, &cache_shape)?,
            error: error.view()?,
        }))
    }

    /// Linear `i` from `x` into `y`; `add_norm`: the tensors of a folded add+RMSNorm; `rope`:
    /// the QKV epilogue's ([`LayerOptions::rope_in_qkv`]); `rms`: the split norm 2's
    /// ([`LayerOptions::norm2_in_o_proj`]).
    #[allow(clippy::too_many_arguments)]
    fn linear(
        &self,
        i: usize,
        w: &DeviceWeights,
        x: &CudaSlice<bf16>,
        y: &mut CudaSlice<bf16>,
        b: usize,
        scratch: &mut Option<CudaSlice<u8>>,
        add_norm: Option<bf16_gemv::AddNorm<'_>>,
        rope: Option<bf16_gemv::RopeArgs<'_>>,
        rms: Option<bf16_gemv::RmsArgs<'_>>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let (n, k) = self.cfg.linear_shapes()[i];
        let scratch = scratch_of(scratch);
        // The fused down projection reads [gate | up]: twice its K per row; the gate/up
        // projection with the SwiGLU epilogue writes half its N.
        let x_cols = if i == DOWN && self.options.fuse_silu { 2 * k } else { k };
        let y_cols = if i == GATE_UP && self.options.gate_up_silu { n / 2 } else { n };
        let (xv, yv) = (TensorRef::from_slice(x, &[b, x_cols])?, TensorMut::from_slice(y, &[b, y_cols])?);
        // The SwiGLU-epilogue plan reads the interleaved layout, every other BF16 plan the plain one.
        let epilogue = i == GATE_UP && self.options.gate_up_silu;
        let rope_rows = i == 0 && self.options.rope_in_qkv;
        // Each BF16 plan reads the weight layout it was planned for.
        let layout = match &w.linears[i] {
            DeviceLinear::Bf16(_) => !epilogue && !rope_rows,
            DeviceLinear::Bf16Rope(_) => rope_rows,
            DeviceLinear::Bf16GateUp(_) => epilogue,
            DeviceLinear::Packed(_) => true,
        } && (i != GATE_UP || w.gate_up_norm_folded == self.options.norm2_in_o_proj)
            && (i != 0 || w.qkv_norm_folded == (self.options.fold_norms == FoldNorms::FirstScale));
        match (&self.linears[i], &w.linears[i]) {
            (
                LinearPlan::Bf16(p),
                DeviceLinear::Bf16(wt) | DeviceLinear::Bf16Rope(wt) | DeviceLinear::Bf16GateUp(wt),
            ) if layout => {
                let w = TensorRef::from_slice(wt, &[n, k])?;
                let args = bf16_gemv::Args { x: xv, w, bias: None, y: yv, add_norm, rope, rms };
                bf16_gemv::run(p, args, scratch, stream)
            }
            (LinearPlan::Packed(p), DeviceLinear::Packed(wt)) => {
                let args = bsgemv::Args { x: xv, x_scales: None, x_global: None, w: wt, bias: None, y: yv, alpha: 1.0 };
                bsgemv::run(p, args, scratch, stream)
            }
            _ => Err(Error::InvalidQuery {
                op: "b12x-layers",
                field: "weights",
                reason: format!("{} weights do not match the layer's {:?} plans", LINEARS[i], self.format),
            }),
        }
    }
}

/// An op's scratch buffer, or none when its layout is empty.
fn scratch_of(s: &mut Option<CudaSlice<u8>>) -> Scratch<'_> {
    match s {
        Some(s) => Scratch::from_slice(s),
        None => Scratch::none(),
    }
}

fn missing(what: &str) -> Error {
    Error::InvalidQuery { op: "b12x-layers", field: "qkv", reason: format!("no {what} columns") }
}
