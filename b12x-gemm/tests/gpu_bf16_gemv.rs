//! GPU validation of `gemm.bf16_gemv` against the CPU oracle (libtest-mimic; every trial is
//! listed as ignored when no CUDA device is present).
//!
//! Each shape × M trial runs every legal config of M's bucket (pinned one at a time; the
//! largest shapes only the default and the first TMA config), with `y` and the scratch poisoned (0xFF) before each launch
//! and y's row padding checked untouched after it. Results must be within
//! `reference::bound` of the f64 oracle element-wise and within `reference::cosine_bound` in
//! cosine difference; NaN/Inf positions equal. The LM head checks sampled rows of W only.
//! Further trials: graph replay equals eager bitwise (split-K, stream-K TMA and cluster TMA merges included), repeated eager runs
//! are bitwise equal, two PDL-launched calls chained through their activations equal the oracle
//! (eager and replayed, every config of the dependent call), a frozen session (or a capture) rejects an unprepared plan, `run`
//! allocates nothing, bad inputs are typed errors that launch nothing.
//! Fused SwiGLU (`x_act`): every fused config pinned in turn must give bitwise the `y` of
//! `activation.silu_and_mul` (b12x-norm, BF16 out) followed by this GEMV pinned to the same
//! config without `_silu`, and lie within the bound of the oracle on the host activation; a PDL
//! chain (gate/up GEMV, then the fused down GEMV reading its output) equals the unfused path
//! bitwise, eager and replayed; bad fused inputs are typed errors that launch nothing.
//! `B12X_TEST_PROFILE=reduced` drops the large shapes (sanitizer runs; the fused chain then runs
//! a 1024 × 1536 MLP).

use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{
    aligned_scratch, alloc_poisoned, alloc_scratch, arange, cast, check_graph_replay_equals_eager,
    check_run_allocates_nothing, poison, reduced_profile, run_gpu_trials, same_bits, session_pinned, shapes, uniform,
    FloatBuf, GpuTrial,
};
use b12x_core::{DType, Device, Error, OpPlan, PreparationSession, Scratch, TensorRef, SCRATCH_ALIGN};
use b12x_gemm::bf16_gemv::{self, reference, Args, Plan, Query, XAct, YAct};
use b12x_norm::silu_and_mul;
use std::sync::Arc;

type TrialResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[derive(Clone, Copy, Debug)]
enum Fill {
    /// Seeded uniform values in [-1, 1).
    Uniform,
    /// `arange` wrapped at a prime, offset to mix signs: exposes layout bugs.
    Arange,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    name: &'static str,
    n: usize,
    k: usize,
    ms: &'static [usize],
    x: DType,
    out: DType,
    bias: Option<DType>,
    aligned: bool,
    /// Extra elements at the end of each row of x, w and y.
    pad: usize,
    fill: Fill,
    /// Check every `sample`-th row of W (and the last one) instead of all (huge N·K).
    sample: usize,
    /// Run only the default config (large shapes), and skip in the reduced profile.
    large: bool,
}

const fn case(name: &'static str, n: usize, k: usize, ms: &'static [usize]) -> Case {
    Case {
        name,
        n,
        k,
        ms,
        x: DType::BF16,
        out: DType::BF16,
        bias: None,
        aligned: true,
        pad: 0,
        fill: Fill::Uniform,
        sample: 1,
        large: false,
    }
}

const ALL_BUCKETS: &[usize] = &[1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64];
const DECODE: &[usize] = &[1, 8];
const F32: DType = DType::F32;
const L3: shapes::Model = shapes::LLAMA3_8B;
const Q3: shapes::Model = shapes::QWEN3_30B_A3B;
const DF: shapes::Model = shapes::DEEPSEEK_V4_FLASH;
const D4: shapes::Model = shapes::DEEPSEEK_V4;

const CASES: &[Case] = &[
    case("llama3_8b_o_proj", L3.hidden, L3.hidden, ALL_BUCKETS),
    case("llama3_8b_gate", L3.intermediate, L3.hidden, DECODE),
    Case { bias: Some(DType::BF16), ..case("llama3_8b_down_bias", L3.hidden, L3.intermediate, &[1, 4]) },
    case("qwen3_30b_a3b_qkv", (Q3.heads + 2 * Q3.kv_heads) * Q3.head_dim, Q3.hidden, &[1, 3]),
    Case { out: F32, ..case("qwen3_30b_a3b_router", Q3.experts, Q3.hidden, DECODE) },
    Case { out: F32, ..case("deepseek_v4_flash_router", DF.experts, DF.hidden, DECODE) },
    case("deepseek_v4_flash_expert_up", DF.moe_intermediate, DF.hidden, &[1, 16]),
    case("deepseek_v4_up", D4.intermediate, D4.hidden, &[1, 8, 16]),
    Case { large: true, ..case("deepseek_v4_down", D4.hidden, D4.intermediate, &[2]) },
    Case { out: F32, ..case("deepseek_v4_router", D4.experts, D4.hidden, &[1, 2, 4, 8, 16, 64]) },
    Case {
        x: F32,
        out: F32,
        bias: Some(F32),
        ..case("deepseek_v4_router_f32_x", D4.experts, D4.hidden, &[1, 3, 8, 9])
    },
    Case { sample: 61, large: true, ..case("deepseek_v4_lm_head", D4.vocab, D4.hidden, DECODE) },
    Case { fill: Fill::Arange, ..case("awkward_prime_n", 4099, 4104, &[1, 3]) },
    // Stream-K CTAs that span three row blocks with unaligned ends (the rotated walk: the row
    // block shared with the next CTA first, a whole one last), a partial last row block and a
    // partial last k-stage (tests/bf16_gemv.rs checks the schedule has them).
    Case { bias: Some(DType::BF16), ..case("stream_k_three_row_blocks", 9000, 1152, &[1, 9]) },
    Case { fill: Fill::Arange, ..case("awkward_k40", 129, 40, &[1, 7, 33]) },
    Case { fill: Fill::Arange, ..case("awkward_tiny", 7, 8, &[1, 2]) },
    Case { aligned: false, fill: Fill::Arange, ..case("unaligned_odd_k", 1031, 4097, &[1, 5, 17]) },
    Case { aligned: false, pad: 3, ..case("unaligned_padded", 515, 1001, &[2, 9]) },
    Case { aligned: false, ..case("unaligned_one_by_one", 1, 1, &[1]) },
    Case { x: F32, aligned: false, pad: 1, ..case("unaligned_f32_x", 515, 1001, &[1, 9]) },
    Case { pad: 8, bias: Some(F32), ..case("padded_rows_f32_bias", 2048, 2048, &[2, 12]) },
    Case { out: F32, bias: Some(DType::BF16), ..case("f32_out_bf16_bias", 1000, 3072, &[1, 6]) },
];

/// Host values exactly representable in `dtype`.
fn values(fill: Fill, seed: u64, n: usize, dtype: DType) -> Vec<f32> {
    let v = match fill {
        Fill::Uniform => uniform(seed, n, -1.0, 1.0),
        Fill::Arange => arange(n, 97 + seed as usize, 1.0 / 64.0).iter().map(|v| v - 0.75).collect(),
    };
    if dtype == DType::BF16 {
        cast::<bf16>(&v).iter().map(|b| b.to_f32()).collect()
    } else {
        v
    }
}

/// Rows of `[rows, cols]` with row stride `stride`, gathered contiguous.
fn gather(v: &[f32], rows: usize, cols: usize, stride: usize) -> Vec<f32> {
    (0..rows).flat_map(|r| v[r * stride..r * stride + cols].iter().copied()).collect()
}

/// Whether any element past the first `cols` of a row (stride `stride`, `m` rows) of a poisoned
/// f32/f64 download is no longer NaN: a kernel wrote row padding.
fn padding_written(all: &[f64], m: usize, stride: usize, cols: usize) -> bool {
    (0..m).any(|t| all[t * stride + cols..(t + 1) * stride].iter().any(|v| !v.is_nan()))
}

/// The same for a poisoned bf16 buffer's bits (poison `0xFFFF`).
fn bits_padding_written(bits: &[u32], m: usize, stride: usize, cols: usize) -> bool {
    (0..m).any(|t| bits[t * stride + cols..(t + 1) * stride].iter().any(|&v| v != 0xFFFF && v != 0xFFFF_FFFF))
}

/// The first `cols` elements of each of `m` rows (stride `stride`), concatenated.
fn live_rows(bits: &[u32], m: usize, stride: usize, cols: usize) -> Vec<u32> {
    (0..m).flat_map(|t| bits[t * stride..t * stride + cols].iter().copied()).collect()
}

fn check_case(dev: &Arc<Device>, c: Case, m: usize) -> TrialResult {
    let (n, k) = (c.n, c.k);
    let (lx, lw, ly) = (k + c.pad, k + c.pad, n + c.pad);
    let stream = dev.stream();
    let x_h = values(c.fill, 1, m * lx, c.x);
    let w_h = values(c.fill, 2, n * lw, DType::BF16);
    let b_h = c.bias.map(|d| values(Fill::Uniform, 3, n, d));
    let rows: Vec<usize> = (0..n).filter(|r| r % c.sample == 0 || *r == n - 1).collect();
    let w_c = cast::<bf16>(&gather(&w_h, n, k, lw));
    let want = reference::exact(&gather(&x_h, m, k, lx), &w_c, b_h.as_deref(), m, k, &rows);
    let x = FloatBuf::upload(stream, &x_h, c.x)?;
    let w = FloatBuf::upload(stream, &w_h, DType::BF16)?;
    let bias = match (&b_h, c.bias) {
        (Some(v), Some(d)) => Some(FloatBuf::upload(stream, v, d)?),
        _ => None,
    };
    let mut y = FloatBuf::poisoned(stream, m * ly, c.out)?;
    let q = Query {
        n,
        k,
        x_dtype: c.x,
        out_dtype: c.out,
        bias: c.bias,
        max_rows: 64,
        aligned: c.aligned,
        pdl: false,
        x_act: XAct::None,
        y_act: YAct::None,
    };
    let plan = bf16_gemv::plan(&q, dev).map_err(err)?;
    let bucket = b12x_core::plan::bucket_of(plan.buckets(), m).ok_or("no bucket")?;
    let label = plan.buckets()[bucket].label();
    let mut scratch = alloc_scratch(stream, plan.scratch_layout().total_bytes()).map_err(err)?;
    let configs = plan.candidates(bucket);
    // Large shapes: the default and the first TMA config (stream-K) only.
    let first_tma = configs.iter().position(|id| id.starts_with("tma_"));
    let chosen = configs.iter().enumerate().filter(|&(i, _)| !c.large || i == 0 || Some(i) == first_tma);
    for (_, id) in chosen {
        let session = session_pinned(dev, &plan, &label, id)?;
        y.poison(stream)?;
        poison(stream, &mut scratch).map_err(err)?;
        let args = Args {
            x: x.view(m, k, lx, c.x),
            w: w.view(n, k, lw, DType::BF16),
            bias: bias.as_ref().map(|b| b.view(n, 0, 1, c.bias.unwrap_or(F32))),
            y: y.view_mut(m, n, ly, c.out),
            add_norm: None,
            rope: None,
            rms: None,
        };
        bf16_gemv::run(&plan, args, aligned_scratch(&mut scratch, plan.scratch_layout().total_bytes()), stream)
            .map_err(err)?;
        stream.synchronize().map_err(err)?;
        let all = y.download(stream)?;
        let got: Vec<f64> =
            (0..m).flat_map(|i| rows.iter().map(move |&r| (i, r))).map(|(i, r)| all[i * ly + r]).collect();
        reference::check_bound(&format!("y [{id}]"), c.out, k, &got, &want, &[m, rows.len()])?;
        // Row padding of y stays poisoned.
        if padding_written(&all, m, ly, n) {
            return Err(format!("y padding written [{id}]"));
        }
        session.close();
    }
    Ok(())
}

/// A split-K router plan (every SM busy through 8 splits) and its inputs.
struct Router {
    plan: Plan,
    x: FloatBuf,
    w: FloatBuf,
    y: FloatBuf,
    scratch: CudaSlice<u8>,
}

const RN: usize = 384;
const RK: usize = 7168;

fn router(dev: &Arc<Device>, m: usize) -> Result<Router, String> {
    let stream = dev.stream();
    let q = Query {
        n: RN,
        k: RK,
        x_dtype: DType::BF16,
        out_dtype: F32,
        bias: None,
        max_rows: 8,
        aligned: true,
        pdl: false,
        x_act: XAct::None,
        y_act: YAct::None,
    };
    let plan = bf16_gemv::plan(&q, dev).map_err(err)?;
    let x = FloatBuf::upload(stream, &uniform(11, m * RK, -1.0, 1.0), DType::BF16)?;
    let w = FloatBuf::upload(stream, &uniform(12, RN * RK, -1.0, 1.0), DType::BF16)?;
    let y = FloatBuf::poisoned(stream, m * RN, F32)?;
    let scratch = alloc_scratch(stream, plan.scratch_layout().total_bytes()).map_err(err)?;
    Ok(Router { plan, x, w, y, scratch })
}

impl Router {
    fn run(&mut self, m: usize, stream: &Arc<CudaStream>) -> b12x_core::Result<()> {
        let args = Args {
            x: self.x.view(m, RK, RK, DType::BF16),
            w: self.w.view(RN, RK, RK, DType::BF16),
            bias: None,
            y: self.y.view_mut(m, RN, RN, F32),
            add_norm: None,
            rope: None,
            rms: None,
        };
        let bytes = self.plan.scratch_layout().total_bytes();
        bf16_gemv::run(&self.plan, args, aligned_scratch(&mut self.scratch, bytes), stream)
    }
}

/// Eager runs, then the same call captured into a graph and replayed three times: all bitwise
/// equal (the default router config splits K). The scratch is never re-poisoned between runs, so
/// every launch finds the previous launch's arrival counters (tagged with that launch's grid id)
/// and must not count them: replays of one graph node must get distinct grid ids.
fn graph_equals_eager(dev: &Arc<Device>) -> TrialResult {
    graph_equals_eager_with(dev, Pick::Default)
}

/// The same with a stream-K TMA config pinned whose CTAs share row blocks (partials, counters
/// and the last-arriver merge inside the graph).
fn graph_equals_eager_tma(dev: &Arc<Device>) -> TrialResult {
    graph_equals_eager_with(dev, Pick::StreamK)
}

/// The same with a cluster split-K TMA config of 8 CTAs pinned (the DSMEM merge inside the graph).
fn graph_equals_eager_cluster(dev: &Arc<Device>) -> TrialResult {
    graph_equals_eager_with(dev, Pick::Cluster)
}

#[derive(Clone, Copy, PartialEq)]
enum Pick {
    Default,
    StreamK,
    Cluster,
}

fn graph_equals_eager_with(dev: &Arc<Device>, pick: Pick) -> TrialResult {
    let m = 4;
    let stream = dev.stream();
    let mut r = router(dev, m)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    let merged = |c: &&bf16_gemv::Config| {
        c.tma.is_some_and(|t| t.work == bf16_gemv::TmaWork::StreamK)
            && c.tma_schedule(RN, RK, dev.sm_count()).is_some_and(|s| s.merges)
    };
    let cluster8 = |c: &&bf16_gemv::Config| c.tma.is_some_and(|t| t.work == bf16_gemv::TmaWork::Cluster(8));
    let chosen = match pick {
        Pick::Default => r.plan.configs(2)[0],
        Pick::StreamK => {
            *r.plan.configs(2).iter().find(merged).ok_or("no merging stream-K TMA config for the router")?
        }
        Pick::Cluster => *r.plan.configs(2).iter().find(cluster8).ok_or("no cluster-8 TMA config for the router")?,
    };
    if pick != Pick::Default {
        session.pin(&r.plan, &r.plan.buckets()[2].label(), &chosen.id());
    }
    session.prepare(&[&r.plan]).map_err(err)?;
    if pick == Pick::Default && chosen.ksplit < 2 {
        return Err(format!("expected a split-K default for the router, got {}", chosen.id()));
    }
    check_graph_replay_equals_eager(
        &session,
        stream,
        &mut r,
        |x, s| x.run(m, s),
        |x, s| x.y.poison(s),
        |x, s| x.y.bits(s),
    )
}

/// Two PDL-launched calls back to back, the second reading the first's output as its x
/// (y1 = x·W1ᵀ, 64 MB of W1 so the first call is long; y2 = y1·W2ᵀ) and sharing its scratch
/// buffer, y1 and y2 poisoned
/// before every chain: with `Query::pdl` the second call starts streaming W2 while the first
/// runs and must read y1 only after `griddepcontrol.wait`. Every config of the second call's
/// bucket is pinned in turn; y1 and y2 must match the oracle (y2's computed from the y1 the
/// GPU produced), and a captured graph of the chain, replayed twice, must equal the eager bits.
fn pdl_chain(dev: &Arc<Device>, m: usize) -> TrialResult {
    const N1: usize = 8192;
    const K1: usize = 4096;
    const N2: usize = 1024;
    let stream = dev.stream();
    let query = |n, k| Query {
        n,
        k,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: 16,
        aligned: true,
        pdl: true,
        x_act: XAct::None,
        y_act: YAct::None,
    };
    let (p1, p2) =
        (bf16_gemv::plan(&query(N1, K1), dev).map_err(err)?, bf16_gemv::plan(&query(N2, N1), dev).map_err(err)?);
    let x_h = values(Fill::Uniform, 21, m * K1, DType::BF16);
    let w1_h = values(Fill::Uniform, 22, N1 * K1, DType::BF16);
    let w2_h = values(Fill::Uniform, 23, N2 * N1, DType::BF16);
    let want1 = reference::exact(&x_h, &cast::<bf16>(&w1_h), None::<&[f32]>, m, K1, &(0..N1).collect::<Vec<_>>());
    let (x, w1, w2) = (
        FloatBuf::upload(stream, &x_h, DType::BF16)?,
        FloatBuf::upload(stream, &w1_h, DType::BF16)?,
        FloatBuf::upload(stream, &w2_h, DType::BF16)?,
    );
    let (mut y1, mut y2) =
        (FloatBuf::poisoned(stream, m * N1, DType::BF16)?, FloatBuf::poisoned(stream, m * N2, DType::BF16)?);
    // One scratch buffer for both calls, as an engine reuses its workspace: a call touching
    // scratch before its wait would race with the call before it.
    let scratch_bytes = p1.scratch_layout().total_bytes().max(p2.scratch_layout().total_bytes());
    let mut shared = alloc_poisoned::<u8>(stream, scratch_bytes + SCRATCH_ALIGN).map_err(err)?;
    let bucket = b12x_core::plan::bucket_of(p2.buckets(), m).ok_or("no bucket")?;
    let label = p2.buckets()[bucket].label();
    let w2_c = cast::<bf16>(&w2_h);
    let mut y1_first: Option<(Vec<u32>, reference::Exact)> = None;
    for id in p2.candidates(bucket) {
        let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
        session.pin(&p2, &label, &id);
        session.prepare(&[&p1, &p2]).map_err(err)?;
        let mut chain = |s: &Arc<CudaStream>, y1: &mut FloatBuf, y2: &mut FloatBuf| -> b12x_core::Result<()> {
            let a1 = Args {
                x: x.view(m, K1, K1, DType::BF16),
                w: w1.view(N1, K1, K1, DType::BF16),
                bias: None,
                y: y1.view_mut(m, N1, N1, DType::BF16),
                add_norm: None,
                rope: None,
                rms: None,
            };
            bf16_gemv::run(&p1, a1, aligned_scratch(&mut shared, p1.scratch_layout().total_bytes()), s)?;
            let a2 = Args {
                x: y1.view(m, N1, N1, DType::BF16),
                w: w2.view(N2, N1, N1, DType::BF16),
                bias: None,
                y: y2.view_mut(m, N2, N2, DType::BF16),
                add_norm: None,
                rope: None,
                rms: None,
            };
            bf16_gemv::run(&p2, a2, aligned_scratch(&mut shared, p2.scratch_layout().total_bytes()), s)
        };
        let mut eager = Vec::new();
        for again in 0..3 {
            y1.poison(stream)?;
            y2.poison(stream)?;
            chain(stream, &mut y1, &mut y2).map_err(err)?;
            stream.synchronize().map_err(err)?;
            // y1 comes from the same config every time: checked once, then bitwise.
            let bits1 = y1.bits(stream)?;
            if let Some((first, _)) = &y1_first {
                same_bits(&format!("y1 [{id}], chain {again}"), &bits1, first)?;
            } else {
                let got1 = y1.download(stream)?;
                reference::check_bound("y1", DType::BF16, K1, &got1, &want1, &[m, N1])?;
                let x2: Vec<f32> = got1.iter().map(|&v| v as f32).collect();
                let want2 = reference::exact(&x2, &w2_c, None::<&[f32]>, m, N1, &(0..N2).collect::<Vec<_>>());
                y1_first = Some((bits1, want2));
            }
            let want2 = &y1_first.as_ref().ok_or("y1 unchecked")?.1;
            reference::check_bound(
                &format!("y2 [{id}], chain {again}"),
                DType::BF16,
                N1,
                &y2.download(stream)?,
                want2,
                &[m, N2],
            )?;
            let bits = y2.bits(stream)?;
            if again == 0 {
                eager = bits;
            } else {
                same_bits(&format!("eager chain {again} [{id}]"), &bits, &eager)?;
            }
        }
        replays_equal_eager(&session, stream, &mut chain, &mut y1, &mut y2, &eager, &id)?;
        session.close();
    }
    Ok(())
}

/// A PDL chain's tail check: `chain` captured as a graph and replayed twice with y1 and y2
/// poisoned before each replay; y2 must equal the eager chains' bits.
fn replays_equal_eager(
    session: &PreparationSession,
    stream: &Arc<CudaStream>,
    chain: &mut impl FnMut(&Arc<CudaStream>, &mut FloatBuf, &mut FloatBuf) -> b12x_core::Result<()>,
    y1: &mut FloatBuf,
    y2: &mut FloatBuf,
    eager: &[u32],
    id: &str,
) -> TrialResult {
    let graph = session.capture(stream, |s| chain(s, y1, y2)).map_err(err)?;
    for replay in 0..2 {
        y1.poison(stream)?;
        y2.poison(stream)?;
        // SAFETY: every buffer the graph uses outlives it (dropped at the end of this function).
        unsafe { graph.launch() }.map_err(err)?;
        stream.synchronize().map_err(err)?;
        same_bits(&format!("replay {replay} [{id}]"), &y2.bits(stream)?, eager)?;
    }
    drop(graph);
    Ok(())
}

/// Frozen session and graph capture reject an unprepared plan and launch nothing; without either,
/// an unprepared plan prepares its default config and computes the right answer.
fn unprepared_plans(dev: &Arc<Device>) -> TrialResult {
    let m = 1;
    let stream = dev.stream();
    let mut r = router(dev, m)?;
    let mut frozen = PreparationSession::new(dev).map_err(err)?;
    frozen.freeze();
    match r.run(m, stream) {
        Err(Error::KernelResolutionFrozen { op: "gemm.bf16_gemv", .. }) => {}
        other => return Err(format!("frozen: expected KernelResolutionFrozen, got {other:?}")),
    }
    frozen.close();
    let open = PreparationSession::new(dev).map_err(err)?;
    match open.capture(stream, |s| r.run(m, s)) {
        Err(Error::KernelResolutionFrozen { .. }) => {}
        Err(e) => return Err(format!("capture: expected KernelResolutionFrozen, got {e}")),
        Ok(_) => return Err("capture: expected KernelResolutionFrozen, got a graph".into()),
    }
    stream.synchronize().map_err(err)?;
    if r.y.download(stream)?.iter().any(|v| !v.is_nan()) {
        return Err("a rejected call wrote y".into());
    }
    r.run(m, stream).map_err(err)?;
    let x_h = values(Fill::Uniform, 11, m * RK, DType::BF16);
    let w_h = cast::<bf16>(&uniform(12, RN * RK, -1.0, 1.0));
    let none: Option<&[f32]> = None;
    let want = reference::exact(&x_h, &w_h, none, m, RK, &(0..RN).collect::<Vec<_>>());
    reference::check_bound("y (unprepared)", F32, RK, &r.y.download(stream)?, &want, &[m, RN])?;
    Ok(())
}

/// 100 prepared runs (after a warm-up) change the device's free memory by nothing.
fn run_allocates_nothing(dev: &Arc<Device>) -> TrialResult {
    let m = 8;
    let stream = dev.stream();
    let mut r = router(dev, m)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&r.plan]).map_err(err)?;
    check_run_allocates_nothing(dev, stream, 100, || r.run(m, stream))
}

type IsExpected = fn(&Error) -> bool;

/// Bad inputs on real buffers: typed errors, and `y` stays poisoned (nothing launched).
fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let stream = dev.stream();
    let mut r = router(dev, 8)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&r.plan]).map_err(err)?;
    let need = r.plan.scratch_layout().total_bytes();
    let x_ptr = r.x.ptr();
    let raw = |ptr: u64, rows: usize, stride: usize, dtype| {
        // SAFETY: every view stays inside `r.x` (8 rows of K); all are rejected before a launch.
        unsafe { TensorRef::from_raw(ptr, &[rows, RK], &[stride as isize, 1], dtype) }.map_err(err)
    };
    let cases: [(&str, TensorRef<'_>, usize, usize, IsExpected); 5] = [
        ("misaligned x", raw(x_ptr + 2, 2, RK, DType::BF16)?, 2, need, |e| {
            matches!(e, Error::Misaligned { tensor: "x", .. })
        }),
        ("odd x row stride", raw(x_ptr, 2, RK + 1, DType::BF16)?, 2, need, |e| {
            matches!(e, Error::Misaligned { tensor: "x", .. })
        }),
        ("wrong x dtype", raw(x_ptr, 2, RK, DType::F16)?, 2, need, |e| matches!(e, Error::DType { tensor: "x", .. })),
        ("scratch too small", raw(x_ptr, 2, RK, DType::BF16)?, 2, need.saturating_sub(1024), |e| {
            matches!(e, Error::ScratchTooSmall { .. })
        }),
        ("y rows differ from x rows", raw(x_ptr, 2, RK, DType::BF16)?, 3, need, |e| {
            matches!(e, Error::Shape { tensor: "y", .. })
        }),
    ];
    let scratch_ptr = TensorRef::from_slice(&r.scratch, &[r.scratch.len()]).map_err(err)?.ptr();
    let scratch_ptr = scratch_ptr.next_multiple_of(SCRATCH_ALIGN as u64);
    for (name, x, y_rows, scratch_bytes, is_expected) in cases {
        // SAFETY: a prefix of the router's own scratch buffer, used by nothing else meanwhile.
        let scratch = unsafe { Scratch::from_raw(scratch_ptr, scratch_bytes) };
        let args = Args {
            x,
            w: r.w.view(RN, RK, RK, DType::BF16),
            bias: None,
            y: r.y.view_mut(y_rows, RN, RN, F32),
            add_norm: None,
            rope: None,
            rms: None,
        };
        match bf16_gemv::run(&r.plan, args, scratch, stream) {
            Err(e) if is_expected(&e) => {}
            other => return Err(format!("{name}: unexpected {other:?}")),
        }
    }
    // Above capacity: a 9-row view of a 9-row buffer.
    let x9 = FloatBuf::upload(stream, &uniform(13, 9 * RK, -1.0, 1.0), DType::BF16)?;
    let mut y9 = FloatBuf::poisoned(stream, 9 * RN, F32)?;
    let args = Args {
        x: x9.view(9, RK, RK, DType::BF16),
        w: r.w.view(RN, RK, RK, DType::BF16),
        bias: None,
        y: y9.view_mut(9, RN, RN, F32),
        add_norm: None,
        rope: None,
        rms: None,
    };
    if !matches!(
        bf16_gemv::run(&r.plan, args, aligned_scratch(&mut r.scratch, need), stream),
        Err(Error::Capacity { .. })
    ) {
        return Err("9 rows on a max_rows = 8 plan: expected Capacity".into());
    }
    stream.synchronize().map_err(err)?;
    if r.y.download(stream)?.iter().chain(y9.download(stream)?.iter()).any(|v| !v.is_nan()) {
        return Err("a rejected call wrote y".into());
    }
    Ok(())
}

// ---- fused SwiGLU (x_act) -------------------------------------------------------------------

/// A fused-SwiGLU case: x `[M, 2K]` = [gate | up] (row stride 2K + pad), W `[N, K]`.
#[derive(Clone, Copy, Debug)]
struct SiluCase {
    name: &'static str,
    n: usize,
    k: usize,
    ms: &'static [usize],
    limit: Option<f32>,
    bias: Option<DType>,
    /// Extra elements at the end of each row of x and y.
    pad: usize,
    /// Dropped by `B12X_TEST_PROFILE=reduced` (every fused config pinned on 100+ MB of W).
    large: bool,
}

const fn silu_case(name: &'static str, n: usize, k: usize, ms: &'static [usize]) -> SiluCase {
    SiluCase { name, n, k, ms, limit: None, bias: None, pad: 0, large: true }
}

/// The swiglu limit of the `_limit` cases (gpt-oss's): it clamps a good share of the inputs
/// below, which are uniform in ±[`SILU_X_RANGE`].
const SILU_LIMIT: Option<f32> = Some(7.0);
const SILU_X_RANGE: f32 = 10.0;
/// Qwen3-8B's MLP (b12x-layers' dense layer): hidden 4096, intermediate 12288.
const QWEN3_8B: (usize, usize) = (4096, 12288);
const GPT_OSS: shapes::Model = shapes::GPT_OSS_120B;

const SILU_CASES: &[SiluCase] = &[
    silu_case("qwen3_8b_down_silu", QWEN3_8B.0, QWEN3_8B.1, &[1, 3, 8]),
    SiluCase { limit: SILU_LIMIT, ..silu_case("qwen3_8b_down_silu_limit", QWEN3_8B.0, QWEN3_8B.1, &[1, 3, 8]) },
    SiluCase {
        limit: SILU_LIMIT,
        ..silu_case("gpt_oss_120b_expert_down_silu_limit", GPT_OSS.hidden, GPT_OSS.moe_intermediate, &[1, 4])
    },
    // Odd N, K with a partial last 32-wide step (1000 = 31·32 + 8), padded rows, an f32 bias; M
    // on both sides of the shared activation's cut (at most 4 live rows: each element formed
    // once per warp; 5 and more: by every lane).
    SiluCase { pad: 8, bias: Some(F32), large: false, ..silu_case("odd_n_silu", 1031, 1000, &[1, 4, 7]) },
    SiluCase { pad: 8, limit: SILU_LIMIT, large: false, ..silu_case("odd_n_silu_limit", 1031, 1000, &[2, 5, 8]) },
];

/// Host x `[M, 2K]` (row stride `lx`), exactly representable in bf16, uniform in ±SILU_X_RANGE.
fn silu_x(seed: u64, m: usize, lx: usize) -> Vec<f32> {
    cast::<bf16>(&uniform(seed, m * lx, -SILU_X_RANGE, SILU_X_RANGE)).iter().map(|b| b.to_f32()).collect()
}

/// A fused-SwiGLU query (bf16 x and y: the fused kernels' only dtypes).
fn silu_query(n: usize, k: usize, limit: Option<f32>, bias: Option<DType>, pdl: bool) -> Query {
    let x_act = XAct::SiluMul { limit };
    let y_act = YAct::None;
    Query { n, k, x_dtype: DType::BF16, out_dtype: DType::BF16, bias, max_rows: 8, aligned: true, pdl, x_act, y_act }
}

fn silu_op(dev: &Arc<Device>, k: usize, limit: Option<f32>) -> Result<silu_and_mul::Plan, String> {
    let q = silu_and_mul::Query { intermediate: k, dtype: DType::BF16, max_tokens: 8, limit, out: None };
    silu_and_mul::plan(&q, dev).map_err(err)
}

/// `activation.silu_and_mul` of x `[m, 2k]` (row stride `lx`) into `act [m, k]` (contiguous).
fn run_silu_op(
    plan: &silu_and_mul::Plan,
    x: &FloatBuf,
    act: &mut FloatBuf,
    (m, k, lx): (usize, usize, usize),
    s: &Arc<CudaStream>,
) -> b12x_core::Result<()> {
    let args = silu_and_mul::Args {
        x: x.view(m, 2 * k, lx, DType::BF16),
        y: Some(act.view_mut(m, k, k, DType::BF16)),
        codes: None,
        scales: None,
        enc: None,
    };
    silu_and_mul::run(plan, args, Scratch::none(), s)
}

/// Every fused config of M's bucket pinned in turn, with its plain twin (the same id without
/// `_silu`) pinned on a plan without `x_act`: fused `y` == silu_and_mul then the twin, bitwise;
/// and within the oracle's bound of `exact(silu_mul_x(x))`; y's row padding untouched.
fn check_silu(dev: &Arc<Device>, c: SiluCase, m: usize) -> TrialResult {
    let (n, k) = (c.n, c.k);
    let (lx, ly) = (2 * k + c.pad, n + c.pad);
    let stream = dev.stream();
    let x_h = silu_x(41, m, lx);
    let w_h = values(Fill::Uniform, 42, n * k, DType::BF16);
    let b_h = c.bias.map(|d| values(Fill::Uniform, 43, n, d));
    let act_h = reference::silu_mul_x(&gather(&x_h, m, 2 * k, lx), m, k, c.limit);
    let rows: Vec<usize> = (0..n).collect();
    let want = reference::exact(&act_h, &cast::<bf16>(&w_h), b_h.as_deref(), m, k, &rows);
    let x = FloatBuf::upload(stream, &x_h, DType::BF16)?;
    let w = FloatBuf::upload(stream, &w_h, DType::BF16)?;
    let bias = match (&b_h, c.bias) {
        (Some(v), Some(d)) => Some(FloatBuf::upload(stream, v, d)?),
        _ => None,
    };
    let mut act = FloatBuf::poisoned(stream, m * k, DType::BF16)?;
    let (mut y, mut y_twin) =
        (FloatBuf::poisoned(stream, m * ly, DType::BF16)?, FloatBuf::poisoned(stream, m * ly, DType::BF16)?);
    let q = silu_query(n, k, c.limit, c.bias, false);
    let (fused, plain) = (
        bf16_gemv::plan(&q, dev).map_err(err)?,
        bf16_gemv::plan(&Query { x_act: XAct::None, ..q.clone() }, dev).map_err(err)?,
    );
    let op = silu_op(dev, k, c.limit)?;
    let bucket = b12x_core::plan::bucket_of(fused.buckets(), m).ok_or("no bucket")?;
    let label = fused.buckets()[bucket].label();
    let bytes = fused.scratch_layout().total_bytes().max(plain.scratch_layout().total_bytes());
    let mut scratch = alloc_scratch(stream, bytes).map_err(err)?;
    let configs = fused.candidates(bucket);
    if configs.is_empty() || configs.iter().any(|id| !id.contains("_silu_")) {
        return Err(format!("unexpected fused candidates {configs:?}"));
    }
    for id in configs {
        let twin = id.replace("_silu", "");
        let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
        session.pin(&fused, &label, &id);
        session.pin(&plain, &label, &twin);
        // A twin the plain plan lacks fails here (UnknownConfig): the two plans' keys differ, so
        // the pins do not collide.
        session.prepare(&[&fused, &plain, &op]).map_err(err)?;
        for buf in [&mut y, &mut y_twin, &mut act] {
            buf.poison(stream)?;
        }
        poison(stream, &mut scratch).map_err(err)?;
        let args = Args {
            x: x.view(m, 2 * k, lx, DType::BF16),
            w: w.view(n, k, k, DType::BF16),
            bias: bias.as_ref().map(|b| b.view(n, 0, 1, c.bias.unwrap_or(F32))),
            y: y.view_mut(m, n, ly, DType::BF16),
            add_norm: None,
            rope: None,
            rms: None,
        };
        bf16_gemv::run(&fused, args, aligned_scratch(&mut scratch, bytes), stream).map_err(err)?;
        run_silu_op(&op, &x, &mut act, (m, k, lx), stream).map_err(err)?;
        let args = Args {
            x: act.view(m, k, k, DType::BF16),
            w: w.view(n, k, k, DType::BF16),
            bias: bias.as_ref().map(|b| b.view(n, 0, 1, c.bias.unwrap_or(F32))),
            y: y_twin.view_mut(m, n, ly, DType::BF16),
            add_norm: None,
            rope: None,
            rms: None,
        };
        bf16_gemv::run(&plain, args, aligned_scratch(&mut scratch, bytes), stream).map_err(err)?;
        stream.synchronize().map_err(err)?;
        same_bits(&format!("fused y vs silu_and_mul + {twin}"), &y.bits(stream)?, &y_twin.bits(stream)?)?;
        let all = y.download(stream)?;
        let got: Vec<f64> = (0..m).flat_map(|i| all[i * ly..i * ly + n].iter().copied()).collect();
        reference::check_bound(&format!("y [{id}]"), DType::BF16, k, &got, &want, &[m, n])?;
        if padding_written(&all, m, ly, n) {
            return Err(format!("y padding written [{id}]"));
        }
        session.close();
    }
    Ok(())
}

/// A PDL chain as in a decode step's MLP: y1 = x·W1ᵀ (the gate/up projection, `[M, 2I]`), then
/// the fused down projection y2 = silu_and_mul(y1)·W2ᵀ, both PDL-launched and sharing one
/// scratch buffer, y1 and y2 poisoned before every chain: the fused call streams W2 while the
/// first runs and must read y1 (gate and up) only after its wait. Every fused config pinned in
/// turn; y2 must equal bitwise the unfused path on the GPU's y1 (silu_and_mul, then the plain
/// twin config), eager three times and as a captured graph replayed twice.
fn silu_pdl_chain(dev: &Arc<Device>, m: usize, limit: Option<f32>) -> TrialResult {
    // Sanitizer runs (reduced profile): a small MLP, hidden 1024 and intermediate 1536.
    let (h, i) = if reduced_profile() { (1024, 1536) } else { QWEN3_8B };
    let stream = dev.stream();
    let q1 = Query {
        n: 2 * i,
        k: h,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: 8,
        aligned: true,
        pdl: true,
        x_act: XAct::None,
        y_act: YAct::None,
    };
    let q2 = silu_query(h, i, limit, None, true);
    let p1 = bf16_gemv::plan(&q1, dev).map_err(err)?;
    let p2 = bf16_gemv::plan(&q2, dev).map_err(err)?;
    let plain = bf16_gemv::plan(&Query { pdl: false, x_act: XAct::None, ..q2.clone() }, dev).map_err(err)?;
    let op = silu_op(dev, i, limit)?;
    let x = FloatBuf::upload(stream, &values(Fill::Uniform, 51, m * h, DType::BF16), DType::BF16)?;
    let w1 = FloatBuf::upload(stream, &values(Fill::Uniform, 52, 2 * i * h, DType::BF16), DType::BF16)?;
    let w2 = FloatBuf::upload(stream, &values(Fill::Uniform, 53, h * i, DType::BF16), DType::BF16)?;
    let (mut y1, mut y2) =
        (FloatBuf::poisoned(stream, m * 2 * i, DType::BF16)?, FloatBuf::poisoned(stream, m * h, DType::BF16)?);
    let (mut act, mut y_twin) =
        (FloatBuf::poisoned(stream, m * i, DType::BF16)?, FloatBuf::poisoned(stream, m * h, DType::BF16)?);
    let bytes = p1.scratch_layout().total_bytes().max(p2.scratch_layout().total_bytes());
    let mut shared = alloc_poisoned::<u8>(stream, bytes + SCRATCH_ALIGN).map_err(err)?;
    let plain_bytes = plain.scratch_layout().total_bytes();
    let mut plain_scratch = alloc_scratch(stream, plain_bytes).map_err(err)?;
    let bucket = b12x_core::plan::bucket_of(p2.buckets(), m).ok_or("no bucket")?;
    let label = p2.buckets()[bucket].label();
    for id in p2.candidates(bucket) {
        let twin = id.replace("_silu", "");
        let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
        session.pin(&p2, &label, &id);
        session.pin(&plain, &label, &twin);
        session.prepare(&[&p1, &p2, &plain, &op]).map_err(err)?;
        let mut chain = |s: &Arc<CudaStream>, y1: &mut FloatBuf, y2: &mut FloatBuf| -> b12x_core::Result<()> {
            let a1 = Args {
                x: x.view(m, h, h, DType::BF16),
                w: w1.view(2 * i, h, h, DType::BF16),
                bias: None,
                y: y1.view_mut(m, 2 * i, 2 * i, DType::BF16),
                add_norm: None,
                rope: None,
                rms: None,
            };
            bf16_gemv::run(&p1, a1, aligned_scratch(&mut shared, p1.scratch_layout().total_bytes()), s)?;
            let a2 = Args {
                x: y1.view(m, 2 * i, 2 * i, DType::BF16),
                w: w2.view(h, i, i, DType::BF16),
                bias: None,
                y: y2.view_mut(m, h, h, DType::BF16),
                add_norm: None,
                rope: None,
                rms: None,
            };
            bf16_gemv::run(&p2, a2, aligned_scratch(&mut shared, p2.scratch_layout().total_bytes()), s)
        };
        let mut eager = Vec::new();
        for again in 0..3 {
            y1.poison(stream)?;
            y2.poison(stream)?;
            chain(stream, &mut y1, &mut y2).map_err(err)?;
            stream.synchronize().map_err(err)?;
            let bits = y2.bits(stream)?;
            if again == 0 {
                // The unfused path on the y1 this chain produced (plain launches, after it).
                act.poison(stream)?;
                y_twin.poison(stream)?;
                run_silu_op(&op, &y1, &mut act, (m, i, 2 * i), stream).map_err(err)?;
                let a = Args {
                    x: act.view(m, i, i, DType::BF16),
                    w: w2.view(h, i, i, DType::BF16),
                    bias: None,
                    y: y_twin.view_mut(m, h, h, DType::BF16),
                    add_norm: None,
                    rope: None,
                    rms: None,
                };
                bf16_gemv::run(&plain, a, aligned_scratch(&mut plain_scratch, plain_bytes), stream).map_err(err)?;
                stream.synchronize().map_err(err)?;
                if y1.download(stream)?.iter().any(|v| v.is_nan()) {
                    return Err(format!("y1 has NaN [{id}]"));
                }
                same_bits(&format!("y2 vs unfused [{id}]"), &bits, &y_twin.bits(stream)?)?;
                eager = bits;
            } else {
                same_bits(&format!("eager chain {again} [{id}]"), &bits, &eager)?;
            }
        }
        replays_equal_eager(&session, stream, &mut chain, &mut y1, &mut y2, &eager, &id)?;
        session.close();
    }
    Ok(())
}

/// Bad fused inputs on real buffers: typed errors, and `y` stays poisoned (nothing launched).
fn silu_bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let (n, k, m) = (1024, 4096, 2);
    let stream = dev.stream();
    let plan = bf16_gemv::plan(&silu_query(n, k, SILU_LIMIT, None, false), dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    // Room for [m, 2K + 8] rows, so every view below stays inside the buffer.
    let x = FloatBuf::upload(stream, &silu_x(61, m, 2 * k + 8), DType::BF16)?;
    let w = FloatBuf::upload(stream, &values(Fill::Uniform, 62, n * k, DType::BF16), DType::BF16)?;
    let mut y = FloatBuf::poisoned(stream, m * n, DType::BF16)?;
    let need = plan.scratch_layout().total_bytes();
    let mut scratch = alloc_scratch(stream, need).map_err(err)?;
    let raw = |ptr: u64, cols: usize, stride: usize| {
        // SAFETY: every view stays inside `x` (m rows of 2K + 8); all are rejected before a launch.
        unsafe { TensorRef::from_raw(ptr, &[m, cols], &[stride as isize, 1], DType::BF16) }.map_err(err)
    };
    let cases: [(&str, TensorRef<'_>, IsExpected); 4] = [
        ("x of K columns (no up half)", raw(x.ptr(), k, k)?, |e| matches!(e, Error::Shape { tensor: "x", .. })),
        ("odd x row stride", raw(x.ptr(), 2 * k, 2 * k + 1)?, |e| matches!(e, Error::Misaligned { tensor: "x", .. })),
        ("misaligned x", raw(x.ptr() + 2, 2 * k, 2 * k)?, |e| matches!(e, Error::Misaligned { tensor: "x", .. })),
        ("overlapping x rows", raw(x.ptr(), 2 * k, 2 * k - 8)?, |e| matches!(e, Error::Stride { tensor: "x", .. })),
    ];
    for (name, xv, is_expected) in cases {
        let args = Args {
            x: xv,
            w: w.view(n, k, k, DType::BF16),
            bias: None,
            y: y.view_mut(m, n, n, DType::BF16),
            add_norm: None,
            rope: None,
            rms: None,
        };
        match bf16_gemv::run(&plan, args, aligned_scratch(&mut scratch, need), stream) {
            Err(e) if is_expected(&e) => {}
            other => return Err(format!("{name}: unexpected {other:?}")),
        }
    }
    // Nine rows on a fused plan (capacity 8).
    let x9 = FloatBuf::upload(stream, &silu_x(63, 9, 2 * k), DType::BF16)?;
    let mut y9 = FloatBuf::poisoned(stream, 9 * n, DType::BF16)?;
    let args = Args {
        x: x9.view(9, 2 * k, 2 * k, DType::BF16),
        w: w.view(n, k, k, DType::BF16),
        bias: None,
        y: y9.view_mut(9, n, n, DType::BF16),
        add_norm: None,
        rope: None,
        rms: None,
    };
    if !matches!(bf16_gemv::run(&plan, args, aligned_scratch(&mut scratch, need), stream), Err(Error::Capacity { .. }))
    {
        return Err("9 rows on a fused plan: expected Capacity".into());
    }
    // A fused query the kernels cannot serve is rejected by plan.
    for bad in [
        Query { x_dtype: F32, ..silu_query(n, k, None, None, false) },
        Query { out_dtype: F32, ..silu_query(n, k, None, None, false) },
    ] {
        if !matches!(bf16_gemv::plan(&bad, dev), Err(Error::InvalidQuery { field: "x_act", .. })) {
            return Err(format!("{bad:?}: expected InvalidQuery(x_act)"));
        }
    }
    stream.synchronize().map_err(err)?;
    if y.download(stream)?.iter().chain(y9.download(stream)?.iter()).any(|v| !v.is_nan()) {
        return Err("a rejected call wrote y".into());
    }
    session.close();
    Ok(())
}

/// A SwiGLU-epilogue case (`YAct::SiluMul`): W `[N, K]` read as 16-row (gate, up) groups.
#[derive(Clone, Copy)]
struct EpiCase {
    name: &'static str,
    n: usize,
    k: usize,
    ms: &'static [usize],
    limit: Option<f32>,
    bias: Option<DType>,
    pad: usize,
    pdl: bool,
    large: bool,
}

const EPI_CASES: &[EpiCase] = &[
    // Qwen3-8B's gate/up projection (N = 2 · 12288, K = 4096): the decode layer's shape.
    EpiCase {
        name: "qwen3_8b_gate_up_ysilu",
        n: 2 * QWEN3_8B.1,
        k: QWEN3_8B.0,
        ms: &[1, 8],
        limit: None,
        bias: None,
        pad: 0,
        pdl: false,
        large: true,
    },
    EpiCase {
        name: "qwen3_8b_gate_up_ysilu_pdl",
        n: 2 * QWEN3_8B.1,
        k: QWEN3_8B.0,
        ms: &[1],
        limit: None,
        bias: None,
        pad: 0,
        pdl: true,
        large: true,
    },
    // Small: a partial last k step, padded rows, an f32 / bf16 bias, the limit, M past 8
    // (NT = 2), split-K merges.
    EpiCase {
        name: "small_ysilu_limit_bias",
        n: 1040,
        k: 1000,
        ms: &[1, 3, 16],
        limit: SILU_LIMIT,
        bias: Some(F32),
        pad: 8,
        pdl: false,
        large: false,
    },
    EpiCase {
        name: "small_ysilu_bf16_bias",
        n: 256,
        k: 7168,
        ms: &[2, 9],
        limit: None,
        bias: Some(DType::BF16),
        pad: 0,
        pdl: false,
        large: false,
    },
];

/// Every candidate config of M's bucket pinned in turn on a `YAct::SiluMul` plan and on its plain
/// twin (same id, `YAct::None`): the epilogue's `y [M, N/2]` equals bitwise
/// `activation.silu_and_mul` (GPU) of the plain GEMV's output with its (gate, up) rows
/// de-interleaved; and the f64 host activation of the exact sums agrees within a cosine
/// distance of 1e-4; y's row padding untouched.
fn check_ysilu(dev: &Arc<Device>, c: EpiCase, m: usize) -> TrialResult {
    let (n, k, i) = (c.n, c.k, c.n / 2);
    let (lx, ly) = (k + c.pad, i + c.pad);
    let stream = dev.stream();
    let x_h = values(Fill::Uniform, 51, m * lx, DType::BF16);
    let w_h = values(Fill::Uniform, 52, n * k, DType::BF16);
    let b_h = c.bias.map(|d| values(Fill::Uniform, 53, n, d));
    let x = FloatBuf::upload(stream, &x_h, DType::BF16)?;
    let w = FloatBuf::upload(stream, &w_h, DType::BF16)?;
    let bias = match (&b_h, c.bias) {
        (Some(v), Some(d)) => Some(FloatBuf::upload(stream, v, d)?),
        _ => None,
    };
    let mut y = FloatBuf::poisoned(stream, m * ly, DType::BF16)?;
    let mut y_plain = FloatBuf::poisoned(stream, m * n, DType::BF16)?;
    let mut act = FloatBuf::poisoned(stream, m * i, DType::BF16)?;
    let q = Query {
        n,
        k,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias: c.bias,
        max_rows: 16,
        aligned: true,
        pdl: c.pdl,
        x_act: XAct::None,
        y_act: YAct::SiluMul { limit: c.limit },
    };
    let (epi, plain) = (
        bf16_gemv::plan(&q, dev).map_err(err)?,
        bf16_gemv::plan(&Query { y_act: YAct::None, ..q.clone() }, dev).map_err(err)?,
    );
    let op = silu_and_mul::plan(
        &silu_and_mul::Query { intermediate: i, dtype: DType::BF16, max_tokens: 16, limit: c.limit, out: None },
        dev,
    )
    .map_err(err)?;
    // The host's f64 activation of the exact sums (an independent, approximate check).
    let rows: Vec<usize> = (0..n).collect();
    let exact = reference::exact(&gather(&x_h, m, k, lx), &cast::<bf16>(&w_h), b_h.as_deref(), m, k, &rows);
    let host_act: Vec<f64> = (0..m * i)
        .map(|e| {
            let (t, col) = (e / i, e % i);
            let row = (col / 8) * 16 + col % 8;
            let (g, u) = (exact.acc[t * n + row], exact.acc[t * n + row + 8]);
            b12x_core::testing::silu_mul(g as f32, u as f32, c.limit) as f64
        })
        .collect();
    let bucket = b12x_core::plan::bucket_of(epi.buckets(), m).ok_or("no bucket")?;
    let label = epi.buckets()[bucket].label();
    let bytes = epi.scratch_layout().total_bytes().max(plain.scratch_layout().total_bytes());
    let mut scratch = alloc_scratch(stream, bytes).map_err(err)?;
    let configs = epi.candidates(bucket);
    if configs.is_empty() || configs.iter().any(|id| id.contains("_c2_") || id.contains("_c4_") || id.contains("_c8_"))
    {
        return Err(format!("unexpected epilogue candidates {configs:?}"));
    }
    for id in configs {
        let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
        session.pin(&epi, &label, &id);
        session.pin(&plain, &label, &id);
        session.prepare(&[&epi, &plain, &op]).map_err(err)?;
        for buf in [&mut y, &mut y_plain, &mut act] {
            buf.poison(stream)?;
        }
        poison(stream, &mut scratch).map_err(err)?;
        let bias_view = || bias.as_ref().map(|b| b.view(n, 0, 1, c.bias.unwrap_or(F32)));
        let args = Args {
            x: x.view(m, k, lx, DType::BF16),
            w: w.view(n, k, k, DType::BF16),
            bias: bias_view(),
            y: y.view_mut(m, i, ly, DType::BF16),
            add_norm: None,
            rope: None,
            rms: None,
        };
        bf16_gemv::run(&epi, args, aligned_scratch(&mut scratch, bytes), stream).map_err(err)?;
        let args = Args {
            x: x.view(m, k, lx, DType::BF16),
            w: w.view(n, k, k, DType::BF16),
            bias: bias_view(),
            y: y_plain.view_mut(m, n, n, DType::BF16),
            add_norm: None,
            rope: None,
            rms: None,
        };
        bf16_gemv::run(&plain, args, aligned_scratch(&mut scratch, bytes), stream).map_err(err)?;
        // De-interleave the plain output into [gate | up] rows and run the op on it.
        let yp = y_plain.download(stream)?;
        let gu = FloatBuf::upload(stream, &deinterleave_gate_up(&yp, m, n), DType::BF16)?;
        let args = silu_and_mul::Args {
            x: gu.view(m, n, n, DType::BF16),
            y: Some(act.view_mut(m, i, i, DType::BF16)),
            codes: None,
            scales: None,
            enc: None,
        };
        silu_and_mul::run(&op, args, Scratch::none(), stream).map_err(err)?;
        stream.synchronize().map_err(err)?;
        let (yb, ab) = (y.bits(stream)?, act.bits(stream)?);
        let y_live = live_rows(&yb, m, ly, i);
        same_bits(&format!("epilogue y vs {id} + silu_and_mul"), &y_live, &ab)?;
        let all = y.download(stream)?;
        if padding_written(&all, m, ly, i) {
            return Err(format!("y padding written [{id}]"));
        }
        let got: Vec<f64> = (0..m).flat_map(|t| all[t * ly..t * ly + i].iter().copied()).collect();
        let dot: f64 = got.iter().zip(&host_act).map(|(a, b)| a * b).sum();
        let nrm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
        let cos = dot / (nrm(&got) * nrm(&host_act)).max(f64::MIN_POSITIVE);
        // A NaN cosine fails too.
        if (1.0 - cos).is_nan() || 1.0 - cos > 1e-4 {
            return Err(format!("[{id}] 1 - cos against the host activation = {:e}", 1.0 - cos));
        }
        session.close();
    }
    Ok(())
}

/// `YAct::SiluMul` where it cannot run is a typed error at planning; a bad y shape at run
/// launches nothing.
fn ysilu_bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let base = Query {
        n: 1024,
        k: 512,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: 4,
        aligned: true,
        pdl: false,
        x_act: XAct::None,
        y_act: YAct::SiluMul { limit: None },
    };
    for (q, what) in [
        (Query { out_dtype: F32, ..base.clone() }, "f32 y"),
        (Query { x_dtype: F32, ..base.clone() }, "f32 x"),
        (Query { n: 1000, ..base.clone() }, "N % 16"),
        (Query { x_act: XAct::SiluMul { limit: None }, ..base.clone() }, "with x_act"),
        (Query { y_act: YAct::SiluMul { limit: Some(-1.0) }, ..base.clone() }, "negative limit"),
    ] {
        match bf16_gemv::plan(&q, dev) {
            Err(Error::InvalidQuery { field: "y_act", .. }) => {}
            other => return Err(format!("{what}: expected InvalidQuery(y_act), got {:?}", other.err())),
        }
    }
    let plan = bf16_gemv::plan(&base, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&plan]).map_err(err)?;
    let stream = dev.stream();
    let x = FloatBuf::upload(stream, &vec![1.0; 2 * 512], DType::BF16)?;
    let w = FloatBuf::upload(stream, &vec![1.0; 1024 * 512], DType::BF16)?;
    let mut y = FloatBuf::poisoned(stream, 2 * 1024, DType::BF16)?;
    let mut scratch = alloc_scratch(stream, plan.scratch_layout().total_bytes().max(1)).map_err(err)?;
    // y must be [M, N/2]: [M, N] is refused before any launch.
    let args = Args {
        x: x.view(2, 512, 512, DType::BF16),
        w: w.view(1024, 512, 512, DType::BF16),
        bias: None,
        y: y.view_mut(2, 1024, 1024, DType::BF16),
        add_norm: None,
        rope: None,
        rms: None,
    };
    match bf16_gemv::run(&plan, args, aligned_scratch(&mut scratch, plan.scratch_layout().total_bytes()), stream) {
        Err(Error::Shape { tensor: "y", .. }) => {}
        other => return Err(format!("[M, N] y: expected Shape(y), got {other:?}")),
    }
    stream.synchronize().map_err(err)?;
    if y.download(stream)?.iter().any(|v| !v.is_nan()) {
        return Err("a refused call wrote y".into());
    }
    session.close();
    Ok(())
}

/// `[gate | up]` `[m, n]` from a SwiGLU-epilogue GEMV's plain `[m, n]` output (16-row groups: 8
/// gate rows, then the matching 8 up rows; `interleave_gate_up`'s layout), as f32.
fn deinterleave_gate_up(y: &[f64], m: usize, n: usize) -> Vec<f32> {
    let i = n / 2;
    let mut gu = vec![0.0f32; m * n];
    for t in 0..m {
        for col in 0..i {
            let row = (col / 8) * 16 + col % 8;
            gu[t * n + col] = y[t * n + row] as f32;
            gu[t * n + i + col] = y[t * n + row + 8] as f32;
        }
    }
    gu
}

/// The host `silu_and_mul` (no limit) of a SwiGLU-epilogue GEMV's plain bf16 output `[m, n]`:
/// the bits its epilogue twin must store, `[m, n/2]`.
fn host_swiglu_bits(y: &[f64], m: usize, n: usize) -> Vec<u32> {
    let gu = cast::<bf16>(&deinterleave_gate_up(y, m, n));
    let act = b12x_norm::silu_and_mul::reference::silu_and_mul(&gu, n / 2, None);
    act.iter().map(|v| u32::from(v.to_bits())).collect()
}

// ---- fused add+RMSNorm (x_act) --------------------------------------------------------------

/// A fused add+RMSNorm case: x and the residual `[M, K]` (row stride K + pad), W `[N, K]`.
#[derive(Clone, Copy, Debug)]
struct NormCase {
    name: &'static str,
    n: usize,
    k: usize,
    ms: &'static [usize],
    bias: Option<DType>,
    pad: usize,
    /// With the SwiGLU epilogue (W's rows read as 16-row gate/up groups): a layer's gate/up
    /// projection after its second norm.
    y_silu: bool,
    /// Dropped by `B12X_TEST_PROFILE=reduced`.
    large: bool,
}

const fn norm_case(name: &'static str, n: usize, k: usize, ms: &'static [usize]) -> NormCase {
    NormCase { name, n, k, ms, bias: None, pad: 0, y_silu: false, large: false }
}

const NORM_EPS: f32 = 1e-6;

const NORM_CASES: &[NormCase] = &[
    // Qwen3-8B's QKV projection after the first norm (b12x-layers' dense layer).
    NormCase { large: true, ..norm_case("qwen3_8b_qkv_addnorm", 6144, 4096, &[1, 3, 8]) },
    // Odd N, K with a partial last 32-wide step (1000 = 31·32 + 8), padded rows, an f32 bias.
    NormCase { pad: 8, bias: Some(F32), ..norm_case("odd_n_addnorm", 1031, 1000, &[1, 4, 7]) },
    // The gate/up projection after the second norm, with the SwiGLU epilogue.
    NormCase { y_silu: true, pad: 8, ..norm_case("gate_up_silu_addnorm", 3072, 1024, &[1, 5, 8]) },
];

/// A fused x-load plan (BF16 x and y, aligned, up to 8 rows; with the SwiGLU epilogue when
/// `y_silu`) and its twin without the epilogue.
fn fused_pair(
    dev: &Arc<Device>,
    (n, k): (usize, usize),
    bias: Option<DType>,
    x_act: XAct,
    y_silu: bool,
) -> Result<(Plan, Plan), String> {
    let q = Query {
        n,
        k,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias,
        max_rows: 8,
        aligned: true,
        pdl: false,
        x_act,
        y_act: if y_silu { YAct::SiluMul { limit: None } } else { YAct::None },
    };
    let plan = bf16_gemv::plan(&q, dev).map_err(err)?;
    let twin = bf16_gemv::plan(&Query { y_act: YAct::None, ..q }, dev).map_err(err)?;
    Ok((plan, twin))
}

/// Every fused config of M's bucket pinned in turn: `residual_out` must equal norm.rmsnorm's
/// oracle residual bit for bit (padding untouched); `y` within the GEMV bound of the f64 product
/// of the oracle's `h`, widened by Σ|w|·ulp(h) (the kernel's rrms sums in another order, so an `h`
/// element may round one bf16 ULP apart, as norm.rmsnorm's own bound allows). With the SwiGLU
/// epilogue: bitwise the same config without it (a twin plan) followed by the host
/// silu_and_mul, and the twin within the bound.
fn check_addnorm(dev: &Arc<Device>, c: NormCase, m: usize) -> TrialResult {
    let (n, k) = (c.n, c.k);
    let n_out = if c.y_silu { n / 2 } else { n };
    let (lx, ly) = (k + c.pad, n_out + c.pad);
    let stream = dev.stream();
    let x_h = values(Fill::Uniform, 51, m * lx, DType::BF16);
    let r_h: Vec<f32> = values(Fill::Uniform, 52, m * lx, DType::BF16).iter().map(|v| 2.0 * v).collect();
    let nw_h: Vec<f32> = cast::<bf16>(&uniform(53, k, 0.5, 1.5)).iter().map(|b| b.to_f32()).collect::<Vec<f32>>();
    let w_h = values(Fill::Uniform, 54, n * k, DType::BF16);
    let b_h = c.bias.map(|d| values(Fill::Uniform, 55, n, d));
    // The oracle: norm.rmsnorm's fused form per token, then the exact product.
    let xb = cast::<bf16>(&gather(&x_h, m, k, lx));
    let mut res = cast::<bf16>(&gather(&r_h, m, k, lx));
    let nwb = cast::<bf16>(&nw_h);
    let mut h = Vec::with_capacity(m * k);
    for t in 0..m {
        let ht = b12x_norm::rmsnorm::reference::rmsnorm_add(
            &xb[t * k..(t + 1) * k],
            &mut res[t * k..(t + 1) * k],
            &nwb,
            NORM_EPS,
        );
        h.extend(ht);
    }
    let wb = cast::<bf16>(&w_h);
    let rows: Vec<usize> = (0..n).collect();
    let want = reference::exact(&h, &wb, b_h.as_deref(), m, k, &rows);
    // Σ_k |w[n,k]| · ulp(h[t,k]): what one-ULP differences of h can move y by.
    let mut slack = vec![0.0f64; m * n];
    for t in 0..m {
        let hu: Vec<f64> = h[t * k..(t + 1) * k].iter().map(|v| reference::ulp(DType::BF16, v.to_f64())).collect();
        for r in 0..n {
            slack[t * n + r] = wb[r * k..(r + 1) * k].iter().zip(&hu).map(|(w, u)| w.to_f64().abs() * u).sum();
        }
    }
    let x = FloatBuf::upload(stream, &x_h, DType::BF16)?;
    let r = FloatBuf::upload(stream, &r_h, DType::BF16)?;
    let nw = FloatBuf::upload(stream, &nw_h, DType::BF16)?;
    let w = FloatBuf::upload(stream, &w_h, DType::BF16)?;
    let bias = match (&b_h, c.bias) {
        (Some(v), Some(d)) => Some(FloatBuf::upload(stream, v, d)?),
        _ => None,
    };
    let mut r_out = FloatBuf::poisoned(stream, m * lx, DType::BF16)?;
    let mut y = FloatBuf::poisoned(stream, m * ly, DType::BF16)?;
    let mut y_twin = FloatBuf::poisoned(stream, m * n, DType::BF16)?;
    let (fused, twin) = fused_pair(dev, (n, k), c.bias, XAct::AddRmsNorm { eps: NORM_EPS }, c.y_silu)?;
    let bucket = b12x_core::plan::bucket_of(fused.buckets(), m).ok_or("no bucket")?;
    let label = fused.buckets()[bucket].label();
    let bytes = fused.scratch_layout().total_bytes().max(twin.scratch_layout().total_bytes());
    let mut scratch = alloc_scratch(stream, bytes).map_err(err)?;
    let configs = fused.candidates(bucket);
    if configs.is_empty() || configs.iter().any(|id| !id.contains("_addnorm_")) {
        return Err(format!("unexpected fused candidates {configs:?}"));
    }
    let want_res: Vec<u32> = res.iter().map(|v| u32::from(v.to_bits())).collect();
    for id in configs {
        let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
        session.pin(&fused, &label, &id);
        if c.y_silu {
            session.pin(&twin, &label, &id);
        }
        session.prepare(&[&fused, &twin]).map_err(err)?;
        for buf in [&mut y, &mut y_twin, &mut r_out] {
            buf.poison(stream)?;
        }
        poison(stream, &mut scratch).map_err(err)?;
        let bias_view = || bias.as_ref().map(|b| b.view(n, 0, 1, c.bias.unwrap_or(F32)));
        let args = Args {
            x: x.view(m, k, lx, DType::BF16),
            w: w.view(n, k, k, DType::BF16),
            bias: bias_view(),
            y: y.view_mut(m, n_out, ly, DType::BF16),
            rope: None,
            rms: None,
            add_norm: Some(bf16_gemv::AddNorm {
                residual: r.view(m, k, lx, DType::BF16),
                residual_out: r_out.view_mut(m, k, lx, DType::BF16),
                norm_w: nw.view(k, 0, 1, DType::BF16),
            }),
        };
        bf16_gemv::run(&fused, args, aligned_scratch(&mut scratch, bytes), stream).map_err(err)?;
        stream.synchronize().map_err(err)?;
        let rb = r_out.bits(stream)?;
        let live = live_rows(&rb, m, lx, k);
        same_bits(&format!("residual_out [{id}]"), &live, &want_res)?;
        if bits_padding_written(&rb, m, lx, k) {
            return Err(format!("residual_out padding written [{id}]"));
        }
        let all = y.download(stream)?;
        if padding_written(&all, m, ly, n_out) {
            return Err(format!("y padding written [{id}]"));
        }
        let check = |name: String, got: &[f64]| -> TrialResult {
            b12x_core::testing::check_close(&name, got, &want.acc, &[m, n], |i| {
                reference::bound(DType::BF16, k, want.acc[i], want.abs[i]) + slack[i]
            })
            .map(|_| ())
        };
        if !c.y_silu {
            let got: Vec<f64> = (0..m).flat_map(|t| all[t * ly..t * ly + n].iter().copied()).collect();
            check(format!("y [{id}]"), &got)?;
        } else {
            let args = Args {
                x: x.view(m, k, lx, DType::BF16),
                w: w.view(n, k, k, DType::BF16),
                bias: bias_view(),
                y: y_twin.view_mut(m, n, n, DType::BF16),
                rope: None,
                rms: None,
                add_norm: Some(bf16_gemv::AddNorm {
                    residual: r.view(m, k, lx, DType::BF16),
                    residual_out: r_out.view_mut(m, k, lx, DType::BF16),
                    norm_w: nw.view(k, 0, 1, DType::BF16),
                }),
            };
            bf16_gemv::run(&twin, args, aligned_scratch(&mut scratch, bytes), stream).map_err(err)?;
            stream.synchronize().map_err(err)?;
            let yp = y_twin.download(stream)?;
            check(format!("twin y [{id}]"), &yp)?;
            // De-interleave into [gate | up] and apply the host silu_and_mul.
            let i = n / 2;
            let want_bits = host_swiglu_bits(&yp, m, n);
            let yb = y.bits(stream)?;
            let y_live = live_rows(&yb, m, ly, i);
            same_bits(&format!("epilogue y vs {id} + silu_and_mul"), &y_live, &want_bits)?;
        }
        session.close();
    }
    Ok(())
}

/// `XAct::AddRmsNorm` where it cannot run is a typed error at planning; missing, misshapen,
/// misaligned or overlapping add+RMSNorm tensors at run launch nothing.
fn addnorm_bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let (n, k, m) = (256, 512, 2);
    let base = Query {
        n,
        k,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: 8,
        aligned: true,
        pdl: false,
        x_act: XAct::AddRmsNorm { eps: NORM_EPS },
        y_act: YAct::None,
    };
    for (q, what) in [
        (Query { out_dtype: F32, ..base.clone() }, "f32 y"),
        (Query { x_dtype: F32, ..base.clone() }, "f32 x"),
        (Query { aligned: false, ..base.clone() }, "unaligned"),
        (Query { k: 500, ..base.clone() }, "K % 8"),
        (Query { max_rows: 9, ..base.clone() }, "max_rows 9"),
        (Query { x_act: XAct::AddRmsNorm { eps: f32::NAN }, ..base.clone() }, "NaN eps"),
        (Query { x_act: XAct::AddRmsNorm { eps: -1.0 }, ..base.clone() }, "negative eps"),
    ] {
        match bf16_gemv::plan(&q, dev) {
            Err(Error::InvalidQuery { field: "x_act", .. }) => {}
            other => return Err(format!("{what}: expected InvalidQuery(x_act), got {:?}", other.err())),
        }
    }
    let plan = bf16_gemv::plan(&base, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&plan]).map_err(err)?;
    let stream = dev.stream();
    let x = FloatBuf::upload(stream, &vec![1.0; m * k], DType::BF16)?;
    let w = FloatBuf::upload(stream, &vec![1.0; n * k], DType::BF16)?;
    let r = FloatBuf::upload(stream, &vec![1.0; m * k + 8], DType::BF16)?;
    let nw = FloatBuf::upload(stream, &vec![1.0; k + 8], DType::BF16)?;
    let mut r_out = FloatBuf::poisoned(stream, m * k, DType::BF16)?;
    let mut y = FloatBuf::poisoned(stream, m * n, DType::BF16)?;
    let bytes = plan.scratch_layout().total_bytes();
    let mut scratch = alloc_scratch(stream, bytes.max(1)).map_err(err)?;
    let mut call = |add_norm: Option<bf16_gemv::AddNorm<'_>>, y: &mut FloatBuf| {
        let args = Args {
            x: x.view(m, k, k, DType::BF16),
            w: w.view(n, k, k, DType::BF16),
            bias: None,
            y: y.view_mut(m, n, n, DType::BF16),
            rope: None,
            rms: None,
            add_norm,
        };
        bf16_gemv::run(&plan, args, aligned_scratch(&mut scratch, bytes), stream)
    };
    if !matches!(call(None, &mut y), Err(Error::Shape { tensor: "add_norm", .. })) {
        return Err("no add_norm on an AddRmsNorm plan: expected Shape(add_norm)".into());
    }
    let res = call(
        Some(bf16_gemv::AddNorm {
            residual: r.view(m, k - 8, k, DType::BF16),
            residual_out: r_out.view_mut(m, k, k, DType::BF16),
            norm_w: nw.view(k, 0, 1, DType::BF16),
        }),
        &mut y,
    );
    if !matches!(res, Err(Error::Shape { tensor: "residual", .. })) {
        return Err(format!("[M, K - 8] residual: expected Shape(residual), got {res:?}"));
    }
    // A residual starting one element in: not 16-byte aligned.
    // SAFETY: inside r's allocation (m·k + 8 elements).
    let r_mis = unsafe { TensorRef::from_raw(r.ptr() + 2, &[m, k], &[k as isize, 1], DType::BF16) }.map_err(err)?;
    let res = call(
        Some(bf16_gemv::AddNorm {
            residual: r_mis,
            residual_out: r_out.view_mut(m, k, k, DType::BF16),
            norm_w: nw.view(k, 0, 1, DType::BF16),
        }),
        &mut y,
    );
    if !matches!(res, Err(Error::Misaligned { tensor: "residual", .. })) {
        return Err(format!("misaligned residual: expected Misaligned(residual), got {res:?}"));
    }
    // residual_out over the residual itself: refused (every CTA reads what one CTA writes).
    // SAFETY: r's allocation, viewed writable for the check only (nothing is launched).
    let r_alias =
        unsafe { b12x_core::TensorMut::from_raw(r.ptr(), &[m, k], &[k as isize, 1], DType::BF16) }.map_err(err)?;
    let res = call(
        Some(bf16_gemv::AddNorm {
            residual: r.view(m, k, k, DType::BF16),
            residual_out: r_alias,
            norm_w: nw.view(k, 0, 1, DType::BF16),
        }),
        &mut y,
    );
    if res.is_ok() {
        return Err("residual_out aliasing the residual: expected an error".into());
    }
    stream.synchronize().map_err(err)?;
    if y.download(stream)?.iter().chain(r_out.download(stream)?.iter()).any(|v| !v.is_nan()) {
        return Err("a refused call wrote y or residual_out".into());
    }
    session.close();
    Ok(())
}

// ---- the split add+RMSNorm (YAct::ResidualRms, then XAct::RmsScale) --------------------------

/// An O projection `[hidden, k_o]` with the residual epilogue, then a gate/up projection
/// `[n_gu, hidden]` reading its output with the rrms scale (rows of y and x padded by `pad`).
#[derive(Clone, Copy, Debug)]
struct SplitCase {
    name: &'static str,
    hidden: usize,
    k_o: usize,
    n_gu: usize,
    ms: &'static [usize],
    bias: Option<DType>,
    pad: usize,
    /// The gate/up projection with the SwiGLU epilogue.
    y_silu: bool,
    large: bool,
}

const SPLIT_CASES: &[SplitCase] = &[
    // Qwen3-8B's O and gate/up projections (b12x-layers' `norm2_in_o_proj`).
    SplitCase {
        name: "qwen3_8b_split_norm2",
        hidden: 4096,
        k_o: 4096,
        n_gu: 24576,
        ms: &[1, 3, 8],
        bias: None,
        pad: 0,
        y_silu: true,
        large: true,
    },
    // Odd hidden (a partial 16-row group), padded rows, an f32 bias, plain gate/up output.
    SplitCase {
        name: "odd_split_norm2",
        hidden: 1000,
        k_o: 520,
        n_gu: 776,
        ms: &[1, 5, 8],
        bias: Some(F32),
        pad: 8,
        y_silu: false,
        large: false,
    },
    SplitCase {
        name: "small_split_norm2_silu",
        hidden: 1024,
        k_o: 1024,
        n_gu: 3072,
        ms: &[2, 8],
        bias: None,
        pad: 8,
        y_silu: true,
        large: false,
    },
];

/// `sum_sq` as the `_resrms` kernel forms it: per 16-row group the butterfly xor 8, 4, 2, 1 of
/// the squares (lane 0's sum), rows past `n` adding 0.
fn host_group_sums(r: &[f32], n: usize) -> Vec<f32> {
    (0..n.div_ceil(16))
        .map(|g| {
            let mut a: Vec<f32> =
                (0..16).map(|i| r.get(16 * g + i).filter(|_| 16 * g + i < n).map_or(0.0, |v| v * v)).collect();
            for o in [8, 4, 2, 1] {
                a = (0..16).map(|i| a[i] + a[i ^ o]).collect();
            }
            a[0]
        })
        .collect()
}

/// Every `_resrms` config of M's bucket pinned in turn (with a `_rmsx` config beside it,
/// round-robin): the new residual must equal the plain twin (same config id without `_resrms`)
/// plus the residual, rounded once, bit for bit (padding untouched); `sum_sq` the host butterfly
/// of its squares bit for bit. The gate/up projection on that residual: within the GEMV bound of
/// the f64 product `rrms · Σ r·(w·nw)` (+ bias), rrms from the device's sums in f64 (slack for
/// rsqrtf and the sum order), and with the SwiGLU epilogue bitwise its `_rmsx` twin without the
/// epilogue followed by the host silu_and_mul.
fn check_split_norm(dev: &Arc<Device>, c: SplitCase, m: usize) -> TrialResult {
    const EPS: f32 = 1e-6;
    let (hd, ko, ngu) = (c.hidden, c.k_o, c.n_gu);
    let n_out = if c.y_silu { ngu / 2 } else { ngu };
    let (lx, lr, ly) = (ko + c.pad, hd + c.pad, n_out + c.pad);
    let groups = bf16_gemv::rms_groups(hd);
    let stream = dev.stream();
    let x_h = values(Fill::Uniform, 61, m * lx, DType::BF16);
    let res_h: Vec<f32> = values(Fill::Uniform, 62, m * lr, DType::BF16).iter().map(|v| 2.0 * v).collect();
    let wo_h = values(Fill::Uniform, 63, hd * ko, DType::BF16);
    let nw = cast::<bf16>(&uniform(64, hd, 0.5, 1.5));
    let wgu = bf16_gemv::fold_norm_weight(&cast::<bf16>(&values(Fill::Uniform, 65, ngu * hd, DType::BF16)), &nw);
    let wgu_h: Vec<f32> = wgu.iter().map(|v| v.to_f32()).collect();
    let bo_h = c.bias.map(|d| values(Fill::Uniform, 66, hd, d));
    let bgu_h = c.bias.map(|d| values(Fill::Uniform, 67, ngu, d));
    let up = |v: &[f32], d| FloatBuf::upload(stream, v, d);
    let (x, res, wo, wg) =
        (up(&x_h, DType::BF16)?, up(&res_h, DType::BF16)?, up(&wo_h, DType::BF16)?, up(&wgu_h, DType::BF16)?);
    let bo = match (&bo_h, c.bias) {
        (Some(v), Some(d)) => Some(up(v, d)?),
        _ => None,
    };
    let bg = match (&bgu_h, c.bias) {
        (Some(v), Some(d)) => Some(up(v, d)?),
        _ => None,
    };
    let mut r_new = FloatBuf::poisoned(stream, m * lr, DType::BF16)?;
    let mut y_plain = FloatBuf::poisoned(stream, m * hd, DType::BF16)?;
    let mut sum_sq = FloatBuf::poisoned(stream, m * groups, DType::F32)?;
    let mut y = FloatBuf::poisoned(stream, m * ly, DType::BF16)?;
    let mut y_twin = FloatBuf::poisoned(stream, m * ngu, DType::BF16)?;
    let base = |n, k| Query {
        n,
        k,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias: c.bias,
        max_rows: 8,
        aligned: true,
        pdl: false,
        x_act: XAct::None,
        y_act: YAct::None,
    };
    let rq = Query { y_act: YAct::ResidualRms, ..base(hd, ko) };
    let sq = Query {
        x_act: XAct::RmsScale { eps: EPS },
        y_act: if c.y_silu { YAct::SiluMul { limit: None } } else { YAct::None },
        ..base(ngu, hd)
    };
    let (res_plan, res_twin) =
        (bf16_gemv::plan(&rq, dev).map_err(err)?, bf16_gemv::plan(&base(hd, ko), dev).map_err(err)?);
    let (sc_plan, sc_twin) = (
        bf16_gemv::plan(&sq, dev).map_err(err)?,
        bf16_gemv::plan(&Query { y_act: YAct::None, ..sq.clone() }, dev).map_err(err)?,
    );
    let bucket = b12x_core::plan::bucket_of(res_plan.buckets(), m).ok_or("no bucket")?;
    let label = res_plan.buckets()[bucket].label();
    let bytes =
        [&res_plan, &res_twin, &sc_plan, &sc_twin].iter().map(|p| p.scratch_layout().total_bytes()).max().unwrap_or(0);
    let mut scratch = alloc_scratch(stream, bytes).map_err(err)?;
    let (res_ids, sc_ids) = (res_plan.candidates(bucket), sc_plan.candidates(bucket));
    if res_ids.is_empty() || res_ids.iter().any(|id| !id.contains("_resrms_")) {
        return Err(format!("unexpected residual candidates {res_ids:?}"));
    }
    if sc_ids.is_empty() || sc_ids.iter().any(|id| !id.contains("_rmsx_")) {
        return Err(format!("unexpected scale candidates {sc_ids:?}"));
    }
    let resb = cast::<bf16>(&gather(&res_h, m, hd, lr));
    fn view_b(b: &Option<FloatBuf>, n: usize, d: Option<DType>) -> Option<TensorRef<'_>> {
        b.as_ref().map(|b| b.view(n, 0, 1, d.unwrap_or(F32)))
    }
    for i in 0..res_ids.len().max(sc_ids.len()) {
        let (rid, sid) = (&res_ids[i % res_ids.len()], &sc_ids[i % sc_ids.len()]);
        let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
        session.pin(&res_plan, &label, rid);
        session.pin(&res_twin, &label, &rid.replace("_resrms", ""));
        session.pin(&sc_plan, &label, sid);
        session.pin(&sc_twin, &label, sid);
        session.prepare(&[&res_plan, &res_twin, &sc_plan, &sc_twin]).map_err(err)?;
        for buf in [&mut r_new, &mut y_plain, &mut sum_sq, &mut y, &mut y_twin] {
            buf.poison(stream)?;
        }
        poison(stream, &mut scratch).map_err(err)?;
        // The plain twin, then the residual epilogue.
        let args = Args {
            x: x.view(m, ko, lx, DType::BF16),
            w: wo.view(hd, ko, ko, DType::BF16),
            bias: view_b(&bo, hd, c.bias),
            y: y_plain.view_mut(m, hd, hd, DType::BF16),
            add_norm: None,
            rope: None,
            rms: None,
        };
        bf16_gemv::run(&res_twin, args, aligned_scratch(&mut scratch, bytes), stream).map_err(err)?;
        let args = Args {
            x: x.view(m, ko, lx, DType::BF16),
            w: wo.view(hd, ko, ko, DType::BF16),
            bias: view_b(&bo, hd, c.bias),
            y: r_new.view_mut(m, hd, lr, DType::BF16),
            add_norm: None,
            rope: None,
            rms: Some(bf16_gemv::RmsArgs::Residual {
                residual: res.view(m, hd, lr, DType::BF16),
                sum_sq: sum_sq.view_mut(m, groups, groups, DType::F32),
            }),
        };
        bf16_gemv::run(&res_plan, args, aligned_scratch(&mut scratch, bytes), stream).map_err(err)?;
        stream.synchronize().map_err(err)?;
        let yp = y_plain.download(stream)?;
        let want_r: Vec<bf16> = (0..m * hd).map(|i| bf16::from_f32((yp[i] as f32) + resb[i].to_f32())).collect();
        let rb = r_new.bits(stream)?;
        let live = live_rows(&rb, m, lr, hd);
        let want_bits: Vec<u32> = want_r.iter().map(|v| u32::from(v.to_bits())).collect();
        same_bits(&format!("residual [{rid}] vs its twin + residual"), &live, &want_bits)?;
        if bits_padding_written(&rb, m, lr, hd) {
            return Err(format!("residual padding written [{rid}]"));
        }
        let rf: Vec<f32> = want_r.iter().map(|v| v.to_f32()).collect();
        let want_sq: Vec<u32> =
            (0..m).flat_map(|t| host_group_sums(&rf[t * hd..(t + 1) * hd], hd)).map(f32::to_bits).collect();
        same_bits(&format!("sum_sq [{rid}]"), &sum_sq.bits(stream)?, &want_sq)?;
        // The gate/up projection on the new residual.
        let call = |plan: &Plan, out: &mut FloatBuf, cols: usize, stride: usize, scratch: &mut CudaSlice<u8>| {
            let args = Args {
                x: r_new.view(m, hd, lr, DType::BF16),
                w: wg.view(ngu, hd, hd, DType::BF16),
                bias: view_b(&bg, ngu, c.bias),
                y: out.view_mut(m, cols, stride, DType::BF16),
                add_norm: None,
                rope: None,
                rms: Some(bf16_gemv::RmsArgs::Scale { sum_sq: sum_sq.view(m, groups, groups, DType::F32) }),
            };
            bf16_gemv::run(plan, args, aligned_scratch(scratch, bytes), stream).map_err(err)
        };
        call(&sc_twin, &mut y_twin, ngu, ngu, &mut scratch)?;
        call(&sc_plan, &mut y, n_out, ly, &mut scratch)?;
        stream.synchronize().map_err(err)?;
        // The oracle: rrms (f64, from the device's sums) times the exact product, plus the bias.
        let ssq = sum_sq.download(stream)?;
        let rrms: Vec<f64> = (0..m)
            .map(|t| 1.0 / (ssq[t * groups..(t + 1) * groups].iter().sum::<f64>() / hd as f64 + f64::from(EPS)).sqrt())
            .collect();
        let rows: Vec<usize> = (0..ngu).collect();
        let ex = reference::exact(&want_r, &wgu, None::<&[f32]>, m, hd, &rows);
        // (values() gives values of the bias dtype.)
        let bias_at = |j: usize| bgu_h.as_ref().map_or(0.0, |b| f64::from(b[j]));
        let want: Vec<f64> = (0..m * ngu).map(|i| rrms[i / ngu] * ex.acc[i] + bias_at(i % ngu)).collect();
        let yt = y_twin.download(stream)?;
        b12x_core::testing::check_close(&format!("gate/up [{sid}]"), &yt, &want, &[m, ngu], |i| {
            let scaled = rrms[i / ngu] * ex.abs[i];
            // rsqrtf (2 ulp) and the f32 sum of the sums of squares: a few 2^-22 relative.
            reference::bound(DType::BF16, hd, want[i], scaled) + 2f64.powi(-20) * (rrms[i / ngu] * ex.acc[i]).abs()
        })?;
        let all = y.download(stream)?;
        if padding_written(&all, m, ly, n_out) {
            return Err(format!("y padding written [{sid}]"));
        }
        if c.y_silu {
            let i_cols = ngu / 2;
            let want_bits = host_swiglu_bits(&yt, m, ngu);
            let yb = y.bits(stream)?;
            let y_live = live_rows(&yb, m, ly, i_cols);
            same_bits(&format!("SwiGLU y [{sid}] vs its twin + silu_and_mul"), &y_live, &want_bits)?;
        } else {
            let yb = y.bits(stream)?;
            let tb = y_twin.bits(stream)?;
            let (a, b): (Vec<u32>, Vec<u32>) = (0..m)
                .flat_map(|t| (0..ngu).map(move |j| (t, j)))
                .map(|(t, j)| (yb[t * ly + j], tb[t * ngu + j]))
                .unzip();
            same_bits(&format!("y [{sid}] vs its twin"), &a, &b)?;
        }
        session.close();
    }
    Ok(())
}

/// Split add+RMSNorm calls without their tensors, with the other kind, or with overlapping
/// ones are typed errors that launch nothing.
fn split_norm_bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let (n, k, m) = (256, 512, 2);
    let stream = dev.stream();
    let q = Query {
        n,
        k,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: 8,
        aligned: true,
        pdl: false,
        x_act: XAct::None,
        y_act: YAct::ResidualRms,
    };
    let plan = bf16_gemv::plan(&q, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&plan]).map_err(err)?;
    let x = FloatBuf::upload(stream, &values(Fill::Uniform, 71, m * k, DType::BF16), DType::BF16)?;
    let w = FloatBuf::upload(stream, &values(Fill::Uniform, 72, n * k, DType::BF16), DType::BF16)?;
    let res = FloatBuf::upload(stream, &values(Fill::Uniform, 73, m * n, DType::BF16), DType::BF16)?;
    let mut y = FloatBuf::poisoned(stream, m * n, DType::BF16)?;
    let mut ssq = FloatBuf::poisoned(stream, m * n / 16, DType::F32)?;
    let mut scratch = alloc_scratch(stream, plan.scratch_layout().total_bytes().max(1)).map_err(err)?;
    let groups = n / 16;
    // One refused call: x [m, k], W [n, k], y [m, n] and `rms`.
    #[allow(clippy::too_many_arguments)]
    fn call(
        plan: &Plan,
        x: &FloatBuf,
        w: &FloatBuf,
        y: &mut FloatBuf,
        rms: Option<bf16_gemv::RmsArgs<'_>>,
        scratch: &mut CudaSlice<u8>,
        stream: &Arc<CudaStream>,
        (m, n, k): (usize, usize, usize),
    ) -> b12x_core::Result<()> {
        let args = Args {
            x: x.view(m, k, k, DType::BF16),
            w: w.view(n, k, k, DType::BF16),
            bias: None,
            y: y.view_mut(m, n, n, DType::BF16),
            add_norm: None,
            rope: None,
            rms,
        };
        bf16_gemv::run(plan, args, Scratch::from_slice(scratch), stream)
    }
    let dims = (m, n, k);
    // No rms tensors.
    if !matches!(call(&plan, &x, &w, &mut y, None, &mut scratch, stream, dims), Err(Error::Shape { tensor: "rms", .. }))
    {
        return Err("no rms tensors: expected Shape(rms)".into());
    }
    // The wrong kind.
    let scale = bf16_gemv::RmsArgs::Scale { sum_sq: res.view(m, groups, groups, DType::F32) };
    if call(&plan, &x, &w, &mut y, Some(scale), &mut scratch, stream, dims).is_ok() {
        return Err("a Scale tensor on a ResidualRms plan: expected an error".into());
    }
    // sum_sq of the wrong width.
    let short = bf16_gemv::RmsArgs::Residual {
        residual: res.view(m, n, n, DType::BF16),
        sum_sq: ssq.view_mut(m, groups - 1, groups, DType::F32),
    };
    if call(&plan, &x, &w, &mut y, Some(short), &mut scratch, stream, dims).is_ok() {
        return Err("sum_sq [M, groups - 1]: expected an error".into());
    }
    // The sums of squares (written) over x (read): a view of x's buffer.
    // SAFETY: x's buffer holds m * k >= m * groups f32 values; the call is refused before any
    // launch (what this trial checks), so nothing writes through the view.
    let ssq_over_x =
        unsafe { b12x_core::TensorMut::from_raw(x.ptr(), &[m, groups], &[groups as isize, 1], DType::F32) }
            .map_err(err)?;
    let over_x = bf16_gemv::RmsArgs::Residual { residual: res.view(m, n, n, DType::BF16), sum_sq: ssq_over_x };
    if call(&plan, &x, &w, &mut y, Some(over_x), &mut scratch, stream, dims).is_ok() {
        return Err("sum_sq over x: expected an error".into());
    }
    // The residual over y (a view of y's buffer; read while y is written).
    // SAFETY: as above: the refused call launches nothing.
    let res_over_y = unsafe { TensorRef::from_raw(y.ptr(), &[m, n], &[n as isize, 1], DType::BF16) }.map_err(err)?;
    let over_y =
        bf16_gemv::RmsArgs::Residual { residual: res_over_y, sum_sq: ssq.view_mut(m, groups, groups, DType::F32) };
    if call(&plan, &x, &w, &mut y, Some(over_y), &mut scratch, stream, dims).is_ok() {
        return Err("the residual over y: expected an error".into());
    }
    stream.synchronize().map_err(err)?;
    if y.download(stream)?.iter().chain(ssq.download(stream)?.iter()).any(|v| !v.is_nan()) {
        return Err("a refused call wrote y or sum_sq".into());
    }
    session.close();
    Ok(())
}

// ---- norm 1 folded as a scale (XAct::AddRmsScale) --------------------------------------

/// A projection `[n, k]` on `r = bf16(x + residual)` with its norm weight folded into W and the
/// rrms scale from each CTA's own Σ r² (rows of x, the residuals and y padded by `pad`).
#[derive(Clone, Copy, Debug)]
struct AddRmsCase {
    name: &'static str,
    n: usize,
    k: usize,
    ms: &'static [usize],
    bias: Option<DType>,
    pad: usize,
    /// With the SwiGLU epilogue (a gate/up projection).
    y_silu: bool,
    large: bool,
}

const ADDRMS_CASES: &[AddRmsCase] = &[
    // Qwen3-8B's QKV projection (b12x-layers' `FoldNorms::FirstScale`).
    AddRmsCase {
        name: "qwen3_8b_addrms_qkv",
        n: 6144,
        k: 4096,
        ms: &[1, 3, 8],
        bias: None,
        pad: 0,
        y_silu: false,
        large: true,
    },
    // K = 1000: not a multiple of any group (the tail's pieces), padded rows, an f32 bias.
    AddRmsCase {
        name: "odd_addrms",
        n: 776,
        k: 1000,
        ms: &[1, 5, 8],
        bias: Some(F32),
        pad: 8,
        y_silu: false,
        large: false,
    },
    AddRmsCase {
        name: "small_addrms_silu",
        n: 3072,
        k: 1024,
        ms: &[2, 8],
        bias: None,
        pad: 8,
        y_silu: true,
        large: false,
    },
];

/// Every `_addrms` config of M's bucket pinned in turn: the new residual must be `bf16(x +
/// residual)` bit for bit (its padding untouched), y within the GEMV bound of the f64 product
/// `rrms · Σ r·(w·nw)` (+ bias) with rrms from the host's Σ r² in f64 (slack for rsqrtf and the
/// f32 sum order), and with the SwiGLU epilogue bitwise the same config without it followed by
/// the host silu_and_mul. Two calls of one config give the same bits.
fn check_addrms(dev: &Arc<Device>, c: AddRmsCase, m: usize) -> TrialResult {
    const EPS: f32 = 1e-6;
    let (n, k) = (c.n, c.k);
    let n_out = if c.y_silu { n / 2 } else { n };
    let (lx, ly) = (k + c.pad, n_out + c.pad);
    let stream = dev.stream();
    let x_h = values(Fill::Uniform, 81, m * lx, DType::BF16);
    let res_h: Vec<f32> = values(Fill::Uniform, 82, m * lx, DType::BF16).iter().map(|v| 2.0 * v).collect();
    let nw = cast::<bf16>(&uniform(84, k, 0.5, 1.5));
    let w = bf16_gemv::fold_norm_weight(&cast::<bf16>(&values(Fill::Uniform, 85, n * k, DType::BF16)), &nw);
    let w_h: Vec<f32> = w.iter().map(|v| v.to_f32()).collect();
    let b_h = c.bias.map(|d| values(Fill::Uniform, 86, n, d));
    let up = |v: &[f32], d| FloatBuf::upload(stream, v, d);
    let (x, res, wd) = (up(&x_h, DType::BF16)?, up(&res_h, DType::BF16)?, up(&w_h, DType::BF16)?);
    let bd = match (&b_h, c.bias) {
        (Some(v), Some(d)) => Some(up(v, d)?),
        _ => None,
    };
    let mut r_new = FloatBuf::poisoned(stream, m * lx, DType::BF16)?;
    let mut y = FloatBuf::poisoned(stream, m * ly, DType::BF16)?;
    let mut y_twin = FloatBuf::poisoned(stream, m * n, DType::BF16)?;
    let (plan, twin) = fused_pair(dev, (n, k), c.bias, XAct::AddRmsScale { eps: EPS }, c.y_silu)?;
    let bucket = b12x_core::plan::bucket_of(plan.buckets(), m).ok_or("no bucket")?;
    let label = plan.buckets()[bucket].label();
    let bytes = [&plan, &twin].iter().map(|p| p.scratch_layout().total_bytes()).max().unwrap_or(0);
    let mut scratch = alloc_scratch(stream, bytes).map_err(err)?;
    let ids = plan.candidates(bucket);
    if ids.is_empty() || ids.iter().any(|id| !id.contains("_addrms_") || !id.ends_with("_ks1")) {
        return Err(format!("unexpected candidates {ids:?}"));
    }
    // The host's r and rrms.
    let want_r: Vec<bf16> =
        (0..m * k).map(|i| bf16::from_f32(x_h[(i / k) * lx + i % k] + res_h[(i / k) * lx + i % k])).collect();
    let rrms: Vec<f64> = (0..m)
        .map(|t| {
            let s: f64 = want_r[t * k..(t + 1) * k].iter().map(|v| f64::from(v.to_f32()).powi(2)).sum();
            1.0 / (s / k as f64 + f64::from(EPS)).sqrt()
        })
        .collect();
    let rows: Vec<usize> = (0..n).collect();
    let ex = reference::exact(&want_r, &w, None::<&[f32]>, m, k, &rows);
    let bias_at = |j: usize| b_h.as_ref().map_or(0.0, |b| f64::from(b[j]));
    let want: Vec<f64> = (0..m * n).map(|i| rrms[i / n] * ex.acc[i] + bias_at(i % n)).collect();
    let want_bits: Vec<u32> = want_r.iter().map(|v| u32::from(v.to_bits())).collect();
    fn view_b(b: &Option<FloatBuf>, n: usize, d: Option<DType>) -> Option<TensorRef<'_>> {
        b.as_ref().map(|b| b.view(n, 0, 1, d.unwrap_or(F32)))
    }
    for id in &ids {
        let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
        session.pin(&plan, &label, id);
        session.pin(&twin, &label, id);
        session.prepare(&[&plan, &twin]).map_err(err)?;
        for buf in [&mut r_new, &mut y, &mut y_twin] {
            buf.poison(stream)?;
        }
        poison(stream, &mut scratch).map_err(err)?;
        let mut call = |p: &Plan, out: &mut FloatBuf, cols: usize, stride: usize| {
            let args = Args {
                x: x.view(m, k, lx, DType::BF16),
                w: wd.view(n, k, k, DType::BF16),
                bias: view_b(&bd, n, c.bias),
                y: out.view_mut(m, cols, stride, DType::BF16),
                add_norm: None,
                rope: None,
                rms: Some(bf16_gemv::RmsArgs::Add {
                    residual: res.view(m, k, lx, DType::BF16),
                    residual_out: r_new.view_mut(m, k, lx, DType::BF16),
                }),
            };
            bf16_gemv::run(p, args, aligned_scratch(&mut scratch, bytes), stream).map_err(err)
        };
        call(&twin, &mut y_twin, n, n)?;
        stream.synchronize().map_err(err)?;
        let first = y_twin.bits(stream)?;
        call(&twin, &mut y_twin, n, n)?;
        call(&plan, &mut y, n_out, ly)?;
        stream.synchronize().map_err(err)?;
        let rb = r_new.bits(stream)?;
        let live = live_rows(&rb, m, lx, k);
        same_bits(&format!("residual_out [{id}] vs bf16(x + residual)"), &live, &want_bits)?;
        if bits_padding_written(&rb, m, lx, k) {
            return Err(format!("residual_out padding written [{id}]"));
        }
        same_bits(&format!("y [{id}] twice"), &y_twin.bits(stream)?, &first)?;
        let yt = y_twin.download(stream)?;
        b12x_core::testing::check_close(&format!("y [{id}]"), &yt, &want, &[m, n], |i| {
            let scaled = rrms[i / n] * ex.abs[i];
            // rsqrtf (2 ulp) and the f32 sum of r²: a few 2^-22 relative.
            reference::bound(DType::BF16, k, want[i], scaled) + 2f64.powi(-20) * (rrms[i / n] * ex.acc[i]).abs()
        })?;
        let all = y.download(stream)?;
        if padding_written(&all, m, ly, n_out) {
            return Err(format!("y padding written [{id}]"));
        }
        let yb = y.bits(stream)?;
        let y_live = live_rows(&yb, m, ly, n_out);
        let expect = if c.y_silu { host_swiglu_bits(&yt, m, n) } else { y_twin.bits(stream)? };
        same_bits(&format!("y [{id}] vs its twin"), &y_live, &expect)?;
        session.close();
    }
    Ok(())
}

/// `AddRmsScale` calls without their tensors, with the other kind, with a short residual, or
/// with the new residual over x or y are typed errors that launch nothing.
fn addrms_bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let (n, k, m) = (256, 512, 2);
    let stream = dev.stream();
    let q = Query {
        n,
        k,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: 8,
        aligned: true,
        pdl: false,
        x_act: XAct::AddRmsScale { eps: 1e-6 },
        y_act: YAct::None,
    };
    let plan = bf16_gemv::plan(&q, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&plan]).map_err(err)?;
    let x = FloatBuf::upload(stream, &values(Fill::Uniform, 91, m * k, DType::BF16), DType::BF16)?;
    let w = FloatBuf::upload(stream, &values(Fill::Uniform, 92, n * k, DType::BF16), DType::BF16)?;
    let res = FloatBuf::upload(stream, &values(Fill::Uniform, 93, m * k, DType::BF16), DType::BF16)?;
    // y's buffer holds m · K values (K > N): the refused calls below view it as [M, K] too.
    let mut y = FloatBuf::poisoned(stream, m * k, DType::BF16)?;
    let mut r_new = FloatBuf::poisoned(stream, m * k, DType::BF16)?;
    let mut scratch = alloc_scratch(stream, plan.scratch_layout().total_bytes().max(1)).map_err(err)?;
    let (x_ptr, y_ptr) = (x.ptr(), y.ptr());
    let mut call = |rms: Option<bf16_gemv::RmsArgs<'_>>, y: &mut FloatBuf| {
        let args = Args {
            x: x.view(m, k, k, DType::BF16),
            w: w.view(n, k, k, DType::BF16),
            bias: None,
            y: y.view_mut(m, n, n, DType::BF16),
            add_norm: None,
            rope: None,
            rms,
        };
        bf16_gemv::run(&plan, args, Scratch::from_slice(&mut scratch), stream)
    };
    if !matches!(call(None, &mut y), Err(Error::Shape { tensor: "rms", .. })) {
        return Err("no rms tensors: expected Shape(rms)".into());
    }
    let scale = bf16_gemv::RmsArgs::Scale { sum_sq: res.view(m, k / 16, k / 16, DType::F32) };
    if call(Some(scale), &mut y).is_ok() {
        return Err("a Scale tensor on an AddRmsScale plan: expected an error".into());
    }
    let short = bf16_gemv::RmsArgs::Add {
        residual: res.view(m, k - 8, k, DType::BF16),
        residual_out: r_new.view_mut(m, k, k, DType::BF16),
    };
    if call(Some(short), &mut y).is_ok() {
        return Err("residual [M, K - 8]: expected an error".into());
    }
    // The new residual (written) over x (read), then over y (written): [M, K] views of their
    // buffers (each holds m · K values).
    for (what, ptr) in [("x", x_ptr), ("y", y_ptr)] {
        // SAFETY: the buffer holds m · K bf16 values; the call is refused before any launch
        // (what this trial checks), so nothing writes through the view.
        let over =
            unsafe { b12x_core::TensorMut::from_raw(ptr, &[m, k], &[k as isize, 1], DType::BF16) }.map_err(err)?;
        let bad = bf16_gemv::RmsArgs::Add { residual: res.view(m, k, k, DType::BF16), residual_out: over };
        if call(Some(bad), &mut y).is_ok() {
            return Err(format!("residual_out over {what}: expected an error"));
        }
    }
    stream.synchronize().map_err(err)?;
    if y.download(stream)?.iter().chain(r_new.download(stream)?.iter()).any(|v| !v.is_nan()) {
        return Err("a refused call wrote y or residual_out".into());
    }
    session.close();
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    for &c in CASES.iter().filter(|c| !(c.large && reduced_profile())) {
        for &m in c.ms {
            trials.push(GpuTrial::new(format!("{}::m{m}", c.name), move |d| check_case(d, c, m)));
        }
    }
    trials.push(GpuTrial::new("graph_replay_equals_eager", graph_equals_eager));
    trials.push(GpuTrial::new("graph_replay_equals_eager_tma_stream_k", graph_equals_eager_tma));
    trials.push(GpuTrial::new("graph_replay_equals_eager_tma_cluster", graph_equals_eager_cluster));
    trials.push(GpuTrial::new("pdl_chain::m1", |d| pdl_chain(d, 1)));
    trials.push(GpuTrial::new("pdl_chain::m16", |d| pdl_chain(d, 16)));
    trials.push(GpuTrial::new("unprepared_plans", unprepared_plans));
    trials.push(GpuTrial::new("run_allocates_nothing", run_allocates_nothing));
    trials.push(GpuTrial::new("bad_inputs_launch_nothing", bad_inputs));
    for &c in SILU_CASES.iter().filter(|c| !(c.large && reduced_profile())) {
        for &m in c.ms {
            trials.push(GpuTrial::new(format!("{}::m{m}", c.name), move |d| check_silu(d, c, m)));
        }
    }
    trials.push(GpuTrial::new("silu_pdl_chain::m1", |d| silu_pdl_chain(d, 1, None)));
    trials.push(GpuTrial::new("silu_pdl_chain_limit::m8", |d| silu_pdl_chain(d, 8, SILU_LIMIT)));
    trials.push(GpuTrial::new("silu_bad_inputs_launch_nothing", silu_bad_inputs));
    for &c in EPI_CASES.iter().filter(|c| !(c.large && reduced_profile())) {
        for &m in c.ms {
            trials.push(GpuTrial::new(format!("{}::m{m}", c.name), move |d| check_ysilu(d, c, m)));
        }
    }
    trials.push(GpuTrial::new("ysilu_bad_inputs_launch_nothing", ysilu_bad_inputs));
    for &c in NORM_CASES.iter().filter(|c| !(c.large && reduced_profile())) {
        for &m in c.ms {
            trials.push(GpuTrial::new(format!("{}::m{m}", c.name), move |d| check_addnorm(d, c, m)));
        }
    }
    trials.push(GpuTrial::new("addnorm_bad_inputs_launch_nothing", addnorm_bad_inputs));
    for &c in SPLIT_CASES.iter().filter(|c| !(c.large && reduced_profile())) {
        for &m in c.ms {
            trials.push(GpuTrial::new(format!("{}::m{m}", c.name), move |d| check_split_norm(d, c, m)));
        }
    }
    trials.push(GpuTrial::new("split_norm_bad_inputs_launch_nothing", split_norm_bad_inputs));
    for &c in ADDRMS_CASES.iter().filter(|c| !(c.large && reduced_profile())) {
        for &m in c.ms {
            trials.push(GpuTrial::new(format!("{}::m{m}", c.name), move |d| check_addrms(d, c, m)));
        }
    }
    trials.push(GpuTrial::new("addrms_bad_inputs_launch_nothing", addrms_bad_inputs));
    run_gpu_trials(trials)
}
