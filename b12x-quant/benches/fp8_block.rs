//! Benchmark of `quantization.fp8_block` (bf16 in; E4M3 codes + one scale per 1×128 group, f32
//! and UE8M0) over M ∈ {1, 16, 128, 8192, 32768} × K = 7168 (DeepSeek-V4's hidden size), method of
//! DESIGN.md §7, results checked bitwise against the CPU codec before timing.
//!
//! Bytes: x read (2 B/element), codes written (1 B), scales written (4 or 1 B per 128). No
//! PyTorch peer. `B12X_BENCH_QUICK=1` keeps M ∈ {1, 8192}.
//!
//! After every case with M·K ≥ 32 M elements (the size from which issue 3's bandwidth target
//! applies) a `read_probe/<case>` row times the project's read probes reading the same number
//! of bytes as the op moves: the size-matched ceiling (at ~100 MB even a pure read stays well
//! below the 2 GB ceiling). M = 32768 shows the rate once launch and ramp-up amortize.
//!
//! Run: `cargo bench -p b12x-quant --bench fp8_block`.

use b12x_core::bench::{add_read_probe, quick, samples, selected, time_graph, BenchReport, QUANT_TARGET_ELEMENTS};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{gpu, uniform};
use b12x_core::{DType, PreparationSession, Result, Scratch, TensorMut, TensorRef};
use b12x_quant::block::{quantize_block_fp8, Fp8ScaleKind, Fp8Scales};
use b12x_quant::fp8_block::{self, Args, Query};
use std::sync::Arc;

const ROWS: [usize; 5] = [1, 16, 128, 8192, 32768];
const QUICK_ROWS: [usize; 2] = [1, 8192];
const K: usize = 7168;
const G: usize = 128;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("fp8_block bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let mut report = BenchReport::new("fp8_block", &dev)?;
    for scale in [Fp8ScaleKind::F32, Fp8ScaleKind::Ue8m0] {
        for m in ROWS.into_iter().filter(|m| !quick() || QUICK_ROWS.contains(m)) {
            let case = format!("fp8_block/M{m}_K{K}_g{G}_{}_bf16", format!("{scale:?}").to_lowercase());
            if !selected(&case) {
                continue;
            }
            let stream = dev.stream();
            let x_h: Vec<bf16> = uniform(11, m * K, -3.0, 3.0).iter().map(|&v| bf16::from_f32(v)).collect();
            let x = stream.clone_htod(&x_h)?;
            let groups = K / G;
            let scale_bytes = if scale == Fp8ScaleKind::F32 { 4 } else { 1 };
            let mut codes = stream.alloc_zeros::<u8>(m * K)?;
            let mut s32 = stream.alloc_zeros::<f32>(m * groups)?;
            let mut s8 = stream.alloc_zeros::<u8>(m * groups)?;
            let q = Query { group: G, k: K, dtype: DType::BF16, max_rows: m, scale };
            let plan = fp8_block::plan(&q, &dev)?;
            let mut session = PreparationSession::new(&dev)?;
            let config = session.prepare(&[&plan])?.last().map(|s| s.config.clone()).unwrap_or_default();
            let call = |codes: &mut CudaSlice<u8>,
                        s32: &mut CudaSlice<f32>,
                        s8: &mut CudaSlice<u8>,
                        s: &Arc<CudaStream>|
             -> Result<()> {
                let scales = match scale {
                    Fp8ScaleKind::F32 => TensorMut::from_slice(s32, &[m, groups])?,
                    Fp8ScaleKind::Ue8m0 => TensorMut::from_slice(s8, &[m, groups])?,
                };
                let args = Args {
                    x: TensorRef::from_slice(&x, &[m, K])?,
                    codes: TensorMut::from_slice(codes, &[m, K])?,
                    scales,
                };
                fp8_block::run(&plan, args, Scratch::none(), s)
            };
            call(&mut codes, &mut s32, &mut s8, stream)?;
            let x_r: Vec<f32> = x_h.iter().map(|v| v.to_f32()).collect();
            let want = quantize_block_fp8(&x_r, m, K, (1, G), scale).expect("valid shape");
            let scales_ok = match &want.scales {
                Fp8Scales::F32(w) => stream.clone_dtoh(&s32)?.iter().zip(w).all(|(a, b)| a.to_bits() == b.to_bits()),
                Fp8Scales::Ue8m0(w) => stream.clone_dtoh(&s8)? == *w,
            };
            if stream.clone_dtoh(&codes)? != want.codes || !scales_ok {
                panic!("{case}: GPU result differs from the CPU codec");
            }
            let times = time_graph(&dev, samples(), |s| call(&mut codes, &mut s32, &mut s8, s))?;
            let bytes = (m * K * 3 + m * groups * scale_bytes) as f64;
            report.add(&case, &config, &times, bytes, 0.0);
            if m * K >= QUANT_TARGET_ELEMENTS {
                add_read_probe(&mut report, &dev, &format!("read_probe/{case}"), bytes as usize)?;
            }
            session.close();
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}
