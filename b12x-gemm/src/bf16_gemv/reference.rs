//! CPU oracle of `gemm.bf16_gemv`: straight loops, the executable spec.
//!
//! ```text
//! acc[m][n] = Σ_k f64(x[m][k]) · f64(w[n][k])        (exact products, f64 accumulation in k order)
//! acc[m][n] += f64(bias[n])                          (when there is a bias)
//! y[m][n]   = round_to_nearest_even(acc[m][n] as TOut)   (f64 → f32 → TOut, see below)
//! ```
//!
//! Rounding points: inputs are exact in f64 (bf16 and f32 both widen exactly); the products of
//! a bf16 and a bf16 or f32 are exact in f64 (≤ 8 + 24 significant bits); the k-sum in f64
//! loses at most K·2⁻⁵³·Σ|x·w| (negligible next to the kernel's f32 accumulation); the one
//! rounding to the output is f64 → f32 (RNE), then f32 → bf16 (RNE) for bf16 output. That double
//! rounding can differ from a direct f64 → bf16 rounding only on exact f32 ties, which the
//! tolerance below (≥ 1 ULP of the output) absorbs.
//!
//! With a fused SwiGLU (`XAct::SiluMul`) the GEMV's x is [`silu_mul_x`] of the `[M, 2K]` input:
//!
//! ```text
//! act[m][k] = bf16_rne(silu_mul(x[m][k], x[m][K + k], L))   (b12x_core::testing::silu_mul, f32)
//! ```
//!
//! and the formulas above run on `act` (exact in f64, as any bf16 x). That is
//! `activation.silu_and_mul`'s oracle with BF16 output; the kernels' `expf` makes an element
//! differ from it by one bf16 ULP where the f32 value sits next to a rounding boundary (a few in
//! 10⁵ on random data), each moving `y` by at most `2⁻⁷ · |act · w|` of one term: inside the
//! bound below, though at small K (the tests' K = 1000) one such flip can take up to ~2/3 of an
//! element's bound where its sum is small (a review's simulation; ~5% at K = 2880). A failure
//! there with the bitwise check passing points at the oracle's `exp`, not at the kernel. (The
//! GPU kernels' activation itself is the op's exactly: the GPU tests compare the fused `y`
//! bitwise with the op followed by the GEMV.)
//!
//! The kernel accumulates in f32 in its own (fixed) order, so GPU results are compared with
//! [`check_bound`]: `|y − acc| ≤ ulp_out(|acc|) + C_ACC · K · 2⁻²⁴ · Σ_k |x·w|` per element, plus
//! a cosine-difference bound over the whole output ([`cosine_bound`]).

use b12x_core::half::bf16;
use b12x_core::testing::HostFloat;
use b12x_core::DType;

/// Factor on the worst-case f32 summation error `K · 2⁻²⁴ · Σ|x·w|` (any order of additions).
/// Decision: 2, because tensor-core f32 accumulation on SM90 truncates rather than rounds each
/// addition (up to twice the error of a round-to-nearest add); the SIMT path rounds and needs 1.
pub const C_ACC: f64 = 2.0;

/// Unrounded result and the per-element magnitude `Σ_k |x·w|` (for the error bound).
#[derive(Clone, Debug, PartialEq)]
pub struct Exact {
    /// `[M, N]` row-major: Σ_k x·w (+ bias), in f64.
    pub acc: Vec<f64>,
    /// `[M, N]` row-major: Σ_k |x·w|.
    pub abs: Vec<f64>,
}

/// The exact (f64) result for the rows `rows` of W only (all of them: `0..n`).
///
/// `x`: `[M, K]` contiguous; `w`: `[N, K]` contiguous bf16; `bias`: `[N]` or empty.
/// The result is `[M, rows.len()]`.
pub fn exact<X: HostFloat, B: HostFloat>(
    x: &[X],
    w: &[bf16],
    bias: Option<&[B]>,
    m: usize,
    k: usize,
    rows: &[usize],
) -> Exact {
    let mut acc = vec![0.0f64; m * rows.len()];
    let mut abs = vec![0.0f64; m * rows.len()];
    for i in 0..m {
        let xr = &x[i * k..(i + 1) * k];
        for (j, &n) in rows.iter().enumerate() {
            let wr = &w[n * k..(n + 1) * k];
            let (mut s, mut a) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let p = xr[kk].to_f64() * wr[kk].to_f64();
                s += p;
                a += p.abs();
            }
            if let Some(b) = bias {
                s += b[n].to_f64();
            }
            acc[i * rows.len() + j] = s;
            abs[i * rows.len() + j] = a;
        }
    }
    Exact { acc, abs }
}

/// The GEMV input of a fused SwiGLU (`XAct::SiluMul`): `act [M, K]` (bf16) from `x [M, 2K]`
/// (contiguous rows `[gate | up]`), `act[m][k] = bf16(silu_mul(x[m][k], x[m][K + k], limit))` with
/// the f32 steps of [`b12x_core::testing::silu_mul`] and one round-to-nearest-even to bf16.
pub fn silu_mul_x<X: HostFloat>(x: &[X], m: usize, k: usize, limit: Option<f32>) -> Vec<bf16> {
    assert_eq!(x.len(), m * 2 * k, "x must be [M, 2K] = [{m}, {}]", 2 * k);
    x.chunks(2 * k.max(1))
        .flat_map(|row| {
            let (g, u) = row.split_at(k);
            g.iter().zip(u).map(move |(&g, &u)| {
                <bf16 as HostFloat>::from_f32(b12x_core::testing::silu_mul(g.to_f64() as f32, u.to_f64() as f32, limit))
            })
        })
        .collect()
}

/// Rounds an exact result once to the output type (f64 → f32 → `O`).
pub fn round<O: HostFloat>(acc: &[f64]) -> Vec<O> {
    acc.iter().map(|&v| O::from_f32(v as f32)).collect()
}

/// `y = x · Wᵀ (+ bias)` rounded to `O`: the whole output, `[M, N]`.
pub fn gemv<X: HostFloat, B: HostFloat, O: HostFloat>(
    x: &[X],
    w: &[bf16],
    bias: Option<&[B]>,
    m: usize,
    n: usize,
    k: usize,
) -> Vec<O> {
    let rows: Vec<usize> = (0..n).collect();
    round(&exact(x, w, bias, m, k, &rows).acc)
}

/// One ULP of `out` (bf16, f16 or f32) at magnitude `v` (the spacing of representable values
/// just above |v|; the subnormal spacing below the smallest normal).
pub fn ulp(out: DType, v: f64) -> f64 {
    let (mant_bits, min_normal) = match out {
        DType::BF16 => (8, f64::from(f32::MIN_POSITIVE)),
        DType::F16 => (11, 2f64.powi(-14)),
        _ => (24, f64::from(f32::MIN_POSITIVE)),
    };
    let e = v.abs().max(min_normal).log2().floor();
    2f64.powf(e - (mant_bits - 1) as f64)
}

/// The per-element bound of the module docs.
pub fn bound(out: DType, k: usize, acc: f64, abs: f64) -> f64 {
    ulp(out, acc) + C_ACC * k as f64 * 2f64.powi(-24) * abs
}

/// Largest allowed `1 − cos(y, acc)` over a whole output. Decision: bf16 output rounds each
/// element with relative error ≤ 2⁻⁹, so `1 − cos ≤ (2⁻⁹)² / 2 ≈ 1.9e-6`; 1e-5 leaves room for
/// the f32 accumulation on top. f32 output: relative errors of a few 1e-6 give `1 − cos` of
/// ~1e-11; 1e-6 still catches any misplaced or missing term of a sum.
pub fn cosine_bound(out: DType) -> f64 {
    // f16 rounds with relative error ≤ 2⁻¹¹: 1 − cos ≤ 1.2e-7 from the rounding.
    if out == DType::BF16 {
        1e-5
    } else {
        1e-6
    }
}

/// Checks `got` (`[M, cols]`, already widened to f64) against an exact result: every element
/// within [`bound`], NaN/Inf positions equal, and the cosine difference within [`cosine_bound`].
/// Returns the worst error as a fraction of its bound.
pub fn check_bound(
    name: &str,
    out: DType,
    k: usize,
    got: &[f64],
    want: &Exact,
    shape: &[usize],
) -> Result<f64, String> {
    let worst =
        b12x_core::testing::check_close(name, got, &want.acc, shape, |i| bound(out, k, want.acc[i], want.abs[i]))?;
    let finite = |v: &[f64]| v.iter().map(|x| if x.is_finite() { *x } else { 0.0 }).collect::<Vec<_>>();
    let cd = b12x_core::testing::cosine_diff(&finite(got), &finite(&want.acc));
    if cd > cosine_bound(out) {
        return Err(format!("{name}: cosine difference {cd:.3e} exceeds {:.1e}", cosine_bound(out)));
    }
    Ok(worst)
}
