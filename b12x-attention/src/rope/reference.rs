//! CPU oracle of `attention.rope`, and the host-side math the plan itself uses (frequencies,
//! the cos/sin table).
//!
//! Rounding points (the kernel's, so the GPU result in table mode is **bitwise equal** to
//! [`rotate`]; with cos/sin computed in the kernel it is within one ULP of the dtype plus 2^-20 of
//! the pair's magnitude `|a'| + |b'|`, from the last f32 bit of CUDA's `sincosf` against the
//! correctly rounded value, which shows where `a·c − b·s` cancels):
//! 1. `inv_freq[j]` ([`inv_freq`]): the formula evaluated in f64, rounded once to f32.
//! 2. `angle = RN_f32(f32(pos) · inv_freq[j])`.
//! 3. `c = RN_f32(cos(angle))`, `s = RN_f32(sin(angle))` (f64 `cos`/`sin` of the f32 angle),
//!    then each multiplied by `scale` in f32 ([`cos_sin_scale`]; exact when it is 1).
//! 4. `a' = RN(a·c) − RN(b·s)`, `b' = RN(b·c) + RN(a·s)` in f32 (no fused multiply-add), then
//!    rounded once to bf16/f16 by the caller of [`rotate`].

use super::{Query, RopeStyle, Yarn};
use crate::paging::FAULT_POSITION;

/// YaRN's `mscale(s, m) = 0.1 · m · ln s + 1` (1 for `s ≤ 1`).
pub fn yarn_mscale(factor: f64, m: f64) -> f64 {
    if factor <= 1.0 {
        1.0
    } else {
        0.1 * m * factor.ln() + 1.0
    }
}

/// YaRN's correction range `(low, high)` over the `R / 2` pair indices: the DeepSeek form,
/// `corr_dim(r) = R · ln(L / (2π r)) / (2 ln θ)`, `low = max(floor(corr_dim(β_fast)), 0)`,
/// `high = min(ceil(corr_dim(β_slow)), R − 1)`.
pub fn yarn_range(rotary_dim: usize, base: f64, y: &Yarn) -> (f64, f64) {
    let r = rotary_dim as f64;
    let corr =
        |rot: f64| r * (y.original_max_position as f64 / (rot * 2.0 * std::f64::consts::PI)).ln() / (2.0 * base.ln());
    let low = corr(y.beta_fast as f64).floor().max(0.0);
    let high = corr(y.beta_slow as f64).ceil().min(r - 1.0);
    (low, high)
}

/// The `R / 2` rotation frequencies: `θ^(−2j / R)`, with YaRN (when given) blending in
/// `θ^(−2j / R) / factor` by `ramp(j) = clamp((j − low) / (high − low), 0, 1)` (`high += 0.001`
/// when equal): `inv / factor · ramp + inv · (1 − ramp)` — high-frequency pairs (j < low) keep
/// their frequency, low-frequency ones (j > high) are interpolated. f64, rounded once to f32.
pub fn inv_freq(rotary_dim: usize, base: f64, yarn: Option<&Yarn>) -> Vec<f32> {
    let half = rotary_dim / 2;
    let range = yarn.map(|y| {
        let (low, high) = yarn_range(rotary_dim, base, y);
        (low, if low == high { high + 0.001 } else { high }, y.factor as f64)
    });
    (0..half)
        .map(|j| {
            let inv = base.powf(-(2.0 * j as f64) / rotary_dim as f64);
            let v = match range {
                None => inv,
                Some((low, high, factor)) => {
                    let ramp = ((j as f64 - low) / (high - low)).clamp(0.0, 1.0);
                    inv / factor * ramp + inv * (1.0 - ramp)
                }
            };
            v as f32
        })
        .collect()
}

/// The factor on cos and sin: YaRN's `mscale(factor, mscale) / mscale(factor, mscale_all_dim)`
/// (DeepSeek; 1 when the two are equal), 1 without YaRN. Rounded to f32.
pub fn cos_sin_scale(yarn: Option<&Yarn>) -> f32 {
    match yarn {
        None => 1.0,
        Some(y) => {
            let f = y.factor as f64;
            (yarn_mscale(f, y.mscale as f64) / yarn_mscale(f, y.mscale_all_dim as f64)) as f32
        }
    }
}

/// `(cos, sin)` of pair `j` at `pos` before the scale: rounding points 2 and 3.
pub fn cos_sin(pos: i32, inv_freq: f32) -> (f32, f32) {
    let angle = pos as f32 * inv_freq;
    let a = angle as f64;
    (a.cos() as f32, a.sin() as f32)
}

/// The table of table mode, `[max_position, R]` f32: row `pos` holds `cos` of its `R / 2` pairs,
/// then their `sin` (unscaled; rounding points 2 and 3).
pub fn table(max_position: usize, rotary_dim: usize, inv_freq: &[f32]) -> Vec<f32> {
    let half = rotary_dim / 2;
    let mut t = vec![0f32; max_position * rotary_dim];
    for (pos, row) in t.chunks_exact_mut(rotary_dim).enumerate() {
        for j in 0..half {
            let (c, s) = cos_sin(pos as i32, inv_freq[j]);
            row[j] = c;
            row[half + j] = s;
        }
    }
    t
}

/// Rotates the rows of `x` (`[T, heads, D]` values, contiguous) in place as the kernel does, in
/// f32 (the caller rounds to the dtype). Rows whose position lies outside `[0, max_position)`
/// are left as they are and set [`FAULT_POSITION`] in the returned bits.
pub fn rotate(q: &Query, positions: &[i32], heads: usize, x: &mut [f32]) -> u32 {
    let (d, r, off) = (q.head_dim, q.rotary_dim, q.rotary_offset);
    let half = r / 2;
    let inv = inv_freq(r, q.base as f64, q.yarn.as_ref());
    let scale = cos_sin_scale(q.yarn.as_ref());
    let mut faults = 0;
    for (t, &pos) in positions.iter().enumerate() {
        if pos < 0 || pos as i64 >= q.max_position as i64 {
            faults |= FAULT_POSITION;
            continue;
        }
        for h in 0..heads {
            let head = &mut x[(t * heads + h) * d..][..d];
            for (j, &f) in inv.iter().enumerate() {
                let (c, s) = cos_sin(pos, f);
                let (c, s) = (c * scale, s * scale);
                let (ia, ib) = match q.style {
                    RopeStyle::Neox => (off + j, off + j + half),
                    RopeStyle::Gptj => (off + 2 * j, off + 2 * j + 1),
                };
                let (a, b) = (head[ia], head[ib]);
                head[ia] = a * c - b * s;
                head[ib] = b * c + a * s;
            }
        }
    }
    faults
}
