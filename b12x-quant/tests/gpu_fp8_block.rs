//! GPU validation of `quantization.fp8_block` against `block::quantize_block_fp8` (tile (1, G)),
//! bit for bit: codes and scales (f32 bits or UE8M0 codes), every G and scale kind, every config
//! pinned in turn, outputs poisoned; inputs mix group magnitudes over 2^±20 and (the `specials`
//! fills) hold NaN, ±Inf, zero, subnormal and near-max groups. `B12X_TEST_PROFILE=reduced`
//! drops the large shapes.

use b12x_core::cudarc::driver::CudaSlice;
use b12x_core::half::{bf16, f16};
use b12x_core::testing::{alloc_poisoned, reduced_profile, run_gpu_trials, GpuTrial};
use b12x_core::{Device, Scratch, TensorMut, TensorRef};
use b12x_quant::block::{quantize_block_fp8, Fp8ScaleKind, Fp8Scales};
use b12x_quant::fp8_block::{self, Args, Query};
use std::sync::Arc;

mod gpu_common;

use gpu_common::{err, fill, first_diff, session_pinned, trial_configs, Input, TrialResult};

fn check_shape<T: Input>(
    dev: &Arc<Device>,
    g: usize,
    scale: Fp8ScaleKind,
    m: usize,
    k: usize,
    specials: bool,
) -> TrialResult {
    let stream = dev.stream();
    let groups = k / g;
    let x_h: Vec<T> = fill(m as u64 * 17 + g as u64, m, k, g, specials, 3.0e38).into_iter().map(T::round).collect();
    let x_f: Vec<f32> = x_h.iter().map(|v| v.widen()).collect();
    let want = quantize_block_fp8(&x_f, m, k, (1, g), scale).map_err(err)?;
    let x = stream.clone_htod(&x_h).map_err(err)?;
    let dtype = <T as b12x_core::Element>::DTYPE;
    let query = Query { group: g, k, dtype, max_rows: m.max(4096), scale };
    let plan = fp8_block::plan(&query, dev).map_err(err)?;
    for config in trial_configs(&plan, m * k) {
        let session = session_pinned(dev, &plan, &config)?;
        let mut codes: CudaSlice<u8> = alloc_poisoned(stream, m * k).map_err(err)?;
        let tag = |what: &str| format!("{config} {what}");
        match &want.scales {
            Fp8Scales::F32(w) => {
                let mut s: CudaSlice<f32> = alloc_poisoned(stream, m * groups).map_err(err)?;
                let args = Args {
                    x: TensorRef::from_slice(&x, &[m, k]).map_err(err)?,
                    codes: TensorMut::from_slice(&mut codes, &[m, k]).map_err(err)?,
                    scales: TensorMut::from_slice(&mut s, &[m, groups]).map_err(err)?,
                };
                fp8_block::run(&plan, args, Scratch::none(), stream).map_err(err)?;
                let got: Vec<u32> = stream.clone_dtoh(&s).map_err(err)?.iter().map(|v| v.to_bits()).collect();
                let want_bits: Vec<u32> = w.iter().map(|v| v.to_bits()).collect();
                first_diff(&tag("f32 scales (bits)"), &got, &want_bits, groups)?;
            }
            Fp8Scales::Ue8m0(w) => {
                let mut s: CudaSlice<u8> = alloc_poisoned(stream, m * groups).map_err(err)?;
                let args = Args {
                    x: TensorRef::from_slice(&x, &[m, k]).map_err(err)?,
                    codes: TensorMut::from_slice(&mut codes, &[m, k]).map_err(err)?,
                    scales: TensorMut::from_slice(&mut s, &[m, groups]).map_err(err)?,
                };
                fp8_block::run(&plan, args, Scratch::none(), stream).map_err(err)?;
                first_diff(&tag("ue8m0 scales"), &stream.clone_dtoh(&s).map_err(err)?, w, groups)?;
            }
        }
        first_diff(&tag("codes"), &stream.clone_dtoh(&codes).map_err(err)?, &want.codes, k)?;
        session.close();
    }
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    let large = !reduced_profile();
    for g in [128usize, 64, 32] {
        for scale in [Fp8ScaleKind::F32, Fp8ScaleKind::Ue8m0] {
            let s = format!("{scale:?}").to_lowercase();
            for k in [1536usize, 4096, 7168, 18432] {
                for m in [1usize, 7, 128, 4096] {
                    if !large && m * k > 128 * 7168 {
                        continue;
                    }
                    trials.push(GpuTrial::new(format!("g{g}_{s}::k{k}_m{m}::bf16_specials"), move |d| {
                        check_shape::<bf16>(d, g, scale, m, k, true)
                    }));
                }
            }
            trials.push(GpuTrial::new(format!("g{g}_{s}::k7168_m7::bf16"), move |d| {
                check_shape::<bf16>(d, g, scale, 7, 7168, false)
            }));
            trials.push(GpuTrial::new(format!("g{g}_{s}::k4096_m7::f16_specials"), move |d| {
                check_shape::<f16>(d, g, scale, 7, 4096, true)
            }));
        }
    }
    run_gpu_trials(trials)
}
