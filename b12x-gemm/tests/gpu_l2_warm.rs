//! `gemm.l2_warm` on the GPU: it reads and writes nothing (the buffer and its neighbours keep
//! their bits, on the main stream, on a forked one and in a captured fork/join graph), the range
//! it read is then read faster than after an L2 flush (the op's purpose; skipped in the reduced
//! profile, where compute-sanitizer's timing means nothing), typed errors for bad inputs, frozen
//! sessions refuse an unprepared plan, and prepared runs allocate nothing.

use b12x_core::bench::EventTimer;
use b12x_core::cudarc::driver::sys::CUevent_flags;
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::testing::{check_run_allocates_nothing, random_bf16_bytes, reduced_profile, run_gpu_trials, GpuTrial};
use b12x_core::{Device, Error, PreparationSession, Scratch, TensorRef};
use b12x_gemm::l2_warm::{self, Args, Query};
use std::sync::Arc;

type TrialResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn query(max_bytes: usize, evict_last: bool, dev: &Device) -> Query {
    Query { evict_last, ..Query::beside_attention(max_bytes, dev) }
}

/// A byte view as a rank-1 u8 tensor.
fn range<'a>(view: &'a b12x_core::cudarc::driver::CudaView<'a, u8>) -> b12x_core::Result<TensorRef<'a>> {
    TensorRef::from_view(view, &[view.len()])
}

/// Reads several ranges of a random buffer (whole, odd sizes, an interior piece), on the device
/// stream and on a forked stream: the buffer's bits never change.
fn reads_without_writing(dev: &Arc<Device>, evict_last: bool) -> TrialResult {
    let stream = dev.stream();
    let n = if reduced_profile() { 1 << 20 } else { 24 << 20 };
    let buf: CudaSlice<u8> = random_bf16_bytes(stream, 5, n / 2).map_err(err)?;
    let before = stream.clone_dtoh(&buf).map_err(err)?;
    let plan = l2_warm::plan(&query(n, evict_last, dev), dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&plan]).map_err(err)?;
    session.freeze();
    let side = stream.fork().map_err(err)?;
    for (lo, len) in [(0, n), (16, 16), (4096, 4096 + 16), (n / 3 / 16 * 16, n / 2 / 16 * 16), (n - 48, 48)] {
        for s in [stream, &side] {
            let v = buf.slice(lo..lo + len);
            l2_warm::run(&plan, Args { src: range(&v).map_err(err)? }, Scratch::none(), s).map_err(err)?;
        }
    }
    stream.join(&side).map_err(err)?;
    stream.synchronize().map_err(err)?;
    if stream.clone_dtoh(&buf).map_err(err)? != before {
        return Err("the buffer changed".into());
    }
    // A fork/join graph as the decoder layer captures it: the warm on a second stream.
    let graph = session
        .capture(stream, |s| {
            side.join(s)?;
            let v = buf.slice(..);
            l2_warm::run(&plan, Args { src: range(&v)? }, Scratch::none(), &side)?;
            s.join(&side)?;
            Ok(())
        })
        .map_err(err)?;
    for _ in 0..3 {
        // SAFETY: the graph reads `buf`, alive until after the synchronize below.
        unsafe { graph.launch() }.map_err(err)?;
    }
    stream.synchronize().map_err(err)?;
    if stream.clone_dtoh(&buf).map_err(err)? != before {
        return Err("the buffer changed after the graph".into());
    }
    Ok(())
}

/// The point of the op: right after it, reading the same 24 MB (the op again, as the reader;
/// about half of an H100's / H200's 50 MB L2) takes at most 80% of the time the read takes right
/// after an L2 flush (~50-60% expected there). Normal-priority lines throughout (the flush evicts them; evict-last lines are what
/// `reads_without_writing` runs). The timed reads are bracketed by plain events, with no flush in
/// between (`EventTimer::time_us` flushes first). Medians of 11.
fn warm_range_reads_faster(dev: &Arc<Device>) -> TrialResult {
    let stream = dev.stream();
    let n = 24 << 20;
    let buf: CudaSlice<u8> = random_bf16_bytes(stream, 6, n / 2).map_err(err)?;
    let plan = l2_warm::plan(&query(n, false, dev), dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&plan]).map_err(err)?;
    let mut flush = EventTimer::new(dev).map_err(err)?;
    let ctx = dev.context();
    // Timing events (cudarc's `None` makes CU_EVENT_DISABLE_TIMING ones: elapsed_ms fails).
    let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let (e0, e1) = (ctx.new_event(timing).map_err(err)?, ctx.new_event(timing).map_err(err)?);
    let read = |s: &Arc<CudaStream>| {
        let v = buf.slice(..);
        l2_warm::run(&plan, Args { src: range(&v)? }, Scratch::none(), s)
    };
    let timed = || -> Result<f64, String> {
        e0.record(stream).map_err(err)?;
        read(stream).map_err(err)?;
        e1.record(stream).map_err(err)?;
        e1.synchronize().map_err(err)?;
        Ok(e0.elapsed_ms(&e1).map_err(err)? as f64 * 1e3)
    };
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for _ in 0..11 {
        flush.flush_l2(stream).map_err(err)?;
        cold.push(timed()?);
        flush.flush_l2(stream).map_err(err)?;
        read(stream).map_err(err)?;
        warm.push(timed()?);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (c, w) = (median(&mut cold), median(&mut warm));
    eprintln!("l2_warm: 24 MB read after a flush {c:.2} us, after the op {w:.2} us ({:.0}%)", 100.0 * w / c);
    if w > 0.8 * c {
        return Err(format!("after the op the read took {w:.2} us, after a flush {c:.2} us: not faster by 20%"));
    }
    Ok(())
}

/// Bad inputs: typed errors before any launch.
fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let stream = dev.stream();
    let buf: CudaSlice<u8> = random_bf16_bytes(stream, 7, (1 << 16) / 2).map_err(err)?;
    let plan = l2_warm::plan(&query(4096, true, dev), dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&plan]).map_err(err)?;
    let call = |lo: usize, len: usize| {
        let v = buf.slice(lo..lo + len);
        l2_warm::run(&plan, Args { src: range(&v)? }, Scratch::none(), stream)
    };
    if !matches!(call(8, 4096), Err(Error::Misaligned { tensor: "src", .. })) {
        return Err("src 8 bytes off: expected Misaligned".into());
    }
    if !matches!(call(0, 24), Err(Error::Shape { tensor: "src", .. })) {
        return Err("24 bytes: expected Shape (whole 16-byte vectors)".into());
    }
    if !matches!(call(0, 4096 + 16), Err(Error::Capacity { .. })) {
        return Err("4112 bytes on a 4096-byte plan: expected Capacity".into());
    }
    // Every other row of a [64, 64] view: not contiguous.
    let v = buf.slice(..64 * 64);
    let strided = TensorRef::from_view(&v, &[32, 64]).map_err(err)?.with_strides(&[128, 1]).map_err(err)?;
    if l2_warm::run(&plan, Args { src: strided }, Scratch::none(), stream).is_ok() {
        return Err("a strided src: expected an error".into());
    }
    // An empty range launches nothing and is fine.
    call(0, 0).map_err(err)?;
    for (what, q) in [
        ("max_bytes 0", Query { max_bytes: 0, ..query(16, true, dev) }),
        ("threads 33", Query { threads: 33, ..query(16, true, dev) }),
        ("ctas 0", Query { ctas: 0, ..query(16, true, dev) }),
    ] {
        if !matches!(l2_warm::plan(&q, dev), Err(Error::InvalidQuery { op: "gemm.l2_warm", .. })) {
            return Err(format!("{what}: expected InvalidQuery"));
        }
    }
    Ok(())
}

/// With the device frozen an unprepared plan is refused (eagerly and in a capture).
fn unprepared_plans(dev: &Arc<Device>) -> TrialResult {
    let stream = dev.stream();
    let buf: CudaSlice<u8> = random_bf16_bytes(stream, 8, (1 << 16) / 2).map_err(err)?;
    let plan = l2_warm::plan(&query(1 << 16, false, dev), dev).map_err(err)?;
    let call = |s: &Arc<CudaStream>| {
        let v = buf.slice(..);
        l2_warm::run(&plan, Args { src: range(&v)? }, Scratch::none(), s)
    };
    let mut frozen = PreparationSession::new(dev).map_err(err)?;
    frozen.freeze();
    match call(stream) {
        Err(Error::KernelResolutionFrozen { op: "gemm.l2_warm", .. }) => {}
        other => return Err(format!("frozen: expected KernelResolutionFrozen, got {other:?}")),
    }
    frozen.close();
    let open = PreparationSession::new(dev).map_err(err)?;
    match open.capture(stream, call) {
        Err(Error::KernelResolutionFrozen { .. }) => {}
        Err(e) => return Err(format!("capture: expected KernelResolutionFrozen, got {e}")),
        Ok(_) => return Err("capture: expected KernelResolutionFrozen, got a graph".into()),
    }
    call(stream).map_err(err)?;
    stream.synchronize().map_err(err)
}

/// 100 prepared runs change the device's free memory by nothing.
fn run_allocates_nothing(dev: &Arc<Device>) -> TrialResult {
    let stream = dev.stream();
    let buf: CudaSlice<u8> = random_bf16_bytes(stream, 9, (1 << 20) / 2).map_err(err)?;
    let plan = l2_warm::plan(&query(1 << 20, true, dev), dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&plan]).map_err(err)?;
    check_run_allocates_nothing(dev, stream, 100, || {
        let v = buf.slice(..);
        l2_warm::run(&plan, Args { src: range(&v)? }, Scratch::none(), stream)
    })
}

fn main() {
    let mut trials = vec![
        GpuTrial::new("reads_without_writing::evict_last", |d| reads_without_writing(d, true)),
        GpuTrial::new("reads_without_writing::normal", |d| reads_without_writing(d, false)),
        GpuTrial::new("bad_inputs_launch_nothing", bad_inputs),
        GpuTrial::new("unprepared_plans", unprepared_plans),
        GpuTrial::new("run_allocates_nothing", run_allocates_nothing),
    ];
    if !reduced_profile() {
        trials.push(GpuTrial::new("warm_range_reads_faster", warm_range_reads_faster));
    }
    run_gpu_trials(trials)
}
