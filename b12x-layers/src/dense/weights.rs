//! The layer's weights: seeded random values in a format, on the host and on the device.

use super::{Config, WeightFormat};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::{Error, Result};
use b12x_gemm::blockscaled::pack::{pack_weight, PackedWeight};
use b12x_gemm::blockscaled::Weight;
use b12x_quant::block::{quantize_block_fp8, quantize_nvfp4, Fp8ScaleKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// One linear on the host: the values the layer computes with (bf16-rounded, or the quantized
/// weight's dequantized values) and what goes to the device.
#[derive(Clone, Debug)]
pub struct HostLinear {
    pub n: usize,
    pub k: usize,
    /// `[n, k]`: the weight's exact values.
    pub values: Vec<f32>,
    /// The quantized weight (block FP8 / NVFP4), `None` for BF16.
    pub quantized: Option<Weight>,
}

/// The layer's weights on the host.
#[derive(Clone, Debug)]
pub struct HostWeights {
    pub format: WeightFormat,
    /// `[hidden]` bf16 values.
    pub ln1: Vec<f32>,
    pub ln2: Vec<f32>,
    /// In [`LINEARS`](super::LINEARS) order.
    pub linears: Vec<HostLinear>,
}

impl HostWeights {
    /// Seeded random weights: linears uniform in `±√(3/K)` (unit-variance outputs for
    /// unit-variance inputs), norm weights in `[0.8, 1.2]`, quantized to `format` on the host with
    /// b12x-quant's codecs.
    pub fn random(cfg: &Config, format: WeightFormat, seed: u64) -> Result<Self> {
        let bf = |v: f32| bf16::from_f32(v).to_f32();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let ln1 = (0..cfg.hidden).map(|_| bf(rng.random_range(0.8..1.2))).collect();
        let ln2 = (0..cfg.hidden).map(|_| bf(rng.random_range(0.8..1.2))).collect();
        let linears = crate::par_map(4, |i| -> Result<HostLinear> {
            let (n, k) = cfg.linear_shapes()[i];
            let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(i as u64 + 1));
            let a = (3.0 / k as f32).sqrt();
            let raw: Vec<f32> = (0..n * k).map(|_| bf(rng.random_range(-a..a))).collect();
            let bad = |e: b12x_quant::block::FormatError| Error::InvalidQuery {
                op: "b12x-layers",
                field: "weights",
                reason: e.to_string(),
            };
            Ok(match format {
                WeightFormat::Bf16 => HostLinear { n, k, values: raw, quantized: None },
                WeightFormat::BlockFp8 => {
                    let q = quantize_block_fp8(&raw, n, k, (128, 128), Fp8ScaleKind::F32).map_err(bad)?;
                    let w = Weight::BlockFp8(q);
                    HostLinear { n, k, values: w.dequantize(), quantized: Some(w) }
                }
                WeightFormat::Nvfp4 => {
                    let w = Weight::Nvfp4(quantize_nvfp4(&raw, n, k, None).map_err(bad)?);
                    HostLinear { n, k, values: w.dequantize(), quantized: Some(w) }
                }
            })
        });
        Ok(HostWeights { format, ln1, ln2, linears: linears.into_iter().collect::<Result<_>>()? })
    }

    /// Uploads (BF16) or packs (`pack_weight`, layout v3) every weight.
    pub fn upload(&self, stream: &Arc<CudaStream>) -> Result<DeviceWeights> {
        self.upload_with(stream, None, None, None, false)
    }

    /// [`HostWeights::upload`], with the BF16 linear `gate_up` (an index into
    /// [`LINEARS`](super::LINEARS)) uploaded with its rows interleaved for the SwiGLU epilogue
    /// (`bf16_gemv::interleave_gate_up`, [`DeviceLinear::Bf16GateUp`]).
    /// `rope_rows` (`LayerOptions::rope_in_qkv`): the QKV weight (linear 0) uploaded with its rows
    /// in that order (`bf16_gemv::rope_row_order`, [`DeviceLinear::Bf16Rope`]).
    /// `norm2_fold` (`LayerOptions::norm2_in_o_proj`): that BF16 linear's columns multiplied by
    /// `ln2` (`bf16_gemv::fold_norm_weight`, before any interleaving).
    /// `norm1_fold` (`FoldNorms::FirstScale`): the BF16 QKV weight's (linear 0) columns
    /// multiplied by `ln1` (before any reordering).
    pub(super) fn upload_with(
        &self,
        stream: &Arc<CudaStream>,
        gate_up: Option<usize>,
        rope_rows: Option<&[usize]>,
        norm2_fold: Option<usize>,
        norm1_fold: bool,
    ) -> Result<DeviceWeights> {
        let bf = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
        let up = |v: &[f32]| -> Result<CudaSlice<bf16>> { Ok(stream.clone_htod(&bf(v))?) };
        let mut linears = Vec::new();
        let (mut folded, mut qkv_folded) = (false, false);
        for (i, l) in self.linears.iter().enumerate() {
            let fold = l.quantized.is_none() && norm2_fold == Some(i);
            let fold1 = l.quantized.is_none() && norm1_fold && i == 0;
            // The weight's bf16 values (folded with its norm's weight where asked).
            let values = if fold {
                folded = true;
                b12x_gemm::bf16_gemv::fold_norm_weight(&bf(&l.values), &bf(&self.ln2))
            } else if fold1 {
                qkv_folded = true;
                b12x_gemm::bf16_gemv::fold_norm_weight(&bf(&l.values), &bf(&self.ln1))
            } else {
                bf(&l.values)
            };
            linears.push(match (&l.quantized, rope_rows) {
                (None, Some(order)) if i == 0 => {
                    DeviceLinear::Bf16Rope(stream.clone_htod(&b12x_gemm::bf16_gemv::reorder_rows(&values, l.k, order))?)
                }
                (None, _) if gate_up == Some(i) => DeviceLinear::Bf16GateUp(
                    stream.clone_htod(&b12x_gemm::bf16_gemv::interleave_gate_up(&values, l.k))?,
                ),
                (None, _) => DeviceLinear::Bf16(stream.clone_htod(&values)?),
                (Some(w), _) => DeviceLinear::Packed(Box::new(pack_weight(w, stream)?)),
            });
        }
        Ok(DeviceWeights {
            ln1: up(&self.ln1)?,
            ln2: up(&self.ln2)?,
            linears,
            gate_up_norm_folded: folded,
            qkv_norm_folded: qkv_folded,
        })
    }
}

/// One linear's weight on the device.
pub enum DeviceLinear {
    Bf16(CudaSlice<bf16>),
    /// BF16 gate/up weight with its rows interleaved for the SwiGLU epilogue
    /// (`bf16_gemv::interleave_gate_up`; `Layer::upload_weights` with `gate_up_silu`).
    Bf16GateUp(CudaSlice<bf16>),
    /// BF16 QKV weight with its rows in the rope epilogue's pair order
    /// (`bf16_gemv::rope_row_order`; `Layer::upload_weights` with `rope_in_qkv`).
    Bf16Rope(CudaSlice<bf16>),
    Packed(Box<PackedWeight>),
}

/// The layer's weights on the device.
pub struct DeviceWeights {
    pub ln1: CudaSlice<bf16>,
    pub ln2: CudaSlice<bf16>,
    pub linears: Vec<DeviceLinear>,
    /// The gate/up weight's columns are multiplied by `ln2` (`LayerOptions::norm2_in_o_proj`,
    /// `Layer::upload_weights`): only such a layer takes these weights, and it takes no others.
    pub gate_up_norm_folded: bool,
    /// The QKV weight's columns are multiplied by `ln1` (`FoldNorms::FirstScale`,
    /// `Layer::upload_weights`): only such a layer takes these weights, and it takes no others.
    pub qkv_norm_folded: bool,
}
