//! `gemm.blockscaled` decode path, on the CPU: query validation (typed errors naming the field)
//! and the kernel table.

use b12x_core::{DType, Error};
use b12x_gemm::blockscaled::gemv::{
    all_symbols, configs, native_configs, tile_configs, NativeKind, Query, XFormat, XQuant, MAX_CAPACITY, MAX_ROWS,
};
use b12x_gemm::blockscaled::pack::WeightFormat;
use b12x_quant::block::Fp8ScaleKind;

fn query() -> Query {
    Query {
        n: 4096,
        k: 7168,
        weight: WeightFormat::Nvfp4,
        x_format: XFormat::Bf16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: 16,
        x_quant: None,
    }
}

fn field_of(q: &Query) -> String {
    match q.validate() {
        Err(Error::InvalidQuery { field, .. }) => field.to_string(),
        Err(Error::Unsupported { .. }) => "unsupported".into(),
        Err(e) => format!("other: {e}"),
        Ok(()) => "ok".into(),
    }
}

#[test]
fn valid_queries_pass() {
    let block = |tile, scale| WeightFormat::BlockFp8 { tile, scale };
    for weight in [
        WeightFormat::Nvfp4,
        WeightFormat::Mxfp4,
        WeightFormat::Mxfp8,
        block(128, Fp8ScaleKind::F32),
        block(128, Fp8ScaleKind::Ue8m0),
        block(32, Fp8ScaleKind::F32),
        block(32, Fp8ScaleKind::Ue8m0),
        WeightFormat::TensorFp8,
    ] {
        for out_dtype in [DType::BF16, DType::F16, DType::F32] {
            for bias in [None, Some(DType::BF16), Some(DType::F32)] {
                for max_rows in [1, 8, 9, MAX_ROWS] {
                    let q = Query { weight, out_dtype, bias, max_rows, ..query() };
                    assert_eq!(field_of(&q), "ok", "{q:?}");
                }
            }
        }
    }
    assert_eq!(field_of(&Query { n: 1, k: 32, ..query() }), "ok");
    // Activations quantized in the call: MXFP8, block FP8 1 × 32 / 1 × 128 (K a multiple).
    for x_quant in [XQuant::Mxfp8, XQuant::BlockFp8Ue8m0 { group: 32 }, XQuant::BlockFp8Ue8m0 { group: 128 }] {
        assert_eq!(field_of(&Query { x_quant: Some(x_quant), ..query() }), "ok");
    }
}

#[test]
fn bad_activation_quantization_names_x_quant() {
    let block = |group| Some(XQuant::BlockFp8Ue8m0 { group });
    assert_eq!(field_of(&Query { x_quant: block(64), ..query() }), "x_quant");
    assert_eq!(field_of(&Query { x_quant: block(0), ..query() }), "x_quant");
    // 1 × 128 groups need K % 128 == 0 (K = 7168 + 32 is a multiple of 32 only).
    assert_eq!(field_of(&Query { k: 7168 + 32, x_quant: block(128), ..query() }), "x_quant");
    assert_eq!(field_of(&Query { k: 7168 + 32, x_quant: block(32), ..query() }), "ok");
}

#[test]
fn bad_queries_name_the_field() {
    assert_eq!(field_of(&Query { n: 0, ..query() }), "n");
    assert_eq!(field_of(&Query { k: 0, ..query() }), "k");
    // K must be a multiple of 32 (whole 16-byte lines of codes), also for NVFP4's 16-blocks.
    assert_eq!(field_of(&Query { k: 7168 + 16, ..query() }), "k");
    assert_eq!(field_of(&Query { out_dtype: DType::I32, ..query() }), "out_dtype");
    assert_eq!(field_of(&Query { bias: Some(DType::F16), ..query() }), "bias");
    assert_eq!(field_of(&Query { max_rows: 0, ..query() }), "max_rows");
    assert_eq!(field_of(&Query { max_rows: MAX_CAPACITY + 1, ..query() }), "max_rows");
    // Above the decode buckets the tiled kernels serve M: any capacity up to MAX_CAPACITY.
    assert_eq!(field_of(&Query { max_rows: MAX_ROWS + 1, ..query() }), "ok");
    assert_eq!(field_of(&Query { max_rows: MAX_CAPACITY, ..query() }), "ok");
    // Block FP8 weights come in 128 × 128 or 32 × 32 tiles only.
    let weight = WeightFormat::BlockFp8 { tile: 64, scale: Fp8ScaleKind::F32 };
    assert_eq!(field_of(&Query { weight, ..query() }), "weight");
    // f32 activation scales: block-FP8 weights (their promoted partial sums take the x scale),
    // 1 × 128 groups; everything else typed, never a silent fallback.
    let x_format = XFormat::BlockFp8 { group: 128, scale: Fp8ScaleKind::F32 };
    assert_eq!(field_of(&Query { x_format, ..query() }), "unsupported");
    for weight in [WeightFormat::Mxfp4, WeightFormat::Mxfp8, WeightFormat::TensorFp8] {
        assert_eq!(field_of(&Query { x_format, weight, ..query() }), "unsupported", "{weight:?}");
    }
    for tile in [32, 128] {
        for scale in [Fp8ScaleKind::F32, Fp8ScaleKind::Ue8m0] {
            let weight = WeightFormat::BlockFp8 { tile, scale };
            for max_rows in [1, 16, 17, 8192] {
                assert_eq!(field_of(&Query { x_format, weight, max_rows, ..query() }), "ok");
            }
            let x32 = XFormat::BlockFp8 { group: 32, scale: Fp8ScaleKind::F32 };
            assert_eq!(field_of(&Query { x_format: x32, weight, ..query() }), "unsupported");
        }
    }
    assert!(x_format.f32_scales() && !XFormat::BlockFp8 { group: 128, scale: Fp8ScaleKind::Ue8m0 }.f32_scales());
}

#[test]
fn pre_quantized_activations_validate() {
    let block = |group| XFormat::BlockFp8 { group, scale: Fp8ScaleKind::Ue8m0 };
    // Every activation format with every weight format (NVFP4 × NVFP4, W4A8, FP8 × FP8, mixed).
    for x_format in [XFormat::Mxfp8, XFormat::Nvfp4, block(32), block(128), XFormat::TensorFp8] {
        for weight in [
            WeightFormat::Nvfp4,
            WeightFormat::Mxfp4,
            WeightFormat::Mxfp8,
            WeightFormat::BlockFp8 { tile: 128, scale: Fp8ScaleKind::F32 },
            WeightFormat::TensorFp8,
        ] {
            for max_rows in [1, 16, 17, 8192] {
                let q = Query { x_format, weight, max_rows, ..query() };
                assert_eq!(field_of(&q), "ok", "{q:?}");
            }
        }
        // x is already quantized: quantizing it again in the call is a contradiction.
        assert_eq!(field_of(&Query { x_format, x_quant: Some(XQuant::Mxfp8), ..query() }), "x_quant");
    }
    assert_eq!(field_of(&Query { x_format: block(64), ..query() }), "x_format");
    assert_eq!(field_of(&Query { k: 7168 + 32, x_format: block(128), ..query() }), "x_format");
    assert_eq!(field_of(&Query { k: 7168 + 32, x_format: block(32), ..query() }), "ok");
    // Code bytes per row, k per scale byte, tensor scale.
    assert_eq!((XFormat::Nvfp4.row_bytes(64), XFormat::Nvfp4.group(), XFormat::Nvfp4.has_global()), (32, 16, true));
    assert_eq!((XFormat::Mxfp8.row_bytes(64), XFormat::Mxfp8.group(), XFormat::Mxfp8.has_global()), (64, 32, false));
    assert_eq!((XFormat::TensorFp8.group(), XFormat::TensorFp8.has_global()), (0, true));
    assert_eq!((XFormat::Bf16.row_bytes(64), XFormat::Bf16.name()), (128, "bf16".to_string()));
}

#[test]
fn every_bucket_has_configs_and_symbols_are_distinct() {
    for hi in [1, 2, 4, 8, 16] {
        assert!(!configs(hi, 232_448, false).is_empty());
        assert!(!configs(hi, 232_448, true).is_empty());
    }
    for hi in [32, 64, 128, 1 << 20] {
        for f in
            [WeightFormat::Nvfp4, WeightFormat::Mxfp8, WeightFormat::BlockFp8 { tile: 32, scale: Fp8ScaleKind::F32 }]
        {
            assert!(!tile_configs(hi, 232_448, f).is_empty());
            assert!(!tile_configs(hi, 101_376, f).is_empty());
        }
    }
    let mut all = all_symbols();
    all.sort();
    all.dedup();
    // Five weight kernels (NVFP4, MXFP4, MXFP8, block FP8, per-tensor FP8) × NT × KB × 3 outputs
    // (decode), six (the five, and block FP8 × f32-scaled x) × 3 tile shapes × 3 outputs (tiled),
    // the native kernels (MXFP8, UE8M0 block-FP8, MXFP4 and NVFP4 weights × 3 tile shapes × 3 outputs),
    // the SM90 wgmma kernels (the five weight formats, block FP8 twice and block FP8 × f32-scaled x
    // twice, × 3 outputs) and the x pre-passes (quantize bf16 x, dequantize pre-quantized x, stage
    // x for the native kernels).
    assert_eq!(all.len(), 5 * 2 * 2 * 3 + 6 * 3 * 3 + 4 * 3 * 3 + 8 * 3 + 3);
}

#[test]
fn fixed_linears_map_to_blockscaled_queries() {
    use b12x_gemm::blockscaled::linear::{block_fp8_linear, mxfp8_linear, tensor_fp8_linear, BLOCK_FP8_LINEAR};
    let b = |tile, k| block_fp8_linear::Query {
        n: 1536,
        k,
        tile,
        weight_scale: Fp8ScaleKind::F32,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: 64,
    };
    // DeepSeek's 128 × 128 weights take 1 × 128 activation groups; V4.1's 32 × 32 take 1 × 32.
    for (tile, k) in [(128, 7168), (32, 7168 + 32)] {
        let q = b(tile, k).blockscaled().unwrap();
        assert_eq!(q.weight, WeightFormat::BlockFp8 { tile, scale: Fp8ScaleKind::F32 });
        assert_eq!((q.x_format, q.x_quant), (XFormat::Bf16, Some(XQuant::BlockFp8Ue8m0 { group: tile })));
        assert_eq!(field_of(&q), "ok");
    }
    let named = |r: b12x_core::Result<Query>| match r {
        Err(Error::InvalidQuery { op, field, .. }) => format!("{op}:{field}"),
        other => format!("{other:?}"),
    };
    assert_eq!(named(b(64, 7168).blockscaled()), format!("{BLOCK_FP8_LINEAR}:tile"));
    assert_eq!(named(b(128, 7168 + 32).blockscaled()), format!("{BLOCK_FP8_LINEAR}:k"));
    let m = mxfp8_linear::Query { n: 4096, k: 7168, out_dtype: DType::F32, bias: Some(DType::F32), max_rows: 8 };
    let q = m.blockscaled().unwrap();
    assert_eq!((q.weight, q.x_format, q.x_quant), (WeightFormat::Mxfp8, XFormat::Bf16, Some(XQuant::Mxfp8)));
    assert_eq!((q.out_dtype, q.bias, q.max_rows), (DType::F32, Some(DType::F32), 8));
    let t = tensor_fp8_linear::Query { n: 2048, k: 768, out_dtype: DType::BF16, bias: None, max_rows: 300 };
    let q = t.blockscaled().unwrap();
    assert_eq!((q.weight, q.x_format, q.x_quant), (WeightFormat::TensorFp8, XFormat::TensorFp8, None));
    assert_eq!(field_of(&q), "ok");
    // Bad fields of the generic op stay typed (plan() renames the op to the linear's).
    let bad = tensor_fp8_linear::Query { k: 770, ..t };
    assert_eq!(field_of(&bad.blockscaled().unwrap()), "k");
}

#[test]
fn native_configs_fit_and_name_entry_points() {
    // E4M3 x with UE8M0 scales (given or quantized in the call) × MXFP8, UE8M0 block-FP8 or
    // MXFP4 weights, and NVFP4 x (given) × NVFP4 weights; nothing else.
    let q = Query { x_format: XFormat::Mxfp8, weight: WeightFormat::Mxfp8, ..query() };
    let ue = Fp8ScaleKind::Ue8m0;
    assert_eq!(NativeKind::of(&q), Some(NativeKind::Mxf8));
    assert_eq!(NativeKind::of(&Query { x_format: XFormat::Bf16, ..q.clone() }), None);
    assert_eq!(NativeKind::of(&Query { weight: WeightFormat::Nvfp4, ..q.clone() }), None);
    let fused = Query { x_format: XFormat::Bf16, x_quant: Some(XQuant::BlockFp8Ue8m0 { group: 128 }), ..q.clone() };
    assert_eq!(NativeKind::of(&fused), Some(NativeKind::Mxf8));
    let block = |tile, scale| WeightFormat::BlockFp8 { tile, scale };
    assert_eq!(NativeKind::of(&Query { weight: block(128, ue), ..fused.clone() }), Some(NativeKind::Fp8Block));
    assert_eq!(NativeKind::of(&Query { weight: block(32, ue), ..q.clone() }), Some(NativeKind::Fp8Block));
    // f32 weight or activation scales are not powers of two: no UE8M0 operand for the MMA.
    assert_eq!(NativeKind::of(&Query { weight: block(128, Fp8ScaleKind::F32), ..q.clone() }), None);
    let x_f32 = XFormat::BlockFp8 { group: 128, scale: Fp8ScaleKind::F32 };
    assert_eq!(NativeKind::of(&Query { x_format: x_f32, ..q.clone() }), None);
    assert_eq!(NativeKind::of(&Query { x_format: XFormat::Nvfp4, ..q.clone() }), None);
    assert_eq!(NativeKind::of(&Query { weight: WeightFormat::Mxfp4, ..q.clone() }), Some(NativeKind::Mxf4));
    let nv = Query { x_format: XFormat::Nvfp4, weight: WeightFormat::Nvfp4, ..q.clone() };
    assert_eq!(NativeKind::of(&nv), Some(NativeKind::Nvf4));
    // NVFP4 weights against anything but NVFP4 x (MXFP4 weights against NVFP4 x): no native pair.
    assert_eq!(NativeKind::of(&Query { x_format: XFormat::Mxfp8, ..nv.clone() }), None);
    assert_eq!(NativeKind::of(&Query { x_format: XFormat::Bf16, x_quant: Some(XQuant::Mxfp8), ..nv.clone() }), None);
    assert_eq!(NativeKind::of(&Query { weight: WeightFormat::Mxfp4, ..nv }), None);
    let symbols = all_symbols();
    for smem in [232_448, 101_376] {
        for (hi, kind) in [
            (32, NativeKind::Mxf8),
            (64, NativeKind::Fp8Block),
            (256, NativeKind::Mxf8),
            (8192, NativeKind::Mxf8),
            (64, NativeKind::Mxf4),
            (8192, NativeKind::Mxf4),
            (32, NativeKind::Nvf4),
            (8192, NativeKind::Nvf4),
        ] {
            let cs = native_configs(hi, smem, kind);
            assert!(!cs.is_empty(), "hi={hi} smem={smem}");
            let mut ids: Vec<String> = cs.iter().map(|c| c.id()).collect();
            ids.dedup();
            assert_eq!(ids.len(), cs.len());
            for c in cs {
                assert!(c.dynamic_smem() + 1280 <= smem, "{}", c.id());
                assert!(c.tile.stages >= 2);
                assert!(symbols.contains(&c.symbol(DType::F16)), "{}", c.id());
                // Same tiles as the dequantizing kernels: code rows for x (128 bytes, NVFP4 64) and
                // the weight (FP8 128 bytes, FP4 64), the weight's 2 KB of scale tiles and x's
                // 512-byte tile (NVFP4: two) per stage.
                let (bm, bn) = c.tile.tile();
                let (xb, wb, xs) = match kind {
                    NativeKind::Mxf8 | NativeKind::Fp8Block => (128, 128, 512),
                    NativeKind::Mxf4 => (128, 64, 512),
                    NativeKind::Nvf4 => (64, 64, 1024),
                };
                assert_eq!(c.stage_bytes() as usize, bm * xb + bn * wb + 2048 + xs);
                assert!(c
                    .symbol(DType::BF16)
                    .starts_with(&format!("b12x_bsgemm_native_{}_", c.id().split('_').nth(1).unwrap())));
            }
        }
    }
}

/// The decode kernels' SASS instruction counts (`cuobjdump -sass` of the pinned CUDA 13.0 build,
/// without the end padding), per `(format, NT, KB)` — the largest of the three output types — for
/// sm_90a and for sm_120a / sm_121a (the same code). Measured at the session-44 head.
const DECODE_SASS: &[(&str, usize, usize, usize, usize)] = &[
    ("w4a16_mxfp4", 1, 1, 2400, 3084),
    ("w4a16_mxfp4", 1, 2, 2899, 3928),
    ("w4a16_mxfp4", 2, 1, 2701, 3673),
    ("w4a16_mxfp4", 2, 2, 3457, 4803),
    ("w4a16_nvfp4", 1, 1, 2479, 3165),
    ("w4a16_nvfp4", 1, 2, 2995, 4032),
    ("w4a16_nvfp4", 2, 1, 2785, 3765),
    ("w4a16_nvfp4", 2, 2, 3554, 4908),
    ("w8a16_fp8block", 1, 1, 2239, 2676),
    ("w8a16_fp8block", 1, 2, 2975, 3654),
    ("w8a16_fp8block", 2, 1, 2431, 3176),
    ("w8a16_fp8block", 2, 2, 3286, 4340),
    ("w8a16_fp8tensor", 1, 1, 1913, 2367),
    ("w8a16_fp8tensor", 1, 2, 2288, 3048),
    ("w8a16_fp8tensor", 2, 1, 2101, 2833),
    ("w8a16_fp8tensor", 2, 2, 2605, 3658),
    ("w8a16_mxfp8", 1, 1, 2295, 2969),
    ("w8a16_mxfp8", 1, 2, 2696, 3697),
    ("w8a16_mxfp8", 2, 1, 2479, 3446),
    ("w8a16_mxfp8", 2, 2, 3016, 4316),
];

/// The decode body's code size stays within 10% of its measured size: its consumers' hot loop
/// shares the instruction cache with the whole kernel, and session 43 measured b12x-moe's
/// instantiation of the same body 0–12% slower at +19% instructions and up to 2× slower at +280%
/// (`b12x-moe/src/fused_moe/README.md`). An edit of `bsgemv_decode.cuh` that inlines more than
/// it looks like fails here, on the CPU; one that grows the code on purpose updates the table
/// with the GPU numbers that justify it.
#[test]
fn decode_kernels_stay_within_their_code_size() {
    let budget = |arch: &str, name: &str| {
        let row =
            DECODE_SASS.iter().find(|(f, nt, kb, _, _)| name.starts_with(&format!("b12x_bsgemv_{f}_nt{nt}_kb{kb}_")));
        row.map_or(0, |&(_, _, _, sm90, sm120)| (if arch == "sm_90a" { sm90 } else { sm120 }) * 11 / 10)
    };
    // 5 formats x NT 1, 2 x KB 1, 2 x 3 output types.
    b12x_core::testing::check_sass_size(
        b12x_gemm::BLOCKSCALED_GEMV_FATBIN,
        b12x_gemm::KERNEL_MANIFEST,
        "b12x_bsgemv_w",
        60,
        budget,
    )
    .unwrap();
}
