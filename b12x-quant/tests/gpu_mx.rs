//! GPU validation of `quantization.mxfp8` and `quantization.mxfp4` against the CPU codec, bit for bit (libtest-mimic;
//! every trial is listed as ignored when no CUDA device is present).
//!
//! Each shape trial runs every config (pinned one at a time) with both scale layouts, outputs
//! poisoned before the launch; codes, row-major scales and the swizzled buffer (padding rows
//! included) must equal `block::quantize_mx` + `layout::to_swizzled` exactly. Inputs mix block
//! magnitudes over 2^±20 and, in the `specials` fills, hold NaN, ±Inf, all-zero, subnormal and
//! near-max blocks. Further trials: graph replay equals eager, and bad inputs are typed errors.
//! `B12X_TEST_PROFILE=reduced` drops the large shapes (sanitizer runs).

use b12x_core::cudarc::driver::CudaSlice;
use b12x_core::half::{bf16, f16};
use b12x_core::testing::{alloc_poisoned, reduced_profile, run_gpu_trials, GpuTrial};
use b12x_core::{DType, Device, Error, LaunchDims, PreparationSession, Scratch, TensorMut, TensorRef};
use b12x_quant::block::{quantize_mx, MxOptions};
use b12x_quant::layout::{swizzled_len, to_swizzled};
use b12x_quant::mx::{self, Args, MxFormat, Query, BLOCK};
use std::sync::Arc;

mod gpu_common;

use gpu_common::{err, fill, first_diff, session_pinned, trial_configs, Input, TrialResult};

fn check_shape<T: Input>(
    dev: &Arc<Device>,
    format: MxFormat,
    m: usize,
    k: usize,
    specials: bool,
    seed: u64,
) -> TrialResult {
    let stream = dev.stream();
    let cols = k / BLOCK;
    let qk = format.code_bytes(k);
    let x_h: Vec<T> = fill(seed, m, k, BLOCK, specials, 3.0e38).into_iter().map(T::round).collect();
    let x_f: Vec<f32> = x_h.iter().map(|v| v.widen()).collect();
    let want = quantize_mx(&x_f, m, k, format.element(), MxOptions::default()).map_err(err)?;
    let want_sw = to_swizzled(&want.scales, m, cols);
    let x = stream.clone_htod(&x_h).map_err(err)?;
    let dtype = <T as b12x_core::Element>::DTYPE;
    let query = Query { format, k, dtype, max_rows: m.max(4096), row_major: true, swizzled: true };
    let plan = mx::plan(&query, dev).map_err(err)?;
    for config in trial_configs(&plan, m * k) {
        let session = session_pinned(dev, &plan, &config)?;
        let mut codes: CudaSlice<u8> = alloc_poisoned(stream, m * qk).map_err(err)?;
        let mut scales: CudaSlice<u8> = alloc_poisoned(stream, m * cols).map_err(err)?;
        let mut sw: CudaSlice<u8> = alloc_poisoned(stream, swizzled_len(m, cols)).map_err(err)?;
        let args = Args {
            x: TensorRef::from_slice(&x, &[m, k]).map_err(err)?,
            codes: TensorMut::from_slice(&mut codes, &[m, qk]).map_err(err)?,
            scales: Some(TensorMut::from_slice(&mut scales, &[m, cols]).map_err(err)?),
            scales_swizzled: Some(TensorMut::from_slice(&mut sw, &[swizzled_len(m, cols)]).map_err(err)?),
        };
        mx::run(&plan, args, Scratch::none(), stream).map_err(err)?;
        stream.synchronize().map_err(err)?;
        let tag = |what: &str| format!("{config} {what}");
        first_diff(&tag("codes"), &stream.clone_dtoh(&codes).map_err(err)?, &want.codes, qk)?;
        first_diff(&tag("scales"), &stream.clone_dtoh(&scales).map_err(err)?, &want.scales, cols)?;
        first_diff(&tag("swizzled scales"), &stream.clone_dtoh(&sw).map_err(err)?, &want_sw, 512)?;
        session.close();
    }
    Ok(())
}

fn graph_equals_eager(dev: &Arc<Device>, format: MxFormat) -> TrialResult {
    let (m, k) = (7, 4096);
    let qk = format.code_bytes(k);
    let stream = dev.stream();
    let x_h: Vec<bf16> = fill(21, m, k, BLOCK, true, 3.0e38).into_iter().map(bf16::from_f32).collect();
    let x = stream.clone_htod(&x_h).map_err(err)?;
    let query = Query { format, k, dtype: DType::BF16, max_rows: 16, row_major: true, swizzled: false };
    let plan = mx::plan(&query, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    let mut codes: CudaSlice<u8> = alloc_poisoned(stream, m * qk).map_err(err)?;
    let mut scales: CudaSlice<u8> = alloc_poisoned(stream, m * k / BLOCK).map_err(err)?;
    let call = |codes: &mut CudaSlice<u8>, scales: &mut CudaSlice<u8>, s: &Arc<_>| {
        let args = Args {
            x: TensorRef::from_slice(&x, &[m, k])?,
            codes: TensorMut::from_slice(codes, &[m, qk])?,
            scales: Some(TensorMut::from_slice(scales, &[m, k / BLOCK])?),
            scales_swizzled: None,
        };
        mx::run(&plan, args, Scratch::none(), s)
    };
    call(&mut codes, &mut scales, stream).map_err(err)?;
    let (c_eager, s_eager) = (stream.clone_dtoh(&codes).map_err(err)?, stream.clone_dtoh(&scales).map_err(err)?);
    let graph = session.capture(stream, |s| call(&mut codes, &mut scales, s)).map_err(err)?;
    b12x_core::testing::poison(stream, &mut codes).map_err(err)?;
    b12x_core::testing::poison(stream, &mut scales).map_err(err)?;
    // SAFETY: x, codes and scales outlive the graph.
    unsafe { graph.launch() }.map_err(err)?;
    stream.synchronize().map_err(err)?;
    first_diff("replayed codes", &stream.clone_dtoh(&codes).map_err(err)?, &c_eager, qk)?;
    first_diff("replayed scales", &stream.clone_dtoh(&scales).map_err(err)?, &s_eager, k / BLOCK)
}

/// Row strides larger than the rows (x, codes and row-major scales all padded): the padding
/// must stay untouched and the values equal the unpadded oracle.
fn padded_rows(dev: &Arc<Device>, format: MxFormat) -> TrialResult {
    let (m, k) = (9, 1536);
    let (qk, cols) = (format.code_bytes(k), k / BLOCK);
    let (ldx, ldq, lds) = (k + 24, qk + 40, cols + 5);
    let stream = dev.stream();
    let x_f = fill(5, m, k, BLOCK, true, 3.0e38);
    let x_h: Vec<bf16> = x_f.iter().map(|&v| bf16::from_f32(v)).collect();
    let x_r: Vec<f32> = x_h.iter().map(|v| v.to_f32()).collect();
    let want = quantize_mx(&x_r, m, k, format.element(), MxOptions::default()).map_err(err)?;
    let mut x_pad = vec![bf16::from_f32(f32::NAN); m * ldx];
    for r in 0..m {
        x_pad[r * ldx..r * ldx + k].copy_from_slice(&x_h[r * k..(r + 1) * k]);
    }
    let x = stream.clone_htod(&x_pad).map_err(err)?;
    let mut codes = alloc_poisoned::<u8>(stream, m * ldq).map_err(err)?;
    let mut scales = alloc_poisoned::<u8>(stream, m * lds).map_err(err)?;
    let poison = stream.clone_dtoh(&codes).map_err(err)?[0];
    let query = Query { format, k, dtype: DType::BF16, max_rows: 16, row_major: true, swizzled: false };
    let plan = mx::plan(&query, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    {
        let xb = TensorRef::from_slice(&x, &[m * ldx]).map_err(err)?;
        let (qn, sn) = (codes.len(), scales.len());
        let qb = TensorMut::from_slice(&mut codes, &[qn]).map_err(err)?;
        let sb = TensorMut::from_slice(&mut scales, &[sn]).map_err(err)?;
        // SAFETY: each buffer holds `rows × stride` elements of its type.
        let args = unsafe {
            Args {
                x: TensorRef::from_raw(xb.ptr(), &[m, k], &[ldx as isize, 1], DType::BF16).map_err(err)?,
                codes: TensorMut::from_raw(qb.ptr(), &[m, qk], &[ldq as isize, 1], DType::U8).map_err(err)?,
                scales: Some(TensorMut::from_raw(sb.ptr(), &[m, cols], &[lds as isize, 1], DType::U8).map_err(err)?),
                scales_swizzled: None,
            }
        };
        mx::run(&plan, args, Scratch::none(), stream).map_err(err)?;
    }
    let (q, s) = (stream.clone_dtoh(&codes).map_err(err)?, stream.clone_dtoh(&scales).map_err(err)?);
    for r in 0..m {
        first_diff("padded codes", &q[r * ldq..r * ldq + qk], &want.codes[r * qk..(r + 1) * qk], qk)?;
        first_diff("padded scales", &s[r * lds..r * lds + cols], &want.scales[r * cols..(r + 1) * cols], cols)?;
        if q[r * ldq + qk..(r + 1) * ldq].iter().any(|&b| b != poison)
            || s[r * lds + cols..(r + 1) * lds].iter().any(|&b| b != poison)
        {
            return Err(format!("row {r}: padding written"));
        }
    }
    Ok(())
}

fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let (m, k) = (4, 256);
    let stream = dev.stream();
    let x = stream.alloc_zeros::<bf16>(m * k + 8).map_err(err)?;
    let mut codes = alloc_poisoned::<u8>(stream, m * k).map_err(err)?;
    let mut scales = alloc_poisoned::<u8>(stream, m * k / BLOCK).map_err(err)?;
    let query = Query { format: MxFormat::Fp8, k, dtype: DType::BF16, max_rows: 2, row_major: true, swizzled: false };
    let plan = mx::plan(&query, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    // M = 4 above capacity 2.
    let args = Args {
        x: TensorRef::from_slice(&x, &[m, k]).map_err(err)?,
        codes: TensorMut::from_slice(&mut codes, &[m, k]).map_err(err)?,
        scales: Some(TensorMut::from_slice(&mut scales, &[m, k / BLOCK]).map_err(err)?),
        scales_swizzled: None,
    };
    match mx::run(&plan, args, Scratch::none(), stream) {
        Err(Error::Capacity { .. }) => {}
        other => return Err(format!("above capacity: {other:?}")),
    }
    // Missing row-major scales.
    let args = Args {
        x: TensorRef::from_slice(&x, &[2, k]).map_err(err)?,
        codes: TensorMut::from_slice(&mut codes, &[2, k]).map_err(err)?,
        scales: None,
        scales_swizzled: None,
    };
    match mx::run(&plan, args, Scratch::none(), stream) {
        Err(Error::Shape { tensor: "scales", .. }) => {}
        other => return Err(format!("missing scales: {other:?}")),
    }
    stream.synchronize().map_err(err)?;
    // Nothing was launched: the outputs still hold the poison.
    let c = stream.clone_dtoh(&codes).map_err(err)?;
    let poison = c[0];
    if c.iter().any(|&b| b != poison) {
        return Err("a rejected call wrote codes".into());
    }
    Ok(())
}

/// Mirror of `E2m1ProbeParams` in kernels/mx.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct ProbeParams {
    input: u64,
    out: u64,
    n: i64,
}

/// The packed E2M1 encoder of the MXFP4 kernels (`e2m1x2<W>` in b12x/quant.cuh) on every
/// non-NaN 16-bit value of W (bf16 or f16), in both halves of a word, against the CPU codec.
fn e2m1x2_every_value<T: Input>(dev: &Arc<Device>, symbol: &str) -> TrialResult {
    let stream = dev.stream();
    // Words (v, u) with v over every non-NaN pattern, u = the pattern 40503 steps further on.
    let finite: Vec<u16> = (0..=u16::MAX).filter(|&b| !T::from_bits(b).widen().is_nan()).collect();
    let n = finite.len();
    let words: Vec<u32> = (0..n).map(|i| u32::from(finite[i]) | (u32::from(finite[(i + 40503) % n]) << 16)).collect();
    let want: Vec<u8> = words
        .iter()
        .map(|&w| {
            let lo = b12x_quant::codec::e2m1_encode(T::from_bits(w as u16).widen());
            let hi = b12x_quant::codec::e2m1_encode(T::from_bits((w >> 16) as u16).widen());
            lo | (hi << 4)
        })
        .collect();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let input = stream.clone_htod(&bytes).map_err(err)?;
    let mut out = alloc_poisoned::<u8>(stream, n).map_err(err)?;
    let kernel = dev.kernel(&b12x_quant::MX_MODULE, symbol).map_err(err)?;
    let params = ProbeParams {
        input: TensorRef::from_slice(&input, &[4 * n]).map_err(err)?.ptr(),
        out: TensorMut::from_slice(&mut out, &[n]).map_err(err)?.ptr(),
        n: n as i64,
    };
    let dims = LaunchDims { grid: (n.div_ceil(256) as u32, 1, 1), block: (256, 1, 1), smem_bytes: 0 };
    // SAFETY: ProbeParams mirrors the kernel's struct; `input` holds n words and `out` n bytes.
    unsafe { kernel.launch(stream, dims, &params) }.map_err(err)?;
    first_diff(symbol, &stream.clone_dtoh(&out).map_err(err)?, &want, n)
}

fn main() {
    let mut trials = Vec::new();
    trials.push(GpuTrial::new("e2m1x2_every_value::bf16", |d| {
        e2m1x2_every_value::<bf16>(d, "b12x_mx_e2m1x2_probe_bf16")
    }));
    trials.push(GpuTrial::new("e2m1x2_every_value::f16", |d| e2m1x2_every_value::<f16>(d, "b12x_mx_e2m1x2_probe_f16")));
    let large = !reduced_profile();
    for format in [MxFormat::Fp8, MxFormat::Fp4] {
        let f = format.name();
        for k in [1536usize, 4096, 7168, 18432] {
            for m in [1usize, 7, 128, 4096] {
                if !large && m * k > 128 * 7168 {
                    continue;
                }
                trials.push(GpuTrial::new(format!("mx{f}::k{k}_m{m}::bf16"), move |d| {
                    check_shape::<bf16>(d, format, m, k, false, 1)
                }));
                trials.push(GpuTrial::new(format!("mx{f}::k{k}_m{m}::bf16_specials"), move |d| {
                    check_shape::<bf16>(d, format, m, k, true, 2)
                }));
            }
            trials.push(GpuTrial::new(format!("mx{f}::k{k}_m7::f16_specials"), move |d| {
                check_shape::<f16>(d, format, 7, k, true, 3)
            }));
        }
        trials.push(GpuTrial::new(format!("mx{f}::awkward_m129_k128::bf16_specials"), move |d| {
            check_shape::<bf16>(d, format, 129, 128, true, 4)
        }));
    }
    trials.push(GpuTrial::new("graph_replay_equals_eager::fp8", |d| graph_equals_eager(d, MxFormat::Fp8)));
    trials.push(GpuTrial::new("graph_replay_equals_eager::fp4", |d| graph_equals_eager(d, MxFormat::Fp4)));
    trials.push(GpuTrial::new("padded_rows::fp8", |d| padded_rows(d, MxFormat::Fp8)));
    trials.push(GpuTrial::new("padded_rows::fp4", |d| padded_rows(d, MxFormat::Fp4)));
    trials.push(GpuTrial::new("bad_inputs_launch_nothing", bad_inputs));
    run_gpu_trials(trials)
}
