//! Benchmark of `norm.rmsnorm_quant` (bf16 in, plain form) for each quantized output — MXFP8,
//! block FP8 1×128 with f32 and with UE8M0 scales, NVFP4 with a given encode scale — over T ∈ {1, 16, 8192, 32768} ×
//! D ∈ {4096, 7168}, method of DESIGN.md §7 (graph replay, L2 flushed, median).
//!
//! Before timing, the fused codes and scales of the first, middle and last rows are checked bit
//! for bit against `norm.rmsnorm` (the same row layout pinned: v4 for v4r2) followed by the CPU
//! codec of b12x-quant.
//!
//! Bytes are the compulsory traffic: x read (2 B/element), w read, codes written (1 or 1/2
//! B/element), scales written. For T = 8192 a second row, `unfused_<out>/…`, times the same work
//! as two b12x ops in one graph (`norm.rmsnorm` to a bf16 y, then the standalone quantizer, each
//! with its own autotuned config), bytes counted the same way (so its % of the ceiling is the
//! fused-equivalent rate). No PyTorch peer: PyTorch has no fused norm → MX/NVFP4 quantizer.
//! `B12X_BENCH_QUICK=1` keeps T ∈ {1, 8192}.
//!
//! After every fused case with T·D ≥ 32 M elements a `read_probe/<case>` row times the project's
//! read probes reading as many bytes as the op moves (the size-matched ceiling).
//!
//! Run: `cargo bench -p b12x-norm --bench rmsnorm_quant` (rows go to
//! `bench-results/rmsnorm_quant.{json,md}`).

use b12x_core::bench::{add_read_probe, quick, samples, selected, time_graph, BenchReport, QUANT_TARGET_ELEMENTS};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{cast, gpu, uniform};
use b12x_core::{DType, Device, OpPlan, PreparationSession, Result, Scratch, TensorMut, TensorRef};
use b12x_norm::rmsnorm;
use b12x_norm::rmsnorm_quant::{self, Args, QuantOut, Query};
use b12x_quant::block::{quantize_block_fp8, quantize_mx, quantize_nvfp4, Fp8ScaleKind, Fp8Scales, MxOptions};
use b12x_quant::{fp8_block, mx, nvfp4};
use std::sync::Arc;

const TOKENS: [usize; 4] = [1, 16, 8192, 32768];
const QUICK_TOKENS: [usize; 2] = [1, 8192];
const COLS: [usize; 2] = [4096, 7168];
const OUTS: [QuantOut; 4] = [QuantOut::Mxfp8, QuantOut::Fp8Block128F32, QuantOut::Fp8Block128Ue8m0, QuantOut::Nvfp4];
const EPS: f32 = 1e-6;
/// The NVFP4 encode scale (any positive f32).
const ENC: f32 = 448.0;
/// Distinct host rows; larger inputs repeat them (values do not change the speed).
const DISTINCT_ROWS: usize = 61;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("rmsnorm_quant bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let mut report = BenchReport::new("rmsnorm_quant", &dev)?;
    for out in OUTS {
        for d in COLS {
            for t in TOKENS.into_iter().filter(|t| !quick() || QUICK_TOKENS.contains(t)) {
                bench_case(&dev, &mut report, out, t, d)?;
            }
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}

fn out_name(out: QuantOut) -> &'static str {
    match out {
        QuantOut::Mxfp8 => "mxfp8",
        QuantOut::Fp8Block128F32 => "fp8b128f32",
        QuantOut::Fp8Block128Ue8m0 => "fp8b128ue8m0",
        QuantOut::Nvfp4 => "nvfp4",
    }
}

/// Output buffers of one case: codes and the scales as raw bytes.
struct Outputs {
    codes: CudaSlice<u8>,
    scales: CudaSlice<u8>,
}

fn scales_view<'a>(s: &'a mut CudaSlice<u8>, out: QuantOut, t: usize, d: usize) -> Result<TensorMut<'a>> {
    let groups = d / out.block();
    let base = TensorMut::from_slice(s, &[t * groups * out.scale_dtype().size_bytes()])?;
    // SAFETY: the buffer holds t * groups scales of the output's scale dtype.
    unsafe { TensorMut::from_raw(base.ptr(), &[t, groups], &[groups as isize, 1], out.scale_dtype()) }
}

fn bench_case(dev: &Arc<Device>, report: &mut BenchReport, out: QuantOut, t: usize, d: usize) -> Result<()> {
    let case = format!("rmsnorm_quant_{}/T{t}_D{d}_bf16", out_name(out));
    let unfused_case = format!("unfused_{}/T{t}_D{d}_bf16", out_name(out));
    let time_unfused = t >= 8192 && selected(&unfused_case);
    if !selected(&case) && !time_unfused {
        return Ok(());
    }
    let stream = dev.stream();
    let block = cast::<bf16>(&uniform(1, DISTINCT_ROWS * d, -2.0, 2.0));
    let x_h: Vec<bf16> = block.iter().copied().cycle().take(t * d).collect();
    let w_h = cast::<bf16>(&uniform(3, d, 0.5, 1.5));
    let x = stream.clone_htod(&x_h)?;
    let w = stream.clone_htod(&w_h)?;
    let enc = stream.clone_htod(&[ENC])?;
    let qb = out.code_bytes(d);
    let groups = d / out.block();
    let scale_bytes = out.scale_dtype().size_bytes();
    let mut o = Outputs { codes: stream.alloc_zeros(t * qb)?, scales: stream.alloc_zeros(t * groups * scale_bytes)? };
    let q = Query { cols: d, dtype: DType::BF16, max_tokens: t, eps: EPS, residual: false, out };
    let plan = rmsnorm_quant::plan(&q, dev)?;
    let mut session = PreparationSession::new(dev)?;
    let config = session.prepare(&[&plan])?.last().map(|s| s.config.clone()).unwrap_or_default();
    let call = |o: &mut Outputs, s: &Arc<CudaStream>| -> Result<()> {
        let args = Args {
            x: TensorRef::from_slice(&x, &[t, d])?,
            residual: None,
            w: TensorRef::from_slice(&w, &[d])?,
            codes: TensorMut::from_slice(&mut o.codes, &[t, qb])?,
            scales: scales_view(&mut o.scales, out, t, d)?,
            enc: (out == QuantOut::Nvfp4).then(|| TensorRef::from_slice(&enc, &[1])).transpose()?,
        };
        rmsnorm_quant::run(&plan, args, Scratch::none(), s)
    };
    call(&mut o, stream)?;
    check(dev, &q, &config, &x, &w, &o, t, d)?;
    let bytes = (t * d * 2 + d * 2 + t * qb + t * groups * scale_bytes) as f64;
    if selected(&case) {
        let times = time_graph(dev, samples(), |s| call(&mut o, s))?;
        report.add(&case, &config, &times, bytes, 0.0);
        if t * d >= QUANT_TARGET_ELEMENTS {
            add_read_probe(report, dev, &format!("read_probe/{case}"), bytes as usize)?;
        }
    }
    session.close();
    if time_unfused {
        let (times, configs) = unfused(dev, &q, &x, &w, &enc, &mut o)?;
        report.add(&unfused_case, &configs, &times, bytes, 0.0);
    }
    Ok(())
}

/// Checks rows 0, T/2 and T−1 against `norm.rmsnorm` (same config pinned) + the CPU codec.
#[allow(clippy::too_many_arguments)]
fn check(
    dev: &Arc<Device>,
    q: &Query,
    config: &str,
    x: &CudaSlice<bf16>,
    w: &CudaSlice<bf16>,
    o: &Outputs,
    t: usize,
    d: usize,
) -> Result<()> {
    let stream = dev.stream();
    let rplan = rmsnorm::plan(&q.rmsnorm_query(), dev)?;
    // The norm.rmsnorm config with the fused config's row layout (v4r2: v4).
    let unknown =
        || b12x_core::Error::UnknownConfig { op: rmsnorm_quant::OP, bucket: String::new(), config: config.into() };
    let row_config = rmsnorm_quant::Config::parse(config).ok_or_else(unknown)?.row.id();
    let mut s = PreparationSession::new(dev)?.with_autotune(false);
    for b in rplan.buckets() {
        s.pin(&rplan, &b.label(), &row_config);
    }
    s.prepare(&[&rplan])?;
    let mut y = stream.alloc_zeros::<bf16>(t * d)?;
    let args = rmsnorm::Args {
        x: TensorRef::from_slice(x, &[t, d])?,
        residual: None,
        w: TensorRef::from_slice(w, &[d])?,
        y: TensorMut::from_slice(&mut y, &[t, d])?,
    };
    rmsnorm::run(&rplan, args, Scratch::none(), stream)?;
    s.close();
    let y_h = stream.clone_dtoh(&y)?;
    let (codes, scales) = (stream.clone_dtoh(&o.codes)?, stream.clone_dtoh(&o.scales)?);
    let qb = q.out.code_bytes(d);
    let sb = d / q.out.block() * q.out.scale_dtype().size_bytes();
    for row in [0, t / 2, t - 1] {
        let y_r: Vec<f32> = y_h[row * d..(row + 1) * d].iter().map(|v| v.to_f32()).collect();
        let (want_codes, want_scales): (Vec<u8>, Vec<u8>) = match q.out {
            QuantOut::Mxfp8 => {
                let m = quantize_mx(&y_r, 1, d, mx::MxFormat::Fp8.element(), MxOptions::default()).expect("shape");
                (m.codes, m.scales)
            }
            QuantOut::Nvfp4 => {
                let n = quantize_nvfp4(&y_r, 1, d, Some(ENC)).expect("shape");
                (n.codes, n.scales)
            }
            QuantOut::Fp8Block128F32 | QuantOut::Fp8Block128Ue8m0 => {
                let kind = if q.out == QuantOut::Fp8Block128F32 { Fp8ScaleKind::F32 } else { Fp8ScaleKind::Ue8m0 };
                let b = quantize_block_fp8(&y_r, 1, d, (1, 128), kind).expect("shape");
                let scales = match b.scales {
                    Fp8Scales::F32(v) => v.iter().flat_map(|f| f.to_le_bytes()).collect(),
                    Fp8Scales::Ue8m0(v) => v,
                };
                (b.codes, scales)
            }
        };
        if codes[row * qb..(row + 1) * qb] != want_codes[..] || scales[row * sb..(row + 1) * sb] != want_scales[..] {
            panic!("rmsnorm_quant {:?} T{t} D{d}: row {row} differs from rmsnorm + the CPU codec", q.out);
        }
    }
    Ok(())
}

/// The same work as two b12x ops in one graph: rmsnorm to a bf16 y, then the standalone
/// quantizer, each autotuned. Returns the sample times and "rmsnorm config + quantizer config".
fn unfused(
    dev: &Arc<Device>,
    q: &Query,
    x: &CudaSlice<bf16>,
    w: &CudaSlice<bf16>,
    enc: &CudaSlice<f32>,
    o: &mut Outputs,
) -> Result<(Vec<f64>, String)> {
    let stream = dev.stream();
    let (t, d) = (x.len() / q.cols, q.cols);
    let mut y = stream.alloc_zeros::<bf16>(t * d)?;
    let rplan = rmsnorm::plan(&q.rmsnorm_query(), dev)?;
    let (k, dtype) = (d, DType::BF16);
    let mq = mx::Query { format: mx::MxFormat::Fp8, k, dtype, max_rows: t, row_major: true, swizzled: false };
    let scale = if q.out == QuantOut::Fp8Block128Ue8m0 { Fp8ScaleKind::Ue8m0 } else { Fp8ScaleKind::F32 };
    let fq = fp8_block::Query { group: 128, k, dtype, max_rows: t, scale };
    let nq =
        nvfp4::Query { k, dtype, max_rows: t, row_major: true, swizzled: false, global: nvfp4::GlobalScale::Given };
    let (mplan, fplan, nplan) = (mx::plan(&mq, dev)?, fp8_block::plan(&fq, dev)?, nvfp4::plan(&nq, dev)?);
    let qplan: &dyn OpPlan = match q.out {
        QuantOut::Mxfp8 => &mplan,
        QuantOut::Nvfp4 => &nplan,
        _ => &fplan,
    };
    let mut session = PreparationSession::new(dev)?;
    let sel = session.prepare(&[&rplan, qplan])?;
    // The call's rmsnorm bucket is its last (max_tokens = T); the quantizer has one bucket.
    let configs = sel[sel.len().saturating_sub(2)..].iter().map(|s| s.config.clone()).collect::<Vec<_>>().join("+");
    let qb = q.out.code_bytes(d);
    let groups = d / q.out.block();
    let times = time_graph(dev, samples(), |s| {
        let args = rmsnorm::Args {
            x: TensorRef::from_slice(x, &[t, d])?,
            residual: None,
            w: TensorRef::from_slice(w, &[d])?,
            y: TensorMut::from_slice(&mut y, &[t, d])?,
        };
        rmsnorm::run(&rplan, args, Scratch::none(), s)?;
        let yv = TensorRef::from_slice(&y, &[t, d])?;
        let codes = TensorMut::from_slice(&mut o.codes, &[t, qb])?;
        match q.out {
            QuantOut::Mxfp8 => {
                let scales = Some(TensorMut::from_slice(&mut o.scales, &[t, groups])?);
                mx::run(&mplan, mx::Args { x: yv, codes, scales, scales_swizzled: None }, Scratch::none(), s)
            }
            QuantOut::Nvfp4 => {
                let args = nvfp4::Args {
                    x: yv,
                    codes,
                    scales: Some(TensorMut::from_slice(&mut o.scales, &[t, groups])?),
                    scales_swizzled: None,
                    enc_in: Some(TensorRef::from_slice(enc, &[1])?),
                    enc_out: None,
                };
                nvfp4::run(&nplan, args, Scratch::none(), s)
            }
            _ => {
                let scales = scales_view(&mut o.scales, q.out, t, d)?;
                fp8_block::run(&fplan, fp8_block::Args { x: yv, codes, scales }, Scratch::none(), s)
            }
        }
    })?;
    session.close();
    Ok((times, configs))
}
