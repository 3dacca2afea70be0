//! Benchmark of `norm.rmsnorm` (bf16), plain and fused with the residual add, over
//! T ∈ {1, 8, 128, 4096, 32768} × D ∈ {4096, 7168}, with the method of DESIGN.md §7: one op call
//! per CUDA graph replay, L2 flushed before each sample, median of `bench::samples()` (≥ 20),
//! the oracle checked on sampled rows before timing.
//!
//! Bytes are the compulsory traffic: plain reads x and w and writes y; fused also reads and
//! writes the residual. Peers come from `B12X_PEER_JSON` (bench/peers.py), keyed by the case
//! names `rmsnorm/T{t}_D{d}_bf16` (torch `F.rms_norm`) and `rmsnorm_add/T{t}_D{d}_bf16`.
//! `B12X_BENCH_QUICK=1` keeps T ∈ {1, 4096}.
//!
//! A second table, `rmsnorm_x8/…` and `rmsnorm_add_x8/…` at T = 4096 (where one call's fixed
//! launch cost, ~3–4 µs of a ~18 µs sample, weighs most), times the steady state of a graph of
//! layers: each graph replay holds [`CALLS`] back-to-back calls, each on its own x, y (and
//! residual) buffers, so every call reads cold inputs; L2 flushed before the sample; the row's
//! time is the sample's median divided by [`CALLS`]. A `read_probe_x8/…` row times the
//! project's read probes on the same bytes the same way, and the peer (`rmsnorm_x8/…` in
//! peers.py: 8 `F.rms_norm` calls on distinct x) too.
//!
//! After the plain rows at T ≥ 4096, `read_probe/T{t}_D{d}` reads the op's bytes with the
//! project's read probes, and `copy_probe/T{t}_D{d}` copies x into y with the driver's
//! device-to-device copy (`cuMemcpyDtoDAsync`), both timed the same way: the size-matched
//! floors of an op that reads x and writes y.
//!
//! Run: `cargo bench -p b12x-norm --bench rmsnorm` (rows go to `bench-results/rmsnorm.{json,md}`).

use b12x_core::bench::{samples, time_graph, BenchReport};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{cast, check_bitwise, check_ulp, gpu, uniform};
use b12x_core::{Device, Element, PreparationSession, Result, Scratch, TensorMut, TensorRef};
use b12x_norm::rmsnorm::{self, reference, Args, Query};
use std::sync::Arc;

const TOKENS: [usize; 5] = [1, 8, 128, 4096, 32768];
const COLS: [usize; 2] = [4096, 7168];
/// `B12X_BENCH_QUICK=1`: one decode and one prefill size.
const QUICK_TOKENS: [usize; 2] = [1, 4096];
/// The eps of bench/peers.py.
const EPS: f32 = 1e-6;
/// Distinct host rows; larger inputs repeat them (values do not change the speed).
const DISTINCT_ROWS: usize = 61;
/// Back-to-back calls per graph replay in the `_x8` table (each on its own buffers).
const CALLS: usize = 8;
/// From this T on (the targets), plain rows are followed by `read_probe/…` and
/// `copy_probe/…` rows: a read of the op's bytes, and the driver's copy of x into y.
const PROBE_TOKENS: usize = 4096;
/// Token counts of the `_x8` table.
const CALLS_TOKENS: [usize; 1] = [4096];

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("rmsnorm bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let quick = b12x_core::bench::quick();
    let mut report = BenchReport::new("rmsnorm", &dev)?;
    report.note(&format!(
        "Rows `…_x{CALLS}/…` (and their read probe and peer): each graph replay holds {CALLS} back-to-back calls, each on \
         its own buffers (cold inputs, as consecutive layers); time = the sample's median / {CALLS}. Every other row: \
         one call per replay."
    ));
    for residual in [false, true] {
        for d in COLS {
            for t in TOKENS.into_iter().filter(|t| !quick || QUICK_TOKENS.contains(t)) {
                bench_case(&dev, &mut report, t, d, residual, 1)?;
                if !residual && t >= PROBE_TOKENS {
                    // The size-matched floors of the plain op: a read of its bytes, and the
                    // driver's copy of x into y (an rmsnorm reads x and writes y: at least a copy).
                    let half = t * d * size_of::<bf16>();
                    let read = format!("read_probe/T{t}_D{d}");
                    if b12x_core::bench::selected(&read) {
                        b12x_core::bench::add_read_probe(&mut report, &dev, &read, 2 * half)?;
                    }
                    let copy = format!("copy_probe/T{t}_D{d}");
                    if b12x_core::bench::selected(&copy) {
                        b12x_core::bench::add_copy_probe(&mut report, &dev, &copy, half)?;
                    }
                }
            }
        }
    }
    for d in COLS {
        for t in CALLS_TOKENS {
            // The bytes of one plain call (x read, y written: the probe reads as many).
            let bytes = 2 * t * d * size_of::<bf16>();
            let probe = format!("read_probe_x{CALLS}/T{t}_D{d}");
            if b12x_core::bench::selected(&probe) {
                b12x_core::bench::add_read_probe_calls(&mut report, &dev, &probe, bytes, CALLS)?;
            }
            for residual in [false, true] {
                bench_case(&dev, &mut report, t, d, residual, CALLS)?;
            }
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}

/// One row: `calls` back-to-back calls per graph replay, each on its own x, y and residual.
fn bench_case(
    dev: &Arc<Device>,
    report: &mut BenchReport,
    t: usize,
    d: usize,
    residual: bool,
    calls: usize,
) -> Result<()> {
    // The keys of bench/peers.py.
    let form = if residual { "rmsnorm_add" } else { "rmsnorm" };
    let suffix = if calls == 1 { String::new() } else { format!("_x{calls}") };
    let case = format!("{form}{suffix}/T{t}_D{d}_bf16");
    if !b12x_core::bench::selected(&case) {
        return Ok(());
    }
    let stream = dev.stream();
    let rows = |seed| -> Vec<bf16> {
        let block = cast::<bf16>(&uniform(seed, DISTINCT_ROWS * d, -2.0, 2.0));
        block.iter().copied().cycle().take(t * d).collect()
    };
    let (x_h, r_h) = (rows(1), rows(2));
    let w_h = cast::<bf16>(&uniform(3, d, 0.5, 1.5));
    let x = stream.clone_htod(&x_h)?;
    let w = stream.clone_htod(&w_h)?;
    let mut r = stream.clone_htod(&r_h)?;
    let mut y = stream.alloc_zeros::<bf16>(t * d)?;
    // The other back-to-back calls' own buffers (x, residual, y).
    let mut more = (1..calls)
        .map(|_| Ok((stream.clone_dtod(&x)?, stream.clone_dtod(&r)?, stream.alloc_zeros::<bf16>(t * d)?)))
        .collect::<std::result::Result<Vec<_>, b12x_core::cudarc::driver::DriverError>>()?;

    let q = Query { cols: d, dtype: bf16::DTYPE, max_tokens: t, eps: EPS, residual };
    let plan = rmsnorm::plan(&q, dev)?;
    let mut session = PreparationSession::new(dev)?;
    // max_tokens = T: the call's bucket is the last one.
    let config = session.prepare(&[&plan])?.last().map(|s| s.config.clone()).unwrap_or_default();

    let call_on =
        |x: &CudaSlice<bf16>, y: &mut CudaSlice<bf16>, r: &mut CudaSlice<bf16>, s: &Arc<CudaStream>| -> Result<()> {
            let args = Args {
                x: TensorRef::from_slice(x, &[t, d])?,
                residual: if residual { Some(TensorMut::from_slice(r, &[t, d])?) } else { None },
                w: TensorRef::from_slice(&w, &[d])?,
                y: TensorMut::from_slice(y, &[t, d])?,
            };
            rmsnorm::run(&plan, args, Scratch::none(), s)
        };
    call_on(&x, &mut y, &mut r, stream)?;
    let (y_got, r_got) = (stream.clone_dtoh(&y)?, stream.clone_dtoh(&r)?);
    // Oracle on the first, middle and last rows.
    for row in [0, t / 2, t - 1] {
        let span = row * d..(row + 1) * d;
        let mut want_r = r_h[span.clone()].to_vec();
        let want_y = match residual {
            true => reference::rmsnorm_add(&x_h[span.clone()], &mut want_r, &w_h, EPS),
            false => reference::rmsnorm(&x_h[span.clone()], &w_h, EPS),
        };
        let check = check_ulp(&format!("{case} y row {row}"), &y_got[span.clone()], &want_y, &[1, d], 1)
            .and_then(|_| check_bitwise(&format!("{case} residual row {row}"), &r_got[span], &want_r, &[1, d]));
        if let Err(e) = check {
            panic!("oracle check failed before timing: {e}");
        }
    }

    // Each replay of the fused form adds x into the residual again; values stay far from overflow.
    let times = time_graph(dev, samples(), |s| {
        call_on(&x, &mut y, &mut r, s)?;
        more.iter_mut().try_for_each(|(x, r, y)| call_on(x, y, r, s))
    })?;
    let times: Vec<f64> = times.iter().map(|t| t / calls as f64).collect();
    let tensors = if residual { 4 } else { 2 };
    let bytes = ((tensors * t * d + d) * size_of::<bf16>()) as f64;
    report.add(&case, &config, &times, bytes, 0.0);
    session.close();
    Ok(())
}
