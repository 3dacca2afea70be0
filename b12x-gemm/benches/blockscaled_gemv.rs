//! Benchmark of `gemm.blockscaled`'s decode path (W4A16 and W8A16) with the method of DESIGN.md
//! §7: one op call per CUDA graph replay, L2 flushed before each sample, median of
//! `bench::samples()` (≥ 20), the oracle checked on sampled rows before timing, configs chosen by
//! the session's autotune race.
//!
//! Grid: weight ∈ {NVFP4, MXFP4 (`blockscaled_w4a16_*`), MXFP8, block FP8 128 × 128 with f32
//! scales (`blockscaled_w8a16_*`), MXFP4 with x quantized to MXFP8 in the call
//! (`blockscaled_w4a8_mxfp4`), block FP8 128² with x quantized to block FP8 1×128 UE8M0
//! (`blockscaled_w8a8_fp8block128`)} × M ∈ {1, 2, 4, 8, 16} × (N, K) ∈ {(18432, 7168), (36864,
//! 7168), (7168, 18432)} (the issue's ≥ 64 MB shapes at BF16; 70–272 MB of codes + scales) and
//! {(4096, 7168), (7168, 2048)} (smaller, reported in µs), bf16 x and y. Bytes are the weight's
//! codes + scales (the measure; x and y add < 0.1%); FLOPs 2·M·N·K. Before each shape a
//! `read_probe/…` row times the project's read probes reading exactly those bytes: the
//! size-matched ceiling. Peer: cuBLAS BF16 on the dequantized weight (`bench/peers.py`:
//! `F.linear`, keyed `blockscaled_w4a16/M{m}_N{n}_K{k}_bf16`; the issue expects ≥ 3× for FP4);
//! each W8A16 row at M = 16 appears twice, the second (`…_bf16@scaled_mm`, the same samples)
//! against `torch._scaled_mm` FP8 (`blockscaled_fp8_scaled_mm/M16_N{n}_K{k}`; run peers.py with
//! `--only blockscaled` to get both).
//! The tiled path (middle and prefill buckets): `blockscaled_prefill_{w4a16_nvfp4|w4a16_mxfp4|
//! w8a16_mxfp8|w8a16_fp8block128}/M{m}_N{n}_K{k}_bf16`, M ∈ {64, 256, 2048, 8192}, (N, K) ∈
//! {(7168, 7168), (18432, 7168)} (the prefill shapes), TFLOP/s = 2·M·N·K / time, the
//! oracle checked on x's first 64 rows; peers cuBLAS BF16 (`blockscaled_prefill_bf16/…`) and, in a
//! second row per case (`…@fp8`), cuBLASLt FP8 via `torch._scaled_mm` (`blockscaled_prefill_fp8/…`).
//! Pre-quantized NVFP4 activations × NVFP4 weights (`quantization.nvfp4`'s output: codes,
//! row-major scales, encode scale on the device; the call's dequantization pre-pass timed with
//! it): `blockscaled_w4a4_nvfp4/…` at the decode shapes and `blockscaled_prefill_w4a4_nvfp4/…`,
//! against the same peers. Pre-quantized block FP8 1 × 128 activations with f32 scales (DeepSeek-V3's
//! recipe, `norm.rmsnorm_quant`'s block-FP8 output) × block FP8 128² f32 weights:
//! `blockscaled_w8a8f32_fp8block128/…` and `blockscaled_prefill_w8a8f32_fp8block128/…` (the
//! pre-pass that stages the codes and copies the scales timed with the call), same peers.
//! `B12X_BENCH_QUICK=1` keeps M ∈ {1, 16} and {2048, 8192}.
//!
//! Run: `cargo bench -p b12x-gemm --bench blockscaled_gemv` (rows go to
//! `bench-results/blockscaled_gemv.{json,md}`).

use b12x_core::bench::{samples, time_graph, BenchReport};
use b12x_core::cudarc::driver::CudaSlice;
use b12x_core::half::bf16;
use b12x_core::testing::{cast, gpu, uniform};
use b12x_core::{DType, Device, PreparationSession, Result, Scratch, TensorMut, TensorRef, SCRATCH_ALIGN};
use b12x_gemm::blockscaled::gemv::{self, Args, Query, XFormat, XQuant};
use b12x_gemm::blockscaled::pack::{pack_weight, PackedWeight, WeightFormat};
use b12x_gemm::blockscaled::{reference, Activation, Weight};
use b12x_quant::block::{
    quantize_block_fp8, quantize_mx, quantize_nvfp4, BlockFp8, Fp8ScaleKind, Fp8Scales, Mx, MxOptions, Nvfp4,
};
use b12x_quant::codec::Element;
use std::sync::Arc;

const ROWS: [usize; 5] = [1, 2, 4, 8, 16];
const QUICK_ROWS: [usize; 2] = [1, 16];
const SHAPES: [(usize, usize); 5] = [(18432, 7168), (36864, 7168), (7168, 18432), (4096, 7168), (7168, 2048)];
/// Distinct quantized rows; larger weights repeat them (values do not change the speed).
const DISTINCT_ROWS: usize = 256;
/// Every SAMPLE-th row of W is checked against the oracle before timing.
const SAMPLE: usize = 97;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("blockscaled_gemv bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let quick = b12x_core::bench::quick();
    let mut report = BenchReport::new("blockscaled_gemv", &dev)?;
    report.note(
        "Bytes = the packed weight's codes + scales (NVFP4: 0.5625 B per weight, MXFP4: 0.53125, \
         MXFP8: 1.03125, block FP8 128 × 128: 1.0002); the peer is cuBLAS BF16 (F.linear) on a BF16 \
         weight of the same shape (2 B per weight).",
    );
    let block = WeightFormat::BlockFp8 { tile: 128, scale: Fp8ScaleKind::F32 };
    for format in [WeightFormat::Nvfp4, WeightFormat::Mxfp4, WeightFormat::Mxfp8, block] {
        for (n, k) in SHAPES {
            bench_shape(&dev, &mut report, format, XMode::Bf16(None), (n, k), quick)?;
        }
    }
    // Activations quantized inside the call: W4A8 (MXFP4 × MXFP8) and DeepSeek's block FP8 ×
    // block FP8 1×128 (UE8M0), the pre-pass included in the timed call.
    let fused = [(WeightFormat::Mxfp4, XQuant::Mxfp8), (block, XQuant::BlockFp8Ue8m0 { group: 128 })];
    for (format, xq) in fused {
        for (n, k) in SHAPES {
            bench_shape(&dev, &mut report, format, XMode::Bf16(Some(xq)), (n, k), quick)?;
        }
    }
    // Pre-quantized NVFP4 activations × NVFP4 weights (W4A4 on SM90: the dequantization pre-pass
    // included in the timed call).
    for (n, k) in SHAPES {
        bench_shape(&dev, &mut report, WeightFormat::Nvfp4, XMode::Nvfp4, (n, k), quick)?;
    }
    for (n, k) in SHAPES {
        bench_shape(&dev, &mut report, block, XMode::BlockFp8F32, (n, k), quick)?;
    }
    for format in [WeightFormat::Nvfp4, WeightFormat::Mxfp4, WeightFormat::Mxfp8, block] {
        for (n, k) in PREFILL_SHAPES {
            bench_prefill(&dev, &mut report, format, XMode::Bf16(None), (n, k), quick)?;
        }
    }
    for (n, k) in PREFILL_SHAPES {
        bench_prefill(&dev, &mut report, WeightFormat::Nvfp4, XMode::Nvfp4, (n, k), quick)?;
    }
    for (n, k) in PREFILL_SHAPES {
        bench_prefill(&dev, &mut report, block, XMode::BlockFp8F32, (n, k), quick)?;
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}

const PREFILL_ROWS: [usize; 4] = [64, 256, 2048, 8192];
const PREFILL_QUICK_ROWS: [usize; 2] = [2048, 8192];
const PREFILL_SHAPES: [(usize, usize); 2] = [(7168, 7168), (18432, 7168)];
/// Rows of x checked against the oracle before timing a prefill case.
const PREFILL_CHECK_ROWS: usize = 64;

/// How the benched calls pass x: bf16 (optionally quantized in the call), or pre-quantized for
/// the whole `mx`-row x: NVFP4 (`quantization.nvfp4`'s output: codes, row-major scales, its encode
/// scale on the device) or block FP8 1 × 128 with f32 scales (codes, row-major f32 scales).
#[derive(Clone, Copy, Debug, PartialEq)]
enum XMode {
    Bf16(Option<XQuant>),
    Nvfp4,
    BlockFp8F32,
}

const X_BLOCK_F32: XFormat = XFormat::BlockFp8 { group: 128, scale: Fp8ScaleKind::F32 };

impl XMode {
    /// The pre-quantized x format, if any.
    fn pre(self) -> Option<XFormat> {
        match self {
            XMode::Bf16(_) => None,
            XMode::Nvfp4 => Some(XFormat::Nvfp4),
            XMode::BlockFp8F32 => Some(X_BLOCK_F32),
        }
    }
}

/// A pre-quantized x on the device: codes, block scales (bytes), the NVFP4 encode scale.
struct PreQ {
    _bufs: (CudaSlice<u8>, CudaSlice<u8>, CudaSlice<f32>),
    ptrs: (u64, u64, u64),
    format: XFormat,
    enc: f32,
}

/// One plan of capacity `mx` over a packed weight, prepared, with x (uniform bf16, `mx` rows) and
/// y on the device: each `measure(m)` checks the oracle on sampled rows then times the call.
struct Bench<'a> {
    dev: &'a Arc<Device>,
    plan: gemv::Plan,
    packed: &'a PackedWeight,
    small: &'a Weight,
    xmode: XMode,
    pre: Option<PreQ>,
    x_h: Vec<bf16>,
    _x: CudaSlice<bf16>,
    y: CudaSlice<bf16>,
    _scratch: CudaSlice<u8>,
    sp: u64,
    scratch_bytes: usize,
    session: PreparationSession,
    rows: Vec<usize>,
    small_rows: Vec<usize>,
    xp: u64,
    yp: u64,
}

impl<'a> Bench<'a> {
    fn new(
        dev: &'a Arc<Device>,
        (packed, small): (&'a PackedWeight, &'a Weight),
        xmode: XMode,
        (n, k): (usize, usize),
        mx: usize,
    ) -> Result<Self> {
        let stream = dev.stream();
        let x_h = cast::<bf16>(&uniform(2, mx * k, -1.0, 1.0));
        let x = stream.clone_htod(&x_h)?;
        let (xq, x_format) = match xmode {
            XMode::Bf16(xq) => (xq, XFormat::Bf16),
            _ => (None, xmode.pre().unwrap_or(XFormat::Bf16)),
        };
        let pre = match xmode.pre() {
            Some(format) => {
                let bad = |e: b12x_quant::block::FormatError| b12x_core::Error::InvalidQuery {
                    op: "bench",
                    field: "x",
                    reason: e.to_string(),
                };
                let (codes, scales, enc) = match reference::pre_quantized(mx, k, &x_h, format).map_err(bad)? {
                    Activation::Nvfp4(q) => (q.codes, q.scales, q.enc),
                    Activation::BlockFp8(BlockFp8 { codes, scales: Fp8Scales::F32(sc), .. }) => {
                        (codes, sc.iter().flat_map(|v| v.to_le_bytes()).collect(), 1.0)
                    }
                    _ => unreachable!("pre_quantized gives the format asked for"),
                };
                let (c, sc, g) = (stream.clone_htod(&codes)?, stream.clone_htod(&scales)?, stream.clone_htod(&[enc])?);
                let ptrs = (
                    TensorRef::from_slice(&c, &[c.len()])?.ptr(),
                    TensorRef::from_slice(&sc, &[sc.len()])?.ptr(),
                    TensorRef::from_slice(&g, &[1])?.ptr(),
                );
                Some(PreQ { _bufs: (c, sc, g), ptrs, format, enc })
            }
            None => None,
        };
        let y = stream.alloc_zeros::<bf16>(mx * n)?;
        let q = Query {
            n,
            k,
            weight: packed.format,
            x_format,
            out_dtype: DType::BF16,
            bias: None,
            max_rows: mx,
            x_quant: xq,
        };
        let plan = gemv::plan(&q, dev)?;
        let scratch_bytes = plan.scratch_layout().total_bytes();
        let scratch = stream.alloc_zeros::<u8>(scratch_bytes + SCRATCH_ALIGN)?;
        let sp = TensorRef::from_slice(&scratch, &[scratch.len()])?.ptr().next_multiple_of(SCRATCH_ALIGN as u64);
        let mut session = PreparationSession::new(dev)?;
        session.prepare(&[&plan])?;
        let rows: Vec<usize> = (0..n).step_by(SAMPLE).chain([n - 1]).collect();
        let small_rows: Vec<usize> = rows.iter().map(|r| r % DISTINCT_ROWS.min(n)).collect();
        let (xp, yp) = (TensorRef::from_slice(&x, &[mx, k])?.ptr(), TensorRef::from_slice(&y, &[mx * n])?.ptr());
        Ok(Bench {
            dev,
            plan,
            packed,
            small,
            xmode,
            pre,
            x_h,
            _x: x,
            y,
            _scratch: scratch,
            sp,
            scratch_bytes,
            session,
            rows,
            small_rows,
            xp,
            yp,
        })
    }

    /// `(config, times in µs)` of the call at `m` rows, after checking its first `check` rows of
    /// y (sampled columns) against the oracle.
    fn measure(&self, case: &str, m: usize, check: usize) -> Result<(String, Vec<f64>)> {
        let (n, k) = (self.packed.n, self.packed.k);
        let bucket = b12x_core::plan::bucket_of(b12x_core::OpPlan::buckets(&self.plan), m).unwrap_or(0);
        let config = b12x_core::OpPlan::slot(&self.plan).get(bucket).map(|s| s.config.clone()).unwrap_or_default();
        let call = |s: &Arc<b12x_core::cudarc::driver::CudaStream>| -> Result<()> {
            // SAFETY: `x` holds mx ≥ m rows of K and `y` mx ≥ m rows of N; both outlive the calls
            // and the graph, and nothing else touches them meanwhile.
            let yv = unsafe { TensorMut::from_raw(self.yp, &[m, n], &[n as isize, 1], DType::BF16)? };
            let (x, x_scales, x_global) = match &self.pre {
                // SAFETY: the NVFP4 codes ([mx, K/2]), scales ([mx, K/16]) and encode scale live
                // as long as the bench.
                Some(pre) if pre.format == XFormat::Nvfp4 => unsafe {
                    let (c, sc, g) = pre.ptrs;
                    (
                        TensorRef::from_raw(c, &[m, k / 2], &[k as isize / 2, 1], DType::U8)?,
                        Some(TensorRef::from_raw(sc, &[m, k / 16], &[k as isize / 16, 1], DType::U8)?),
                        Some(TensorRef::from_raw(g, &[1], &[1], DType::F32)?),
                    )
                },
                // SAFETY: the block-FP8 codes ([mx, K]) and f32 scales ([mx, K/128]) live as long
                // as the bench.
                Some(pre) => unsafe {
                    let (c, sc, _) = pre.ptrs;
                    (
                        TensorRef::from_raw(c, &[m, k], &[k as isize, 1], DType::U8)?,
                        Some(TensorRef::from_raw(sc, &[m, k / 128], &[k as isize / 128, 1], DType::F32)?),
                        None,
                    )
                },
                // SAFETY: as y.
                None => (unsafe { TensorRef::from_raw(self.xp, &[m, k], &[k as isize, 1], DType::BF16)? }, None, None),
            };
            let args = Args { x, x_scales, x_global, w: self.packed, bias: None, y: yv, alpha: 1.0 };
            // SAFETY: the plan's scratch buffer, used by nothing else.
            let scratch = unsafe { Scratch::from_raw(self.sp, self.scratch_bytes) };
            gemv::run(&self.plan, args, scratch, s)
        };
        let stream = self.dev.stream();
        call(stream)?;
        stream.synchronize()?;
        let got: Vec<f64> = stream.clone_dtoh(&self.y)?.iter().map(|v| v.to_f64()).collect();
        let mc = m.min(check);
        let bad = |field: &'static str, e: String| b12x_core::Error::InvalidQuery { op: "bench", field, reason: e };
        let xq = match self.xmode {
            XMode::Bf16(xq) => xq,
            _ => None,
        };
        let a = match &self.pre {
            // The first mc rows of the quantized x: the same codes and scales under its encode scale.
            Some(pre) if pre.format == XFormat::Nvfp4 => {
                let f: Vec<f32> = self.x_h[..mc * k].iter().map(|v| v.to_f32()).collect();
                quantize_nvfp4(&f, mc, k, Some(pre.enc)).map(Activation::Nvfp4)
            }
            // Block FP8 rows quantize independently: the first mc rows' codes and scales.
            Some(pre) => reference::pre_quantized(mc, k, &self.x_h[..mc * k], pre.format),
            None => reference::activation(mc, k, &self.x_h[..mc * k], xq),
        }
        .map_err(|e| bad("x", e.to_string()))?;
        let want =
            reference::exact(&a, self.small, 1.0, None, &self.small_rows).map_err(|e| bad("oracle", e.to_string()))?;
        let rows = &self.rows;
        let got: Vec<f64> =
            (0..mc).flat_map(|i| rows.iter().map(move |&r| (i, r))).map(|(i, r)| got[i * n + r]).collect();
        if let Err(e) = reference::check_bound(case, DType::BF16, &got, &want, &[mc, rows.len()]) {
            panic!("oracle check failed before timing: {e}");
        }
        Ok((config, time_graph(self.dev, samples(), call)?))
    }

    fn close(self) {
        self.session.close();
    }
}

/// The tiled path at the middle and prefill M: one plan of capacity 8192 per (format, shape).
fn bench_prefill(
    dev: &Arc<Device>,
    report: &mut BenchReport,
    format: WeightFormat,
    xmode: XMode,
    (n, k): (usize, usize),
    quick: bool,
) -> Result<()> {
    let (fname, wa) = names(format);
    let wa = match xmode {
        XMode::Nvfp4 => "w4a4",
        XMode::BlockFp8F32 => "w8a8f32",
        XMode::Bf16(_) => wa,
    };
    let case_name = |m: usize| format!("blockscaled_prefill_{wa}_{fname}/M{m}_N{n}_K{k}_bf16");
    let ms: Vec<usize> = PREFILL_ROWS
        .into_iter()
        .filter(|m| !quick || PREFILL_QUICK_ROWS.contains(m))
        .filter(|&m| b12x_core::bench::selected(&case_name(m)))
        .collect();
    if ms.is_empty() {
        return Ok(());
    }
    let (small, big) = tiled_weight(format, n, k)?;
    let packed = pack_weight(&big, dev.stream())?;
    drop(big);
    let w_bytes = packed.codes.len() + packed.scales.len();
    let bench = Bench::new(dev, (&packed, &small), xmode, (n, k), *PREFILL_ROWS.iter().max().unwrap_or(&1))?;
    for m in ms {
        let case = case_name(m);
        let (config, times) = bench.measure(&case, m, PREFILL_CHECK_ROWS)?;
        let flops = (2 * m * n * k) as f64;
        report.add_vs(
            &case,
            &format!("blockscaled_prefill_bf16/M{m}_N{n}_K{k}"),
            &config,
            &times,
            w_bytes as f64,
            flops,
        );
        let fp8 = format!("blockscaled_prefill_fp8/M{m}_N{n}_K{k}");
        report.add_vs(&format!("{case}@fp8"), &fp8, &config, &times, w_bytes as f64, flops);
    }
    bench.close();
    Ok(())
}

/// `(format, weight × activation)` parts of the case names: `("nvfp4", "w4a16")`, …
fn names(format: WeightFormat) -> (&'static str, &'static str) {
    match format {
        WeightFormat::Nvfp4 => ("nvfp4", "w4a16"),
        WeightFormat::Mxfp4 => ("mxfp4", "w4a16"),
        WeightFormat::Mxfp8 => ("mxfp8", "w8a16"),
        WeightFormat::BlockFp8 { .. } => ("fp8block128", "w8a16"),
        WeightFormat::TensorFp8 => ("fp8tensor", "w8a16"),
    }
}

/// `DISTINCT_ROWS` quantized rows repeated to `n` rows (codes and row-major scales tile by rows,
/// block-FP8 scales by rows of 128-row tiles; NVFP4 keeps one encode scale). `n` is a multiple of
/// 128.
fn tiled_weight(format: WeightFormat, n: usize, k: usize) -> Result<(Weight, Weight)> {
    let d = DISTINCT_ROWS.min(n);
    let mut w = uniform(1, d * k, -1.0, 1.0);
    for (r, row) in w.chunks_mut(k).enumerate() {
        let mag = 2f32.powi((r % 9) as i32 - 4);
        row.iter_mut().for_each(|v| *v *= mag);
    }
    let rep = |v: &[u8]| -> Vec<u8> { v.iter().copied().cycle().take(v.len() / d * n).collect() };
    let bad = |e: b12x_quant::block::FormatError| b12x_core::Error::InvalidQuery {
        op: "bench",
        field: "weight",
        reason: e.to_string(),
    };
    Ok(match format {
        WeightFormat::Nvfp4 => {
            let q = quantize_nvfp4(&w, d, k, None).map_err(bad)?;
            let big = Nvfp4 { rows: n, k, codes: rep(&q.codes), scales: rep(&q.scales), enc: q.enc };
            (Weight::Nvfp4(q), Weight::Nvfp4(big))
        }
        WeightFormat::Mxfp4 | WeightFormat::Mxfp8 => {
            let element = if format == WeightFormat::Mxfp4 { Element::E2M1 } else { Element::E4M3 };
            let q = quantize_mx(&w, d, k, element, MxOptions::default()).map_err(bad)?;
            let big = Mx { element, rows: n, k, codes: rep(&q.codes), scales: rep(&q.scales) };
            (Weight::Mx(q), Weight::Mx(big))
        }
        WeightFormat::BlockFp8 { tile, scale } => {
            let q = quantize_block_fp8(&w, d, k, (tile, tile), scale).map_err(bad)?;
            let tiles = n / tile * k.div_ceil(tile);
            let scales = match &q.scales {
                Fp8Scales::F32(v) => Fp8Scales::F32(v.iter().copied().cycle().take(tiles).collect()),
                Fp8Scales::Ue8m0(v) => Fp8Scales::Ue8m0(v.iter().copied().cycle().take(tiles).collect()),
            };
            let big = BlockFp8 { rows: n, k, tile: q.tile, codes: rep(&q.codes), scales };
            (Weight::BlockFp8(q), Weight::BlockFp8(big))
        }
        WeightFormat::TensorFp8 => {
            let q = b12x_quant::block::quantize_tensor_fp8(&w, None).map_err(bad)?;
            let big = b12x_quant::block::TensorFp8 { codes: rep(&q.codes), scale: q.scale };
            (Weight::TensorFp8 { n: d, k, q }, Weight::TensorFp8 { n, k, q: big })
        }
    })
}

fn bench_shape(
    dev: &Arc<Device>,
    report: &mut BenchReport,
    format: WeightFormat,
    xmode: XMode,
    (n, k): (usize, usize),
    quick: bool,
) -> Result<()> {
    let (fname, wa) = names(format);
    let wa = match (xmode, wa) {
        (XMode::Bf16(None), wa) => wa,
        (XMode::Nvfp4, "w4a16") => "w4a4",
        (XMode::Nvfp4, _) => "w8a4",
        (XMode::BlockFp8F32, _) => "w8a8f32",
        (XMode::Bf16(Some(_)), "w4a16") => "w4a8",
        (XMode::Bf16(Some(_)), _) => "w8a8",
    };
    let case_name = |m: usize| format!("blockscaled_{wa}_{fname}/M{m}_N{n}_K{k}_bf16");
    let peer_name = |m: usize| format!("blockscaled_w4a16/M{m}_N{n}_K{k}_bf16");
    let ms: Vec<usize> = ROWS
        .into_iter()
        .filter(|m| !quick || QUICK_ROWS.contains(m))
        .filter(|&m| b12x_core::bench::selected(&case_name(m)))
        .collect();
    if ms.is_empty() {
        return Ok(());
    }
    let stream = dev.stream();
    let (small, big) = tiled_weight(format, n, k)?;
    let packed = pack_weight(&big, stream)?;
    drop(big);
    let scale_bytes = match format {
        WeightFormat::Nvfp4 | WeightFormat::Mxfp4 | WeightFormat::Mxfp8 => n * k / format.block(),
        WeightFormat::BlockFp8 { tile, .. } => 4 * n.div_ceil(tile) * k.div_ceil(tile),
        WeightFormat::TensorFp8 => 0,
    };
    let w_bytes = n * format.code_bytes(k) + scale_bytes;
    let probe_tbps = b12x_core::bench::read_bandwidth_calls(dev, w_bytes, 1)?;
    let probe_us = (w_bytes / 8192 * 8192) as f64 / (probe_tbps * 1e12) * 1e6;
    report.add(
        &format!("read_probe/{fname}_{}MB_N{n}_K{k}", w_bytes >> 20),
        "b12x read probes, best shape",
        &[probe_us],
        w_bytes as f64,
        0.0,
    );
    let bench = Bench::new(dev, (&packed, &small), xmode, (n, k), *ROWS.iter().max().unwrap_or(&1))?;
    for m in ms {
        let case = case_name(m);
        let (config, times) = bench.measure(&case, m, m)?;
        report.add_vs(&case, &peer_name(m), &config, &times, w_bytes as f64, (2 * m * n * k) as f64);
        if (wa == "w8a16" || wa.starts_with("w8a8")) && m == 16 {
            let fp8_peer = format!("blockscaled_fp8_scaled_mm/M16_N{n}_K{k}");
            report.add_vs(
                &format!("{case}@scaled_mm"),
                &fp8_peer,
                &config,
                &times,
                w_bytes as f64,
                (2 * m * n * k) as f64,
            );
        }
    }
    bench.close();
    Ok(())
}
