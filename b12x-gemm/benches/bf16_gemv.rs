//! Benchmark of `gemm.bf16_gemv` with the method of DESIGN.md §7: one op call per CUDA graph
//! replay, L2 flushed before each sample, median of `bench::samples()` (≥ 20), the oracle
//! checked on sampled rows before timing, configs chosen by the session's autotune race.
//!
//! Grid: M ∈ {1, 2, 4, 8, 16} × (N, K) ∈ {(4096, 7168), (7168, 4096), (18432, 7168),
//! (1024, 4096), (129280, 7168)} with bf16 x and y, plus the DeepSeek-V4 router (384, 7168) with
//! bf16 x and f32 y. Bytes are the compulsory traffic (W, x and y once); FLOPs 2·M·N·K. Peers come
//! from `B12X_PEER_JSON` (bench/peers.py: torch `F.linear` / `torch.mm(out_dtype=f32)`), keyed
//! `bf16_gemv/M{m}_N{n}_K{k}_{bf16|f32}`. `B12X_BENCH_QUICK=1` keeps M ∈ {1, 8}. Before each
//! shape a `read_probe/…` row times the project's read probes (the ceiling's kernels, best
//! shape) reading exactly W's bytes the same way: the size-matched ceiling, which for the
//! 58 MB shapes is far below the 2 GB ceiling (launch, ramp-up and drain do not amortize).
//!
//! A second table, `bf16_gemv_x8/…` (every shape but the LM head), times the steady state of a
//! decode graph: each graph replay holds [`CALLS`] back-to-back calls, each on its own copy of W
//! (so every call reads cold weights, as consecutive layers do), L2 flushed before the sample;
//! the row's time is the sample's median divided by [`CALLS`]. Its `read_probe_x8/…` rows and
//! the peer (`bf16_gemv_x8/…` in peers.py) are measured the same way. The LM head is left out:
//! it runs once per step, and one call of it already amortizes the launch (99.7% for a pure read).
//! A third table, `bf16_gemv_x8_pdl/…`, repeats it with `Query::pdl` (programmatic dependent
//! launch: each call starts streaming W while the call before it finishes), against the same
//! peer rows (`bf16_gemv_x8/…`: PyTorch cannot launch cuBLAS with PDL).
//!
//! `B12X_BENCH_SWEEP=N` adds, after each row, `sweep…/` rows: the N fastest race candidates of
//! the row's bucket, each pinned and timed the same way (the race times one call, or two with
//! PDL; the sweep shows how its choice fares in the table's own setting).
//!
//! Run: `cargo bench -p b12x-gemm --bench bf16_gemv` (rows go to `bench-results/bf16_gemv.{json,md}`).

use b12x_core::bench::{samples, time_graph, BenchReport};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{cast, gpu, uniform};
use b12x_core::{DType, Device, OpPlan, PreparationSession, Result, Scratch, TensorMut, TensorRef, SCRATCH_ALIGN};
use b12x_gemm::bf16_gemv::{self, reference, Args, Query, XAct, YAct};
use std::sync::Arc;

const ROWS: [usize; 5] = [1, 2, 4, 8, 16];
const QUICK_ROWS: [usize; 2] = [1, 8];
/// (N, K, f32 output).
const SHAPES: [(usize, usize, bool); 6] = [
    (4096, 7168, false),
    (7168, 4096, false),
    (18432, 7168, false),
    (1024, 4096, false),
    (129280, 7168, false),
    (384, 7168, true),
];
/// Distinct host rows of W; larger W repeat them (values do not change the speed).
const DISTINCT_ROWS: usize = 509;
/// Every SAMPLE-th row of W is checked against the oracle before timing.
const SAMPLE: usize = 97;
/// Back-to-back calls per graph replay in the `bf16_gemv_x8` table (each on its own copy of W).
const CALLS: usize = 8;
/// The `bf16_gemv_x8` table leaves out weights larger than this (the LM head).
const CALLS_MAX_W_BYTES: usize = 1 << 30;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("bf16_gemv bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let quick = b12x_core::bench::quick();
    let mut report = BenchReport::new("bf16_gemv", &dev)?;
    report.note(&format!(
        "Rows `bf16_gemv_x{CALLS}_pdl/…`: the same with `Query::pdl` (programmatic dependent launch), against the \
         peer's `bf16_gemv_x{CALLS}` time (PyTorch cannot launch cuBLAS with PDL)."
    ));
    report.note(&format!(
        "Rows `bf16_gemv_x{CALLS}/…` and `read_probe_x{CALLS}/…` (and their peer): each graph replay holds {CALLS} back-to-back \
         calls, each on its own copy of W (cold weights, as consecutive layers of a decode graph); time = the \
         sample's median / {CALLS}. Every other row: one call per replay."
    ));
    let mut scores = RaceScores::new();
    for (calls, pdl) in [(1, false), (CALLS, false), (CALLS, true)] {
        for (n, k, f32_out) in SHAPES {
            if calls == 1 || n * k * 2 <= CALLS_MAX_W_BYTES {
                bench_shape(&dev, &mut report, &mut scores, (n, k, f32_out), quick, (calls, pdl))?;
            }
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}

/// Race scores by (query key, bucket label), kept from the first table that raced them (a later
/// table of the same plan finds its selections cached) for the sweep's ranking.
type RaceScores = std::collections::HashMap<(String, String), Vec<(String, f64)>>;

enum Out {
    Bf16(CudaSlice<bf16>),
    F32(CudaSlice<f32>),
}

/// `B12X_BENCH_SWEEP=N`: after each row, time the N fastest race candidates of its bucket, each
/// pinned, as `sweep…/` rows (for choosing configs and race policies; 0 or unset: off).
fn sweep_count() -> usize {
    std::env::var("B12X_BENCH_SWEEP").ok().and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn out_ptr(y: &Out) -> Result<u64> {
    Ok(match y {
        Out::Bf16(b) => TensorRef::from_slice(b, &[b.len()])?.ptr(),
        Out::F32(b) => TensorRef::from_slice(b, &[b.len()])?.ptr(),
    })
}

/// One shape's rows of one table: `(calls, pdl)` = back-to-back calls per graph replay (each on
/// its own copy of W) and whether the plan launches with PDL.
fn bench_shape(
    dev: &Arc<Device>,
    report: &mut BenchReport,
    scores: &mut RaceScores,
    (n, k, f32_out): (usize, usize, bool),
    quick: bool,
    (calls, pdl): (usize, bool),
) -> Result<()> {
    let out_dtype = if f32_out { DType::F32 } else { DType::BF16 };
    let suffix = if calls == 1 { String::new() } else { format!("_x{calls}") };
    let pdl_suffix = if pdl { "_pdl" } else { "" };
    let peer_name = |m: usize| format!("bf16_gemv{suffix}/M{m}_N{n}_K{k}_{}", out_dtype.name());
    let case_name = |m: usize| format!("bf16_gemv{suffix}{pdl_suffix}/M{m}_N{n}_K{k}_{}", out_dtype.name());
    let ms: Vec<usize> = ROWS
        .into_iter()
        .filter(|m| !quick || QUICK_ROWS.contains(m))
        .filter(|&m| b12x_core::bench::selected(&case_name(m)))
        .collect();
    if ms.is_empty() {
        return Ok(());
    }
    // What a pure read of W's bytes takes with the same method: the size-matched ceiling
    // (launch, ramp-up and drain included) the GEMV rows compare against; once per table of
    // plain launches (the probes have no PDL form).
    if !pdl {
        probe_row(dev, report, n, k, calls, &suffix)?;
    }
    let stream = dev.stream();
    let block = cast::<bf16>(&uniform(1, DISTINCT_ROWS * k, -1.0, 1.0));
    let w_h: Vec<bf16> = block.iter().copied().cycle().take(n * k).collect();
    let w = stream.clone_htod(&w_h)?;
    // One copy of W per back-to-back call (the first is `w`).
    let w_more: Vec<CudaSlice<bf16>> =
        (1..calls).map(|_| stream.clone_dtod(&w)).collect::<std::result::Result<_, _>>()?;
    let mx = *ROWS.iter().max().unwrap_or(&1);
    let x_h = cast::<bf16>(&uniform(2, mx * k, -1.0, 1.0));
    let x = stream.clone_htod(&x_h)?;
    let y = if f32_out { Out::F32(stream.alloc_zeros(mx * n)?) } else { Out::Bf16(stream.alloc_zeros(mx * n)?) };
    let q = Query {
        n,
        k,
        x_dtype: DType::BF16,
        out_dtype,
        bias: None,
        max_rows: mx,
        aligned: true,
        pdl,
        x_act: XAct::None,
        y_act: YAct::None,
    };
    let plan = bf16_gemv::plan(&q, dev)?;
    let scratch_bytes = plan.scratch_layout().total_bytes();
    // Scratch regions start on a SCRATCH_ALIGN boundary; allocations are only 256-byte aligned.
    let scratch = stream.alloc_zeros::<u8>(scratch_bytes + SCRATCH_ALIGN)?;
    let sp = TensorRef::from_slice(&scratch, &[scratch.len()])?.ptr().next_multiple_of(SCRATCH_ALIGN as u64);
    let mut session = PreparationSession::new(dev)?;
    for r in session.prepare(&[&plan])? {
        if !r.scores_us.is_empty() {
            scores.insert((r.query.clone(), r.bucket.clone()), r.scores_us.clone());
        }
    }
    let rows: Vec<usize> = (0..n).step_by(SAMPLE).chain([n - 1]).collect();
    for m in ms {
        let case = case_name(m);
        let bucket = b12x_core::plan::bucket_of(plan.buckets(), m).unwrap_or(0);
        let config = plan.slot().get(bucket).map(|s| s.config.clone()).unwrap_or_default();
        let (xp, yp) = (TensorRef::from_slice(&x, &[mx, k])?.ptr(), out_ptr(&y)?);
        // Checks `plan`'s call against the oracle, then times `calls` back-to-back calls.
        let measure = |plan: &bf16_gemv::Plan, case: &str| -> Result<Vec<f64>> {
            let call_on = |s: &Arc<CudaStream>, w: &CudaSlice<bf16>| -> Result<()> {
                // SAFETY: `x` holds mx ≥ m rows of K and `y` mx ≥ m rows of N; both outlive the
                // calls and the graph, and nothing else touches them meanwhile (back-to-back calls
                // on one stream write `y` in order).
                let (xv, yv) = unsafe {
                    (
                        TensorRef::from_raw(xp, &[m, k], &[k as isize, 1], DType::BF16)?,
                        TensorMut::from_raw(yp, &[m, n], &[n as isize, 1], out_dtype)?,
                    )
                };
                let args = Args {
                    x: xv,
                    w: TensorRef::from_slice(w, &[n, k])?,
                    bias: None,
                    y: yv,
                    add_norm: None,
                    rope: None,
                    rms: None,
                };
                // SAFETY: the plan's scratch buffer, used by nothing else (calls on one stream use
                // it in order).
                let scratch = unsafe { Scratch::from_raw(sp, scratch_bytes) };
                bf16_gemv::run(plan, args, scratch, s)
            };
            let call = |s: &Arc<CudaStream>| -> Result<()> {
                std::iter::once(&w).chain(&w_more).try_for_each(|wi| call_on(s, wi))
            };
            // The oracle checks the call on the last copy (every copy holds the same W).
            call_on(stream, w_more.last().unwrap_or(&w))?;
            stream.synchronize()?;
            let got: Vec<f64> = match &y {
                Out::Bf16(b) => stream.clone_dtoh(b)?.iter().map(|v| v.to_f64()).collect(),
                Out::F32(b) => stream.clone_dtoh(b)?.iter().map(|&v| f64::from(v)).collect(),
            };
            let none: Option<&[f32]> = None;
            let want = reference::exact(&x_h[..m * k], &w_h, none, m, k, &rows);
            let got: Vec<f64> =
                (0..m).flat_map(|i| rows.iter().map(move |&r| (i, r))).map(|(i, r)| got[i * n + r]).collect();
            if let Err(e) = reference::check_bound(case, out_dtype, k, &got, &want, &[m, rows.len()]) {
                panic!("oracle check failed before timing: {e}");
            }
            Ok(time_graph(dev, samples(), call)?.iter().map(|t| t / calls as f64).collect())
        };
        let bytes = (n * k * 2 + m * k * 2 + m * n * out_dtype.size_bytes()) as f64;
        let times = measure(&plan, &case)?;
        report.add_vs(&case, &peer_name(m), &config, &times, bytes, (2 * m * n * k) as f64);
        // Sweep: the race's fastest candidates of this bucket, each pinned, timed the same way.
        let sweep = sweep_count();
        if sweep > 0 {
            let label = plan.buckets()[bucket].label();
            let mut ranked = scores.get(&(OpPlan::query_key(&plan), label.clone())).cloned().unwrap_or_default();
            if ranked.is_empty() {
                ranked = OpPlan::candidates(&plan, bucket).into_iter().map(|c| (c, 0.0)).collect();
            }
            ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
            for (cfg, race_us) in ranked.into_iter().take(sweep) {
                let pinned = bf16_gemv::plan(&q, dev)?;
                let mut s2 = PreparationSession::new(dev)?.with_autotune(false);
                s2.pin(&pinned, &label, &cfg);
                s2.prepare(&[&pinned])?;
                let sweep_case = format!("sweep{suffix}{pdl_suffix}/M{m}_N{n}_K{k}_{}", out_dtype.name());
                let times = measure(&pinned, &sweep_case)?;
                report.add_vs(
                    &sweep_case,
                    &peer_name(m),
                    &format!("{cfg} (race {race_us:.2} µs)"),
                    &times,
                    bytes,
                    (2 * m * n * k) as f64,
                );
                s2.close();
            }
        }
    }
    session.close();
    Ok(())
}

/// The `read_probe{suffix}/…` row: the project's read probes reading exactly W's bytes, timed
/// like the GEMV rows of the same table (`calls` back-to-back on distinct buffers).
fn probe_row(
    dev: &Arc<Device>,
    report: &mut BenchReport,
    n: usize,
    k: usize,
    calls: usize,
    suffix: &str,
) -> Result<()> {
    let w_bytes = n * k * 2;
    let probe_tbps = b12x_core::bench::read_bandwidth_calls(dev, w_bytes, calls)?;
    let probe_us = (w_bytes / 8192 * 8192) as f64 / (probe_tbps * 1e12) * 1e6;
    let probe_config = if calls == 1 {
        "b12x read probes, best shape".to_string()
    } else {
        format!("b12x read probes, best shape, {calls} back-to-back on distinct buffers, per read")
    };
    report.add(
        &format!("read_probe{suffix}/{}MB_N{n}_K{k}", w_bytes >> 20),
        &probe_config,
        &[probe_us],
        w_bytes as f64,
        0.0,
    );
    Ok(())
}
