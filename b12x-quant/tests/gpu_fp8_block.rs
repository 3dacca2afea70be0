//! GPU validation of `quantization.fp8_block` against `block::quantize_block_fp8` (tile (1, G)),
//! bit for bit: codes and scales (f32 bits or UE8M0 codes), every G and scale kind, every config
//! pinned in turn, outputs poisoned; inputs mix group magnitudes over 2^±20 and (the `specials`
//! fills) hold NaN, ±Inf, zero, subnormal and near-max groups. `B12X_TEST_PROFILE=reduced`
//! drops the large shapes.

use b12x_core::cudarc::driver::CudaSlice;
use b12x_core::half::{bf16, f16};
use b12x_core::testing::{alloc_poisoned, reduced_profile, run_gpu_trials, uniform, GpuTrial};
use b12x_core::{Device, PreparationSession, Scratch, TensorMut, TensorRef};
use b12x_quant::block::{quantize_block_fp8, Fp8ScaleKind, Fp8Scales};
use b12x_quant::fp8_block::{self, Args, Plan, Query};
use std::sync::Arc;

type TrialResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn fill(seed: u64, m: usize, k: usize, g: usize, specials: bool) -> Vec<f32> {
    let u = uniform(seed, m * k, -1.0, 1.0);
    let mags = uniform(seed + 1, m * k / g, -20.0, 20.0);
    let mut v: Vec<f32> = u.iter().enumerate().map(|(i, &x)| x * 2f32.powf(mags[i / g].round())).collect();
    if specials {
        for b in 0..m * k / g {
            let grp = &mut v[b * g..(b + 1) * g];
            match b % 13 {
                1 => grp[3] = f32::NAN,
                2 => grp[g - 1] = f32::INFINITY,
                3 => grp[0] = f32::NEG_INFINITY,
                4 => grp.iter_mut().for_each(|x| *x = 0.0),
                5 => grp.iter_mut().for_each(|x| *x *= 1e-38),
                6 => grp[5] = 3.0e38,
                _ => {}
            }
        }
    }
    v
}

trait Input: b12x_core::Element + Copy {
    fn round(x: f32) -> Self;
    fn widen(self) -> f32;
}
impl Input for bf16 {
    fn round(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
}
impl Input for f16 {
    fn round(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

fn first_diff<T: PartialEq + std::fmt::Debug>(name: &str, got: &[T], want: &[T], row_len: usize) -> TrialResult {
    if got.len() != want.len() {
        return Err(format!("{name}: {} values, expected {}", got.len(), want.len()));
    }
    match (0..got.len()).find(|&i| got[i] != want[i]) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{name}: {} of {} differ, first at [{}, {}]: got {:?}, want {:?}",
            (0..got.len()).filter(|&j| got[j] != want[j]).count(),
            got.len(),
            i / row_len,
            i % row_len,
            got[i],
            want[i]
        )),
    }
}

fn session_pinned(dev: &Arc<Device>, plan: &Plan, config: &str) -> Result<PreparationSession, String> {
    let mut s = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    s.pin(plan, &b12x_core::OpPlan::buckets(plan)[0].label(), config);
    s.prepare(&[plan]).map_err(err)?;
    Ok(s)
}

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
    let x_h: Vec<T> = fill(m as u64 * 17 + g as u64, m, k, g, specials).into_iter().map(T::round).collect();
    let x_f: Vec<f32> = x_h.iter().map(|v| v.widen()).collect();
    let want = quantize_block_fp8(&x_f, m, k, (1, g), scale).map_err(err)?;
    let x = stream.clone_htod(&x_h).map_err(err)?;
    let dtype = <T as b12x_core::Element>::DTYPE;
    let query = Query { group: g, k, dtype, max_rows: m.max(4096), scale };
    let plan = fp8_block::plan(&query, dev).map_err(err)?;
    for config in b12x_core::OpPlan::candidates(&plan, 0) {
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
