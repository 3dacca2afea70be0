//! `gemm.pack_weight` on the device: the uploaded weight of every format reads back equal to the
//! host packing (layout v3).

use b12x_core::testing::{run_gpu_trials, GpuTrial};
use b12x_core::Device;
use b12x_gemm::blockscaled::pack::{pack_host, pack_weight};
use b12x_gemm::blockscaled::Weight;
use b12x_quant::block::{
    quantize_block_fp8, quantize_mx, quantize_nvfp4, quantize_tensor_fp8, Fp8ScaleKind, MxOptions,
};
use b12x_quant::codec::Element;
use std::sync::Arc;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn round_trip(dev: &Arc<Device>) -> Result<(), String> {
    let (n, k) = (576, 7168);
    let w: Vec<f32> = (0..n * k).map(|i| ((i * 7919 % 113) as f32 - 56.0) / 9.0).collect();
    let weights = [
        Weight::Nvfp4(quantize_nvfp4(&w, n, k, Some(7.5)).map_err(err)?),
        Weight::Mx(quantize_mx(&w, n, k, Element::E2M1, MxOptions::default()).map_err(err)?),
        Weight::Mx(quantize_mx(&w, n, k, Element::E4M3, MxOptions::default()).map_err(err)?),
        Weight::BlockFp8(quantize_block_fp8(&w, n, k, (128, 128), Fp8ScaleKind::F32).map_err(err)?),
        Weight::TensorFp8 { n, k, q: quantize_tensor_fp8(&w, None).map_err(err)? },
    ];
    let stream = dev.stream();
    for weight in &weights {
        let want = pack_host(weight).map_err(err)?;
        let packed = pack_weight(weight, stream).map_err(err)?;
        let got = packed.to_host(stream).map_err(err)?;
        if got != want {
            return Err(format!("{:?}: the device copy differs from the host packing", want.format));
        }
    }
    Ok(())
}

fn main() {
    run_gpu_trials(vec![GpuTrial::new("pack_weight_round_trip", round_trip)])
}
