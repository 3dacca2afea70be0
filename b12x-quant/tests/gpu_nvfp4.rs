//! GPU validation of `quantization.nvfp4` against `block::quantize_nvfp4`, bit for bit: codes,
//! row-major and swizzled scales (padding rows included) and the computed encode scale, for the
//! given and the computed global-scale modes, every config pinned in turn, outputs poisoned.
//! Inputs mix block magnitudes over 2^±20 and (the `specials` fills) hold NaN, ±Inf, zero,
//! subnormal and near-max blocks; `padded_rows` runs the kernels' strided-rows path (every other
//! trial has dense rows). `B12X_TEST_PROFILE=reduced` drops the large shapes.

use b12x_core::cudarc::driver::CudaSlice;
use b12x_core::half::{bf16, f16};
use b12x_core::testing::{alloc_poisoned, poison, reduced_profile, run_gpu_trials, GpuTrial};
use b12x_core::{DType, Device, Scratch, TensorMut, TensorRef};
use b12x_quant::block::quantize_nvfp4;
use b12x_quant::layout::{swizzled_len, to_swizzled};
use b12x_quant::nvfp4::{self, Args, GlobalScale, Query, BLOCK};
use std::sync::Arc;

mod gpu_common;

use gpu_common::{err, fill, first_diff, session_pinned, trial_configs, Input, TrialResult};

/// Whole-tensor fills beyond the per-block mix (they exercise the encode-scale edge cases).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tensor {
    Mixed {
        specials: bool,
    },
    /// All zeros: A = 0 → enc = 1, the amax pass never reaches its atomic.
    Zero,
    /// Values ~1e-36: 2688 / A overflows 2^126 → enc = 2^126.
    Tiny,
    /// One 3e38 outlier: every other block's scale rounds to 0.
    Outlier,
}

/// The global-scale arguments of one run: the given scale as input (given mode), or the
/// computed one's output (computed mode).
fn enc_args<'a>(
    global: GlobalScale,
    enc_in: &'a CudaSlice<f32>,
    enc_out: &'a mut CudaSlice<f32>,
) -> Result<(Option<TensorRef<'a>>, Option<TensorMut<'a>>), String> {
    let given = (global == GlobalScale::Given).then(|| TensorRef::from_slice(enc_in, &[1])).transpose().map_err(err)?;
    let computed =
        (global == GlobalScale::Computed).then(|| TensorMut::from_slice(enc_out, &[1])).transpose().map_err(err)?;
    Ok((given, computed))
}

fn check_shape<T: Input>(dev: &Arc<Device>, global: GlobalScale, m: usize, k: usize, specials: bool) -> TrialResult {
    check_tensor::<T>(dev, global, m, k, Tensor::Mixed { specials })
}

fn check_tensor<T: Input>(dev: &Arc<Device>, global: GlobalScale, m: usize, k: usize, t: Tensor) -> TrialResult {
    let stream = dev.stream();
    let cols = k / BLOCK;
    let mut x_f = fill(m as u64 * 31 + k as u64, m, k, BLOCK, matches!(t, Tensor::Mixed { specials: true }), 6.0e4);
    match t {
        Tensor::Zero => x_f.iter_mut().for_each(|v| *v = 0.0),
        Tensor::Tiny => x_f.iter_mut().for_each(|v| *v = v.signum() * 1e-36),
        Tensor::Outlier => {
            let i = x_f.len() / 3;
            x_f[i] = 3.0e38;
        }
        Tensor::Mixed { .. } => {}
    }
    let x_h: Vec<T> = x_f.into_iter().map(T::round).collect();
    let x_f: Vec<f32> = x_h.iter().map(|v| v.widen()).collect();
    let given = 37.25f32; // any positive f32 works for the given mode
    let want = quantize_nvfp4(&x_f, m, k, (global == GlobalScale::Given).then_some(given)).map_err(err)?;
    let want_sw = to_swizzled(&want.scales, m, cols);
    let x = stream.clone_htod(&x_h).map_err(err)?;
    let enc_in = stream.clone_htod(&[given]).map_err(err)?;
    let dtype = <T as b12x_core::Element>::DTYPE;
    let query = Query { k, dtype, max_rows: m.max(4096), row_major: true, swizzled: true, global };
    let plan = nvfp4::plan(&query, dev).map_err(err)?;
    // Poisoned (0xFF) before every run: `run` must reset computed mode's amax cell itself.
    let mut scratch = stream.alloc_zeros::<u8>(4096).map_err(err)?;
    if plan.scratch_layout().total_bytes() > 4096 {
        return Err(format!("scratch {} bytes > the test's 4096", plan.scratch_layout().total_bytes()));
    }
    for config in trial_configs(&plan, m * k) {
        poison(stream, &mut scratch).map_err(err)?;
        let session = session_pinned(dev, &plan, &config)?;
        let mut codes: CudaSlice<u8> = alloc_poisoned(stream, m * k / 2).map_err(err)?;
        let mut scales: CudaSlice<u8> = alloc_poisoned(stream, m * cols).map_err(err)?;
        let mut sw: CudaSlice<u8> = alloc_poisoned(stream, swizzled_len(m, cols)).map_err(err)?;
        let mut enc_out: CudaSlice<f32> = alloc_poisoned(stream, 1).map_err(err)?;
        let (enc_arg_in, enc_arg_out) = enc_args(global, &enc_in, &mut enc_out)?;
        let args = Args {
            x: TensorRef::from_slice(&x, &[m, k]).map_err(err)?,
            codes: TensorMut::from_slice(&mut codes, &[m, k / 2]).map_err(err)?,
            scales: Some(TensorMut::from_slice(&mut scales, &[m, cols]).map_err(err)?),
            scales_swizzled: Some(TensorMut::from_slice(&mut sw, &[swizzled_len(m, cols)]).map_err(err)?),
            enc_in: enc_arg_in,
            enc_out: enc_arg_out,
        };
        nvfp4::run(&plan, args, Scratch::from_slice(&mut scratch), stream).map_err(err)?;
        stream.synchronize().map_err(err)?;
        let tag = |what: &str| format!("{config} {global:?} {what}");
        if global == GlobalScale::Computed {
            let got = stream.clone_dtoh(&enc_out).map_err(err)?[0];
            if got.to_bits() != want.enc.to_bits() {
                return Err(format!("{}: {got:e} vs {:e}", tag("enc"), want.enc));
            }
        }
        first_diff(&tag("codes"), &stream.clone_dtoh(&codes).map_err(err)?, &want.codes, k / 2)?;
        first_diff(&tag("scales"), &stream.clone_dtoh(&scales).map_err(err)?, &want.scales, cols)?;
        first_diff(&tag("swizzled scales"), &stream.clone_dtoh(&sw).map_err(err)?, &want_sw, 512)?;
        session.close();
    }
    Ok(())
}

/// Row strides larger than the rows (x, codes and row-major scales all padded, swizzled scales
/// too): the kernels take their strided-rows path; the padding must stay untouched and the
/// values equal the unpadded oracle, for every config.
fn padded_rows(dev: &Arc<Device>, global: GlobalScale) -> TrialResult {
    let (m, k) = (9, 1536);
    let (qk, cols) = (k / 2, k / BLOCK);
    let (ldx, ldq, lds) = (k + 24, qk + 40, cols + 5);
    let stream = dev.stream();
    let x_f = fill(7, m, k, BLOCK, true, 6.0e4);
    let x_h: Vec<bf16> = x_f.iter().map(|&v| bf16::from_f32(v)).collect();
    let x_r: Vec<f32> = x_h.iter().map(|v| v.to_f32()).collect();
    let given = 37.25f32;
    let want = quantize_nvfp4(&x_r, m, k, (global == GlobalScale::Given).then_some(given)).map_err(err)?;
    let want_sw = to_swizzled(&want.scales, m, cols);
    let mut x_pad = vec![bf16::from_f32(f32::NAN); m * ldx];
    for r in 0..m {
        x_pad[r * ldx..r * ldx + k].copy_from_slice(&x_h[r * k..(r + 1) * k]);
    }
    let x = stream.clone_htod(&x_pad).map_err(err)?;
    let enc_in = stream.clone_htod(&[given]).map_err(err)?;
    let query = Query { k, dtype: DType::BF16, max_rows: 16, row_major: true, swizzled: true, global };
    let plan = nvfp4::plan(&query, dev).map_err(err)?;
    let mut scratch = stream.alloc_zeros::<u8>(4096).map_err(err)?;
    for config in trial_configs(&plan, m * k) {
        poison(stream, &mut scratch).map_err(err)?;
        let session = session_pinned(dev, &plan, &config)?;
        let mut codes = alloc_poisoned::<u8>(stream, m * ldq).map_err(err)?;
        let mut scales = alloc_poisoned::<u8>(stream, m * lds).map_err(err)?;
        let mut sw: CudaSlice<u8> = alloc_poisoned(stream, swizzled_len(m, cols)).map_err(err)?;
        let mut enc_out: CudaSlice<f32> = alloc_poisoned(stream, 1).map_err(err)?;
        let poison_byte = stream.clone_dtoh(&codes).map_err(err)?[0];
        {
            let xb = TensorRef::from_slice(&x, &[m * ldx]).map_err(err)?;
            let (qn, sn) = (codes.len(), scales.len());
            let qb = TensorMut::from_slice(&mut codes, &[qn]).map_err(err)?;
            let sb = TensorMut::from_slice(&mut scales, &[sn]).map_err(err)?;
            // SAFETY: each buffer holds `rows × stride` elements of its type.
            let (xv, qv, sv) = unsafe {
                (
                    TensorRef::from_raw(xb.ptr(), &[m, k], &[ldx as isize, 1], DType::BF16).map_err(err)?,
                    TensorMut::from_raw(qb.ptr(), &[m, qk], &[ldq as isize, 1], DType::U8).map_err(err)?,
                    TensorMut::from_raw(sb.ptr(), &[m, cols], &[lds as isize, 1], DType::U8).map_err(err)?,
                )
            };
            let (enc_arg_in, enc_arg_out) = enc_args(global, &enc_in, &mut enc_out)?;
            let args = Args {
                x: xv,
                codes: qv,
                scales: Some(sv),
                scales_swizzled: Some(TensorMut::from_slice(&mut sw, &[swizzled_len(m, cols)]).map_err(err)?),
                enc_in: enc_arg_in,
                enc_out: enc_arg_out,
            };
            nvfp4::run(&plan, args, Scratch::from_slice(&mut scratch), stream).map_err(err)?;
        }
        stream.synchronize().map_err(err)?;
        let (q, s) = (stream.clone_dtoh(&codes).map_err(err)?, stream.clone_dtoh(&scales).map_err(err)?);
        for r in 0..m {
            let tag = |what: &str| format!("{config} {global:?} padded {what}");
            first_diff(&tag("codes"), &q[r * ldq..r * ldq + qk], &want.codes[r * qk..(r + 1) * qk], qk)?;
            first_diff(&tag("scales"), &s[r * lds..r * lds + cols], &want.scales[r * cols..(r + 1) * cols], cols)?;
            if q[r * ldq + qk..(r + 1) * ldq].iter().any(|&b| b != poison_byte)
                || s[r * lds + cols..(r + 1) * lds].iter().any(|&b| b != poison_byte)
            {
                return Err(format!("{config} {global:?}: row {r}: padding written"));
            }
        }
        first_diff("padded swizzled scales", &stream.clone_dtoh(&sw).map_err(err)?, &want_sw, 512)?;
        session.close();
    }
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    let large = !reduced_profile();
    for global in [GlobalScale::Computed, GlobalScale::Given] {
        let g = format!("{global:?}").to_lowercase();
        for k in [1536usize, 4096, 7168, 18432] {
            for m in [1usize, 7, 128, 4096] {
                if !large && m * k > 128 * 7168 {
                    continue;
                }
                trials.push(GpuTrial::new(format!("{g}::k{k}_m{m}::bf16"), move |d| {
                    check_shape::<bf16>(d, global, m, k, false)
                }));
                trials.push(GpuTrial::new(format!("{g}::k{k}_m{m}::bf16_specials"), move |d| {
                    check_shape::<bf16>(d, global, m, k, true)
                }));
            }
            trials.push(GpuTrial::new(format!("{g}::k{k}_m7::f16_specials"), move |d| {
                check_shape::<f16>(d, global, 7, k, true)
            }));
        }
    }
    for (name, t) in [("zero", Tensor::Zero), ("tiny", Tensor::Tiny), ("outlier", Tensor::Outlier)] {
        trials.push(GpuTrial::new(format!("computed::k4096_m7::{name}"), move |d| {
            check_tensor::<bf16>(d, GlobalScale::Computed, 7, 4096, t)
        }));
    }
    for global in [GlobalScale::Computed, GlobalScale::Given] {
        let g = format!("{global:?}").to_lowercase();
        trials.push(GpuTrial::new(format!("{g}::padded_rows"), move |d| padded_rows(d, global)));
    }
    run_gpu_trials(trials)
}
