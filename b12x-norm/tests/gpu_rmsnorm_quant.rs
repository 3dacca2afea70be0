//! GPU validation of `norm.rmsnorm_quant`: for each config (pinned), the fused kernel's codes
//! and scales must equal — bit for bit — `norm.rmsnorm` with the same row layout (its config;
//! v4 for the two-rows-per-CTA v4r2) followed by the
//! b12x-quant quantizer (`quantization.mxfp8` / `.fp8_block` / `.nvfp4` given), and its written-back
//! residual must equal rmsnorm's. (The same config matters: the row's sum of squares is reduced
//! in a config-dependent order.)

use b12x_core::cudarc::driver::CudaSlice;
use b12x_core::half::{bf16, f16};
use b12x_core::testing::{alloc_poisoned, cast, run_gpu_trials, uniform, GpuTrial, HostFloat};
use b12x_core::{Device, Element, OpPlan, PreparationSession, Scratch, TensorMut, TensorRef};
use b12x_norm::rmsnorm;
use b12x_norm::rmsnorm_quant::{self, QuantOut};
use b12x_quant::block::Fp8ScaleKind;
use b12x_quant::{fp8_block, mx, nvfp4};
use std::sync::Arc;

type TrialResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn pinned(dev: &Arc<Device>, plan: &dyn OpPlan, config: &str) -> Result<PreparationSession, String> {
    let mut s = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    for b in plan.buckets() {
        s.pin(plan, &b.label(), config);
    }
    s.prepare(&[plan]).map_err(err)?;
    Ok(s)
}

/// The reference: rmsnorm into bf16/f16 y, then the standalone quantizer on y.
fn two_ops<E: Element + HostFloat>(
    dev: &Arc<Device>,
    q: &rmsnorm_quant::Query,
    config: &str,
    x: &CudaSlice<E>,
    w: &CudaSlice<E>,
    residual: &mut CudaSlice<E>,
    enc: &CudaSlice<f32>,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let stream = dev.stream();
    let (t, d) = (x.len() / q.cols, q.cols);
    let rplan = rmsnorm::plan(&q.rmsnorm_query(), dev).map_err(err)?;
    // norm.rmsnorm with the fused config's row layout (v4r2: v4), so the same reduction order.
    let row = rmsnorm_quant::Config::parse(config).ok_or_else(|| format!("unknown config {config}"))?.row;
    let s1 = pinned(dev, &rplan, &row.id())?;
    let mut y = alloc_poisoned::<E>(stream, t * d).map_err(err)?;
    let args = rmsnorm::Args {
        x: TensorRef::from_slice(x, &[t, d]).map_err(err)?,
        residual: if q.residual { Some(TensorMut::from_slice(residual, &[t, d]).map_err(err)?) } else { None },
        w: TensorRef::from_slice(w, &[d]).map_err(err)?,
        y: TensorMut::from_slice(&mut y, &[t, d]).map_err(err)?,
    };
    rmsnorm::run(&rplan, args, Scratch::none(), stream).map_err(err)?;
    s1.close();
    let qb = q.out.code_bytes(d);
    let mut codes = alloc_poisoned::<u8>(stream, t * qb).map_err(err)?;
    let groups = d / q.out.block();
    let mut scales = alloc_poisoned::<u8>(stream, t * groups * q.out.scale_dtype().size_bytes()).map_err(err)?;
    match q.out {
        QuantOut::Nvfp4 => {
            let nq = nvfp4::Query {
                k: d,
                dtype: q.dtype,
                max_rows: t,
                row_major: true,
                swizzled: false,
                global: nvfp4::GlobalScale::Given,
            };
            let plan = nvfp4::plan(&nq, dev).map_err(err)?;
            let mut s = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
            s.prepare(&[&plan]).map_err(err)?;
            let args = nvfp4::Args {
                x: TensorRef::from_slice(&y, &[t, d]).map_err(err)?,
                codes: TensorMut::from_slice(&mut codes, &[t, qb]).map_err(err)?,
                scales: Some(TensorMut::from_slice(&mut scales, &[t, groups]).map_err(err)?),
                scales_swizzled: None,
                enc_in: Some(TensorRef::from_slice(enc, &[1]).map_err(err)?),
                enc_out: None,
            };
            nvfp4::run(&plan, args, Scratch::none(), stream).map_err(err)?;
            s.close();
        }
        QuantOut::Mxfp8 => {
            let mq = mx::Query {
                format: mx::MxFormat::Fp8,
                k: d,
                dtype: q.dtype,
                max_rows: t,
                row_major: true,
                swizzled: false,
            };
            let plan = mx::plan(&mq, dev).map_err(err)?;
            let mut s = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
            s.prepare(&[&plan]).map_err(err)?;
            let args = mx::Args {
                x: TensorRef::from_slice(&y, &[t, d]).map_err(err)?,
                codes: TensorMut::from_slice(&mut codes, &[t, d]).map_err(err)?,
                scales: Some(TensorMut::from_slice(&mut scales, &[t, groups]).map_err(err)?),
                scales_swizzled: None,
            };
            mx::run(&plan, args, Scratch::none(), stream).map_err(err)?;
            s.close();
        }
        QuantOut::Fp8Block128F32 | QuantOut::Fp8Block128Ue8m0 => {
            let kind = if q.out == QuantOut::Fp8Block128F32 { Fp8ScaleKind::F32 } else { Fp8ScaleKind::Ue8m0 };
            let fq = fp8_block::Query { group: 128, k: d, dtype: q.dtype, max_rows: t, scale: kind };
            let plan = fp8_block::plan(&fq, dev).map_err(err)?;
            let mut s = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
            s.prepare(&[&plan]).map_err(err)?;
            // SAFETY: `scales` holds t * groups elements of the scale dtype.
            let sv = unsafe {
                let base = TensorMut::from_slice(&mut scales, &[t * groups * q.out.scale_dtype().size_bytes()])
                    .map_err(err)?;
                TensorMut::from_raw(base.ptr(), &[t, groups], &[groups as isize, 1], q.out.scale_dtype())
                    .map_err(err)?
            };
            let args = fp8_block::Args {
                x: TensorRef::from_slice(&y, &[t, d]).map_err(err)?,
                codes: TensorMut::from_slice(&mut codes, &[t, d]).map_err(err)?,
                scales: sv,
            };
            fp8_block::run(&plan, args, Scratch::none(), stream).map_err(err)?;
            s.close();
        }
    }
    Ok((stream.clone_dtoh(&codes).map_err(err)?, stream.clone_dtoh(&scales).map_err(err)?))
}

/// `enc`: the NVFP4 encode scale (any finite positive value; unused by the other outputs).
/// `w_exps`: when not empty, 32-element group g of w is scaled by 2^w_exps[g % len] (y's blocks
/// then span the format's scale range: huge and tiny block scales, subnormal y, saturated and
/// zero NVFP4 scales).
fn check<E: Element + HostFloat>(
    dev: &Arc<Device>,
    t: usize,
    d: usize,
    residual: bool,
    out: QuantOut,
    enc: f32,
    w_exps: &[i32],
) -> TrialResult {
    let stream = dev.stream();
    let mut x_f = uniform(t as u64 + 3, t * d, -2.0, 2.0);
    if t >= 3 {
        // Row 0 all zeros (y = 0: MXFP8 scale code 0, block FP8's 1e-4 floor); row 1 holds one
        // +Inf (rrms = 0: its block gets a NaN scale, the rest of the row zeros).
        x_f[..d].iter_mut().for_each(|v| *v = 0.0);
        x_f[d + 17] = f32::INFINITY;
    }
    let x_h = cast::<E>(&x_f);
    let r_h = cast::<E>(&uniform(t as u64 + 4, t * d, -2.0, 2.0));
    let mut w_f = uniform(5, d, 0.5, 1.5);
    if !w_exps.is_empty() {
        for (g, chunk) in w_f.chunks_mut(32).enumerate() {
            let e = w_exps[g % w_exps.len()];
            chunk.iter_mut().for_each(|v| *v *= 2f32.powi(e));
        }
    }
    let w_h = cast::<E>(&w_f);
    let x = stream.clone_htod(&x_h).map_err(err)?;
    let w = stream.clone_htod(&w_h).map_err(err)?;
    let q = rmsnorm_quant::Query { cols: d, dtype: E::DTYPE, max_tokens: t.max(64), eps: 1e-6, residual, out };
    let plan = rmsnorm_quant::plan(&q, dev).map_err(err)?;
    let groups = d / out.block();
    let qb = out.code_bytes(d);
    let enc = stream.clone_htod(&[enc]).map_err(err)?;
    for config in plan.candidates(0) {
        let mut r_ref = stream.clone_htod(&r_h).map_err(err)?;
        let (want_codes, want_scales) = two_ops::<E>(dev, &q, &config, &x, &w, &mut r_ref, &enc)?;
        let session = pinned(dev, &plan, &config)?;
        let mut r = stream.clone_htod(&r_h).map_err(err)?;
        let mut codes = alloc_poisoned::<u8>(stream, t * qb).map_err(err)?;
        let mut scales = alloc_poisoned::<u8>(stream, t * groups * out.scale_dtype().size_bytes()).map_err(err)?;
        {
            let sb = TensorMut::from_slice(&mut scales, &[t * groups * out.scale_dtype().size_bytes()]).map_err(err)?;
            // SAFETY: `scales` holds t * groups elements of the scale dtype.
            let sv = unsafe { TensorMut::from_raw(sb.ptr(), &[t, groups], &[groups as isize, 1], out.scale_dtype()) }
                .map_err(err)?;
            let args = rmsnorm_quant::Args {
                x: TensorRef::from_slice(&x, &[t, d]).map_err(err)?,
                residual: if residual { Some(TensorMut::from_slice(&mut r, &[t, d]).map_err(err)?) } else { None },
                w: TensorRef::from_slice(&w, &[d]).map_err(err)?,
                codes: TensorMut::from_slice(&mut codes, &[t, qb]).map_err(err)?,
                scales: sv,
                enc: (out == QuantOut::Nvfp4).then(|| TensorRef::from_slice(&enc, &[1])).transpose().map_err(err)?,
            };
            rmsnorm_quant::run(&plan, args, Scratch::none(), stream).map_err(err)?;
        }
        if stream.clone_dtoh(&codes).map_err(err)? != want_codes {
            return Err(format!("{config}: codes differ from rmsnorm + quantizer"));
        }
        if stream.clone_dtoh(&scales).map_err(err)? != want_scales {
            return Err(format!("{config}: scales differ from rmsnorm + quantizer"));
        }
        let (a, b) = (stream.clone_dtoh(&r).map_err(err)?, stream.clone_dtoh(&r_ref).map_err(err)?);
        if a.iter().zip(&b).any(|(u, v)| u.bits() != v.bits()) {
            return Err(format!("{config}: written-back residual differs"));
        }
        session.close();
    }
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    for out in [QuantOut::Mxfp8, QuantOut::Fp8Block128F32, QuantOut::Fp8Block128Ue8m0, QuantOut::Nvfp4] {
        let o = format!("{out:?}").to_lowercase();
        // D = 1152 and 2880 leave warps partly inside the row (the `i < nvec` guard splits them).
        let mut shapes = vec![(1usize, 4096usize), (7, 7168), (300, 4096), (33, 16384), (5, 1152)];
        if out == QuantOut::Mxfp8 {
            shapes.push((9, 2880));
        }
        for (t, d) in shapes {
            for residual in [false, true] {
                let form = if residual { "add" } else { "plain" };
                trials.push(GpuTrial::new(format!("{o}::t{t}_d{d}::{form}::bf16"), move |dev| {
                    check::<bf16>(dev, t, d, residual, out, 52.5, &[])
                }));
            }
        }
        if out == QuantOut::Nvfp4 {
            // |y| reaches ~2.6 here. enc = 1e4 saturates most block scales at 448; with enc = 6.5e-3
            // the scales are UE4M3 subnormals, and those that round down leave products of 7 and
            // more: both take the encoder's general path (nvfp4_codes8), the other blocks the
            // below-7 path.
            for (name, enc) in [("enc_saturating", 1.0e4f32), ("enc_subnormal_scales", 6.5e-3)] {
                for residual in [false, true] {
                    let form = if residual { "add" } else { "plain" };
                    trials.push(GpuTrial::new(format!("{o}::t300_d4096::{form}::bf16::{name}"), move |dev| {
                        check::<bf16>(dev, 300, 4096, residual, out, enc, &[])
                    }));
                }
            }
        }
        // w from 2^-131 (a bf16 subnormal: subnormal y) to 2^116 (|y| up to ~2^123, |x rrms| <=
        // sqrt(D)); f16 from 2^-20 (f16 subnormal y) to 2^8.
        trials.push(GpuTrial::new(format!("{o}::t33_d4096::plain::bf16::w_extremes"), move |dev| {
            check::<bf16>(dev, 33, 4096, false, out, 52.5, &[-131, -116, -80, -40, 0, 40, 80, 116])
        }));
        trials.push(GpuTrial::new(format!("{o}::t33_d7168::plain::f16::w_extremes"), move |dev| {
            check::<f16>(dev, 33, 7168, false, out, 52.5, &[-20, -12, -4, 0, 4, 8])
        }));
        for residual in [false, true] {
            let form = if residual { "add" } else { "plain" };
            trials.push(GpuTrial::new(format!("{o}::t7_d4096::{form}::f16"), move |dev| {
                check::<f16>(dev, 7, 4096, residual, out, 52.5, &[])
            }));
        }
    }
    run_gpu_trials(trials)
}
