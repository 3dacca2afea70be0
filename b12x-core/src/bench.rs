//! Benchmark helpers: one method everywhere (DESIGN.md §7).
//!
//! Each timed sample replays a CUDA graph holding the op call(s), with the L2 flushed before the
//! sample and outside the timed events ([`EventTimer::flush_l2`]: zeros written over
//! max(256 MB, 2× L2), then read back with plain loads — what `bench/peers.py` does before the
//! peers); the median of the samples is reported. The ceiling is [`read_bandwidth`], measured the
//! same way in the same run.

use crate::autotune::median;
use crate::kernel::{KernelModule, LaunchDims};
use crate::{Device, Error, Result};
use cudarc::driver::sys::{CUevent_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use serde::Serialize;
use std::sync::Arc;

/// Times single enqueued pieces of work between events, flushing L2 before each sample.
pub struct EventTimer {
    flush: CudaSlice<u8>,
    sink: CudaSlice<u32>,
    fill: crate::Kernel,
    read: crate::Kernel,
    grid: u32,
    start: CudaEvent,
    end: CudaEvent,
}

impl EventTimer {
    pub fn new(device: &Arc<Device>) -> Result<Self> {
        let ctx = device.context();
        let bytes = FLUSH_MIN_BYTES.max(2 * device.l2_bytes() as usize);
        let flush = device.stream().alloc_zeros::<u8>(bytes)?;
        let sink = device.stream().alloc_zeros::<u32>(1)?;
        let fill = device.kernel(&READ_BW, "b12x_flush_fill")?;
        let read = device.kernel(&READ_BW, "b12x_flush_read")?;
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let (start, end) = (ctx.new_event(flags)?, ctx.new_event(flags)?);
        Ok(Self { flush, sink, fill, read, grid: device.sm_count() * 4, start, end })
    }
    /// Evicts the sample's data from L2: zeros written over the flush buffer (max(256 MB, 2× L2))
    /// with plain stores, then read back with plain (L2-allocating, normal-priority) loads, so the
    /// cache holds only clean lines of the flush buffer and the timed work pays no write-backs —
    /// the same flush `bench/peers.py` runs before the peers. The earlier flush (memset, then the
    /// read probe's `L1::no_allocate` loads) left dirty lines behind that the timed work paid for
    /// (a 58.7 MB read: 20.0 µs after it, 17.2 µs after this; `bench-results/2026-12-01-h200-d/`).
    ///
    /// First, lines that loads with an evict-last policy (`createpolicy … evict_last`, e.g.
    /// `gemm.l2_warm`, the TMA GEMV's x) marked persisting go back to normal status
    /// (`cuCtxResetPersistingL2Cache`, best effort: its error is ignored), so that they cannot
    /// outlive the flush and carry into the next sample.
    pub fn flush_l2(&mut self, stream: &CudaStream) -> Result<()> {
        stream.context().bind_to_thread()?;
        // SAFETY: a context-wide driver call with no arguments; the context is bound above.
        let _ = unsafe { cudarc::driver::sys::cuCtxResetPersistingL2Cache() };
        let n = self.flush.len();
        let (ptr, _g) = self.flush.device_ptr_mut(stream);
        let sink = self.sink.device_ptr(stream).0;
        let params = ReadBwParams { src: ptr, sink, n_vec: (n / 16) as u64, magic: 0x9e37_79b9, pad: 0 };
        let dims = LaunchDims { grid: (self.grid, 1, 1), block: (512, 1, 1), smem_bytes: 0 };
        // SAFETY: ReadBwParams mirrors the kernels' struct; the buffer holds n_vec vectors (the
        // fill kernel writes through `src`).
        unsafe { self.fill.launch(stream, dims, &params) }?;
        unsafe { self.read.launch(stream, dims, &params) }
    }
    /// One sample: flush, event, `work`, event, wait. Returns µs.
    pub fn time_us(&mut self, stream: &CudaStream, work: impl FnOnce() -> Result<()>) -> Result<f64> {
        self.flush_l2(stream)?;
        self.start.record(stream)?;
        work()?;
        self.end.record(stream)?;
        self.end.synchronize()?;
        Ok(self.start.elapsed_ms(&self.end)? as f64 * 1e3)
    }
}

/// The flush buffer's minimum size (bench/peers.py's `Timer` uses the same).
const FLUSH_MIN_BYTES: usize = 256 << 20;

/// Captures `work` on the device stream into a graph, replays it `warmup` times, then returns
/// `samples` timed replays (µs) with L2 flushed before each.
pub fn time_graph(
    device: &Arc<Device>,
    samples: usize,
    mut work: impl FnMut(&Arc<CudaStream>) -> Result<()>,
) -> Result<Vec<f64>> {
    let stream = device.stream().clone();
    let mut timer = EventTimer::new(device)?;
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let body = work(&stream);
    let graph = stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
    body?;
    let graph =
        graph?.ok_or_else(|| Error::InvalidQuery { op: "bench", field: "work", reason: "captured nothing".into() })?;
    for _ in 0..3 {
        graph.launch()?;
    }
    stream.synchronize()?;
    (0..samples).map(|_| timer.time_us(&stream, || Ok(graph.launch()?))).collect()
}

/// `B12X_BENCH_QUICK=1`: benchmarks run a reduced set of shapes (smoke runs).
pub fn quick() -> bool {
    std::env::var("B12X_BENCH_QUICK").is_ok_and(|v| v == "1")
}

/// `B12X_BENCH_FILTER=SUBSTRING`: benchmarks run only the cases whose name contains it (for
/// profiling one case, e.g. under ncu); `A|B` runs those containing either; unset, every case
/// runs.
pub fn selected(case: &str) -> bool {
    std::env::var("B12X_BENCH_FILTER").map_or(true, |f| filter_matches(&f, case))
}

/// Whether `case` contains one of the `|`-separated substrings of `filter`.
pub fn filter_matches(filter: &str, case: &str) -> bool {
    filter.split('|').any(|p| case.contains(p))
}

/// Samples per benchmark row (≥ 20; `B12X_BENCH_SAMPLES` overrides).
pub fn samples() -> usize {
    std::env::var("B12X_BENCH_SAMPLES").ok().and_then(|v| v.parse().ok()).unwrap_or(30).max(20)
}

include!(concat!(env!("OUT_DIR"), "/b12x_kernels.rs"));

static READ_BW: KernelModule = KernelModule { name: "b12x-core/read_bw", fatbin: READ_BW_FATBIN, hash: READ_BW_HASH };

#[repr(C)]
#[derive(Clone, Copy)]
struct ReadBwParams {
    src: u64,
    sink: u64,
    n_vec: u64,
    magic: u32,
    pad: u32,
}
const _: () = assert!(std::mem::size_of::<ReadBwParams>() == 32);

/// Measured HBM read bandwidth (TB/s, 1e12 B/s): median of graph-replayed, L2-flushed reads of
/// a `bytes`-sized buffer (use ≥ 1 GB; rounded down to 8 KB) by the project's read kernels,
/// the best of their shapes.
pub fn read_bandwidth(device: &Arc<Device>, bytes: usize) -> Result<f64> {
    read_bandwidth_calls(device, bytes, 1)
}

/// [`read_bandwidth`] with `calls` back-to-back reads per graph, each of its own `bytes`-sized
/// buffer (so every read is cold, as in a decode graph that runs layer after layer): the
/// bandwidth of one read, from the sample's time divided by `calls`.
pub fn read_bandwidth_calls(device: &Arc<Device>, bytes: usize, calls: usize) -> Result<f64> {
    let stream = device.stream().clone();
    // Whole 8 KB pieces (the bulk probe's unit).
    let n_vec = bytes / 8192 * 512;
    let sink = stream.alloc_zeros::<u32>(1)?;
    let mut bufs = Vec::with_capacity(calls.max(1));
    for _ in 0..calls.max(1) {
        let mut src = stream.alloc_zeros::<u8>(n_vec * 16)?;
        {
            let (p, _g) = src.device_ptr_mut(&stream);
            crate::memset_u32(&stream, p, 0x3c00_4000, n_vec * 4)?;
        }
        bufs.push(src);
    }
    let params: Vec<ReadBwParams> = bufs
        .iter()
        .map(|src| ReadBwParams {
            src: src.device_ptr(&stream).0,
            sink: sink.device_ptr(&stream).0,
            n_vec: n_vec as u64,
            magic: 0x9e37_79b9,
            pad: 0,
        })
        .collect();
    // The ceiling is the best of a few shapes of the probe: register loads (4 or 8 in flight per
    // thread, 1-4 CTAs of 512 threads per SM) and bulk copies (2-6 single-thread CTAs per SM,
    // each with a 32 KB ring).
    let mut best = f64::INFINITY;
    let shapes =
        [("b12x_read_bw", 512, [1, 2, 4]), ("b12x_read_bw_u8", 512, [1, 2, 4]), ("b12x_read_bw_bulk", 32, [2, 4, 6])];
    for (symbol, threads, per_sm) in shapes {
        let k = device.kernel(&READ_BW, symbol)?;
        for ctas_per_sm in per_sm {
            let dims =
                LaunchDims { grid: (device.sm_count() * ctas_per_sm, 1, 1), block: (threads, 1, 1), smem_bytes: 0 };
            // SAFETY: each ReadBwParams mirrors the kernel's struct and its buffer holds n_vec
            // vectors; the buffers outlive the graph.
            let t = time_graph(device, samples(), |s| params.iter().try_for_each(|p| unsafe { k.launch(s, dims, p) }))?;
            best = best.min(median(&t) / params.len() as f64);
        }
    }
    Ok((n_vec * 16) as f64 / (best * 1e-6) / 1e12)
}

/// Elements from which the quantizer targets apply (issue 3: M·K ≥ 32 M): the quantizer benches
/// add a [`add_read_probe`] row after every case this large.
pub const QUANT_TARGET_ELEMENTS: usize = 32 << 20;

/// Adds the row `case`: the project's read probes (the ceiling's kernels, best shape) reading
/// `bytes` bytes (rounded down to 8 KB) in one graph-replayed, L2-flushed call, timed like the
/// op rows. It is the size-matched ceiling of an op that moves that many bytes: launch, ramp-up
/// and drain do not amortize over ~100 MB, so even a pure read falls short of the ceiling there.
pub fn add_read_probe(report: &mut BenchReport, device: &Arc<Device>, case: &str, bytes: usize) -> Result<()> {
    add_read_probe_calls(report, device, case, bytes, 1)
}

/// [`add_read_probe`] for a table of `calls` back-to-back calls per graph replay (each read on
/// its own buffer, as [`read_bandwidth_calls`] times them): the time of one read.
pub fn add_read_probe_calls(
    report: &mut BenchReport,
    device: &Arc<Device>,
    case: &str,
    bytes: usize,
    calls: usize,
) -> Result<()> {
    let tbps = read_bandwidth_calls(device, bytes, calls)?;
    let probed = bytes / 8192 * 8192;
    let us = probed as f64 / (tbps * 1e12) * 1e6;
    let config = if calls <= 1 {
        "b12x read probes, best shape, reading the op's bytes (read + written)".to_string()
    } else {
        format!("b12x read probes, best shape, {calls} back-to-back on distinct buffers, per read")
    };
    report.add(case, &config, &[us], probed as f64, 0.0);
    Ok(())
}

/// Adds the row `case`: the driver's device-to-device copy (`cuMemcpyDtoDAsync`, what
/// `cudaMemcpyAsync` runs) of `bytes` bytes from one buffer to another, in one graph-replayed,
/// L2-flushed call timed like the op rows; the row counts the bytes read and written
/// (2 × `bytes`). It is the size-matched floor of any op that reads `bytes` and writes as many,
/// such as an rmsnorm of x into y.
pub fn add_copy_probe(report: &mut BenchReport, device: &Arc<Device>, case: &str, bytes: usize) -> Result<()> {
    let stream = device.stream().clone();
    let src = stream.alloc_zeros::<u8>(bytes)?;
    let mut dst = stream.alloc_zeros::<u8>(bytes)?;
    let src_ptr = src.device_ptr(&stream).0;
    let dst_ptr = dst.device_ptr_mut(&stream).0;
    // SAFETY: both buffers hold `bytes` bytes and live until this function returns, after the
    // graph (time_graph destroys it before returning).
    let t = time_graph(device, samples(), |s| {
        Ok(unsafe { cudarc::driver::result::memcpy_dtod_async(dst_ptr, src_ptr, bytes, s.cu_stream()) }?)
    })?;
    report.add(case, "cuMemcpyDtoDAsync of the bytes read (driver copy), read + written", &t, (2 * bytes) as f64, 0.0);
    Ok(())
}

/// One benchmark row (DESIGN.md §7).
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    pub case: String,
    pub time_us: f64,
    pub bytes: f64,
    pub flops: f64,
    pub tbps: f64,
    pub tflops: f64,
    pub pct_of_ceiling: f64,
    pub peer: Option<String>,
    pub peer_us: Option<f64>,
    /// peer time / our time: > 1 means b12x is faster.
    pub ratio_vs_peer: Option<f64>,
    pub config: String,
}

/// A benchmark's rows, written to `bench-results/<name>.{json,md}`.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub name: String,
    pub gpu: String,
    pub ceiling_tbps: f64,
    pub command: String,
    pub commit: String,
    pub samples: usize,
    pub rows: Vec<BenchRow>,
    /// Lines printed under the Markdown table's header (what a group of rows measures).
    pub notes: Vec<String>,
    #[serde(skip)]
    peers: serde_json::Map<String, serde_json::Value>,
}

impl BenchReport {
    /// Measures the read ceiling now; loads peer timings from `B12X_PEER_JSON` if set (an object
    /// `{ "<case>": {"name": "...", "us": 12.3} }` written by `bench/peers.py` in the same job).
    pub fn new(name: &str, device: &Arc<Device>) -> Result<Self> {
        let ceiling_tbps = read_bandwidth(device, 2 << 30)?;
        let peers = std::env::var("B12X_PEER_JSON")
            .ok()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        println!("read ceiling {ceiling_tbps:.3} TB/s; {} samples per row", samples());
        Ok(Self {
            name: name.to_string(),
            gpu: device.name().to_string(),
            ceiling_tbps,
            command: std::env::args().collect::<Vec<_>>().join(" "),
            commit: std::env::var("B12X_COMMIT").unwrap_or_else(|_| "unknown".into()),
            samples: samples(),
            rows: Vec::new(),
            notes: Vec::new(),
            peers,
        })
    }
    /// Adds a note printed under the Markdown header (e.g. what a group of rows times).
    pub fn note(&mut self, line: &str) {
        self.notes.push(line.to_string());
    }
    /// Adds a row from our sample times; the peer is looked up by `case`.
    pub fn add(&mut self, case: &str, config: &str, times_us: &[f64], bytes: f64, flops: f64) -> &BenchRow {
        self.add_vs(case, case, config, times_us, bytes, flops)
    }
    /// [`BenchReport::add`] with the peer of another case (e.g. a PDL row against the peer's
    /// plain row, when the peer has no PDL form).
    pub fn add_vs(
        &mut self,
        case: &str,
        peer_case: &str,
        config: &str,
        times_us: &[f64],
        bytes: f64,
        flops: f64,
    ) -> &BenchRow {
        let t = median(times_us);
        let tbps = bytes / (t * 1e-6) / 1e12;
        let peer = self.peers.get(peer_case);
        let peer_us = peer.and_then(|p| p.get("us")).and_then(|v| v.as_f64());
        self.rows.push(BenchRow {
            case: case.to_string(),
            time_us: t,
            bytes,
            flops,
            tbps,
            tflops: flops / (t * 1e-6) / 1e12,
            pct_of_ceiling: 100.0 * tbps / self.ceiling_tbps,
            peer: peer.and_then(|p| p.get("name")).and_then(|v| v.as_str()).map(str::to_string),
            peer_us,
            ratio_vs_peer: peer_us.map(|p| p / t),
            config: config.to_string(),
        });
        let row = self.rows.last().expect("just pushed");
        println!(
            "{:<44} {:>9.2} us {:>7.3} TB/s {:>6.1}% peer {:>9} ratio {:>6}  [{}]",
            row.case,
            row.time_us,
            row.tbps,
            row.pct_of_ceiling,
            row.peer_us.map(|p| format!("{p:.2}")).unwrap_or("-".into()),
            row.ratio_vs_peer.map(|r| format!("{r:.2}x")).unwrap_or("-".into()),
            row.config
        );
        row
    }
    /// Writes `<dir>/<name>.json` and `<dir>/<name>.md` (dir: `B12X_BENCH_OUT` or `bench-results`).
    pub fn write(&self) -> Result<std::path::PathBuf> {
        let dir = std::path::PathBuf::from(std::env::var("B12X_BENCH_OUT").unwrap_or_else(|_| "bench-results".into()));
        let io = |p: &std::path::Path, source| Error::Io { path: p.display().to_string(), source };
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        let json = dir.join(format!("{}.json", self.name));
        std::fs::write(&json, serde_json::to_string_pretty(self).unwrap_or_default()).map_err(|e| io(&json, e))?;
        let mut md = format!(
            "# {}\n\nGPU: {} · commit {} · read ceiling {:.3} TB/s (b12x read kernel, same run) · median of {} graph replays, L2 flushed\n\nCommand: `{}`\n\n{}| case | config | time (µs) | bytes | TB/s | TFLOP/s | % ceiling | peer | peer (µs) | peer/b12x |\n|---|---|---|---|---|---|---|---|---|---|\n",
            self.name,
            self.gpu,
            self.commit,
            self.ceiling_tbps,
            self.samples,
            self.command,
            self.notes.iter().map(|n| format!("{n}\n\n")).collect::<String>()
        );
        for r in &self.rows {
            md += &format!(
                "| {} | {} | {:.2} | {:.3e} | {:.3} | {:.2} | {:.1} | {} | {} | {} |\n",
                r.case,
                r.config,
                r.time_us,
                r.bytes,
                r.tbps,
                r.tflops,
                r.pct_of_ceiling,
                r.peer.clone().unwrap_or("-".into()),
                r.peer_us.map(|p| format!("{p:.2}")).unwrap_or("-".into()),
                r.ratio_vs_peer.map(|p| format!("{p:.2}")).unwrap_or("-".into())
            );
        }
        let mdp = dir.join(format!("{}.md", self.name));
        std::fs::write(&mdp, md).map_err(|e| io(&mdp, e))?;
        Ok(json)
    }
}

#[cfg(test)]
mod tests {
    use super::filter_matches;

    #[test]
    fn filter_takes_alternatives() {
        assert!(filter_matches("fused_moe/", "fused_moe/gpt_oss_120b/T4096"));
        assert!(!filter_matches("fused_moe/", "fused_moe_notail/gpt_oss_120b/T4096"));
        assert!(filter_matches("fused_moe/|fused_moe_notail/", "fused_moe_notail/gpt_oss_120b/T4096"));
        assert!(!filter_matches("fused_moe/|fused_moe_notail/", "fused_moe_tile_wg64/gpt_oss_120b/T4096"));
        assert!(filter_matches("", "anything"));
    }
}
