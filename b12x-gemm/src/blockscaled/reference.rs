//! CPU oracle of `gemm.blockscaled`: straight loops, the executable spec.
//!
//! ```text
//! â = A.dequantize(), b̂ = B.dequantize()            (f32 values, formats.md exactly: b12x-quant's codecs)
//! acc[m][n] = alpha · Σ_k f64(â[m][k]) · f64(b̂[n][k]) (+ f64(bias[n]))   (f64, k in order)
//! C[m][n]   = round(acc[m][n])                        (f64 → f32 → the output dtype, once)
//! ```
//!
//! Rounding points: every dequantized value is one f32 (an element code times its scales as
//! b12x-quant computes it); the products of two f32 are exact in f64 and the f64 sum loses at
//! most K · 2⁻⁵³ · Σ|â·b̂|. The kernels differ only by summation order (f32 accumulation) and by
//! where they apply the scales: per-block scales to codes or to per-block partial sums, global
//! (NVFP4 encode) and per-tensor scales and alpha in the f32 epilogue. Hence the per-element
//! bound the GPU tests check ([`bound`]):
//!
//! ```text
//! |C − acc| ≤ ulp_out(|acc|) + C_ACC · K · 2⁻²⁴ · |alpha| · Σ_k |â·b̂| + EPILOGUE_ULPS · 2⁻²⁴ · |acc|
//! ```
//!
//! (`C_ACC` = 2 as for `gemm.bf16_gemv`: tensor-core f32 accumulation truncates; the epilogue's
//! at most [`EPILOGUE_ULPS`] f32 multiplications — alpha, the two global or per-tensor scales,
//! the bias add — round once each), and over the whole output a cosine difference ≤ 1e-5 (bf16
//! and f16 outputs; 1e-6 for f32).

use super::{Activation, Weight};
use crate::bf16_gemv::reference::{cosine_bound, ulp, C_ACC};
use b12x_core::DType;

/// f32 roundings the epilogue may add per element (alpha, two global / per-tensor scales, bias).
pub const EPILOGUE_ULPS: f64 = 4.0;

/// The A operand a decode call multiplies for BF16 `x [m, k]`: `x` itself, or with
/// [`XQuant`](super::gemv::XQuant) b12x-quant's quantization of it (whose dequantization is the
/// `x̂` the call computes).
pub fn activation(
    m: usize,
    k: usize,
    x: &[b12x_core::half::bf16],
    x_quant: Option<super::gemv::XQuant>,
) -> Result<Activation, b12x_quant::block::FormatError> {
    use b12x_quant::block::{quantize_block_fp8, quantize_mx, Fp8ScaleKind, MxOptions};
    let f: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
    Ok(match x_quant {
        None => Activation::Bf16 { m, k, data: x.to_vec() },
        Some(super::gemv::XQuant::Mxfp8) => {
            Activation::Mxfp8(quantize_mx(&f, m, k, b12x_quant::codec::Element::E4M3, MxOptions::default())?)
        }
        Some(super::gemv::XQuant::BlockFp8Ue8m0 { group }) => {
            Activation::BlockFp8(quantize_block_fp8(&f, m, k, (1, group), Fp8ScaleKind::Ue8m0)?)
        }
    })
}

/// A pre-quantized activation ([`XFormat`](super::gemv::XFormat)) of BF16 `x [m, k]` as
/// b12x-quant's quantizers write it (NVFP4 and per-tensor FP8 with the tensor scale computed from
/// x, MXFP8 with the CeilPow2 rule, block FP8 `1 × group` with UE8M0 scales); `Bf16`: x itself.
pub fn pre_quantized(
    m: usize,
    k: usize,
    x: &[b12x_core::half::bf16],
    format: super::gemv::XFormat,
) -> Result<Activation, b12x_quant::block::FormatError> {
    use super::gemv::XFormat;
    use b12x_quant::block::{quantize_block_fp8, quantize_mx, quantize_nvfp4, quantize_tensor_fp8, MxOptions};
    let f: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
    Ok(match format {
        XFormat::Bf16 => Activation::Bf16 { m, k, data: x.to_vec() },
        XFormat::Mxfp8 => {
            Activation::Mxfp8(quantize_mx(&f, m, k, b12x_quant::codec::Element::E4M3, MxOptions::default())?)
        }
        XFormat::Nvfp4 => Activation::Nvfp4(quantize_nvfp4(&f, m, k, None)?),
        XFormat::BlockFp8 { group, scale } => Activation::BlockFp8(quantize_block_fp8(&f, m, k, (1, group), scale)?),
        XFormat::TensorFp8 => Activation::TensorFp8 { m, k, q: quantize_tensor_fp8(&f, None)? },
    })
}

/// The x̂ a call stages for activation `a` (`[M, K]`, f32 values BF16 holds exactly in the ranges
/// [`XFormat`](super::gemv::XFormat) states): its dequantization without the tensor-level scale
/// (NVFP4's encode scale and per-tensor FP8's scale go to the epilogue); for block FP8 with f32
/// scales the codes' values alone (the scales go to the block-FP8 weight's promotions).
pub fn staged_x(a: &Activation) -> Vec<f32> {
    use b12x_quant::block::{BlockFp8, Fp8Scales};
    match a {
        Activation::BlockFp8(q) if matches!(q.scales, Fp8Scales::F32(_)) => {
            let ones = Fp8Scales::F32(vec![1.0; q.rows.div_ceil(q.tile.0) * q.k.div_ceil(q.tile.1)]);
            Activation::BlockFp8(BlockFp8 { scales: ones, ..q.clone() }).dequantize()
        }
        Activation::Nvfp4(q) => Activation::Nvfp4(b12x_quant::block::Nvfp4 { enc: 1.0, ..q.clone() }).dequantize(),
        Activation::TensorFp8 { m, k, q } => {
            Activation::TensorFp8 { m: *m, k: *k, q: b12x_quant::block::TensorFp8 { scale: 1.0, ..q.clone() } }
                .dequantize()
        }
        other => other.dequantize(),
    }
}

/// Unrounded result and the per-element magnitude `|alpha| · Σ_k |â·b̂|` (for the error bound).
#[derive(Clone, Debug, PartialEq)]
pub struct Exact {
    /// `[M, N]` row-major.
    pub acc: Vec<f64>,
    /// `[M, N]` row-major.
    pub abs: Vec<f64>,
    /// K, for the bound.
    pub k: usize,
}

/// Why a pair of operands cannot be multiplied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// A is `[M, K]`, B is `[N, K']` with K ≠ K'.
    K { a: usize, b: usize },
    /// The bias has `got` elements, N expected.
    Bias { n: usize, got: usize },
}

impl std::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShapeError::K { a, b } => write!(f, "A has K = {a}, B has K = {b}"),
            ShapeError::Bias { n, got } => write!(f, "bias has {got} elements, N = {n} expected"),
        }
    }
}

impl std::error::Error for ShapeError {}

/// The exact (f64) result for the rows `cols` of B only (all of them: `0..N`); `[M, cols.len()]`.
pub fn exact(
    a: &Activation,
    b: &Weight,
    alpha: f32,
    bias: Option<&[f32]>,
    cols: &[usize],
) -> Result<Exact, ShapeError> {
    let (m, k) = a.shape();
    let (n, kb) = b.shape();
    if k != kb {
        return Err(ShapeError::K { a: k, b: kb });
    }
    if let Some(bias) = bias {
        if bias.len() != n {
            return Err(ShapeError::Bias { n, got: bias.len() });
        }
    }
    let (ad, bd) = (a.dequantize(), b.dequantize());
    let alpha = f64::from(alpha);
    let mut acc = vec![0.0f64; m * cols.len()];
    let mut abs = vec![0.0f64; m * cols.len()];
    for i in 0..m {
        let ar = &ad[i * k..(i + 1) * k];
        for (j, &col) in cols.iter().enumerate() {
            let br = &bd[col * k..(col + 1) * k];
            let (mut s, mut t) = (0.0f64, 0.0f64);
            for (&x, &w) in ar.iter().zip(br) {
                let p = f64::from(x) * f64::from(w);
                s += p;
                t += p.abs();
            }
            s *= alpha;
            if let Some(bias) = bias {
                s += f64::from(bias[col]);
            }
            acc[i * cols.len() + j] = s;
            abs[i * cols.len() + j] = alpha.abs() * t;
        }
    }
    Ok(Exact { acc, abs, k })
}

/// `C = alpha · A · Bᵀ (+ bias)`, the whole `[M, N]` output rounded once to f32 (callers round
/// further to bf16/f16 with `HostFloat::from_f32`, RNE).
pub fn gemm(a: &Activation, b: &Weight, alpha: f32, bias: Option<&[f32]>) -> Result<Vec<f32>, ShapeError> {
    let cols: Vec<usize> = (0..b.shape().0).collect();
    Ok(exact(a, b, alpha, bias, &cols)?.acc.iter().map(|&v| v as f32).collect())
}

/// The per-element bound of the module docs.
pub fn bound(out: DType, k: usize, acc: f64, abs: f64) -> f64 {
    let u = 2f64.powi(-24);
    ulp(out, acc) + C_ACC * k as f64 * u * abs + EPILOGUE_ULPS * u * acc.abs()
}

/// Checks `got` (`[M, cols]`, widened to f64) against an exact result: every element within
/// [`bound`], NaN/Inf positions equal, and the cosine difference within the output's bound.
/// Returns the worst error as a fraction of its bound.
pub fn check_bound(name: &str, out: DType, got: &[f64], want: &Exact, shape: &[usize]) -> Result<f64, String> {
    let worst =
        b12x_core::testing::check_close(name, got, &want.acc, shape, |i| bound(out, want.k, want.acc[i], want.abs[i]))?;
    let finite = |v: &[f64]| v.iter().map(|x| if x.is_finite() { *x } else { 0.0 }).collect::<Vec<_>>();
    let cd = b12x_core::testing::cosine_diff(&finite(got), &finite(&want.acc));
    if cd > cosine_bound(out) {
        return Err(format!("{name}: cosine difference {cd:.3e} exceeds {:.1e}", cosine_bound(out)));
    }
    Ok(worst)
}
