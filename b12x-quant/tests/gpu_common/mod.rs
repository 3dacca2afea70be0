//! Helpers shared by the GPU suites of the quantizers (`gpu_*.rs`).
#![allow(dead_code)] // each suite uses a subset

use b12x_core::half::{bf16, f16};
use b12x_core::testing::uniform;
use b12x_core::{Device, OpPlan, PreparationSession};
use std::sync::Arc;

pub type TrialResult = Result<(), String>;

pub fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// `[m, k]` values whose magnitude changes by 2^±20 from one `block` to the next. With
/// `specials`, every 11th block from the 1st on holds, in turn: a NaN, +Inf (last element),
/// −Inf (first), all zeros, ±0 alternating, values × 1e-38 (subnormal or zero in bf16/f16), and
/// one `outlier` (near the bf16 max for the MX suites; milder where a tensor-wide scale would
/// otherwise zero every other block).
pub fn fill(seed: u64, m: usize, k: usize, block: usize, specials: bool, outlier: f32) -> Vec<f32> {
    let u = uniform(seed, m * k, -1.0, 1.0);
    let mags = uniform(seed + 1, m * k / block, -20.0, 20.0);
    let mut v: Vec<f32> = u.iter().enumerate().map(|(i, &x)| x * 2f32.powf(mags[i / block].round())).collect();
    if specials {
        for b in 0..m * k / block {
            let blk = &mut v[b * block..(b + 1) * block];
            match b % 11 {
                1 => blk[3] = f32::NAN,
                2 => blk[block - 1] = f32::INFINITY,
                3 => blk[0] = f32::NEG_INFINITY,
                4 => blk.iter_mut().for_each(|x| *x = 0.0),
                5 => blk.iter_mut().enumerate().for_each(|(i, x)| *x = if i % 2 == 0 { -0.0 } else { 0.0 }),
                6 => blk.iter_mut().for_each(|x| *x *= 1e-38),
                7 => blk[5] = outlier,
                _ => {}
            }
        }
    }
    v
}

/// The input dtypes: rounding from and widening to f32.
pub trait Input: b12x_core::Element + Copy {
    fn round(x: f32) -> Self;
    fn widen(self) -> f32;
    fn from_bits(b: u16) -> Self;
}
impl Input for bf16 {
    fn round(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn from_bits(b: u16) -> Self {
        bf16::from_bits(b)
    }
}
impl Input for f16 {
    fn round(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn from_bits(b: u16) -> Self {
        f16::from_bits(b)
    }
}

/// Exact equality, reporting the count and the first differing `[row, col]`.
pub fn first_diff<T: PartialEq + std::fmt::Debug>(name: &str, got: &[T], want: &[T], row_len: usize) -> TrialResult {
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

/// A session with `config` pinned in the plan's (single) bucket, prepared without a race.
pub fn session_pinned(dev: &Arc<Device>, plan: &dyn OpPlan, config: &str) -> Result<PreparationSession, String> {
    let mut s = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    s.pin(plan, &plan.buckets()[0].label(), config);
    s.prepare(&[plan]).map_err(err)?;
    Ok(s)
}

/// The configs a shape trial pins in turn: every candidate up to 2^22 elements; above that the
/// first candidate (the default) and the two extremes of chunks per CTA (`t128_u1`, `t512_u4`),
/// to keep the device time of the large shapes down (each of them still runs every config on
/// the smaller shapes of the same suite).
pub fn trial_configs(plan: &dyn OpPlan, elements: usize) -> Vec<String> {
    let all = plan.candidates(0);
    if elements <= 1 << 22 {
        return all;
    }
    all.iter()
        .enumerate()
        .filter(|(i, c)| *i == 0 || c.as_str() == "t128_u1" || c.as_str() == "t512_u4")
        .map(|(_, c)| c.clone())
        .collect()
}
