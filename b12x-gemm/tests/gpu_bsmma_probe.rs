//! One block-scaled warp MMA per form (`kernels/bsmma_probe.cu`) against the CPU product of the
//! decoded codes and scales (b12x-quant's codecs), bit for bit: the inputs are chosen so that
//! every product and partial sum is exact in f32 (codes with at most two significant bits,
//! scales 2^-1..2^1 or UE4M3 0.5..2), so any summation order gives the same f32.
//!
//! On sm_120a / sm_121a this checks the hardware MMAs and the operand placement of
//! `b12x/mma_sm120.cuh` (fragments and scale registers) — every element and every scale differs,
//! so a misplaced one changes D. On other GPUs (the H200) the kernels compute the portable
//! product and this checks that path only; the SM120 path is then compiled and SASS-checked
//! (`tests/sm120_fragments.rs`), not run.

use b12x_core::testing::{alloc_poisoned, run_gpu_trials, GpuTrial};
use b12x_core::{Device, LaunchDims, TensorMut, TensorRef};
use b12x_quant::codec::{e2m1_decode, e4m3_decode, ue4m3_decode, ue8m0_decode};
use std::sync::Arc;

type TrialResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Mirrors `BsmmaProbeParams` in kernels/bsmma_probe.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct ProbeParams {
    a: u64,
    b: u64,
    sfa: u64,
    sfb: u64,
    c: u64,
    d: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Form {
    Mxf8E4m3,
    Mxf8E2m1,
    Mxf4,
    Nvf4,
    /// E2M1 weight × E4M3 activation (W4A8).
    Mxf8E2m1E4m3,
}

impl Form {
    fn symbol(self) -> &'static str {
        match self {
            Form::Mxf8E4m3 => "b12x_bsmma_probe_mxf8_e4m3",
            Form::Mxf8E2m1 => "b12x_bsmma_probe_mxf8_e2m1",
            Form::Mxf4 => "b12x_bsmma_probe_mxf4",
            Form::Nvf4 => "b12x_bsmma_probe_nvf4",
            Form::Mxf8E2m1E4m3 => "b12x_bsmma_probe_e2m1_e4m3",
        }
    }
    /// (K, scales per row).
    fn shape(self) -> (usize, usize) {
        match self {
            Form::Mxf8E4m3 | Form::Mxf8E2m1 | Form::Mxf8E2m1E4m3 => (32, 1),
            Form::Mxf4 => (64, 2),
            Form::Nvf4 => (64, 4),
        }
    }
    /// Whether A's (`b_operand` false) or B's elements are E4M3 (else E2M1).
    fn e4m3(self, b_operand: bool) -> bool {
        self == Form::Mxf8E4m3 || (b_operand && self == Form::Mxf8E2m1E4m3)
    }
    fn element(self, code: u8, b_operand: bool) -> f32 {
        if self.e4m3(b_operand) {
            e4m3_decode(code)
        } else {
            e2m1_decode(code)
        }
    }
    fn scale(self, code: u8) -> f32 {
        if self == Form::Nvf4 {
            ue4m3_decode(code)
        } else {
            ue8m0_decode(code)
        }
    }
}

/// A small deterministic generator (the inputs only need to differ everywhere).
fn pick<T: Copy>(set: &[T], seed: &mut u64) -> T {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    set[(*seed >> 33) as usize % set.len()]
}

fn probe(dev: &Arc<Device>, form: Form, seed: u64) -> TrialResult {
    let (k, s) = form.shape();
    let mut seed = seed;
    // E4M3 ±{0.5, 0.75, 1, 1.5, 2, 3, 4}; E2M1 every code (±0 .. ±6); scales 2^-1..2^1 (UE8M0)
    // or 0.5, 1, 1.5, 2 (UE4M3).
    let e4m3 = [0x30u8, 0x34, 0x38, 0x3C, 0x40, 0x44, 0x48, 0xB0, 0xB4, 0xB8, 0xBC, 0xC0, 0xC4, 0xC8];
    let e2m1: Vec<u8> = (0..16).collect();
    let elems = |b_operand: bool| -> &[u8] {
        if form.e4m3(b_operand) {
            &e4m3
        } else {
            &e2m1
        }
    };
    let scales: &[u8] = if form == Form::Nvf4 { &[0x30, 0x38, 0x3C, 0x40] } else { &[126, 127, 128] };
    let a: Vec<u8> = (0..16 * k).map(|_| pick(elems(false), &mut seed)).collect();
    let b: Vec<u8> = (0..8 * k).map(|_| pick(elems(true), &mut seed)).collect();
    let sfa: Vec<u8> = (0..16 * s).map(|_| pick(scales, &mut seed)).collect();
    let sfb: Vec<u8> = (0..8 * s).map(|_| pick(scales, &mut seed)).collect();
    let c: Vec<f32> = (0..128).map(|i| ((i * 37 % 41) as f32 - 20.0) / 16.0).collect();
    let chunk = k / s;
    let want: Vec<f32> = (0..128)
        .map(|i| {
            let (m, n) = (i / 8, i % 8);
            let mut acc = f64::from(c[i]);
            for kk in 0..k {
                let va = f64::from(form.element(a[m * k + kk], false)) * f64::from(form.scale(sfa[m * s + kk / chunk]));
                let vb = f64::from(form.element(b[n * k + kk], true)) * f64::from(form.scale(sfb[n * s + kk / chunk]));
                acc += va * vb;
            }
            acc as f32
        })
        .collect();
    let stream = dev.stream();
    let (da, db) = (stream.clone_htod(&a).map_err(err)?, stream.clone_htod(&b).map_err(err)?);
    let (dsa, dsb) = (stream.clone_htod(&sfa).map_err(err)?, stream.clone_htod(&sfb).map_err(err)?);
    let dc = stream.clone_htod(&c).map_err(err)?;
    let mut dd = alloc_poisoned::<f32>(stream, 128).map_err(err)?;
    let params = ProbeParams {
        a: TensorRef::from_slice(&da, &[16 * k]).map_err(err)?.ptr(),
        b: TensorRef::from_slice(&db, &[8 * k]).map_err(err)?.ptr(),
        sfa: TensorRef::from_slice(&dsa, &[16 * s]).map_err(err)?.ptr(),
        sfb: TensorRef::from_slice(&dsb, &[8 * s]).map_err(err)?.ptr(),
        c: TensorRef::from_slice(&dc, &[128]).map_err(err)?.ptr(),
        d: TensorMut::from_slice(&mut dd, &[128]).map_err(err)?.ptr(),
    };
    let kernel = dev.kernel(&b12x_gemm::BSMMA_PROBE_MODULE, form.symbol()).map_err(err)?;
    let dims = LaunchDims { grid: (1, 1, 1), block: (32, 1, 1), smem_bytes: 0 };
    // SAFETY: ProbeParams mirrors the kernel's struct; every tensor has the size the form reads.
    unsafe { kernel.launch(stream, dims, &params) }.map_err(err)?;
    let got = stream.clone_dtoh(&dd).map_err(err)?;
    for i in 0..128 {
        if got[i].to_bits() != want[i].to_bits() {
            return Err(format!("{}: D[{}][{}] = {} , want {}", form.symbol(), i / 8, i % 8, got[i], want[i]));
        }
    }
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    for (name, form) in [
        ("mxf8_e4m3", Form::Mxf8E4m3),
        ("mxf8_e2m1", Form::Mxf8E2m1),
        ("mxf4", Form::Mxf4),
        ("nvf4", Form::Nvf4),
        ("e2m1_e4m3", Form::Mxf8E2m1E4m3),
    ] {
        for seed in [1u64, 2, 3] {
            trials.push(GpuTrial::new(format!("{name}::seed{seed}"), move |d| probe(d, form, seed)));
        }
    }
    run_gpu_trials(trials)
}
