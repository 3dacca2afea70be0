//! The SM120 block-scaled MMA's operand placement (`b12x/mma_sm120.cuh`), checked on the CPU:
//!
//! - the header's index functions, compiled for the CPU (`tests/cuda_ref/frag_ref.cpp`), against
//!   the PTX ISA's formulas transcribed below (PTX ISA, "Matrix Fragments for mma.m16n8k32" and
//!   "... for mma.m16n8k64": element i of a lane, `groupID = lane >> 2`,
//!   `threadID_in_group = lane % 4`) and, independently, against CUTLASS's CuTe layouts of the
//!   same atoms (`cute/atom/mma_traits_sm80.hpp` `SM80_16x8x32_S32S8S8S32_TN`, `SM80_16x8_Row`,
//!   `cute/atom/mma_traits_sm120.hpp` `SM120_16x8x64_TN_VS` and its `SFALayout` / `SFBLayout`);
//! - a few spot values, every map a bijection onto its matrix;
//! - the built sm_120a / sm_121a probe kernels contain the block-scaled MMAs (QMMA.SF / OMMA.SF)
//!   and the sm_90a ones none.
//!
//! Nothing here runs an MMA: we have no SM120 GPU (`tests/gpu_bsmma_probe.rs` does, there).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::Command;

/// (function, lane, register, element) → (row, col), and the scale-lane tables.
struct Table {
    frag: BTreeMap<(String, usize, usize, usize), (i64, i64)>,
    other: BTreeMap<(String, usize), i64>,
}

/// Built and run once per test process (the tests run in parallel threads).
fn header_table() -> &'static Table {
    static TABLE: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    TABLE.get_or_init(build_table)
}

fn build_table() -> Table {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = b12x_core::testing::compile_host_cpp(
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("b12x-gemm-frag-ref"),
        "frag_ref",
        &root.join("tests/cuda_ref/frag_ref.cpp"),
        &[&root.join("../b12x-core/include")],
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let mut t = Table { frag: BTreeMap::new(), other: BTreeMap::new() };
    for line in String::from_utf8(run.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| f[i].parse::<i64>().unwrap();
        match f.len() {
            6 => {
                t.frag.insert((f[0].into(), n(1) as usize, n(2) as usize, n(3) as usize), (n(4), n(5)));
            }
            3 => {
                t.other.insert((f[0].into(), n(1) as usize), n(2));
            }
            _ => panic!("bad line {line}"),
        }
    }
    t
}

/// The PTX ISA's formulas, per element index i (a0..a15 / b0..b7 for m16n8k32, a0..a31 / b0..b15
/// for m16n8k64, c0..c3), transcribed.
fn ptx(f: &str, lane: usize, i: usize) -> (i64, i64) {
    let (g, t, i) = ((lane >> 2) as i64, (lane % 4) as i64, i as i64);
    match f {
        // m16n8k32 A: row = groupID for ai where 0 <= i < 4 || 8 <= i < 12, groupID + 8 otherwise;
        // col = threadID_in_group * 4 + (i & 0x3) for ai where i < 8, + 16 for i >= 8.
        "k32_a" => (
            if (0..4).contains(&i) || (8..12).contains(&i) { g } else { g + 8 },
            t * 4 + (i & 3) + if i < 8 { 0 } else { 16 },
        ),
        // m16n8k32 B: row = threadID_in_group * 4 + (i & 0x3) for bi where i < 4, + 16 for i >= 4; col = groupID.
        "k32_b" => (t * 4 + (i & 3) + if i < 4 { 0 } else { 16 }, g),
        // m16n8k64 A: row = groupID for ai where 0 <= i < 8 || 16 <= i < 24, groupID + 8 otherwise;
        // col = threadID_in_group * 8 + (i & 0x7) for ai where i < 16, + 32 for i >= 16.
        "k64_a" => (
            if (0..8).contains(&i) || (16..24).contains(&i) { g } else { g + 8 },
            t * 8 + (i & 7) + if i < 16 { 0 } else { 32 },
        ),
        // m16n8k64 B: row = threadID_in_group * 8 + (i & 0x7) for bi where i < 8, + 32 for i >= 8; col = groupID.
        "k64_b" => (t * 8 + (i & 7) + if i < 8 { 0 } else { 32 }, g),
        // C/D (f32): row = groupID for ci where i < 2, groupID + 8 otherwise; col = threadID_in_group * 2 + (i & 0x1).
        "cd" => (if i < 2 { g } else { g + 8 }, t * 2 + (i & 1)),
        _ => unreachable!(),
    }
}

/// CuTe layout `((4, 8), V):((s0, s1), VS)` evaluated at (thread, value): the linear index into
/// the column-major (rows × cols) matrix, as (row, col).
fn cute(
    thread_stride: (i64, i64),
    value_shape: &[i64],
    value_stride: &[i64],
    rows: i64,
    lane: usize,
    v: usize,
) -> (i64, i64) {
    let (t0, t1) = ((lane % 4) as i64, (lane / 4) as i64);
    let mut idx = t0 * thread_stride.0 + t1 * thread_stride.1;
    let mut rest = v as i64;
    for (&s, &st) in value_shape.iter().zip(value_stride) {
        idx += (rest % s) * st;
        rest /= s;
    }
    (idx % rows, idx / rows)
}

/// (function, registers, elements per register, matrix rows, matrix cols) of each fragment.
const FRAGS: [(&str, usize, usize, i64, i64); 5] = [
    ("k32_a", 4, 4, 16, 32),
    ("k32_b", 2, 4, 32, 8),
    ("k64_a", 4, 8, 16, 64),
    ("k64_b", 2, 8, 64, 8),
    ("cd", 1, 4, 16, 8),
];

#[test]
fn fragments_equal_the_ptx_isa_formulas() {
    let t = header_table();
    for (f, regs, per, _, _) in FRAGS {
        for lane in 0..32 {
            for r in 0..regs {
                for j in 0..per {
                    // Element i of the PTX tables is byte / nibble j of register r, low to high.
                    let i = r * per + j;
                    assert_eq!(t.frag[&(f.to_string(), lane, r, j)], ptx(f, lane, i), "{f} lane {lane} r {r} j {j}");
                }
            }
        }
    }
}

#[test]
fn fragments_equal_cutlass_layouts() {
    let t = header_table();
    for lane in 0..32 {
        for v in 0..16 {
            // SM80_16x8x32_S32S8S8S32_TN A: ((4,8),(4,2,2)):((64,1),(16,8,256)) over (M16, K32).
            assert_eq!(
                t.frag[&("k32_a".into(), lane, v / 4, v % 4)],
                cute((64, 1), &[4, 2, 2], &[16, 8, 256], 16, lane, v)
            );
        }
        for v in 0..8 {
            // B: ((4,8),(4,2)):((32,1),(8,128)) over (N8, K32): (n, k) -> our (k, n).
            let (n, k) = cute((32, 1), &[4, 2], &[8, 128], 8, lane, v);
            assert_eq!(t.frag[&("k32_b".into(), lane, v / 4, v % 4)], (k, n));
        }
        for v in 0..32 {
            // SM120_16x8x64_TN_VS A: ((4,8),(8,2,2)):((128,1),(16,8,512)) over (M16, K64).
            assert_eq!(
                t.frag[&("k64_a".into(), lane, v / 8, v % 8)],
                cute((128, 1), &[8, 2, 2], &[16, 8, 512], 16, lane, v)
            );
        }
        for v in 0..16 {
            // B: ((4,8),(8,2)):((64,1),(8,256)) over (N8, K64).
            let (n, k) = cute((64, 1), &[8, 2], &[8, 256], 8, lane, v);
            assert_eq!(t.frag[&("k64_b".into(), lane, v / 8, v % 8)], (k, n));
        }
        for v in 0..4 {
            // SM80_16x8_Row: ((4,8),(2,2)):((32,1),(16,8)) over (M16, N8).
            assert_eq!(t.frag[&("cd".into(), lane, 0, v)], cute((32, 1), &[2, 2], &[16, 8], 16, lane, v));
        }
        // SFALayout ((2,2,8),K):((8,0,1),16): lane (a, b, c) = (lane & 1, (lane >> 1) & 1, lane >> 2)
        // holds row 8a + c (b is the "2:0" duplicate: with thread-id-a = 0 only lanes % 4 < 2 count).
        let want_a = if lane % 4 < 2 { 8 * (lane as i64 & 1) + (lane as i64 >> 2) } else { -1 };
        assert_eq!(t.other[&("sfa_row".into(), lane)], want_a, "sfa lane {lane}");
        // SFBLayout ((4,8),K):((0,1),8): column lane >> 2 (thread-id-b = 0: lane % 4 == 0 supplies it).
        let want_b = if lane % 4 == 0 { lane as i64 >> 2 } else { -1 };
        assert_eq!(t.other[&("sfb_col".into(), lane)], want_b, "sfb lane {lane}");
    }
    for m in 0..16 {
        assert_eq!(t.other[&("sfa_row".into(), t.other[&("sfa".into(), m)] as usize)], m as i64);
    }
    for n in 0..8 {
        assert_eq!(t.other[&("sfb_col".into(), t.other[&("sfb".into(), n)] as usize)], n as i64);
    }
}

#[test]
fn spot_values_and_bijections() {
    let t = header_table();
    let at = |f: &str, lane, r, j| t.frag[&(f.to_string(), lane, r, j)];
    // Lane 5: groupID 1, threadID_in_group 1.
    assert_eq!(at("k32_a", 5, 0, 0), (1, 4));
    assert_eq!(at("k32_a", 5, 3, 3), (9, 23));
    assert_eq!(at("k32_b", 5, 1, 3), (23, 1));
    assert_eq!(at("k64_a", 5, 1, 7), (9, 15));
    assert_eq!(at("k64_a", 5, 2, 0), (1, 40));
    assert_eq!(at("k64_b", 31, 1, 7), (63, 7));
    assert_eq!(at("cd", 5, 0, 2), (9, 2));
    for (f, regs, per, rows, cols) in FRAGS {
        let mut seen = HashSet::new();
        for lane in 0..32 {
            for r in 0..regs {
                for j in 0..per {
                    let (row, col) = at(f, lane, r, j);
                    assert!((0..rows).contains(&row) && (0..cols).contains(&col), "{f}");
                    assert!(seen.insert((row, col)), "{f}: ({row}, {col}) twice");
                }
            }
        }
        assert_eq!(seen.len() as i64, rows * cols, "{f}");
    }
    // E2M1 in the kind::mxf8f6f4 byte container: bits [5:2].
    for c in 0..16 {
        assert_eq!(t.other[&("e2m1_container".into(), c)], (c as i64) << 2);
    }
}

#[test]
fn sm120_probe_kernels_contain_the_block_scaled_mmas() {
    use b12x_core::testing::check_sass_opcode;
    use b12x_gemm::{BSMMA_PROBE_FATBIN, KERNEL_MANIFEST};
    const SM120: &[&str] = &["sm_120a", "sm_121a"];
    for (kernel, opcode) in [
        ("b12x_bsmma_probe_mxf8_e4m3", "QMMA.SF.16832.F32.E4M3.E4M3.E8"),
        ("b12x_bsmma_probe_mxf8_e2m1", "QMMA.SF.16832.F32.E2M1.E2M1.E8"),
        ("b12x_bsmma_probe_mxf4", "OMMA.SF.16864.F32.E2M1.E2M1.E8"),
        ("b12x_bsmma_probe_nvf4", "OMMA.SF.16864.F32.E2M1.E2M1.UE4M3.4X"),
        ("b12x_bsmma_probe_e2m1_e4m3", "QMMA.SF.16832.F32.E2M1.E4M3.E8"),
    ] {
        check_sass_opcode(BSMMA_PROBE_FATBIN, KERNEL_MANIFEST, kernel, 1, opcode, SM120).unwrap();
    }
    // No block-scaled MMA of any kind outside SM120 (the portable path there).
    check_sass_opcode(BSMMA_PROBE_FATBIN, KERNEL_MANIFEST, "b12x_bsmma_probe_", 5, "MMA.SF", SM120).unwrap();
}

#[test]
fn sm120_native_gemm_kernels_contain_the_block_scaled_mmas() {
    // gemm.blockscaled's native kernels (E4M3 x × MXFP8, UE8M0 block-FP8 or MXFP4 weights: QMMA.SF;
    // NVFP4 x × NVFP4 weights: OMMA.SF, UE4M3 4X) on sm_120a / sm_121a, none elsewhere (sm_90a
    // builds them around the emulation the H200 runs).
    use b12x_core::testing::check_sass_opcode;
    use b12x_gemm::{BLOCKSCALED_GEMV_FATBIN, KERNEL_MANIFEST};
    const SM120: &[&str] = &["sm_120a", "sm_121a"];
    for prefix in ["b12x_bsgemm_native_mxf8_", "b12x_bsgemm_native_fp8block_"] {
        check_sass_opcode(BLOCKSCALED_GEMV_FATBIN, KERNEL_MANIFEST, prefix, 9, "QMMA.SF.16832.F32.E4M3.E4M3.E8", SM120)
            .unwrap();
    }
    check_sass_opcode(
        BLOCKSCALED_GEMV_FATBIN,
        KERNEL_MANIFEST,
        "b12x_bsgemm_native_mxf4_",
        9,
        "QMMA.SF.16832.F32.E2M1.E4M3.E8",
        SM120,
    )
    .unwrap();
    check_sass_opcode(
        BLOCKSCALED_GEMV_FATBIN,
        KERNEL_MANIFEST,
        "b12x_bsgemm_native_nvf4_",
        9,
        "OMMA.SF.16864.F32.E2M1.E2M1.UE4M3.4X",
        SM120,
    )
    .unwrap();
    // The dequantization kernels never use block-scaled MMAs, on any target.
    for (prefix, count) in
        [("b12x_bsgemm_w4a16_", 18), ("b12x_bsgemm_w8a16_", 27), ("b12x_bsgemm_w8a8f32_", 9), ("b12x_bsgemm_wg_", 24)]
    {
        check_sass_opcode(BLOCKSCALED_GEMV_FATBIN, KERNEL_MANIFEST, prefix, count, "MMA.SF", &[]).unwrap();
    }
}

#[test]
fn sm90_wgmma_gemm_kernels_contain_the_warpgroup_mmas() {
    // gemm.blockscaled's SM90-only candidates (every weight format, and block FP8 × f32-scaled x):
    // the warpgroup MMA with register A on
    // sm_90a; a trapping body on sm_120a / sm_121a (wgmma does not exist there; Rust never lists
    // them on those devices).
    use b12x_core::testing::check_sass_opcode;
    use b12x_gemm::{BLOCKSCALED_GEMV_FATBIN, KERNEL_MANIFEST};
    check_sass_opcode(
        BLOCKSCALED_GEMV_FATBIN,
        KERNEL_MANIFEST,
        "b12x_bsgemm_wg_",
        24,
        "HGMMA.64x128x16.F32.BF16",
        &["sm_90a"],
    )
    .unwrap();
}
