//! CPU checks of the built SASS (no GPU; `cuobjdump` from `cargo xtask toolchain`): the sm_120a /
//! sm_121a NVFP4 and MXFP4 quantizers, which we cannot run, encode E2M1 with the hardware
//! conversion they were written for (`cvt.rn.satfinite.e2m1x2.f32` → SASS
//! `F2FP.SATFINITE.E2M1.F32`), and the sm_90a ones (validated on the H200) with the software
//! encoder, which must not contain it.

use b12x_core::testing::check_sass_opcode;
use b12x_quant::{KERNEL_MANIFEST, MX_FATBIN, NVFP4_FATBIN};

const HW_E2M1: &str = "F2FP.SATFINITE.E2M1.F32";
const SM120: &[&str] = &["sm_120a", "sm_121a"];
/// 3 block sizes × 3 units per thread × 2 input dtypes.
const QUANTIZE_ENTRY_POINTS: usize = 18;

#[test]
fn nvfp4_quantizers_use_the_hardware_e2m1_conversion_on_sm120_only() {
    // b12x_nvfp4_t*: the quantize passes (the amax passes convert nothing).
    check_sass_opcode(NVFP4_FATBIN, KERNEL_MANIFEST, "b12x_nvfp4_t", QUANTIZE_ENTRY_POINTS, HW_E2M1, SM120).unwrap();
}

#[test]
fn mxfp4_quantizers_use_the_hardware_e2m1_conversion_on_sm120_only() {
    check_sass_opcode(MX_FATBIN, KERNEL_MANIFEST, "b12x_mxfp4_t", QUANTIZE_ENTRY_POINTS, HW_E2M1, SM120).unwrap();
    // The probe of the software packed encoder stays software everywhere.
    check_sass_opcode(MX_FATBIN, KERNEL_MANIFEST, "b12x_mx_e2m1x2_probe_", 2, HW_E2M1, &[]).unwrap();
}
