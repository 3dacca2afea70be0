//! The proof behind the GPU's two-instruction block FP8 division (`div_by_block_scale` in
//! `b12x-core/include/b12x/quant.cuh`): for the f32 group scales `s = RN(max(amax, 1e-4) ·
//! RN(1/448)) < 2^64` and every bf16 (or f16) `x` with `|x| ≤ amax`,
//!
//! ```text
//! r = RD(1 / s),  rlo = RN(RN(1 - r·s) · r),  q = RN(x·r + RN(x·rlo))  ⇒  e4m3(q) == e4m3(RN(x / s))
//! ```
//!
//! checked pair by pair, in the same f32 operations the kernel executes (`mul_add` is the fused
//! multiply-add). `q` itself is not always the IEEE quotient; only its E4M3 code is claimed.
//! Pairs with `0 < |x| < amax · 2^-22` are left out of the sweeps: their quotient is below
//! 448·2^-22 < 2^-13, and q is within 2^-40 of it, so both round to a zero of x's sign
//! (`tiny_quotients_are_signed_zeros` checks a sample).

use b12x_core::half::{bf16, f16};
use b12x_quant::codec::Element;

const INV_448: f32 = 1.0 / 448.0;

fn scale(amax: f32) -> f32 {
    amax.max(1e-4) * INV_448
}

/// (r, rlo) as the kernel forms them.
fn reciprocal_pair(s: f32) -> (f32, f32) {
    let mut r = 1.0 / s;
    if r.mul_add(s, -1.0) > 0.0 {
        r = f32::from_bits(r.to_bits() - 1); // round down: r is positive and normal here
    }
    let rlo = (-r).mul_add(s, 1.0) * r;
    (r, rlo)
}

fn two_op(x: f32, r: f32, rlo: f32) -> f32 {
    x.mul_add(r, x * rlo)
}

fn e4m3(x: f32) -> u8 {
    Element::E4M3.encode(x)
}

/// Every (x, amax) pair of one 16-bit format: `decode` maps a bit pattern to f32, `limit` is the
/// first non-finite pattern. Returns (pairs checked, mismatches, first mismatch).
fn sweep(decode: impl Fn(u16) -> f32, limit: u16, amax_bits: impl Iterator<Item = u16>) -> (u64, u64, Option<String>) {
    let (mut pairs, mut bad, mut first) = (0u64, 0u64, None);
    for ab in amax_bits {
        let amax = decode(ab);
        let s = scale(amax);
        if s >= 2f32.powi(64) {
            continue; // the kernel takes the three-instruction division there
        }
        let (r, rlo) = reciprocal_pair(s);
        assert!(rlo >= 0.0, "rlo < 0 for s = {s:e}");
        for xb in 0..limit {
            let x = decode(xb);
            if x > amax {
                break;
            }
            if x != 0.0 && x < amax * 2f32.powi(-22) {
                continue;
            }
            for xs in [x, -x] {
                pairs += 1;
                let (want, got) = (e4m3(xs / s), e4m3(two_op(xs, r, rlo)));
                if want != got {
                    bad += 1;
                    first.get_or_insert_with(|| {
                        format!("x = {xs:e}, amax = {amax:e}: want {want:#04x}, got {got:#04x}")
                    });
                }
            }
        }
    }
    (pairs, bad, first)
}

/// Asserts a sweep covered at least `min_pairs` pairs and found no mismatch.
fn assert_clean((pairs, bad, first): (u64, u64, Option<String>), min_pairs: u64) {
    assert!(pairs > min_pairs, "swept only {pairs} pairs");
    assert_eq!(bad, 0, "{bad} of {pairs} pairs differ, first: {first:?}");
}

fn bf16_of(b: u16) -> f32 {
    bf16::from_bits(b).to_f32()
}
fn f16_of(b: u16) -> f32 {
    f16::from_bits(b).to_f32()
}

/// Every positive finite bf16 amax below the 2^64 cut (the floor 1e-4 included) against every
/// bf16 x: ~6·10^7 pairs, so run it optimized with `f16_every_pair` (below).
#[test]
#[ignore = "6e7 pairs: run with --release -- --ignored"]
fn bf16_every_pair() {
    assert_clean(sweep(bf16_of, 0x7F80, 1..0x7F80), 50_000_000);
}

/// Every positive finite f16 amax against every f16 x: ~9·10^8 pairs, so run it optimized:
/// `cargo test --release -p b12x-quant --test block_fp8_division -- --ignored` (~1 minute).
#[test]
#[ignore = "9e8 pairs: run with --release -- --ignored"]
fn f16_every_pair() {
    assert_clean(sweep(f16_of, 0x7C00, 1..0x7C00), 900_000_000);
}

/// The slice of the bf16 sweep every `cargo test` runs: every 16th amax pattern (each binade's
/// significands in steps of 16, all exponents, the floor), and the amax around 1 and 1.75 (1.75 /
/// 448 = 2^-8: a power-of-two scale, where 1 - r·s = 0), against every x.
#[test]
fn bf16_every_16th_amax() {
    let amaxes = (1..0x7F80).step_by(16).chain(0x3F80..0x3F90).chain(0x3FE0..0x4000);
    assert_clean(sweep(bf16_of, 0x7F80, amaxes), 3_000_000);
}

/// The slice of the f16 sweep every `cargo test` runs: amax in [2^15, 2^16) every 4th, and every
/// amax at or below the 1e-4 floor and up to 2^-12 (subnormal amax, every x below it).
#[test]
fn f16_top_binade_and_floor() {
    let amaxes = (0x7800..0x7C00).step_by(4).chain(0x0001..0x0C00);
    assert_clean(sweep(f16_of, 0x7C00, amaxes), 4_000_000);
}

/// Why two instructions: one multiply by RN(1/s) gets thousands of codes wrong (x/s near an E4M3
/// rounding boundary), and the round-to-nearest reciprocal makes rlo negative for some s, which
/// loses the sign of x = -0 (-0·r + (+0) = +0).
#[test]
fn simpler_forms_fail() {
    let mut one_mul_bad = 0u64;
    let mut neg_zero_lost = false;
    for ab in 0x3F80u16..0x4000 {
        let amax = bf16_of(ab);
        let s = scale(amax);
        let r_rn = 1.0 / s;
        let rlo_rn = (-r_rn).mul_add(s, 1.0) * r_rn;
        if rlo_rn < 0.0 && two_op(-0.0, r_rn, rlo_rn).is_sign_positive() {
            neg_zero_lost = true;
        }
        for xb in 0x3000u16..=ab {
            let x = bf16_of(xb);
            if e4m3(x * r_rn) != e4m3(x / s) {
                one_mul_bad += 1;
            }
        }
    }
    assert!(one_mul_bad > 0, "one multiply matched everywhere: the sweep is not probing boundaries");
    assert!(neg_zero_lost, "no s with a negative round-to-nearest rlo found");
}

/// The pairs the sweeps skip: their codes are zeros of x's sign, both ways.
#[test]
fn tiny_quotients_are_signed_zeros() {
    for ab in (0x0080u16..0x7F80).step_by(37) {
        let amax = bf16_of(ab);
        let s = scale(amax);
        if s >= 2f32.powi(64) {
            continue;
        }
        let (r, rlo) = reciprocal_pair(s);
        let cut = amax * 2f32.powi(-22);
        for xb in (1u16..0x7F80).step_by(13) {
            let x = bf16_of(xb);
            if x >= cut {
                break;
            }
            for xs in [x, -x] {
                let code = e4m3(two_op(xs, r, rlo));
                assert_eq!(code, e4m3(xs / s));
                assert_eq!(code & 0x7F, 0, "x = {xs:e}, amax = {amax:e}");
            }
        }
    }
}
