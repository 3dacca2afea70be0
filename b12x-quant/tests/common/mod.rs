//! The dense f32 sweep every encoder is checked on.

use b12x_quant::codec::Element;

/// f32 inputs that exercise every rounding rule of every element format:
/// - every 4099th f32 bit pattern (≈ 1.05 M values across all exponents, both signs, NaN
///   payloads included);
/// - for each format: every code's value, every midpoint between adjacent codes (the ties),
///   one f32 ulp either side of each of them, and the same negated;
/// - specials: ±0, ±Inf, NaNs of both signs and several payloads, f32 subnormals, f32::MAX.
pub fn sweep() -> Vec<f32> {
    let mut v: Vec<f32> = (0..=u32::MAX / 4099).map(|i| f32::from_bits(i * 4099)).collect();
    for fmt in Element::ALL {
        let max = fmt.max_code();
        for c in 0..=max {
            let a = fmt.decode(c);
            let mut pts = vec![a];
            if c < max {
                let b = fmt.decode(c + 1);
                // Midpoints are exact in f32 for these formats (at most 5 significant bits).
                pts.push((a + b) / 2.0);
            } else {
                // Above max: the would-be next step (saturation region).
                pts.push(a * 1.0625);
                pts.push(a * 2.0);
            }
            for p in pts {
                // p and its f32 neighbours (p ≥ 0 here).
                let down = if p == 0.0 { f32::from_bits(0x8000_0001) } else { f32::from_bits(p.to_bits() - 1) };
                for q in [p, f32::from_bits(p.to_bits() + 1), down] {
                    v.push(q);
                    v.push(-q);
                }
            }
        }
    }
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7FC0_0001),
        f32::from_bits(0xFF80_0001),
        f32::from_bits(0x7F80_0001),
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::from_bits(0x007F_FFFF),
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
    ]);
    v
}
