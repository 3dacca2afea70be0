//! Writes the CPU codec's E4M3, E5M2 and E2M1 codes for a dense f32 sweep, for
//! `bench/check_codecs.py` (which compares them with PyTorch and ml_dtypes casts).
//!
//!     cargo run -p b12x-quant --example codec_dump -- OUT.bin
//!
//! OUT.bin: u64 n (little-endian), n f32 inputs, then n bytes each of E4M3, E5M2, E2M1 codes.
//! The GPU quantizers equal these codes bit for bit (tests/gpu_mxfp8.rs and friends).

use b12x_quant::codec::{e2m1_encode, e4m3_encode, e5m2_encode, Element};

fn main() -> std::io::Result<()> {
    let out = std::env::args().nth(1).unwrap_or_else(|| "codec_dump.bin".into());
    let mut xs: Vec<f32> = (0..=u32::MAX / 65521).map(|i| f32::from_bits(i * 65521)).collect();
    for fmt in Element::ALL {
        for c in 0..fmt.max_code() {
            let (a, b) = (fmt.decode(c), fmt.decode(c + 1));
            let mid = (a + b) / 2.0;
            for v in [a, mid, f32::from_bits(mid.to_bits() + 1), f32::from_bits(mid.to_bits().saturating_sub(1))] {
                xs.push(v);
                xs.push(-v);
            }
        }
    }
    let mut bytes = (xs.len() as u64).to_le_bytes().to_vec();
    bytes.extend(xs.iter().flat_map(|x| x.to_le_bytes()));
    bytes.extend(xs.iter().map(|&x| e4m3_encode(x)));
    bytes.extend(xs.iter().map(|&x| e5m2_encode(x)));
    bytes.extend(xs.iter().map(|&x| e2m1_encode(x)));
    std::fs::write(&out, bytes)?;
    println!("wrote {} inputs to {out}", xs.len());
    Ok(())
}
