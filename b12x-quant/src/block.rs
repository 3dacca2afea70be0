//! Block formats: MXFP8, MXFP4, NVFP4, block FP8 (DeepSeek) and per-tensor FP8, quantize and
//! dequantize on the CPU — the rules of `spec/formats.md`, each step one IEEE f32 operation,
//! so a GPU quantizer doing the same operations matches bit for bit.
//!
//! Every tensor is row-major `[rows, K]`; blocks run along K. Storage (all row-major):
//!
//! | format | element codes | scales | extra |
//! |---|---|---|---|
//! | MXFP8 | E4M3, 1 byte each, `[rows, K]` | UE8M0 `[rows, K/32]` | — |
//! | MXFP4 | E2M1 packed pairs (element 2i low nibble), `[rows, K/2]` bytes | UE8M0 `[rows, K/32]` | — |
//! | NVFP4 | E2M1 packed pairs, `[rows, K/2]` bytes | UE4M3 `[rows, K/16]` | f32 encode scale `enc` |
//! | block FP8, 1×G (activations) | E4M3 `[rows, K]` | f32 or UE8M0 `[rows, K/G]` | — |
//! | block FP8, G×G tiles (weights) | E4M3 `[rows, K]` | f32 or UE8M0 `[⌈rows/G⌉, ⌈K/G⌉]` (edge tiles partial) | — |
//! | per-tensor FP8 | E4M3 `[rows, K]` | one f32 | — |
//!
//! Scales convert to the swizzled 128×4 layout with [`crate::layout`].
//!
//! Special values: a block holding NaN or ±Inf gets a NaN scale (UE8M0 0xFF, UE4M3 0x7F, f32
//! NaN) and zero element codes, so it dequantizes to NaN; other blocks are unaffected. An
//! all-zero block gets scale code 0 and zero codes (MX, NVFP4) unless an amax floor applies.

use crate::codec::{ceil_pow2, e2m1_decode, e4m3_decode, pack_e2m1, ue4m3_decode, ue4m3_encode, ue8m0_decode, Element};

/// Why a tensor cannot be quantized as asked.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FormatError {
    #[error("{what}: K = {k} is not a multiple of the block size {block}")]
    KNotMultiple { what: &'static str, k: usize, block: usize },
    #[error("input holds {len} values, not rows × K = {rows} × {k}")]
    Shape { len: usize, rows: usize, k: usize },
    #[error("{what} must be finite and > 0, got {value}")]
    BadScale { what: &'static str, value: f32 },
    #[error("{what} is not supported")]
    Unsupported { what: &'static str },
    #[error("block FP8 tile {rows}×{cols} not supported (1×128, 1×64, 1×32 activations; 128×128, 32×32 weights)")]
    Tile { rows: usize, cols: usize },
}

/// How an MX block's power-of-two scale is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ScaleRule {
    /// `s = ceil_pow2(amax · (1/max_finite))`: never saturates (b12x, DeepSeek). The default.
    #[default]
    CeilPow2,
    /// OCP MX v1.0: `s = 2^(⌊log2 amax⌋ − emax)` (emax 8 for E4M3, 2 for E2M1); elements may
    /// saturate. The UE8M0 code is clamped to 0..=254.
    OcpFloor,
}

/// Options of the MX quantizers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MxOptions {
    pub rule: ScaleRule,
    /// `amax = max(amax, floor)` before the scale rule (DeepSeek's FP4 simulation uses 6·2^-126).
    pub amax_floor: Option<f32>,
}

/// An MX-quantized `[rows, K]` tensor (MXFP8 or MXFP4), row-major storage (module table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mx {
    /// [`Element::E4M3`] (MXFP8) or [`Element::E2M1`] (MXFP4).
    pub element: Element,
    pub rows: usize,
    pub k: usize,
    /// E4M3: `[rows, K]`; E2M1: packed pairs `[rows, K/2]`.
    pub codes: Vec<u8>,
    /// UE8M0 `[rows, K/32]`.
    pub scales: Vec<u8>,
}

/// Elements per MX block.
pub const MX_BLOCK: usize = 32;
/// Elements per NVFP4 block.
pub const NVFP4_BLOCK: usize = 16;

fn check_shape(x: &[f32], rows: usize, k: usize) -> Result<(), FormatError> {
    if x.len() != rows * k {
        return Err(FormatError::Shape { len: x.len(), rows, k });
    }
    Ok(())
}

fn check_block(what: &'static str, k: usize, block: usize) -> Result<(), FormatError> {
    if k % block != 0 {
        return Err(FormatError::KNotMultiple { what, k, block });
    }
    Ok(())
}

/// max |x| of a block, or `None` when it holds NaN or ±Inf.
fn finite_amax(block: impl IntoIterator<Item = f32>) -> Option<f32> {
    let mut amax = 0.0f32;
    for v in block {
        if !v.is_finite() {
            return None;
        }
        amax = amax.max(v.abs());
    }
    Some(amax)
}

/// 2^e as f32, e in −149..=127.
fn pow2(e: i32) -> f32 {
    if e >= -126 {
        f32::from_bits(((e + 127) as u32) << 23)
    } else {
        f32::from_bits(1u32 << (e + 149))
    }
}

/// ⌊log2 a⌋ of a finite a > 0, from its bits (subnormals included).
fn floor_log2(a: f32) -> i32 {
    let bits = a.to_bits();
    let exp = (bits >> 23) & 0xFF;
    if exp != 0 {
        exp as i32 - 127
    } else {
        (31 - (bits & 0x7F_FFFF).leading_zeros()) as i32 - 149
    }
}

/// The UE8M0 scale code of one MX block (0xFF for a block with NaN/Inf, 0 for an all-zero one).
pub fn mx_block_scale(block: &[f32], element: Element, opts: MxOptions) -> u8 {
    let Some(mut amax) = finite_amax(block.iter().copied()) else { return 0xFF };
    if let Some(f) = opts.amax_floor {
        amax = amax.max(f);
    }
    if amax == 0.0 {
        return 0;
    }
    match opts.rule {
        ScaleRule::CeilPow2 => {
            let inv = match element {
                Element::E4M3 => 1.0f32 / 448.0,
                Element::E2M1 => 1.0f32 / 6.0,
                Element::E5M2 => 1.0f32 / 57344.0, // not an MX element; kept total
            };
            let p = amax * inv;
            // p underflows to 0 only for amax < ~2^-140: the bit rule (exponent field, no
            // mantissa to bump) gives code 0 there.
            if p == 0.0 {
                0
            } else {
                ceil_pow2(p).1
            }
        }
        ScaleRule::OcpFloor => {
            let emax = match element {
                Element::E4M3 => 8,
                Element::E2M1 => 2,
                Element::E5M2 => 15,
            };
            (floor_log2(amax) - emax + 127).clamp(0, 254) as u8
        }
    }
}

/// Quantizes `x [rows, K]` to MXFP8 (`element = E4M3`) or MXFP4 (`E2M1`): per block of 32,
/// scale code from [`mx_block_scale`], then `q = encode(x · 2^(127 − code))` (an exact
/// power-of-two multiply). K must be a multiple of 32.
pub fn quantize_mx(x: &[f32], rows: usize, k: usize, element: Element, opts: MxOptions) -> Result<Mx, FormatError> {
    check_shape(x, rows, k)?;
    check_block("MX", k, MX_BLOCK)?;
    if element == Element::E5M2 {
        return Err(FormatError::Unsupported { what: "MX with E5M2 elements (MXFP8 is E4M3, MXFP4 is E2M1)" });
    }
    let mut codes = Vec::with_capacity(rows * k);
    let mut scales = Vec::with_capacity(rows * k / MX_BLOCK);
    for block in x.chunks(MX_BLOCK) {
        let code = mx_block_scale(block, element, opts);
        scales.push(code);
        if code == 0xFF || (code == 0 && finite_amax(block.iter().copied()) == Some(0.0) && opts.amax_floor.is_none()) {
            codes.extend(std::iter::repeat_n(0u8, block.len()));
            continue;
        }
        let m = pow2(127 - i32::from(code));
        codes.extend(block.iter().map(|&v| element.encode(v * m)));
    }
    if element == Element::E2M1 {
        codes = pack_e2m1(&codes);
    }
    Ok(Mx { element, rows, k, codes, scales })
}

/// `x̂ = decode(q) · 2^(code − 127)`; a NaN scale gives NaN for the whole block.
pub fn dequantize_mx(q: &Mx) -> Vec<f32> {
    let n = q.rows * q.k;
    (0..n)
        .map(|i| {
            let s = ue8m0_decode(q.scales[i / MX_BLOCK]);
            let v = match q.element {
                Element::E2M1 => e2m1_decode(q.codes[i / 2] >> (4 * (i % 2))),
                other => other.decode(q.codes[i]),
            };
            v * s
        })
        .collect()
}

/// An NVFP4-quantized `[rows, K]` tensor (module table).
#[derive(Clone, Debug, PartialEq)]
pub struct Nvfp4 {
    pub rows: usize,
    pub k: usize,
    /// E2M1 packed pairs `[rows, K/2]`.
    pub codes: Vec<u8>,
    /// UE4M3 `[rows, K/16]`.
    pub scales: Vec<u8>,
    /// The f32 encode scale (b12x's `global_scale`): `x̂ = e2m1 · f32(s) / enc`.
    pub enc: f32,
}

/// The NVFP4 encode scale of an activation tensor: `A` = max |x| over its finite elements,
/// `enc = min(2688 / A, 2^126)` (2688 = 6·448) if A > 0, else 1.
pub fn nvfp4_global_enc(x: &[f32]) -> f32 {
    let a = x.iter().filter(|v| v.is_finite()).fold(0.0f32, |m, v| m.max(v.abs()));
    if a > 0.0 {
        (2688.0f32 / a).min(pow2(126))
    } else {
        1.0
    }
}

/// Quantizes `x [rows, K]` to NVFP4 with encode scale `enc` (computed with
/// [`nvfp4_global_enc`] when `None`). Per block of 16, each step one f32 operation:
/// `s = ue4m3(enc · (amax / 6))`; if `f32(s) == 0` the codes are 0, else
/// `r = 1 / (f32(s) · (1 / enc))` and `q = e2m1(x · r)`. K must be a multiple of 16.
pub fn quantize_nvfp4(x: &[f32], rows: usize, k: usize, enc: Option<f32>) -> Result<Nvfp4, FormatError> {
    check_shape(x, rows, k)?;
    check_block("NVFP4", k, NVFP4_BLOCK)?;
    let enc = enc.unwrap_or_else(|| nvfp4_global_enc(x));
    if !(enc.is_finite() && enc > 0.0) {
        return Err(FormatError::BadScale { what: "NVFP4 encode scale", value: enc });
    }
    let mut codes = Vec::with_capacity(rows * k);
    let mut scales = Vec::with_capacity(rows * k / NVFP4_BLOCK);
    for block in x.chunks(NVFP4_BLOCK) {
        let Some(amax) = finite_amax(block.iter().copied()) else {
            scales.push(0x7F);
            codes.extend(std::iter::repeat_n(0u8, block.len()));
            continue;
        };
        let s = ue4m3_encode(enc * (amax / 6.0));
        scales.push(s);
        let fs = ue4m3_decode(s);
        if fs == 0.0 {
            codes.extend(std::iter::repeat_n(0u8, block.len()));
            continue;
        }
        let r = 1.0f32 / (fs * (1.0f32 / enc));
        codes.extend(block.iter().map(|&v| Element::E2M1.encode(v * r)));
    }
    Ok(Nvfp4 { rows, k, codes: pack_e2m1(&codes), scales, enc })
}

/// `x̂ = (e2m1 · f32(s)) / enc`.
pub fn dequantize_nvfp4(q: &Nvfp4) -> Vec<f32> {
    (0..q.rows * q.k)
        .map(|i| e2m1_decode(q.codes[i / 2] >> (4 * (i % 2))) * ue4m3_decode(q.scales[i / NVFP4_BLOCK]) / q.enc)
        .collect()
}

/// How block-FP8 scales are stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fp8ScaleKind {
    /// `s = amax · (1/448)` as f32.
    #[default]
    F32,
    /// `s = ceil_pow2(amax · (1/448))` as a UE8M0 code.
    Ue8m0,
}

/// Block-FP8 scales: f32 values or UE8M0 codes, row-major over the groups.
#[derive(Clone, Debug, PartialEq)]
pub enum Fp8Scales {
    F32(Vec<f32>),
    Ue8m0(Vec<u8>),
}

impl Fp8Scales {
    /// The scale of group `i` as f32 (NaN for a group with NaN/Inf).
    pub fn value(&self, i: usize) -> f32 {
        match self {
            Fp8Scales::F32(v) => v[i],
            Fp8Scales::Ue8m0(c) => ue8m0_decode(c[i]),
        }
    }
}

/// A block-FP8 (DeepSeek-style) `[rows, K]` tensor (module table).
#[derive(Clone, Debug, PartialEq)]
pub struct BlockFp8 {
    pub rows: usize,
    pub k: usize,
    /// Group shape `(rows, cols)`: `(1, G)` activations, `(G, G)` weight tiles.
    pub tile: (usize, usize),
    /// E4M3 `[rows, K]`.
    pub codes: Vec<u8>,
    /// `[⌈rows/tile.0⌉, ⌈K/tile.1⌉]`.
    pub scales: Fp8Scales,
}

/// Quantizes `x [rows, K]` to block FP8 with groups of `tile` = (1, G) for G ∈ {128, 64, 32}
/// (activations; K must be a multiple of G) or (G, G) for G ∈ {128, 32} (weights; edge tiles
/// partial). Per group: `amax = max(max |x|, 1e-4)`, `s = amax · (1/448)` (f32) or
/// `ceil_pow2` of it (UE8M0), `q = e4m3(x / s)` (IEEE division).
pub fn quantize_block_fp8(
    x: &[f32],
    rows: usize,
    k: usize,
    tile: (usize, usize),
    kind: Fp8ScaleKind,
) -> Result<BlockFp8, FormatError> {
    check_shape(x, rows, k)?;
    match tile {
        (1, 128 | 64 | 32) => check_block("block FP8 activations", k, tile.1)?,
        (128, 128) | (32, 32) => {}
        (r, c) => return Err(FormatError::Tile { rows: r, cols: c }),
    }
    let (tr, tc) = tile;
    let (gr, gc) = (rows.div_ceil(tr), k.div_ceil(tc));
    let mut codes = vec![0u8; rows * k];
    let mut f32_scales = Vec::with_capacity(gr * gc);
    let mut ue8_scales = Vec::with_capacity(gr * gc);
    for bi in 0..gr {
        for bj in 0..gc {
            let (r0, r1) = (bi * tr, ((bi + 1) * tr).min(rows));
            let (c0, c1) = (bj * tc, ((bj + 1) * tc).min(k));
            let group = (r0..r1).flat_map(|r| x[r * k + c0..r * k + c1].iter().copied());
            let Some(amax) = finite_amax(group) else {
                f32_scales.push(f32::NAN);
                ue8_scales.push(0xFF);
                continue; // codes stay 0
            };
            let p = amax.max(1e-4) * (1.0f32 / 448.0);
            let s = match kind {
                Fp8ScaleKind::F32 => {
                    f32_scales.push(p);
                    p
                }
                Fp8ScaleKind::Ue8m0 => {
                    let (s, code) = ceil_pow2(p);
                    ue8_scales.push(code);
                    s
                }
            };
            for r in r0..r1 {
                for c in c0..c1 {
                    codes[r * k + c] = Element::E4M3.encode(x[r * k + c] / s);
                }
            }
        }
    }
    let scales = match kind {
        Fp8ScaleKind::F32 => Fp8Scales::F32(f32_scales),
        Fp8ScaleKind::Ue8m0 => Fp8Scales::Ue8m0(ue8_scales),
    };
    Ok(BlockFp8 { rows, k, tile, codes, scales })
}

/// `x̂ = e4m3 · s` of the element's group.
pub fn dequantize_block_fp8(q: &BlockFp8) -> Vec<f32> {
    let gc = q.k.div_ceil(q.tile.1);
    (0..q.rows * q.k)
        .map(|i| {
            let (r, c) = (i / q.k, i % q.k);
            e4m3_decode(q.codes[i]) * q.scales.value((r / q.tile.0) * gc + c / q.tile.1)
        })
        .collect()
}

/// A per-tensor FP8 tensor: E4M3 codes and one f32 scale.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorFp8 {
    pub codes: Vec<u8>,
    pub scale: f32,
}

/// Per-tensor FP8: `s = max(amax, 1e-12) / 448` over the finite elements unless given;
/// `q = e4m3(x / s)` (NaN → 0x7F, ±Inf saturates to ±448).
pub fn quantize_tensor_fp8(x: &[f32], scale: Option<f32>) -> Result<TensorFp8, FormatError> {
    let s = match scale {
        Some(s) if s.is_finite() && s > 0.0 => s,
        Some(s) => return Err(FormatError::BadScale { what: "per-tensor FP8 scale", value: s }),
        None => x.iter().filter(|v| v.is_finite()).fold(0.0f32, |m, v| m.max(v.abs())).max(1e-12) / 448.0,
    };
    Ok(TensorFp8 { codes: x.iter().map(|&v| Element::E4M3.encode(v / s)).collect(), scale: s })
}

/// `x̂ = e4m3 · s`.
pub fn dequantize_tensor_fp8(q: &TensorFp8) -> Vec<f32> {
    q.codes.iter().map(|&c| e4m3_decode(c) * q.scale).collect()
}
