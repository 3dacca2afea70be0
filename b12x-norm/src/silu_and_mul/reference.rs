//! CPU oracle of `activation.silu_and_mul`: straight loops, the executable spec.
//!
//! For every element (`g = x[t, j]`, `u = x[t, I + j]`; all arithmetic f32, `round` =
//! round-to-nearest-even to the element type `E`):
//!
//! | step | value                                   | kernel                              | oracle                        |
//! |------|-----------------------------------------|-------------------------------------|-------------------------------|
//! | 1    | `a = min(g, L)` (with a limit)          | comparison (a NaN `g` stays NaN)    | the same: exact               |
//! | 2    | `b = clamp(u, -L, L)` (with a limit)    | comparisons (a NaN `u` stays NaN)   | the same: exact               |
//! | 3    | `e = exp(-a)`                           | `expf` (within 2 ulp)               | f64 `exp`, one f32 rounding   |
//! | 4    | `s = a / (1 + e)`                       | IEEE f32 add and division           | the same                      |
//! | 5    | `y = round(s · b)`                      | f32 multiply, the one rounding      | the same                      |
//!
//! Only step 3 differs (by ≤ 2 f32 ulp of `e`, hence a few f32 ulp of `y`, far below half a
//! bf16/f16 ULP): `y` is within [`ULP_BOUND`] ULP of this oracle, and equal where the f32 value
//! does not sit next to a rounding boundary of `E` (almost everywhere).
//!
//! Non-finite values follow IEEE f32: a NaN in `g` or `u` gives NaN; `g = +inf` gives `±inf · u`
//! (NaN for `u = 0`); `g = -inf` gives `-inf / inf` = NaN (as PyTorch's `silu(-inf)`); with a
//! limit `g = +inf` becomes `L` and `u = ±inf` becomes `±L`, while `g = -inf` (no lower clamp)
//! still gives NaN. `exp(-a)` overflows to `+inf` for `a < -88.72`, so `y = ∓0` there.
//!
//! Quantized outputs are the b12x-quant CPU codecs (`b12x_quant::block::quantize_mx`,
//! `quantize_block_fp8` with `(1, 128)` groups, `quantize_nvfp4` with the given encode scale)
//! applied to this `y` *after* its rounding to `E` — on the GPU, to the GPU's own rounded `y`,
//! which makes them bit-exact (the GPU tests do exactly that).

use b12x_core::testing::HostFloat;

/// Largest ULP distance, in `E` (bf16 or f16), between the kernel's `y` and this oracle's.
pub const ULP_BOUND: u64 = 1;

/// `silu(min(g, L)) · clamp(u, -L, L)` in f32, before the rounding to `E` (steps 1–5 of the
/// table). It lives in b12x-core next to the kernels' shared `silu_mul_vec`
/// (`b12x/activation.cuh`), which `gemm.bf16_gemv`'s fused SwiGLU x load uses too.
pub use b12x_core::testing::silu_mul;

/// `y [T, I]` of contiguous `x [T, 2I]` (gate half first), rounded to `E`.
pub fn silu_and_mul<E: HostFloat>(x: &[E], inter: usize, limit: Option<f32>) -> Vec<E> {
    assert!(inter > 0 && x.len() % (2 * inter) == 0, "x must be [T, 2I] with I = {inter}");
    x.chunks(2 * inter)
        .flat_map(|row| {
            let (g, u) = row.split_at(inter);
            g.iter().zip(u).map(|(&g, &u)| E::from_f32(silu_mul(g.to_f64() as f32, u.to_f64() as f32, limit)))
        })
        .collect()
}
