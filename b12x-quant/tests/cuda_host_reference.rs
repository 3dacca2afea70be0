//! The CPU codecs against CUDA's own host conversions of the pinned toolkit.
//!
//! Builds `tests/cuda_ref/fp_ref.cu` with the host C++ compiler (`$CXX`, else `c++`) against
//! the headers next to the nvcc that b12x-build finds (`cargo xtask toolchain` installs it),
//! runs it on the dense sweep and compares every E4M3, E5M2 and E2M1 code, and the decode of
//! every code; it also checks the kernels' software E2M1 encoder (`b12x-core/include/b12x/e2m1.cuh`, built into
//! the same program) against CUDA's. Without a toolkit this test fails (it is the spec's reference, not optional).

mod common;

use b12x_quant::codec::Element;
use std::path::{Path, PathBuf};
use std::process::Command;

fn cuda_include() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let nvcc = b12x_build::find_nvcc(manifest, &|k| std::env::var(k).ok())
        .expect("no nvcc found: run `cargo xtask toolchain` (or set B12X_NVCC / CUDA_HOME)");
    let include = nvcc.parent().and_then(Path::parent).map(|p| p.join("include")).expect("nvcc has no parent folder");
    assert!(include.join("cuda_fp8.hpp").is_file(), "no cuda_fp8.hpp in {}", include.display());
    assert!(include.join("cuda_fp4.hpp").is_file(), "no cuda_fp4.hpp in {}", include.display());
    include
}

/// Builds fp_ref (once per test; each test has its own folder) and returns its path.
fn build_reference(name: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cuda_ref/fp_ref.cu");
    b12x_core::testing::compile_host_cpp(&dir, "fp_ref", &src, &[&cuda_include()])
}

/// (codes [E4M3 | E5M2 | E2M1 | b12x kernel E2M1] for `xs`, decodes [256 E4M3 | 256 E5M2 | 16 E2M1]).
fn run_reference(xs: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let exe = build_reference("b12x-quant-cuda-ref");
    let dir = exe.parent().unwrap();
    let input = dir.join("in.f32");
    let output = dir.join("out.bin");
    std::fs::write(&input, xs.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let status = Command::new(&exe).arg(&input).arg(&output).status().unwrap();
    assert!(status.success(), "fp_ref failed: {status}");
    let bytes = std::fs::read(&output).unwrap();
    let n = 4 * xs.len();
    assert_eq!(bytes.len(), n + 4 * (256 + 256 + 16), "fp_ref output size");
    let dec = bytes[n..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    (bytes[..n].to_vec(), dec)
}

#[test]
fn encoders_and_decoders_equal_cuda_host_conversions() {
    let xs = common::sweep();
    let (codes, dec) = run_reference(&xs);
    let n = xs.len();
    for (k, fmt) in Element::ALL.into_iter().enumerate() {
        let cuda = &codes[k * n..(k + 1) * n];
        let mut bad = Vec::new();
        for (i, &x) in xs.iter().enumerate() {
            let ours = fmt.encode(x);
            if ours != cuda[i] {
                bad.push(format!("{x:e} ({:#010x}): ours {ours:#x}, CUDA {:#x}", x.to_bits(), cuda[i]));
            }
        }
        assert!(bad.is_empty(), "{fmt:?}: {} of {n} inputs differ, first: {:?}", bad.len(), &bad[..bad.len().min(8)]);
    }
    // The kernels' software E2M1 (b12x/e2m1.cuh, compiled for the CPU) equals CUDA's and ours.
    let kernel_e2m1 = &codes[3 * n..4 * n];
    let bad = (0..n).filter(|&i| kernel_e2m1[i] != codes[2 * n + i]).count();
    assert_eq!(bad, 0, "b12x/e2m1.cuh differs from __nv_cvt_float_to_fp4 on {bad} of {n} inputs");
    let offsets = [(Element::E4M3, 0usize, 256u16), (Element::E5M2, 256, 256), (Element::E2M1, 512, 16)];
    for (fmt, off, count) in offsets {
        for c in 0..count {
            let (ours, cuda) = (fmt.decode(c as u8), dec[off + c as usize]);
            assert!(
                ours.to_bits() == cuda.to_bits() || (ours.is_nan() && cuda.is_nan()),
                "{fmt:?} decode {c:#x}: ours {ours}, CUDA {cuda}"
            );
        }
    }
}

/// The kernels' software E2M1 (b12x/e2m1.cuh, compiled for the CPU) equals CUDA's host
/// conversion on all 2^32 f32 inputs, and so do the magnitude forms the quantizers pack
/// (`e2m1_mag_bits_not_nan` everywhere, the unclamped `e2m1_mag_bits_below7` on [0, 7)) (~30 s).
#[test]
fn kernel_e2m1_equals_cuda_on_every_f32() {
    let exe = build_reference("b12x-quant-cuda-ref-exhaustive");
    let out = Command::new(&exe).arg("--exhaustive-e2m1").output().unwrap();
    assert!(out.status.success(), "fp_ref --exhaustive-e2m1 failed: {}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().last(), Some("0"), "b12x/e2m1.cuh differs from __nv_cvt_float_to_fp4:\n{text}");
}
