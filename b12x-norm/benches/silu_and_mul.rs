//! Benchmark of `activation.silu_and_mul` (bf16 in) for each output — bf16 `y`, MXFP8, block FP8
//! 1×128 with f32 and with UE8M0 scales, NVFP4 with a given encode scale — over
//! T ∈ {1, 8, 64, 4096, 32768} × I ∈ {12288 (Qwen3-8B), 18432 (DeepSeek-V3 dense)}, method of
//! DESIGN.md §7 (graph replay, L2 flushed, median; the plan autotuned by the session's race).
//!
//! Inputs: seeded uniform values in ±√3 (unit variance, like the peer's `torch.randn`), 61
//! distinct rows repeated. Before timing, rows 0, T/2 and T−1 are checked: `y` within 1 ULP of
//! the CPU oracle; quantized codes and scales bit for bit the CPU codec of b12x-quant applied to
//! the op's own bf16 `y` (run once with the plain output).
//!
//! Bytes are the compulsory traffic: x read (2 · 2I bytes per row), the output written (y: 2I
//! bytes; codes I or I/2 bytes and the scales). Peer (`B12X_PEER_JSON`, bench/peers.py): the plain
//! rows' `silu_and_mul/T{T}_I{I}_bf16` is `F.silu(x[:, :I]) * x[:, I:]` (two kernels). After every
//! case with T·I ≥ 32 M elements a `read_probe/<case>` row times the project's read probes reading
//! as many bytes as the op moves (the size-matched ceiling). `B12X_BENCH_QUICK=1` keeps
//! T ∈ {1, 4096}.
//!
//! Run: `cargo bench -p b12x-norm --bench silu_and_mul` (rows go to
//! `bench-results/silu_and_mul.{json,md}`).

use b12x_core::bench::{add_read_probe, quick, samples, selected, time_graph, BenchReport, QUANT_TARGET_ELEMENTS};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{cast, check_ulp, gpu, uniform};
use b12x_core::{DType, Device, PreparationSession, Result, Scratch, TensorMut, TensorRef};
use b12x_norm::silu_and_mul::{self, reference, Args, QuantOut, Query};
use b12x_quant::block::{quantize_block_fp8, quantize_mx, quantize_nvfp4, Fp8ScaleKind, Fp8Scales, MxOptions};
use b12x_quant::mx::MxFormat;
use std::sync::Arc;

const TOKENS: [usize; 5] = [1, 8, 64, 4096, 32768];
const QUICK_TOKENS: [usize; 2] = [1, 4096];
const INTER: [usize; 2] = [12288, 18432];
const OUTS: [Option<QuantOut>; 5] = [
    None,
    Some(QuantOut::Mxfp8),
    Some(QuantOut::Fp8Block128F32),
    Some(QuantOut::Fp8Block128Ue8m0),
    Some(QuantOut::Nvfp4),
];
/// The NVFP4 encode scale (any positive f32).
const ENC: f32 = 448.0;
/// Distinct host rows; larger inputs repeat them (values do not change the speed).
const DISTINCT_ROWS: usize = 61;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("silu_and_mul bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let mut report = BenchReport::new("silu_and_mul", &dev)?;
    for i in INTER {
        for t in TOKENS.into_iter().filter(|t| !quick() || QUICK_TOKENS.contains(t)) {
            if !OUTS.iter().any(|&o| selected(&case_name(o, t, i))) {
                continue;
            }
            let stream = dev.stream();
            let block = cast::<bf16>(&uniform(1, DISTINCT_ROWS * 2 * i, -1.732, 1.732));
            let x_h: Vec<bf16> = block.iter().copied().cycle().take(t * 2 * i).collect();
            let x = stream.clone_htod(&x_h)?;
            drop(x_h);
            let y = plain_y(&dev, &x, t, i)?;
            for out in OUTS {
                if selected(&case_name(out, t, i)) {
                    bench_case(&dev, &mut report, &x, &y, out, t, i)?;
                }
            }
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}

fn case_name(out: Option<QuantOut>, t: usize, i: usize) -> String {
    let op = match out {
        None => "silu_and_mul",
        Some(QuantOut::Mxfp8) => "silu_and_mul_mxfp8",
        Some(QuantOut::Fp8Block128F32) => "silu_and_mul_fp8b128f32",
        Some(QuantOut::Fp8Block128Ue8m0) => "silu_and_mul_fp8b128ue8m0",
        Some(QuantOut::Nvfp4) => "silu_and_mul_nvfp4",
    };
    format!("{op}/T{t}_I{i}_bf16")
}

/// The op's bf16 `y` on the host (default config; every config computes the same bits).
fn plain_y(dev: &Arc<Device>, x: &CudaSlice<bf16>, t: usize, i: usize) -> Result<Vec<bf16>> {
    let stream = dev.stream();
    let q = Query { intermediate: i, dtype: DType::BF16, max_tokens: t, limit: None, out: None };
    let plan = silu_and_mul::plan(&q, dev)?;
    let mut session = PreparationSession::new(dev)?.with_autotune(false);
    session.prepare(&[&plan])?;
    let mut y = stream.alloc_zeros::<bf16>(t * i)?;
    let args = Args {
        x: TensorRef::from_slice(x, &[t, 2 * i])?,
        y: Some(TensorMut::from_slice(&mut y, &[t, i])?),
        codes: None,
        scales: None,
        enc: None,
    };
    silu_and_mul::run(&plan, args, Scratch::none(), stream)?;
    session.close();
    Ok(stream.clone_dtoh(&y)?)
}

/// Output buffers of one case (the scales as raw bytes).
struct Outputs {
    y: CudaSlice<bf16>,
    codes: CudaSlice<u8>,
    scales: CudaSlice<u8>,
}

fn scales_view<'a>(s: &'a mut CudaSlice<u8>, out: QuantOut, t: usize, i: usize) -> Result<TensorMut<'a>> {
    let groups = i / out.block();
    let base = TensorMut::from_slice(s, &[t * groups * out.scale_dtype().size_bytes()])?;
    // SAFETY: the buffer holds t * groups scales of the output's scale dtype.
    unsafe { TensorMut::from_raw(base.ptr(), &[t, groups], &[groups as isize, 1], out.scale_dtype()) }
}

fn bench_case(
    dev: &Arc<Device>,
    report: &mut BenchReport,
    x: &CudaSlice<bf16>,
    y_plain: &[bf16],
    out: Option<QuantOut>,
    t: usize,
    i: usize,
) -> Result<()> {
    let case = case_name(out, t, i);
    let stream = dev.stream();
    let enc = stream.clone_htod(&[ENC])?;
    let (qb, sb) = out.map_or((1, 1), |o| (o.code_bytes(i), i / o.block() * o.scale_dtype().size_bytes()));
    let mut o = Outputs {
        y: stream.alloc_zeros(if out.is_none() { t * i } else { 1 })?,
        codes: stream.alloc_zeros(t * qb)?,
        scales: stream.alloc_zeros(t * sb)?,
    };
    let q = Query { intermediate: i, dtype: DType::BF16, max_tokens: t, limit: None, out };
    let plan = silu_and_mul::plan(&q, dev)?;
    let mut session = PreparationSession::new(dev)?;
    let config = session.prepare(&[&plan])?.last().map(|s| s.config.clone()).unwrap_or_default();
    let call = |o: &mut Outputs, s: &Arc<CudaStream>| -> Result<()> {
        let x = TensorRef::from_slice(x, &[t, 2 * i])?;
        let args = match out {
            None => {
                Args { x, y: Some(TensorMut::from_slice(&mut o.y, &[t, i])?), codes: None, scales: None, enc: None }
            }
            Some(qo) => Args {
                x,
                y: None,
                codes: Some(TensorMut::from_slice(&mut o.codes, &[t, qb])?),
                scales: Some(scales_view(&mut o.scales, qo, t, i)?),
                enc: (qo == QuantOut::Nvfp4).then(|| TensorRef::from_slice(&enc, &[1])).transpose()?,
            },
        };
        silu_and_mul::run(&plan, args, Scratch::none(), s)
    };
    call(&mut o, stream)?;
    check(stream, x, y_plain, &o, out, t, i)?;
    let bytes = (t * 2 * i * 2 + if out.is_none() { t * i * 2 } else { t * (qb + sb) }) as f64;
    let times = time_graph(dev, samples(), |s| call(&mut o, s))?;
    report.add(&case, &config, &times, bytes, 0.0);
    if t * i >= QUANT_TARGET_ELEMENTS {
        add_read_probe(report, dev, &format!("read_probe/{case}"), bytes as usize)?;
    }
    session.close();
    Ok(())
}

/// Rows 0, T/2 and T−1: `y` within 1 ULP of the oracle; quantized outputs equal to the CPU codec
/// applied to the plain run's `y`.
fn check(
    stream: &Arc<CudaStream>,
    x: &CudaSlice<bf16>,
    y_plain: &[bf16],
    o: &Outputs,
    out: Option<QuantOut>,
    t: usize,
    i: usize,
) -> Result<()> {
    let x_h = stream.clone_dtoh(x)?;
    let y_h = if out.is_none() { stream.clone_dtoh(&o.y)? } else { y_plain.to_vec() };
    let (codes, scales) = (stream.clone_dtoh(&o.codes)?, stream.clone_dtoh(&o.scales)?);
    for row in [0, t / 2, t - 1] {
        let y_r = &y_h[row * i..(row + 1) * i];
        let Some(qo) = out else {
            let want = reference::silu_and_mul(&x_h[row * 2 * i..(row + 1) * 2 * i], i, None);
            if let Err(e) = check_ulp("y", y_r, &want, &[1, i], reference::ULP_BOUND) {
                panic!("silu_and_mul T{t} I{i} row {row}: {e}");
            }
            continue;
        };
        let y_f: Vec<f32> = y_r.iter().map(|v| v.to_f32()).collect();
        let (want_codes, want_scales): (Vec<u8>, Vec<u8>) = match qo {
            QuantOut::Mxfp8 => {
                let m = quantize_mx(&y_f, 1, i, MxFormat::Fp8.element(), MxOptions::default()).expect("shape");
                (m.codes, m.scales)
            }
            QuantOut::Nvfp4 => {
                let n = quantize_nvfp4(&y_f, 1, i, Some(ENC)).expect("shape");
                (n.codes, n.scales)
            }
            QuantOut::Fp8Block128F32 | QuantOut::Fp8Block128Ue8m0 => {
                let kind = if qo == QuantOut::Fp8Block128F32 { Fp8ScaleKind::F32 } else { Fp8ScaleKind::Ue8m0 };
                let b = quantize_block_fp8(&y_f, 1, i, (1, 128), kind).expect("shape");
                let scales = match b.scales {
                    Fp8Scales::F32(v) => v.iter().flat_map(|f| f.to_le_bytes()).collect(),
                    Fp8Scales::Ue8m0(v) => v,
                };
                (b.codes, scales)
            }
        };
        let (qb, sb) = (want_codes.len(), want_scales.len());
        if codes[row * qb..(row + 1) * qb] != want_codes[..] || scales[row * sb..(row + 1) * sb] != want_scales[..] {
            panic!("silu_and_mul {qo:?} T{t} I{i}: row {row} differs from y + the CPU codec");
        }
    }
    Ok(())
}
