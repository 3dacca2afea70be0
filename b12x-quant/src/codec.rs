//! Element codes: f32 ⇄ E4M3, E5M2, E2M1, UE4M3, UE8M0, bit-exact.
//!
//! | code | layout | bias | max finite (code) | specials | f32 → code |
//! |---|---|---|---|---|---|
//! | E4M3 (`e4m3fn`) | s.eeee.mmm | 7 | 448 (0x7E) | NaN = 0x7F / 0xFF, no Inf | RNE, saturating: ±Inf and \|x\| > 448 → ±448; NaN → **0x7F** |
//! | E5M2 | s.eeeee.mm | 15 | 57344 (0x7B) | ±Inf = 0x7C / 0xFC, NaN = 0x7D–0x7F (and signed) | RNE, saturating: ±Inf → ±57344; NaN → **0x7F** |
//! | E2M1 (FP4) | s.ee.m | 1 | 6 (0x7) | none | RNE on {0, .5, 1, 1.5, 2, 3, 4, 6}, saturating; NaN → **0x7 (+6)** |
//! | UE4M3 | E4M3 without sign | 7 | 448 (0x7E) | NaN = 0x7F | E4M3 of \|x\| (scales are non-negative) |
//! | UE8M0 | eeeeeeee | 127 | 2^127 (0xFE) | 0xFF = NaN; no zero: 0x00 = 2^-127 | [`ceil_pow2`] |
//!
//! - RNE = round to nearest, ties to the even **code**; subnormals are honoured (E4M3 from
//!   2^-9, E5M2 from 2^-16, E2M1 0.5). Magnitudes below half the smallest subnormal become a
//!   zero that keeps the input's sign (−tiny → 0x80 / 0x8).
//! - The NaN codes in **bold** are what CUDA's host conversions of the pinned toolkit return
//!   (`__nv_cvt_float_to_fp8(x, __NV_SATFINITE, …)` canonicalizes every NaN to +NaN first;
//!   `__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)` maps NaN to +6, E2M1 having no
//!   NaN). `tests/cuda_host_reference.rs` compiles those headers for the CPU and checks every
//!   encoder here against them on a dense sweep.
//! - E2M1 codes are packed two per byte, element `2i` in the **low** nibble (CUDA's
//!   `__nv_fp4x2_e2m1` order): [`pack_e2m1`], [`unpack_e2m1`].

/// An element format with a sign bit (E4M3, E5M2, E2M1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Element {
    /// 1 sign, 4 exponent, 3 mantissa bits; bias 7; no infinities (`e4m3fn`).
    E4M3,
    /// 1 sign, 5 exponent, 2 mantissa bits; bias 15; IEEE-style Inf and NaN.
    E5M2,
    /// 1 sign, 2 exponent, 1 mantissa bit; bias 1; no Inf or NaN (FP4, in the low 4 bits).
    E2M1,
}

impl Element {
    /// Every format, for tests and tables.
    pub const ALL: [Element; 3] = [Element::E4M3, Element::E5M2, Element::E2M1];

    /// Width of a code in bits.
    pub const fn bits(self) -> u32 {
        match self {
            Element::E4M3 | Element::E5M2 => 8,
            Element::E2M1 => 4,
        }
    }
    const fn mantissa_bits(self) -> u32 {
        match self {
            Element::E4M3 => 3,
            Element::E5M2 => 2,
            Element::E2M1 => 1,
        }
    }
    const fn bias(self) -> i32 {
        match self {
            Element::E4M3 => 7,
            Element::E5M2 => 15,
            Element::E2M1 => 1,
        }
    }
    /// The sign bit of a code.
    pub const fn sign_bit(self) -> u8 {
        1 << (self.bits() - 1)
    }
    /// The code of the largest finite magnitude (positive).
    pub const fn max_code(self) -> u8 {
        match self {
            Element::E4M3 => 0x7E,
            Element::E5M2 => 0x7B,
            Element::E2M1 => 0x7,
        }
    }
    /// The largest finite value: 448, 57344, 6.
    pub fn max_finite(self) -> f32 {
        self.decode(self.max_code())
    }
    /// What a NaN input encodes to (see the module table).
    pub const fn nan_input_code(self) -> u8 {
        match self {
            Element::E4M3 | Element::E5M2 => 0x7F,
            Element::E2M1 => 0x7,
        }
    }

    /// The exact value of `code` (bits above [`Element::bits`] are ignored). Signed zeros,
    /// subnormals, E5M2 infinities and NaNs decode to the corresponding f32.
    pub fn decode(self, code: u8) -> f32 {
        let code = code & ((1u16 << self.bits()) - 1) as u8;
        let sign = if code & self.sign_bit() != 0 { -1.0f32 } else { 1.0f32 };
        let mag = code & (self.sign_bit() - 1);
        let m = self.mantissa_bits();
        let exp = i32::from(mag >> m);
        let man = u32::from(mag) & ((1 << m) - 1);
        match self {
            Element::E4M3 if mag == 0x7F => return f32::NAN,
            Element::E5M2 if exp == 0x1F => return if man == 0 { sign * f32::INFINITY } else { f32::NAN },
            _ => {}
        }
        // value = significand · 2^(e − bias − m); every factor is exact in f32.
        let (significand, e) = if exp == 0 { (man, 1) } else { ((1 << m) | man, exp) };
        sign * significand as f32 * pow2(e - self.bias() - m as i32)
    }

    /// f32 → code: round to nearest, ties to the even code, saturating to ±max finite (±Inf
    /// included); NaN → [`Element::nan_input_code`].
    pub fn encode(self, x: f32) -> u8 {
        if x.is_nan() {
            return self.nan_input_code();
        }
        let sign = if x.is_sign_negative() { self.sign_bit() } else { 0 };
        let a = f64::from(x.abs());
        let max = self.max_code();
        if a >= f64::from(self.decode(max)) {
            return sign | max;
        }
        // Bisect for adjacent codes lo, lo + 1 with value(lo) ≤ a < value(lo + 1) (finite
        // non-negative codes increase with their value; value(0) = 0 ≤ a < value(max)).
        let (mut lo, mut hi) = (0u8, max);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if f64::from(self.decode(mid)) <= a {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        // The midpoint of two adjacent codes is exact in f64; a tie goes to the even code.
        let mid = (f64::from(self.decode(lo)) + f64::from(self.decode(hi))) / 2.0;
        let code = if a < mid || (a == mid && lo % 2 == 0) { lo } else { hi };
        sign | code
    }
}

/// 2^e as f32 for e in the f32 range (−149 ..= 127), exactly.
fn pow2(e: i32) -> f32 {
    if e >= -126 {
        f32::from_bits(((e + 127) as u32) << 23)
    } else {
        f32::from_bits(1u32 << (e + 149))
    }
}

/// E4M3 of `x` (see [`Element::encode`]).
pub fn e4m3_encode(x: f32) -> u8 {
    Element::E4M3.encode(x)
}
/// The value of an E4M3 code.
pub fn e4m3_decode(code: u8) -> f32 {
    Element::E4M3.decode(code)
}
/// E5M2 of `x` (see [`Element::encode`]).
pub fn e5m2_encode(x: f32) -> u8 {
    Element::E5M2.encode(x)
}
/// The value of an E5M2 code.
pub fn e5m2_decode(code: u8) -> f32 {
    Element::E5M2.decode(code)
}
/// E2M1 of `x` in the low 4 bits (see [`Element::encode`]).
pub fn e2m1_encode(x: f32) -> u8 {
    Element::E2M1.encode(x)
}
/// The value of the E2M1 code in the low 4 bits of `code`.
pub fn e2m1_decode(code: u8) -> f32 {
    Element::E2M1.decode(code)
}

/// UE4M3 (the NVFP4 block scale): E4M3 of `|x|`, sign bit clear; NaN → 0x7F.
pub fn ue4m3_encode(x: f32) -> u8 {
    e4m3_encode(x.abs())
}
/// The value of a UE4M3 code (bit 7 is ignored); 0x7F is NaN.
pub fn ue4m3_decode(code: u8) -> f32 {
    e4m3_decode(code & 0x7F)
}

/// The value of a UE8M0 code: 2^(code − 127); 0xFF is NaN (there is no zero).
pub fn ue8m0_decode(code: u8) -> f32 {
    if code == 0xFF {
        f32::NAN
    } else {
        pow2(i32::from(code) - 127)
    }
}

/// The power-of-two scale rule of the MX formats and DeepSeek's UE8M0 scales, on the f32 bits
/// of a finite `p > 0`: a non-zero mantissa bumps the exponent field by one and is cleared.
/// Returns `(2^e as f32, UE8M0 code)`, the code being the resulting exponent field. For normal
/// `p` that is the smallest power of two ≥ p; a subnormal `p` gives 2^-126 (code 1).
///
/// `p` must be finite and > 0 (callers handle zero and non-finite blocks first); otherwise the
/// result is `(NaN, 0xFF)`.
pub fn ceil_pow2(p: f32) -> (f32, u8) {
    if !(p.is_finite() && p > 0.0) {
        return (f32::NAN, 0xFF);
    }
    let bits = p.to_bits();
    let exp = (bits >> 23) & 0xFF;
    let exp = if bits & 0x7F_FFFF != 0 { exp + 1 } else { exp };
    if exp >= 0xFF {
        return (f32::NAN, 0xFF);
    }
    (f32::from_bits(exp << 23), exp as u8)
}

/// Packs E2M1 codes (low 4 bits of each) two per byte, element `2i` in the low nibble; an odd
/// count leaves the last high nibble 0.
pub fn pack_e2m1(codes: &[u8]) -> Vec<u8> {
    codes.chunks(2).map(|p| (p[0] & 0xF) | (p.get(1).map_or(0, |c| c & 0xF) << 4)).collect()
}

/// The `n` E2M1 codes of `packed` (inverse of [`pack_e2m1`]).
///
/// # Panics
/// If `packed` holds fewer than `n` codes.
pub fn unpack_e2m1(packed: &[u8], n: usize) -> Vec<u8> {
    assert!(packed.len() * 2 >= n, "{} packed bytes hold fewer than {n} codes", packed.len());
    (0..n).map(|i| (packed[i / 2] >> (4 * (i % 2))) & 0xF).collect()
}
