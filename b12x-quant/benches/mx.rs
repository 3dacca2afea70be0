//! Benchmark of `quantization.mxfp8` and `quantization.mxfp4` (bf16 in, E4M3 codes or E2M1
//! pairs + row-major UE8M0 scales out) over
//! M ∈ {1, 16, 128, 8192, 32768} × K ∈ {4096, 7168}, method of DESIGN.md §7 (graph replay, L2 flushed,
//! median), the codes and scales checked bitwise against the CPU codec before timing.
//!
//! Bytes: x read (2 B/element), codes written (1 or 1/2 B/element), scales written (1 B per 32).
//! No PyTorch peer: PyTorch has no MX quantizer op. `B12X_BENCH_QUICK=1` keeps M ∈ {1, 8192}.
//!
//! After every case with M·K ≥ 32 M elements (the size from which issue 3's bandwidth target
//! applies) a `read_probe/<case>` row times the project's read probes reading the same number
//! of bytes as the op moves: the size-matched ceiling (at ~100 MB even a pure read stays well
//! below the 2 GB ceiling). M = 32768 shows the rate once launch and ramp-up amortize.
//!
//! Run: `cargo bench -p b12x-quant --bench mx` (rows go to `bench-results/mx.{json,md}`).

use b12x_core::bench::{add_read_probe, quick, samples, selected, time_graph, BenchReport, QUANT_TARGET_ELEMENTS};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{gpu, uniform};
use b12x_core::{DType, PreparationSession, Result, Scratch, TensorMut, TensorRef};
use b12x_quant::block::{quantize_mx, MxOptions};
use b12x_quant::mx::{self, Args, MxFormat, Query, BLOCK};
use std::sync::Arc;

const ROWS: [usize; 5] = [1, 16, 128, 8192, 32768];
const QUICK_ROWS: [usize; 2] = [1, 8192];
const COLS: [usize; 2] = [4096, 7168];

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("mx bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let mut report = BenchReport::new("mx", &dev)?;
    for (format, k) in [MxFormat::Fp8, MxFormat::Fp4].into_iter().flat_map(|f| COLS.map(|k| (f, k))) {
        for m in ROWS.into_iter().filter(|m| !quick() || QUICK_ROWS.contains(m)) {
            let case = format!("mx{}/M{m}_K{k}_bf16", format.name());
            if !selected(&case) {
                continue;
            }
            let stream = dev.stream();
            let x_f: Vec<f32> = uniform(7, m * k, -3.0, 3.0);
            let x_h: Vec<bf16> = x_f.iter().map(|&v| bf16::from_f32(v)).collect();
            let x = stream.clone_htod(&x_h)?;
            let qk = format.code_bytes(k);
            let mut codes = stream.alloc_zeros::<u8>(m * qk)?;
            let mut scales = stream.alloc_zeros::<u8>(m * k / BLOCK)?;
            let q = Query { format, k, dtype: DType::BF16, max_rows: m, row_major: true, swizzled: false };
            let plan = mx::plan(&q, &dev)?;
            let mut session = PreparationSession::new(&dev)?;
            let config = session.prepare(&[&plan])?.last().map(|s| s.config.clone()).unwrap_or_default();
            let call = |codes: &mut CudaSlice<u8>, scales: &mut CudaSlice<u8>, s: &Arc<CudaStream>| -> Result<()> {
                let args = Args {
                    x: TensorRef::from_slice(&x, &[m, k])?,
                    codes: TensorMut::from_slice(codes, &[m, qk])?,
                    scales: Some(TensorMut::from_slice(scales, &[m, k / BLOCK])?),
                    scales_swizzled: None,
                };
                mx::run(&plan, args, Scratch::none(), s)
            };
            call(&mut codes, &mut scales, stream)?;
            stream.synchronize()?;
            let x_r: Vec<f32> = x_h.iter().map(|v| v.to_f32()).collect();
            let want = quantize_mx(&x_r, m, k, format.element(), MxOptions::default()).expect("valid shape");
            if stream.clone_dtoh(&codes)? != want.codes || stream.clone_dtoh(&scales)? != want.scales {
                panic!("{case}: GPU result differs from the CPU codec");
            }
            let times = time_graph(&dev, samples(), |s| call(&mut codes, &mut scales, s))?;
            let bytes = (m * k * 2 + m * qk + m * k / BLOCK) as f64;
            report.add(&case, &config, &times, bytes, 0.0);
            if m * k >= QUANT_TARGET_ELEMENTS {
                add_read_probe(&mut report, &dev, &format!("read_probe/{case}"), bytes as usize)?;
            }
            session.close();
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}
