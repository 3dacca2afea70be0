//! The E2M1 → BF16 dequantization helpers of `b12x-core/include/b12x/fp4_dequant.cuh` (host
//! build, `tests/cuda_ref/fp4_dequant_ref.cpp`) against b12x-quant's codecs, on every value:
//! every pair of every interleaved word is `code · 2^-126` in BF16 exactly, every finite UE4M3
//! scale is `s · 2^119` exactly, and every product of the two is exact in BF16 (so the kernels'
//! one `mul.bf16x2` per pair rounds nothing); the same for pack_weight's layout-v2 words (every
//! pair of every bit-permuted word), whose permutation `pack.rs` and the header compute alike.
//! And the E4M3 → BF16 pairs of the W8A16 path: every pair of finite codes is `code · 2^-120` in
//! BF16 exactly (signs kept on zeros), so one `mul.bf16x2` by `2^120` or by a power-of-two block
//! scale times it is exact. And the SM120 W4A8 kernels' E2M1 byte containers: both container
//! words of every layout-v2 word hold the codes of the element order the header states, and x's
//! byte selectors pick the same k. And the SM120 NVFP4 × NVFP4 kernels' packed nibbles: every
//! layout-v2 word converts to its codes in the stated element order, and x's staging puts a
//! checkpoint word in the same order.

use b12x_core::half::bf16;
use b12x_gemm::blockscaled::pack::{sm90_permute_word, sm90_unpermute_word};
use b12x_quant::codec::{e2m1_decode, e4m3_decode, ue4m3_decode};
use std::path::Path;
use std::process::Command;

fn run_ref() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = b12x_core::testing::compile_host_cpp(
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("b12x-gemm-fp4-dequant-ref"),
        "fp4_dequant_ref",
        &root.join("tests/cuda_ref/fp4_dequant_ref.cpp"),
        &[&root.join("../b12x-core/include")],
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    String::from_utf8(run.stdout).unwrap()
}

fn bf16_bits(b: u32) -> f64 {
    bf16::from_bits(b as u16).to_f64()
}

#[test]
fn every_value_is_exact() {
    let out = run_ref();
    let (mut pairs, mut scales, mut words) = (0, 0, 0);
    let (mut v2pairs, mut v2words, mut e4m3_pairs, mut containers, mut nibbles) = (0, 0, 0, 0, 0);
    let two_m126 = 2f64.powi(-126);
    let mut scale_of = vec![0.0f64; 127];
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| f[i].parse::<u64>().unwrap();
        match f[0] {
            "pair" => {
                let (lo, hi, r) = (n(2) as u8, n(3) as u8, n(4) as u32);
                assert_eq!(bf16_bits(r & 0xFFFF), f64::from(e2m1_decode(lo)) * two_m126, "{line}: low half");
                assert_eq!(bf16_bits(r >> 16), f64::from(e2m1_decode(hi)) * two_m126, "{line}: high half");
                // Signs survive on zeros too (-0 is 0x8000).
                assert_eq!((r >> 15) & 1, u32::from(lo >> 3), "{line}");
                assert_eq!(r >> 31, u32::from(hi >> 3), "{line}");
                pairs += 1;
            }
            "interleave" => {
                let (w, o) = (n(1) as u32, n(2) as u32);
                for q in 0..4 {
                    assert_eq!((o >> (4 * q)) & 0xF, (w >> (8 * q)) & 0xF, "{line}: element 2q");
                    assert_eq!((o >> (4 * q + 16)) & 0xF, (w >> (8 * q + 4)) & 0xF, "{line}: element 2q + 1");
                }
                words += 1;
            }
            "scale" => {
                let (c, b) = (n(1) as usize, n(2) as u32);
                let want = f64::from(ue4m3_decode(c as u8)) * 2f64.powi(119);
                assert_eq!(bf16_bits(b), want, "{line}");
                scale_of[c] = want;
                scales += 1;
            }
            "v2pair" => {
                let (lo, hi, r) = (n(2) as u8, n(3) as u8, n(4) as u32);
                assert_eq!(bf16_bits(r & 0xFFFF), f64::from(e2m1_decode(lo)) * two_m126, "{line}: low half");
                assert_eq!(bf16_bits(r >> 16), f64::from(e2m1_decode(hi)) * two_m126, "{line}: high half");
                assert_eq!((r >> 15) & 1, u32::from(lo >> 3), "{line}");
                assert_eq!(r >> 31, u32::from(hi >> 3), "{line}");
                v2pairs += 1;
            }
            "v2word" => {
                let (w, o, back) = (n(1) as u32, n(2) as u32, n(3) as u32);
                assert_eq!(back, w, "{line}: the inverse");
                // pack_weight (Rust) permutes exactly as the header.
                assert_eq!(sm90_permute_word(w), o, "{line}: pack.rs");
                assert_eq!(sm90_unpermute_word(o), w, "{line}: pack.rs inverse");
                v2words += 1;
            }
            "e4m3" => {
                let (lo, hi, r) = (n(2) as u8, n(3) as u8, n(4) as u32);
                for (half, code) in [(r & 0xFFFF, lo), (r >> 16, hi)] {
                    if code & 0x7F == 0x7F {
                        continue; // NaN: pack_weight refuses weights holding it
                    }
                    let want = f64::from(e4m3_decode(code)) * 2f64.powi(-120);
                    assert_eq!(bf16_bits(half), want, "{line}: code {code:#x}");
                    assert_eq!(half >> 15, u32::from(code >> 7), "{line}: sign of {code:#x}");
                    // Times 2^120 (BF16 0x7B80) in BF16 is the code itself: exact, normal or zero.
                    let back = want * 2f64.powi(120);
                    assert_eq!(bf16::from_f64(back).to_f64(), back, "{line}");
                }
                e4m3_pairs += 1;
            }
            "cont" => {
                // Container word h, byte j: element e2m1_container_elem(h, j) = (j / 2) + 4 (j % 2)
                // + 2 h of the checkpoint word, its code in bits [5:2]; x's selectors pick bytes
                // of the same k (byte i of x's 8 = k i of the word's 8).
                let (w, c, sel) = (n(1) as u32, [n(2) as u32, n(3) as u32], [n(4) as u32, n(5) as u32]);
                for h in 0..2 {
                    for j in 0..4 {
                        let elem = j / 2 + 4 * (j % 2) + 2 * h;
                        let byte = (c[h] >> (8 * j)) & 0xFF;
                        assert_eq!(byte, ((w >> (4 * elem)) & 0xF) << 2, "{line}: word {h} byte {j}");
                        assert_eq!((sel[h] >> (8 * j)) & 0xFF, elem as u32, "{line}: x selector {h} byte {j}");
                    }
                }
                containers += 1;
            }
            "nib" => {
                // Nibble j of both: element (5, 0, 2, 6, 4, 1, 3, 7)[j] of the checkpoint word.
                let (w, nib, x) = (n(1) as u32, n(2) as u32, n(3) as u32);
                for (j, elem) in [5, 0, 2, 6, 4, 1, 3, 7].into_iter().enumerate() {
                    assert_eq!((nib >> (4 * j)) & 0xF, (w >> (4 * elem)) & 0xF, "{line}: weight nibble {j}");
                }
                assert_eq!(x, nib, "{line}: x in the weight's order");
                nibbles += 1;
            }
            _ => panic!("bad line {line}"),
        }
    }
    assert_eq!((pairs, words, scales), (4 * 256, 6, 127));
    assert_eq!((v2pairs, v2words, e4m3_pairs, containers, nibbles), (4 * 256, 64, 2 * 65536, 16 + 256, 16 + 32 + 256));
    // Every product (code · 2^-126) · (s · 2^119) is representable in BF16: mul.bf16x2 is exact.
    for code in 0u8..16 {
        for (c, &s) in scale_of.iter().enumerate() {
            let p = f64::from(e2m1_decode(code)) * two_m126 * s;
            assert_eq!(bf16::from_f64(p).to_f64(), p, "code {code:#x}, scale code {c:#x}");
            if p != 0.0 {
                assert!(p.abs() >= 2f64.powi(-126), "normal: {p}");
            }
        }
    }
}
