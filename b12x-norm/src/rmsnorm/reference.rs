//! CPU oracle of `norm.rmsnorm`: straight loops over contiguous rows, the executable spec.
//!
//! For every row `t` (all arithmetic f32 unless stated, `round` = round-to-nearest-even to the
//! element type `E`):
//!
//! | step | value                                  | kernel                                   | oracle                     |
//! |------|----------------------------------------|------------------------------------------|----------------------------|
//! | 1    | `r = round(x + residual)` (fused form) | f32 add, `round`                         | the same: bitwise equal    |
//! | 2    | `ss = Σ r²`                            | f32 fma chain per thread, fixed tree     | f64 sum, one f32 rounding  |
//! | 3    | `mean = ss / D`                        | IEEE f32 division                        | the same                   |
//! | 4    | `m = mean + eps`                       | IEEE f32 add                             | the same                   |
//! | 5    | `rrms = 1 / sqrt(m)`                   | `rsqrtf` (within 2 ulp)                  | f64, one f32 rounding      |
//! | 6    | `a = r · rrms`                         | f32 multiply                             | the same                   |
//! | 7    | `b = a · w`                            | f32 multiply                             | the same                   |
//! | 8    | `y = round(b)`                         | the one rounding to the output type      | the same                   |
//!
//! Where the kernel rounds exactly (IEEE operations) the oracle performs the same operation;
//! where it approximates (the summation order of step 2, `rsqrtf` in step 5) the oracle computes
//! the exact value up to one f32 rounding. The residual written back in step 1 must therefore
//! match bitwise, and `y` within [`ulp_bound`] ULPs of the output type.
//!
//! The fused form normalizes the *rounded* sum `r`, the value the next layer reads back from
//! `residual`, as fused add-RMSNorm kernels conventionally do.

use b12x_core::testing::HostFloat;

/// Exact widening of a bf16/f16/f32 value.
fn f32_of<E: HostFloat>(v: E) -> f32 {
    v.to_f64() as f32
}

/// Largest ULP distance, in the output type `E`, between the kernel's `y` and this oracle's.
///
/// Derivation (u = 2^-24, the f32 unit roundoff; a relative error of n·u is at most n f32 ULPs).
/// Step 2 sums positive terms along a tree of depth ≤ 42 (≤ 32 fma per thread: 8 vectors of 4
/// f32, then 5 butterfly levels in a warp and 5 across ≤ 32 warps), so the kernel's `ss` is within
/// 42u of exact; the oracle's within 0.5u. Halved by the square root, plus 2 ulp for `rsqrtf`
/// and the IEEE roundings of steps 3, 4, 6 and 7 on both sides, the two f32 values `b` differ by
/// less than 30u relative. For f32 output that is < 30 ULPs: the bound is 32. For bf16 and f16
/// (8 and 11 significand bits) 30u is far below half an output ULP, so the two values round to the
/// same or to adjacent outputs: the bound is 1.
///
/// Compare with [`b12x_core::testing::check_ulp`].
pub const fn ulp_bound<E: HostFloat>() -> u64 {
    if std::mem::size_of::<E>() == 4 {
        32
    } else {
        1
    }
}

/// `1 / sqrt(mean(r²) + eps)` of one row, steps 2–5 of the table.
pub fn inv_rms<E: HostFloat>(r: &[E], eps: f32) -> f32 {
    // Step 2: the exact sum up to one f32 rounding. f64 holds the square of every bf16, f16 and
    // f32 value exactly; summing ≤ 16384 positive terms loses < 2^-38 relative, far below f32.
    let ss = r.iter().map(|v| v.to_f64() * v.to_f64()).sum::<f64>() as f32;
    // Steps 3 and 4: the same IEEE f32 operations as the kernel. D ≤ 16384 is exact in f32.
    let m = ss / r.len() as f32 + eps;
    // Step 5: correctly rounded rsqrt (up to the double rounding through f64).
    (1.0 / f64::from(m).sqrt()) as f32
}

/// Normalizes one row: `y[j] = round((r[j] * rrms) * w[j])`, steps 2–8 of the table.
pub fn rmsnorm_row<E: HostFloat>(r: &[E], w: &[E], eps: f32, y: &mut [E]) {
    assert_eq!(r.len(), w.len(), "row and weight lengths differ");
    assert_eq!(r.len(), y.len(), "row and output lengths differ");
    let rrms = inv_rms(r, eps);
    for ((y, &r), &w) in y.iter_mut().zip(r).zip(w) {
        *y = E::from_f32((f32_of(r) * rrms) * f32_of(w));
    }
}

/// Plain form over contiguous rows: `x [T, D]`, `w [D]` → `y [T, D]`.
pub fn rmsnorm<E: HostFloat>(x: &[E], w: &[E], eps: f32) -> Vec<E> {
    let d = w.len();
    assert!(d > 0 && x.len() % d == 0, "x must hold whole rows of D = {d}");
    let mut y = vec![E::from_f32(0.0); x.len()];
    for (x_row, y_row) in x.chunks_exact(d).zip(y.chunks_exact_mut(d)) {
        rmsnorm_row(x_row, w, eps, y_row);
    }
    y
}

/// Fused form over contiguous rows: `residual[t,:] ← round(x[t,:] + residual[t,:])` (step 1), then
/// `y[t,:] = rmsnorm(residual[t,:])`. Returns `y [T, D]`.
pub fn rmsnorm_add<E: HostFloat>(x: &[E], residual: &mut [E], w: &[E], eps: f32) -> Vec<E> {
    assert_eq!(x.len(), residual.len(), "x and residual lengths differ");
    for (r, &x) in residual.iter_mut().zip(x) {
        *r = E::from_f32(f32_of(x) + f32_of(*r));
    }
    rmsnorm(residual, w, eps)
}
