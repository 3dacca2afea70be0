//! Benchmark of `quantization.nvfp4` (bf16 in; E2M1 pairs + row-major UE4M3 scales out) in both
//! modes — encode scale computed on the device (the memset + amax pass + quantize pass, as an
//! activation quantizer runs) and given (one pass) — over M ∈ {1, 16, 128, 8192, 32768} × K ∈ {4096,
//! 7168}, method of DESIGN.md §7, results checked bitwise against the CPU codec before timing.
//!
//! Bytes are the compulsory traffic of the op: x read once (2 B/element), codes written (1/2 B),
//! scales written (1 B per 16). The computed mode reads x twice (the amax must be known before
//! the first scale), partly from L2 (the amax pass walks x backwards), so its % of the ceiling
//! is the rate of the whole op, not the DRAM rate. No PyTorch peer. `B12X_BENCH_QUICK=1` keeps
//! M ∈ {1, 8192}.
//!
//! After every case with M·K ≥ 32 M elements (the size from which issue 3's bandwidth target
//! applies) a `read_probe/<case>` row times the project's read probes reading the same number
//! of bytes as the op moves: the size-matched ceiling (at ~100 MB even a pure read stays well
//! below the 2 GB ceiling). M = 32768 shows the rate once launch and ramp-up amortize.
//!
//! Run: `cargo bench -p b12x-quant --bench nvfp4` (rows go to `bench-results/nvfp4.{json,md}`).

use b12x_core::bench::{add_read_probe, quick, samples, selected, time_graph, BenchReport, QUANT_TARGET_ELEMENTS};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{gpu, uniform};
use b12x_core::{DType, PreparationSession, Result, Scratch, TensorMut, TensorRef};
use b12x_quant::block::quantize_nvfp4;
use b12x_quant::nvfp4::{self, Args, GlobalScale, Query, BLOCK};
use std::sync::Arc;

const ROWS: [usize; 5] = [1, 16, 128, 8192, 32768];
const QUICK_ROWS: [usize; 2] = [1, 8192];
const COLS: [usize; 2] = [4096, 7168];
/// The given-mode encode scale (any positive f32 works).
const GIVEN: f32 = 448.0;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("nvfp4 bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let mut report = BenchReport::new("nvfp4", &dev)?;
    for (global, k) in [GlobalScale::Computed, GlobalScale::Given].into_iter().flat_map(|g| COLS.map(|k| (g, k))) {
        for m in ROWS.into_iter().filter(|m| !quick() || QUICK_ROWS.contains(m)) {
            let mode = if global == GlobalScale::Computed { "computed" } else { "given" };
            let case = format!("nvfp4/M{m}_K{k}_bf16_{mode}");
            if !selected(&case) {
                continue;
            }
            let stream = dev.stream();
            let x_h: Vec<bf16> = uniform(9, m * k, -3.0, 3.0).iter().map(|&v| bf16::from_f32(v)).collect();
            let x = stream.clone_htod(&x_h)?;
            let mut codes = stream.alloc_zeros::<u8>(m * k / 2)?;
            let mut scales = stream.alloc_zeros::<u8>(m * k / BLOCK)?;
            let mut enc = stream.alloc_zeros::<f32>(1)?;
            let enc_given = stream.clone_htod(&[GIVEN])?;
            let q = Query { k, dtype: DType::BF16, max_rows: m, row_major: true, swizzled: false, global };
            let plan = nvfp4::plan(&q, &dev)?;
            let mut scratch = stream.alloc_zeros::<u8>(plan.scratch_layout().total_bytes().max(1024) + 1024)?;
            let mut session = PreparationSession::new(&dev)?;
            let config = session.prepare(&[&plan])?.last().map(|s| s.config.clone()).unwrap_or_default();
            let call = |codes: &mut CudaSlice<u8>,
                        scales: &mut CudaSlice<u8>,
                        enc: &mut CudaSlice<f32>,
                        scratch: &mut CudaSlice<u8>,
                        s: &Arc<CudaStream>|
             -> Result<()> {
                let args = Args {
                    x: TensorRef::from_slice(&x, &[m, k])?,
                    codes: TensorMut::from_slice(codes, &[m, k / 2])?,
                    scales: Some(TensorMut::from_slice(scales, &[m, k / BLOCK])?),
                    scales_swizzled: None,
                    enc_in: (global == GlobalScale::Given)
                        .then(|| TensorRef::from_slice(&enc_given, &[1]))
                        .transpose()?,
                    enc_out: (global == GlobalScale::Computed).then(|| TensorMut::from_slice(enc, &[1])).transpose()?,
                };
                nvfp4::run(&plan, args, Scratch::from_slice(scratch), s)
            };
            call(&mut codes, &mut scales, &mut enc, &mut scratch, stream)?;
            let x_r: Vec<f32> = x_h.iter().map(|v| v.to_f32()).collect();
            let given = (global == GlobalScale::Given).then_some(GIVEN);
            let want = quantize_nvfp4(&x_r, m, k, given).expect("valid shape");
            if stream.clone_dtoh(&codes)? != want.codes
                || stream.clone_dtoh(&scales)? != want.scales
                || (given.is_none() && stream.clone_dtoh(&enc)?[0].to_bits() != want.enc.to_bits())
            {
                panic!("{case}: GPU result differs from the CPU codec");
            }
            let times = time_graph(&dev, samples(), |s| call(&mut codes, &mut scales, &mut enc, &mut scratch, s))?;
            let bytes = (m * k * 2 + m * k / 2 + m * k / BLOCK) as f64;
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
