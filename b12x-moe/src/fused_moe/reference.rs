//! CPU oracle of `moe.fused_moe`: a per-token loop over its k experts with dequantized weights
//! (b12x-quant's codecs, formats.md exactly), f64 dot products rounded to f32 then BF16, f32
//! activation math, the rounding points of the [module docs](super).

use super::{Activation, Fp4, Recipe, Shape, FAULT_EXPERT_ID, SWIGLU_OAI_ALPHA};
use b12x_core::half::bf16;
use b12x_quant::block::{
    dequantize_mx, dequantize_nvfp4, quantize_mx, quantize_nvfp4, FormatError, Mx, MxOptions, Nvfp4,
};
use b12x_quant::codec::Element;

/// One expert's FP4 matrix `[rows, K]` (row-major codes and scales, b12x-quant's structs).
#[derive(Clone, Debug, PartialEq)]
pub enum ExpertMatrix {
    Nvfp4(Nvfp4),
    /// E2M1 elements (an [`Mx`] with `element == E2M1`).
    Mxfp4(Mx),
}

impl ExpertMatrix {
    /// Quantizes `w [rows, K]` to `format` (NVFP4: encode scale `enc`, or b12x-quant's from the
    /// matrix's amax when `None`; MXFP4: the CeilPow2 rule).
    pub fn quantize(format: Fp4, w: &[f32], rows: usize, k: usize, enc: Option<f32>) -> Result<Self, FormatError> {
        Ok(match format {
            Fp4::Nvfp4 => ExpertMatrix::Nvfp4(quantize_nvfp4(w, rows, k, enc)?),
            Fp4::Mxfp4 => ExpertMatrix::Mxfp4(quantize_mx(w, rows, k, Element::E2M1, MxOptions::default())?),
        })
    }
    /// `(rows, K)`.
    pub fn shape(&self) -> (usize, usize) {
        match self {
            ExpertMatrix::Nvfp4(q) => (q.rows, q.k),
            ExpertMatrix::Mxfp4(q) => (q.rows, q.k),
        }
    }
    /// The format.
    pub fn format(&self) -> Fp4 {
        match self {
            ExpertMatrix::Nvfp4(_) => Fp4::Nvfp4,
            ExpertMatrix::Mxfp4(_) => Fp4::Mxfp4,
        }
    }
    /// Its f32 values `[rows, K]`.
    pub fn dequantize(&self) -> Vec<f32> {
        match self {
            ExpertMatrix::Nvfp4(q) => dequantize_nvfp4(q),
            ExpertMatrix::Mxfp4(q) => dequantize_mx(q),
        }
    }
}

/// Every expert's FC1 `[fc1_rows, Hd]` and FC2 `[Hd, I]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Experts {
    pub fc1: Vec<ExpertMatrix>,
    pub fc2: Vec<ExpertMatrix>,
}

impl Experts {
    /// Quantizes f32 weights `fc1 [E, fc1_rows, Hd]` and `fc2 [E, Hd, I]` to the shape's
    /// weight format (NVFP4: each matrix's own encode scale).
    pub fn quantize(shape: &Shape, fc1: &[f32], fc2: &[f32]) -> Result<Experts, FormatError> {
        let (r1, hd, i) = (shape.fc1_rows(), shape.hidden, shape.inter);
        let f = shape.recipe.weights();
        let quant = |w: &[f32], rows, k| -> Result<Vec<ExpertMatrix>, FormatError> {
            if w.len() != shape.experts * rows * k {
                return Err(FormatError::Shape { len: w.len(), rows: shape.experts * rows, k });
            }
            w.chunks(rows * k).map(|m| ExpertMatrix::quantize(f, m, rows, k, None)).collect()
        };
        Ok(Experts { fc1: quant(fc1, r1, hd)?, fc2: quant(fc2, hd, i)? })
    }

    /// Whether the experts match `shape` (count, each matrix's shape and format); the first
    /// mismatch.
    pub fn check(&self, shape: &Shape) -> Result<(), String> {
        let f = shape.recipe.weights();
        for (what, ms, want) in
            [("fc1", &self.fc1, (shape.fc1_rows(), shape.hidden)), ("fc2", &self.fc2, (shape.hidden, shape.inter))]
        {
            if ms.len() != shape.experts {
                return Err(format!("{what}: {} experts, the shape has {}", ms.len(), shape.experts));
            }
            if let Some((e, m)) = ms.iter().enumerate().find(|(_, m)| m.shape() != want || m.format() != f) {
                return Err(format!(
                    "{what}[{e}]: {:?} {:?}, the shape wants {:?} {:?}",
                    m.format(),
                    m.shape(),
                    f,
                    want
                ));
            }
        }
        Ok(())
    }
}

/// One matrix kind (FC1 or FC2) of every expert concatenated over E, as the op's
/// [`WeightArgs`](super::WeightArgs) take it: codes `[E, rows, K/2]`, scales `[E, rows, K/B]`,
/// encode scales `[E]` (1 for MXFP4), and the bytes one expert's matrix occupies.
#[derive(Clone, Debug, PartialEq)]
pub struct Stacked {
    pub codes: Vec<u8>,
    pub scales: Vec<u8>,
    pub enc: Vec<f32>,
    /// Codes + scales (+ 4 for an NVFP4 encode scale) of one expert.
    pub expert_bytes: usize,
}

impl Experts {
    /// Random experts for tests and benchmarks, seeded: random E2M1 bytes, scales in a narrow
    /// range (MXFP4 UE8M0 codes 118..=124, 2^-9 .. 2^-3; NVFP4 UE4M3 codes 0x18..=0x38 and encode
    /// scales in [1, 4)), the matrices a checkpoint's quantizer could have written. Fast enough
    /// for the model shapes (gigabytes).
    pub fn random(shape: &Shape, seed: u64) -> Experts {
        let mut rng = SplitMix(seed);
        let f = shape.recipe.weights();
        let mut matrix = |rows: usize, k: usize| {
            let codes = rng.bytes(rows * k / 2, |b| b);
            match f {
                Fp4::Mxfp4 => {
                    let scales = rng.bytes(rows * k / 32, |b| 118 + b % 7);
                    ExpertMatrix::Mxfp4(Mx { element: Element::E2M1, rows, k, codes, scales })
                }
                Fp4::Nvfp4 => {
                    let scales = rng.bytes(rows * k / 16, |b| 0x18 + b % 0x21);
                    ExpertMatrix::Nvfp4(Nvfp4 { rows, k, codes, scales, enc: 1.0 + 3.0 * rng.unit() })
                }
            }
        };
        let fc1 = (0..shape.experts).map(|_| matrix(shape.fc1_rows(), shape.hidden)).collect();
        let fc2 = (0..shape.experts).map(|_| matrix(shape.hidden, shape.inter)).collect();
        Experts { fc1, fc2 }
    }

    /// FC1's and FC2's matrices stacked over E (the device layout of the simple path).
    pub fn stacked(&self) -> (Stacked, Stacked) {
        (stack(&self.fc1), stack(&self.fc2))
    }
}

fn stack(ms: &[ExpertMatrix]) -> Stacked {
    let mut st = Stacked { codes: Vec::new(), scales: Vec::new(), enc: Vec::new(), expert_bytes: 0 };
    for m in ms {
        let (codes, scales, enc) = match m {
            ExpertMatrix::Nvfp4(q) => (&q.codes, &q.scales, Some(q.enc)),
            ExpertMatrix::Mxfp4(q) => (&q.codes, &q.scales, None),
        };
        st.expert_bytes = codes.len() + scales.len() + enc.map_or(0, |_| 4);
        st.codes.extend(codes);
        st.scales.extend(scales);
        st.enc.push(enc.unwrap_or(1.0));
    }
    st
}

/// SplitMix64: seeded bytes, fast enough for gigabytes of random weights.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn bytes(&mut self, n: usize, map: impl Fn(u8) -> u8) -> Vec<u8> {
        (0..n.div_ceil(8)).flat_map(|_| self.next().to_le_bytes()).take(n).map(map).collect()
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// The NVFP4 recipe's calibrated per-expert activation encode scales: x's for FC1 and h's for
/// FC2 (`[E]` each, finite and > 0).
#[derive(Clone, Debug, PartialEq)]
pub struct ActScales {
    pub fc1: Vec<f32>,
    pub fc2: Vec<f32>,
}

impl ActScales {
    /// Seeded scales for tests and benchmarks: x's in [600, 1200), h's in [20, 100) — any
    /// positive values serve a comparison with the oracle; these keep |x| ≤ 2 and typical h away
    /// from NVFP4's saturation and underflow.
    pub fn random(experts: usize, seed: u64) -> ActScales {
        let mut rng = SplitMix(seed);
        let fc1 = (0..experts).map(|_| 600.0 + 600.0 * rng.unit()).collect();
        let fc2 = (0..experts).map(|_| 20.0 + 80.0 * rng.unit()).collect();
        ActScales { fc1, fc2 }
    }
}

/// The layer's output `y [T, Hd]` and the fault bits.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    pub y: Vec<bf16>,
    pub faults: u32,
}

/// `act(g, u)` in f32 (g, u: FC1's BF16 outputs as f32; u ignored by `Relu2`). Clamps are
/// comparisons (a NaN passes through); `exp` is f64 rounded once to f32.
pub fn activate(act: Activation, g: f32, u: f32) -> f32 {
    match act {
        Activation::Silu { limit } => b12x_core::testing::silu_mul(g, u, limit),
        Activation::SwigluOai { limit: l } => {
            let g = if g > l { l } else { g };
            let u = if u > l {
                l
            } else if u < -l {
                -l
            } else {
                u
            };
            let e = (-f64::from(SWIGLU_OAI_ALPHA * g)).exp() as f32;
            (u + 1.0) * (g * (1.0 / (1.0 + e)))
        }
        Activation::Relu2 => {
            let r = if g > 0.0 { g } else { 0.0 };
            r * r
        }
    }
}

/// What the recipe's GEMM sees of the BF16 row `v`: v itself (W4A16), or b12x-quant's
/// quantize-then-dequantize (MXFP8 per 32; NVFP4 per 16 with encode scale `enc`).
pub fn act_operand(recipe: Recipe, v: &[bf16], enc: Option<f32>) -> Result<Vec<f32>, FormatError> {
    let f: Vec<f32> = v.iter().map(|x| x.to_f32()).collect();
    Ok(match recipe {
        Recipe::W4a16(_) => f,
        Recipe::W4a8Mx => dequantize_mx(&quantize_mx(&f, 1, f.len(), Element::E4M3, MxOptions::default())?),
        Recipe::Nvfp4 => {
            let enc = enc.ok_or(FormatError::Unsupported { what: "the NVFP4 recipe without activation scales" })?;
            dequantize_nvfp4(&quantize_nvfp4(&f, 1, f.len(), Some(enc))?)
        }
    })
}

/// `bf16(f32(Σ_k a_k · w_k))`, the sum in f64 in k order (each product exact).
fn dot_bf16(a: &[f32], w: &[f32]) -> bf16 {
    let s: f64 = a.iter().zip(w).map(|(&a, &w)| f64::from(a) * f64::from(w)).sum();
    bf16::from_f32(s as f32)
}

/// One expert on one token: `y_e [Hd]` (BF16) for x `[Hd]`, routing weight `weight`,
/// dequantized `w1 [fc1_rows, Hd]` and `w2 [Hd, I]`, and (NVFP4 recipe) the expert's two
/// activation encode scales.
pub fn expert(
    shape: &Shape,
    w1: &[f32],
    w2: &[f32],
    x: &[bf16],
    weight: f32,
    enc: Option<(f32, f32)>,
) -> Result<Vec<bf16>, FormatError> {
    let (hd, i) = (shape.hidden, shape.inter);
    let xh = act_operand(shape.recipe, x, enc.map(|e| e.0))?;
    let row = |r: usize| dot_bf16(&xh, &w1[r * hd..][..hd]).to_f32();
    let h: Vec<bf16> = (0..i)
        .map(|j| {
            let (g, u) = if shape.activation.gated() { (row(j), row(i + j)) } else { (row(j), 0.0) };
            bf16::from_f32(weight * activate(shape.activation, g, u))
        })
        .collect();
    let hh = act_operand(shape.recipe, &h, enc.map(|e| e.1))?;
    Ok((0..hd).map(|o| dot_bf16(&hh, &w2[o * i..][..i])).collect())
}

/// The layer on `x [T, Hd]` routed by `ids [T, k]` / `weights [T, k]`: per token, each valid
/// slot's expert output (BF16) summed in f32 in slot order, rounded once. Slots with an id
/// outside `[0, E)` are skipped and set [`FAULT_EXPERT_ID`]. Dequantizes each touched expert
/// once.
///
/// # Panics
/// If the slices or experts do not match `shape` (a test oracle, not a user entry point).
pub fn fused_moe(
    shape: &Shape,
    experts: &Experts,
    x: &[bf16],
    ids: &[i32],
    weights: &[f32],
    act_scales: Option<&ActScales>,
) -> Result<Output, FormatError> {
    let (hd, k, e_count) = (shape.hidden, shape.top_k, shape.experts);
    if let Err(e) = experts.check(shape) {
        panic!("experts do not match the shape: {e}");
    }
    assert!(x.len() % hd == 0 && ids.len() == x.len() / hd * k && weights.len() == ids.len());
    let t = x.len() / hd;
    let mut faults = 0;
    // Each slot's expert output, expert by expert (each expert's weights dequantized once).
    let mut slot_out: Vec<Option<Vec<bf16>>> = vec![None; t * k];
    for e in 0..e_count {
        let slots: Vec<usize> = (0..t * k).filter(|&s| ids[s] == e as i32).collect();
        if slots.is_empty() {
            continue;
        }
        let (w1, w2) = (experts.fc1[e].dequantize(), experts.fc2[e].dequantize());
        let enc = act_scales.map(|a| (a.fc1[e], a.fc2[e]));
        for s in slots {
            slot_out[s] = Some(expert(shape, &w1, &w2, &x[(s / k) * hd..][..hd], weights[s], enc)?);
        }
    }
    let mut y = Vec::with_capacity(t * hd);
    for slots in slot_out.chunks(k) {
        let mut acc = vec![0.0f32; hd];
        for out in slots {
            match out {
                Some(v) => acc.iter_mut().zip(v).for_each(|(a, b)| *a += b.to_f32()),
                None => faults |= FAULT_EXPERT_ID,
            }
        }
        y.extend(acc.iter().map(|&a| bf16::from_f32(a)));
    }
    Ok(Output { y, faults })
}
