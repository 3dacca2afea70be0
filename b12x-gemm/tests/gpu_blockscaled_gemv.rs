//! `gemm.blockscaled` (W4A16: packed NVFP4 / MXFP4 weights; W8A16: MXFP8, block FP8 with 128 ×
//! 128 / 32 × 32 tiles and f32 / UE8M0 scales, per-tensor FP8; × BF16 x; the decode kernels for
//! M ≤ 16, the tiled kernels above, M up to 1000 here) on the GPU against the CPU oracle (`blockscaled::reference`): every element within the oracle's
//! bound (1 ULP of a bf16/f16 output plus the K-dependent f32 accumulation term), the cosine
//! difference within 1e-5 (1e-6 for f32), rows and tokens past the output untouched (y starts
//! NaN-poisoned). Shapes from DeepSeek-V4(-Flash), Llama-3-8B and Qwen3-30B-A3B plus awkward N
//! and K (partial row blocks, a partial last k-stage, stream-K CTAs sharing row blocks); every
//! config of the bucket for small shapes, the default for large ones.
//! Further trials: graph replay equals eager bitwise (with stream-K merges, and on the tiled
//! path), `run` allocates nothing, bad inputs are typed errors that launch nothing.

use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{
    aligned_scratch, alloc_scratch, cast, check_graph_replay_equals_eager, check_run_allocates_nothing,
    reduced_profile, run_gpu_trials, session_pinned, uniform, FloatBuf, GpuTrial,
};
use b12x_core::{DType, Device, Error, OpPlan, PreparationSession, TensorRef};
use b12x_gemm::blockscaled::gemv::{self, Args, Plan, Query, XFormat, XQuant};
use b12x_gemm::blockscaled::pack::{pack_weight, PackedWeight, WeightFormat};
use b12x_gemm::blockscaled::Activation;
use b12x_gemm::blockscaled::{reference, Weight};
use b12x_quant::block::{
    quantize_block_fp8, quantize_mx, quantize_nvfp4, quantize_tensor_fp8, Fp8ScaleKind, Fp8Scales, MxOptions,
};
use b12x_quant::codec::Element;
use std::sync::Arc;

type TrialResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[derive(Clone, Copy, Debug)]
struct Case {
    name: &'static str,
    n: usize,
    k: usize,
    ms: &'static [usize],
    out: DType,
    bias: Option<DType>,
    alpha: f32,
    /// Extra elements at the end of each row of x and y.
    pad: usize,
    /// Check every `sample`-th row of W (and the last one) instead of all.
    sample: usize,
    /// Only the default config; skipped in the reduced (sanitizer) profile.
    large: bool,
    /// The weight's values times 2^shift (MXFP4 scale bytes above 128 or far below 127).
    shift: i32,
    /// Every 5th 32-k block of the weight is zero (MX scale byte 0: outside the range the BF16
    /// path holds exactly, ignored because the block's codes are all zero).
    zero_blocks: bool,
    /// x holds a block of zeros and a NaN ([`special`]).
    special_x: bool,
}

const fn case(name: &'static str, n: usize, k: usize, ms: &'static [usize]) -> Case {
    Case {
        name,
        n,
        k,
        ms,
        out: DType::BF16,
        bias: None,
        alpha: 1.0,
        pad: 0,
        sample: 1,
        large: false,
        shift: 0,
        zero_blocks: false,
        special_x: false,
    }
}

const DECODE: &[usize] = &[1, 3, 16];
/// The M list: decode buckets and the tiled kernels' middle and prefill buckets.
const ALL_M: &[usize] = &[1, 3, 16, 17, 64, 128, 1000];
const CASES: &[Case] = &[
    // DeepSeek-V4(-Flash) projections.
    Case { sample: 7, ..case("dsv4_wq_a_7168x1536", 7168, 1536, ALL_M) },
    Case { sample: 3, ..case("dsv4_1536x7168", 1536, 7168, DECODE) },
    Case { sample: 29, large: true, ..case("dsv4_wq_b_24576x1536", 24576, 1536, DECODE) },
    Case { sample: 13, ..case("dsv4_4096x7168", 4096, 7168, &[1, 8, 9, 16, 40]) },
    Case { sample: 31, large: true, ..case("dsv4_down_7168x18432", 7168, 18432, DECODE) },
    Case { out: DType::F32, sample: 3, ..case("dsv4_wkv_576x7168_f32", 576, 7168, &[1, 3, 16, 64, 300]) },
    Case { sample: 37, large: true, ..case("ffn_18432x7168", 18432, 7168, &[1, 4, 16, 512]) },
    // Llama-3-8B and Qwen3-30B-A3B.
    Case { sample: 11, ..case("llama3_8b_qkv_6144x4096", 6144, 4096, &[1, 5, 100]) },
    // More units per CTA than ring stages for every config: the ring wraps (also in the reduced
    // profile the sanitizers run).
    Case { sample: 17, ..case("llama3_8b_down_4096x14336_ring_wraps", 4096, 14336, &[1, 16]) },
    Case { sample: 5, ..case("qwen3_30b_q_4096x2048", 4096, 2048, &[2, 12]) },
    Case { ..case("qwen3_30b_expert_down_2048x768", 2048, 768, &[1, 7, 64]) },
    // Awkward shapes: partial row blocks, K not a multiple of the 256-k stage, tiny, padded
    // rows, every output dtype, bias dtypes, alpha.
    Case { bias: Some(DType::BF16), alpha: 0.75, ..case("awkward_n1000_bias", 1000, 3072, &[1, 6, 17, 200]) },
    Case { out: DType::F16, ..case("awkward_prime_n_f16", 4099, 1056, &[1, 3, 13, 29, 130]) },
    Case { out: DType::F32, bias: Some(DType::F32), ..case("awkward_n129_k96_f32", 129, 96, &[1, 16, 17, 129]) },
    Case { ..case("tiny_1x32", 1, 32, &[1, 2, 33]) },
    Case { pad: 8, alpha: -2.0, bias: Some(DType::F32), ..case("padded_rows", 2048, 2048, &[2, 11, 40, 100]) },
    // Scale bytes far from 127: MXFP4's BF16 exponent offset (c > 0) and tiny weights.
    Case { shift: 24, out: DType::F32, ..case("large_scales_f32", 1000, 2048, &[1, 4, 40]) },
    Case { shift: -30, out: DType::F32, ..case("small_scales_f32", 1000, 2048, &[1, 4, 40]) },
    // Blocks of zeros among tiny scales: without ignoring the zero blocks' scale byte 0, MXFP8
    // would be refused (its range rule needs scale bytes ≥ 3 + c).
    Case { zero_blocks: true, shift: -30, out: DType::F32, ..case("zero_blocks_f32", 1000, 2048, &[1, 5, 40]) },
    // Stream-K CTAs spanning three row blocks with a partial last block and k-stage.
    Case { bias: Some(DType::BF16), ..case("stream_k_three_row_blocks", 9000, 1312, &[1, 9]) },
];

/// Formats every case runs.
const FORMATS: [WeightFormat; 4] = [
    WeightFormat::Nvfp4,
    WeightFormat::Mxfp4,
    WeightFormat::Mxfp8,
    WeightFormat::BlockFp8 { tile: 128, scale: Fp8ScaleKind::F32 },
];
/// Formats the cases of [`SOME`] run (the same kernels as FORMATS' FP8 ones with other scale
/// handling: 32 × 32 tiles, UE8M0 block scales, no block scales).
const MORE_FORMATS: [WeightFormat; 4] = [
    WeightFormat::BlockFp8 { tile: 32, scale: Fp8ScaleKind::F32 },
    WeightFormat::BlockFp8 { tile: 32, scale: Fp8ScaleKind::Ue8m0 },
    WeightFormat::BlockFp8 { tile: 128, scale: Fp8ScaleKind::Ue8m0 },
    WeightFormat::TensorFp8,
];
const SOME: &[&str] = &[
    "dsv4_1536x7168",
    "dsv4_wkv_576x7168_f32",
    "llama3_8b_down_4096x14336_ring_wraps",
    "awkward_n1000_bias",
    "awkward_prime_n_f16",
    "awkward_n129_k96_f32",
    "tiny_1x32",
    "padded_rows",
    "small_scales_f32",
    "stream_k_three_row_blocks",
];

/// A quantized weight: uniform values in [-1, 1) times a per-row magnitude spanning ~2^±6 (so
/// block scales vary), quantized by b12x-quant's codecs.
fn weight(
    format: WeightFormat,
    n: usize,
    k: usize,
    seed: u64,
    shift: i32,
    zero_blocks: bool,
) -> Result<Weight, String> {
    let mut w = uniform(seed, n * k, -1.0, 1.0);
    for (r, row) in w.chunks_mut(k).enumerate() {
        let mag = 2f32.powi((r * 7 % 13) as i32 - 6 + shift);
        row.iter_mut().for_each(|v| *v *= mag);
    }
    if zero_blocks {
        w.chunks_mut(32).step_by(5).for_each(|b| b.fill(0.0));
    }
    Ok(match format {
        WeightFormat::Nvfp4 => Weight::Nvfp4(quantize_nvfp4(&w, n, k, None).map_err(err)?),
        WeightFormat::Mxfp4 => Weight::Mx(quantize_mx(&w, n, k, Element::E2M1, MxOptions::default()).map_err(err)?),
        WeightFormat::Mxfp8 => Weight::Mx(quantize_mx(&w, n, k, Element::E4M3, MxOptions::default()).map_err(err)?),
        WeightFormat::BlockFp8 { tile, scale } => {
            Weight::BlockFp8(quantize_block_fp8(&w, n, k, (tile, tile), scale).map_err(err)?)
        }
        WeightFormat::TensorFp8 => Weight::TensorFp8 { n, k, q: quantize_tensor_fp8(&w, None).map_err(err)? },
    })
}

/// Everything one (case, format) needs on the host and the device.
struct Setup {
    w: Weight,
    packed: PackedWeight,
}

/// x with a block of zeros in token 0 and a NaN in token 1's second block (`special_x` cases):
/// x̂ keeps the zeros and is NaN over the NaN's whole quantization block.
fn special(x: &mut [f32], lx: usize, m: usize) {
    x[..32].fill(0.0);
    if m > 1 {
        x[lx + 40] = f32::NAN;
    }
}

/// How a trial passes x: bf16 values (optionally quantized in the call) or pre-quantized.
#[derive(Clone, Copy, Debug)]
enum XIn {
    Bf16(Option<XQuant>),
    Pre(XFormat),
    /// Pre-quantized, the buckets above 16 on the native kernels only (`PlanOptions::native_only`:
    /// on the H200 their emulated-MMA build).
    Native(XFormat),
    /// bf16 x quantized in the call, the buckets above 16 on the native kernels only.
    NativeQuant(XQuant),
}

fn check_case(dev: &Arc<Device>, c: Case, format: WeightFormat) -> TrialResult {
    check_case_x(dev, c, format, XIn::Bf16(None))
}

/// A pre-quantized x on the device: codes and block scales with rows padded by `pad` elements,
/// the tensor scale.
struct PreX {
    codes: CudaSlice<u8>,
    /// Code bytes per row, and the padded row stride.
    cb: usize,
    ldq: usize,
    /// Bytes, scales per row, padded row stride (scales), dtype (u8 or f32).
    scales: Option<(CudaSlice<u8>, usize, usize, DType)>,
    global: Option<CudaSlice<f32>>,
}

impl PreX {
    fn upload(stream: &Arc<CudaStream>, a: &Activation, pad: usize) -> Result<PreX, String> {
        let (m, _) = a.shape();
        let padded = |v: &[u8], cols: usize| -> Vec<u8> {
            v.chunks(cols).flat_map(|r| r.iter().copied().chain(std::iter::repeat_n(0xAB, pad))).collect()
        };
        let f32_bytes: Vec<u8>;
        // Codes, block scales as bytes with their dtype, the tensor scale.
        type Parts<'b> = (&'b [u8], Option<(&'b [u8], DType)>, Option<f32>);
        let (codes, scales, global): Parts<'_> = match a {
            Activation::Mxfp8(q) => (&q.codes, Some((&q.scales, DType::U8)), None),
            Activation::Nvfp4(q) => (&q.codes, Some((&q.scales, DType::U8)), Some(q.enc)),
            Activation::BlockFp8(q) => match &q.scales {
                Fp8Scales::Ue8m0(sc) => (&q.codes, Some((sc, DType::U8)), None),
                Fp8Scales::F32(sc) => {
                    f32_bytes = sc.iter().flat_map(|v| v.to_le_bytes()).collect();
                    (&q.codes, Some((&f32_bytes, DType::F32)), None)
                }
            },
            Activation::TensorFp8 { q, .. } => (&q.codes, None, Some(q.scale)),
            _ => return Err("not a pre-quantized activation".into()),
        };
        let cb = codes.len() / m;
        let codes = stream.clone_htod(&padded(codes, cb)).map_err(err)?;
        let scales = match scales {
            Some((sc, dtype)) => {
                let (size, cols) = (dtype.size_bytes(), sc.len() / m / dtype.size_bytes());
                let rows: Vec<u8> = sc
                    .chunks(cols * size)
                    .flat_map(|r| r.iter().copied().chain(std::iter::repeat_n(0xAB, pad * size)))
                    .collect();
                Some((stream.clone_htod(&rows).map_err(err)?, cols, cols + pad, dtype))
            }
            None => None,
        };
        let global = match global {
            Some(g) => Some(stream.clone_htod(&[g]).map_err(err)?),
            None => None,
        };
        Ok(PreX { codes, cb, ldq: cb + pad, scales, global })
    }
    /// `(x, x_scales, x_global)` views for `m` rows.
    fn views(&self, m: usize) -> (TensorRef<'_>, Option<TensorRef<'_>>, Option<TensorRef<'_>>) {
        let view = |s: &CudaSlice<u8>, cols: usize, ld: usize, dtype: DType| {
            let ptr = TensorRef::from_slice(s, &[s.len()]).expect("view").ptr();
            // SAFETY: m rows of ld elements were uploaded.
            unsafe { TensorRef::from_raw(ptr, &[m, cols], &[ld as isize, 1], dtype) }.expect("view")
        };
        let x = view(&self.codes, self.cb, self.ldq, DType::U8);
        let sc = self.scales.as_ref().map(|(s, cols, ld, dtype)| view(s, *cols, *ld, *dtype));
        let g = self.global.as_ref().map(|g| TensorRef::from_slice(g, &[1]).expect("view"));
        (x, sc, g)
    }
}

fn check_case_x(dev: &Arc<Device>, c: Case, format: WeightFormat, xin: XIn) -> TrialResult {
    let (n, k) = (c.n, c.k);
    let (xq, x_format) = match xin {
        XIn::Bf16(xq) => (xq, XFormat::Bf16),
        XIn::NativeQuant(xq) => (Some(xq), XFormat::Bf16),
        XIn::Pre(f) | XIn::Native(f) => (None, f),
    };
    let stream = dev.stream();
    let s = {
        let w = weight(format, n, k, 2, c.shift, c.zero_blocks)?;
        let packed = pack_weight(&w, stream).map_err(err)?;
        Setup { w, packed }
    };
    let rows: Vec<usize> = (0..n).filter(|r| r % c.sample == 0 || *r == n - 1).collect();
    let b_h: Option<Vec<f32>> = c.bias.map(|d| {
        let v = uniform(3, n, -1.0, 1.0);
        if d == DType::BF16 {
            cast::<bf16>(&v).iter().map(|b| b.to_f32()).collect()
        } else {
            v
        }
    });
    let bias = match (&b_h, c.bias) {
        (Some(v), Some(d)) => Some(FloatBuf::upload(stream, v, d)?),
        _ => None,
    };
    let max_rows = c.ms.iter().copied().max().unwrap_or(1).max(16);
    let q = Query { n, k, weight: format, x_format, out_dtype: c.out, bias: c.bias, max_rows, x_quant: xq };
    let options = gemv::PlanOptions { native_only: matches!(xin, XIn::Native(_) | XIn::NativeQuant(_)) };
    let plan = gemv::plan_with(&q, dev, options).map_err(err)?;
    let mut scratch = alloc_scratch(stream, plan.scratch_layout().total_bytes()).map_err(err)?;
    for &m in c.ms {
        let (lx, ly) = (k + c.pad, n + c.pad);
        let mut x_h: Vec<f32> =
            cast::<bf16>(&uniform(1 + m as u64, m * lx, -1.0, 1.0)).iter().map(|b| b.to_f32()).collect();
        if c.special_x {
            special(&mut x_h, lx, m);
        }
        let x_c: Vec<bf16> = (0..m).flat_map(|r| cast::<bf16>(&x_h[r * lx..r * lx + k])).collect();
        let a = match xin {
            XIn::Bf16(xq) => reference::activation(m, k, &x_c, xq),
            XIn::NativeQuant(xq) => reference::activation(m, k, &x_c, Some(xq)),
            XIn::Pre(f) | XIn::Native(f) => reference::pre_quantized(m, k, &x_c, f),
        }
        .map_err(err)?;
        let want = reference::exact(&a, &s.w, c.alpha, b_h.as_deref(), &rows).map_err(err)?;
        // x̂ as the pre-pass must write it: the dequantized values (without a tensor scale) in
        // bf16 (exact).
        let x_hat_want: Vec<u16> = reference::staged_x(&a).iter().map(|&v| bf16::from_f32(v).to_bits()).collect();
        let x = FloatBuf::upload(stream, &x_h, DType::BF16)?;
        let pre = match xin {
            XIn::Pre(_) | XIn::Native(_) => Some(PreX::upload(stream, &a, c.pad)?),
            XIn::Bf16(_) | XIn::NativeQuant(_) => None,
        };
        let mut y = FloatBuf::poisoned(stream, m * ly, c.out)?;
        let bucket = b12x_core::plan::bucket_of(plan.buckets(), m).ok_or("no bucket")?;
        let label = plan.buckets()[bucket].label();
        let configs = plan.candidates(bucket);
        for id in configs.iter().take(if c.large { 1 } else { configs.len() }) {
            let _session = session_pinned(dev, &plan, &label, id)?;
            y.poison(stream)?;
            let (xv, x_scales, x_global) = match &pre {
                Some(p) => p.views(m),
                None => (x.view(m, k, lx, DType::BF16), None, None),
            };
            let args = Args {
                x: xv,
                x_scales,
                x_global,
                w: &s.packed,
                bias: bias.as_ref().map(|b| b.view(n, 0, 0, b.dtype())),
                y: y.view_mut(m, n, ly, c.out),
                alpha: c.alpha,
            };
            gemv::run(&plan, args, aligned_scratch(&mut scratch, plan.scratch_layout().total_bytes()), stream)
                .map_err(err)?;
            stream.synchronize().map_err(err)?;
            let got = y.download(stream)?;
            let name = format!("{} {format:?} {xin:?} m={m} {id}", c.name);
            let native = matches!(plan.configs(bucket).first(), Some(gemv::Candidate::Native(_)));
            if !matches!(xin, XIn::Bf16(None)) && !native {
                // The scratch's x_hat region holds b12x-quant's x̂ bit for bit (NaN as NaN).
                let all = stream.clone_dtoh(&scratch).map_err(err)?;
                let base = TensorRef::from_slice(&scratch, &[scratch.len()]).map_err(err)?.ptr();
                let region = plan.scratch_layout().regions().iter().find(|r| r.name == "x_hat").cloned();
                let region = region.ok_or("no x_hat scratch region")?;
                let off = (base.next_multiple_of(b12x_core::SCRATCH_ALIGN as u64) - base) as usize + region.offset;
                for (i, want) in x_hat_want.iter().enumerate() {
                    let got = u16::from_le_bytes([all[off + 2 * i], all[off + 2 * i + 1]]);
                    let nan = |b: u16| b & 0x7FFF > 0x7F80;
                    if got != *want && !(nan(got) && nan(*want)) {
                        return Err(format!(
                            "{name}: x̂[{}][{}] = {got:#06x}, b12x-quant gives {want:#06x}",
                            i / k,
                            i % k
                        ));
                    }
                }
            }
            let mut sel = Vec::with_capacity(m * rows.len());
            for i in 0..m {
                for &r in &rows {
                    sel.push(got[i * ly + r]);
                }
                // Padding past N stays poisoned.
                if got[i * ly + n..(i + 1) * ly].iter().any(|v| !v.is_nan()) {
                    return Err(format!("{name}: wrote past N in row {i}"));
                }
            }
            reference::check_bound(&name, c.out, &sel, &want, &[m, rows.len()])?;
        }
    }
    Ok(())
}

/// A call that must fail with the expected typed error (nothing launched).
fn refused(name: &str, got: b12x_core::Result<()>, is_expected: fn(&Error) -> bool) -> TrialResult {
    match got {
        Err(e) if is_expected(&e) => Ok(()),
        other => Err(format!("{name}: unexpected {other:?}")),
    }
}

/// After rejected calls: every element of each of `ys` is still the NaN poison.
fn untouched(stream: &Arc<CudaStream>, ys: &[&FloatBuf]) -> TrialResult {
    stream.synchronize().map_err(err)?;
    for y in ys {
        if y.download(stream)?.iter().any(|v| !v.is_nan()) {
            return Err("a rejected call wrote y".into());
        }
    }
    Ok(())
}

/// A merging stream-K problem (9000 × 1312: CTAs share row blocks) for the whole-op trials.
struct Fixture {
    plan: Plan,
    packed: PackedWeight,
    x: FloatBuf,
    y: FloatBuf,
    scratch: CudaSlice<u8>,
}

const FN: usize = 9000;
const FK: usize = 1312;

fn fixture(dev: &Arc<Device>, m: usize, max_rows: usize) -> Result<Fixture, String> {
    let stream = dev.stream();
    let w = weight(WeightFormat::Nvfp4, FN, FK, 5, 0, false)?;
    let packed = pack_weight(&w, stream).map_err(err)?;
    let q = Query {
        n: FN,
        k: FK,
        weight: WeightFormat::Nvfp4,
        x_format: XFormat::Bf16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows,
        x_quant: None,
    };
    let plan = gemv::plan(&q, dev).map_err(err)?;
    let x = FloatBuf::upload(stream, &uniform(9, m * FK, -1.0, 1.0), DType::BF16)?;
    let y = FloatBuf::poisoned(stream, m * FN, DType::BF16)?;
    let scratch = alloc_scratch(stream, plan.scratch_layout().total_bytes()).map_err(err)?;
    Ok(Fixture { plan, packed, x, y, scratch })
}

impl Fixture {
    fn run(&mut self, m: usize, stream: &Arc<CudaStream>) -> b12x_core::Result<()> {
        let args = Args {
            x: self.x.view(m, FK, FK, DType::BF16),
            x_scales: None,
            x_global: None,
            w: &self.packed,
            bias: None,
            y: self.y.view_mut(m, FN, FN, DType::BF16),
            alpha: 1.0,
        };
        let bytes = self.plan.scratch_layout().total_bytes();
        gemv::run(&self.plan, args, aligned_scratch(&mut self.scratch, bytes), stream)
    }
}

/// The fixture at capacity `max_rows` with its plan prepared (default configs, no autotune).
fn prepared(dev: &Arc<Device>, m: usize, max_rows: usize) -> Result<(Fixture, PreparationSession), String> {
    let f = fixture(dev, m, max_rows)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&f.plan]).map_err(err)?;
    Ok((f, session))
}

/// `m` rows eager, then captured into a graph and replayed: all bitwise equal.
fn replay_equals_eager(dev: &Arc<Device>, f: &mut Fixture, session: &PreparationSession, m: usize) -> TrialResult {
    check_graph_replay_equals_eager(
        session,
        dev.stream(),
        f,
        |x, s| x.run(m, s),
        |x, s| x.y.poison(s),
        |x, s| x.y.bits(s),
    )
}

/// Eager runs, then the call captured into a graph and replayed three times: all bitwise equal
/// (the merges' tagged counters need no reset between launches or replays).
fn graph_equals_eager(dev: &Arc<Device>) -> TrialResult {
    let m = 3;
    let (mut f, session) = prepared(dev, m, 16)?;
    let gemv::Candidate::Gemv(c) = f.plan.configs(2)[0] else { return Err("bucket 2 runs the decode kernels".into()) };
    let (_, per_cta, kstages) = c.schedule(FN, FK, dev.sm_count());
    if per_cta % kstages == 0 {
        return Err(format!("{}: expected CTAs sharing row blocks, got {per_cta} units per CTA", c.id()));
    }
    replay_equals_eager(dev, &mut f, &session, m)
}

/// The tiled path (M = 100 on a 128-row plan): graph replays equal eager runs bitwise, with the
/// default config (on SM90 the wgmma kernel), with a split-K config (partial tiles summed by the
/// last split to arrive) and with the mma.sync tiled kernel.
fn graph_replay_equals_eager_tiled(dev: &Arc<Device>) -> TrialResult {
    let m = 100;
    let (mut f, session) = prepared(dev, m, 128)?;
    let bucket = b12x_core::plan::bucket_of(f.plan.buckets(), m).ok_or("no bucket")?;
    let default_wg = matches!(f.plan.configs(bucket).first(), Some(gemv::Candidate::Wgmma(_)));
    if default_wg != (dev.arch() == b12x_core::Arch::Sm90) {
        return Err(format!("default config {:?} on {:?}", f.plan.configs(bucket).first(), dev.arch()));
    }
    replay_equals_eager(dev, &mut f, &session, m)?;
    drop(session);
    let label = f.plan.buckets()[bucket].label();
    let tiled = f.plan.configs(bucket).iter().find_map(|c| match c {
        gemv::Candidate::Tile(t) if t.splits == 1 => Some(c.id()),
        _ => None,
    });
    let session = session_pinned(dev, &f.plan, &label, &tiled.ok_or("no unsplit tiled candidate")?)?;
    replay_equals_eager(dev, &mut f, &session, m)?;
    drop(session);
    let split = f.plan.configs(bucket).iter().find_map(|c| match c {
        gemv::Candidate::Tile(t) if t.splits > 1 => Some(c.id()),
        _ => None,
    });
    let split = split.ok_or("the 65..128 bucket has no split-K candidate")?;
    let session = session_pinned(dev, &f.plan, &label, &split)?;
    replay_equals_eager(dev, &mut f, &session, m)
}

fn run_allocates_nothing(dev: &Arc<Device>) -> TrialResult {
    let m = 8;
    let stream = dev.stream();
    let (mut f, _session) = prepared(dev, m, 16)?;
    check_run_allocates_nothing(dev, stream, 100, || f.run(m, stream))
}

/// Bad inputs on real buffers: typed errors, and y stays poisoned (nothing launched).
fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let stream = dev.stream();
    let m = 4;
    let (mut f, _session) = prepared(dev, m, 16)?;
    let bytes = f.plan.scratch_layout().total_bytes();
    let mx = pack_weight(&weight(WeightFormat::Mxfp4, FN, FK, 5, 0, false)?, stream).map_err(err)?;
    let small = pack_weight(&weight(WeightFormat::Nvfp4, 128, FK, 5, 0, false)?, stream).map_err(err)?;
    let x_ptr = f.x.view(m, FK, FK, DType::BF16).ptr();
    // SAFETY: views inside f.x (m rows of FK); all rejected before a launch.
    let raw = |ptr: u64, rows: usize, stride: usize| {
        unsafe { TensorRef::from_raw(ptr, &[rows, FK], &[stride as isize, 1], DType::BF16) }.map_err(err)
    };
    type Check = fn(&Error) -> bool;
    let cases: [(&str, TensorRef<'_>, &PackedWeight, f32, usize, Check); 6] = [
        ("MXFP4 weight on an NVFP4 plan", raw(x_ptr, m, FK)?, &mx, 1.0, bytes, |e| {
            matches!(e, Error::InvalidQuery { field: "w", .. })
        }),
        ("weight of another shape", raw(x_ptr, m, FK)?, &small, 1.0, bytes, |e| {
            matches!(e, Error::Shape { tensor: "w", .. })
        }),
        ("misaligned x", raw(x_ptr + 2, 2, FK)?, &f.packed, 1.0, bytes, |e| {
            matches!(e, Error::Misaligned { tensor: "x", .. })
        }),
        ("odd x row stride", raw(x_ptr, 2, FK + 1)?, &f.packed, 1.0, bytes, |e| {
            matches!(e, Error::Misaligned { tensor: "x", .. })
        }),
        ("non-finite alpha", raw(x_ptr, m, FK)?, &f.packed, f32::NAN, bytes, |e| {
            matches!(e, Error::InvalidQuery { field: "alpha", .. })
        }),
        ("scratch too small", raw(x_ptr, m, FK)?, &f.packed, 1.0, bytes - 8, |e| {
            matches!(e, Error::ScratchTooSmall { .. })
        }),
    ];
    for (name, x, w, alpha, scratch_bytes, is_expected) in cases {
        let rows = x.shape()[0];
        let y = f.y.view_mut(rows, FN, FN, DType::BF16);
        let args = Args { x, x_scales: None, x_global: None, w, bias: None, y, alpha };
        refused(name, gemv::run(&f.plan, args, aligned_scratch(&mut f.scratch, scratch_bytes), stream), is_expected)?;
    }
    // A bias on a plan without one, and 17 rows on a 16-row plan.
    let b = stream.clone_htod(&vec![bf16::ZERO; FN]).map_err(err)?;
    let args = Args {
        x: raw(x_ptr, m, FK)?,
        x_scales: None,
        x_global: None,
        w: &f.packed,
        bias: Some(TensorRef::from_slice(&b, &[FN]).map_err(err)?),
        y: f.y.view_mut(m, FN, FN, DType::BF16),
        alpha: 1.0,
    };
    if !matches!(
        gemv::run(&f.plan, args, aligned_scratch(&mut f.scratch, bytes), stream),
        Err(Error::Shape { tensor: "bias", .. })
    ) {
        return Err("a bias on a plan without one: expected Shape".into());
    }
    let x17 = FloatBuf::upload(stream, &vec![0.0; 17 * FK], DType::BF16)?;
    let mut y17 = FloatBuf::poisoned(stream, 17 * FN, DType::BF16)?;
    let args = Args {
        x: x17.view(17, FK, FK, DType::BF16),
        x_scales: None,
        x_global: None,
        w: &f.packed,
        bias: None,
        y: y17.view_mut(17, FN, FN, DType::BF16),
        alpha: 1.0,
    };
    if !matches!(gemv::run(&f.plan, args, aligned_scratch(&mut f.scratch, bytes), stream), Err(Error::Capacity { .. }))
    {
        return Err("17 rows on a max_rows = 16 plan: expected Capacity".into());
    }
    untouched(stream, &[&f.y, &y17])
}

/// Pre-quantized x with missing, extra or wrong tensors: typed errors, y stays poisoned.
fn pre_quantized_bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let (n, k, m) = (256, 256, 4);
    let stream = dev.stream();
    let packed = pack_weight(&weight(WeightFormat::Nvfp4, n, k, 3, 0, false)?, stream).map_err(err)?;
    let x_c: Vec<bf16> = cast::<bf16>(&uniform(4, m * k, -1.0, 1.0));
    let nv = PreX::upload(stream, &reference::pre_quantized(m, k, &x_c, XFormat::Nvfp4).map_err(err)?, 0)?;
    let mx = PreX::upload(stream, &reference::pre_quantized(m, k, &x_c, XFormat::Mxfp8).map_err(err)?, 0)?;
    let plan_for = |x_format| {
        let q = Query {
            n,
            k,
            weight: WeightFormat::Nvfp4,
            x_format,
            out_dtype: DType::BF16,
            bias: None,
            max_rows: 8,
            x_quant: None,
        };
        gemv::plan(&q, dev).map_err(err)
    };
    let (nv_plan, mx_plan) = (plan_for(XFormat::Nvfp4)?, plan_for(XFormat::Mxfp8)?);
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&nv_plan, &mx_plan]).map_err(err)?;
    let bytes = nv_plan.scratch_layout().total_bytes().max(mx_plan.scratch_layout().total_bytes());
    let mut scratch = alloc_scratch(stream, bytes).map_err(err)?;
    let mut y = FloatBuf::poisoned(stream, m * n, DType::BF16)?;
    let (nx, ns, ng) = nv.views(m);
    let (mxx, mxs, _) = mx.views(m);
    let bf = FloatBuf::upload(stream, &vec![0.0; m * k], DType::BF16)?;
    // SAFETY: never dereferenced (reaches 2 bytes past nv.codes): rejected before a launch.
    let shifted =
        unsafe { TensorRef::from_raw(nx.ptr() + 2, &[m, k / 2], &[k as isize / 2, 1], DType::U8) }.map_err(err)?;
    type Check = fn(&Error) -> bool;
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, &Plan, TensorRef<'_>, Option<TensorRef<'_>>, Option<TensorRef<'_>>, Check)> = vec![
        ("NVFP4 x without its scales", &nv_plan, nx, None, ng, |e| {
            matches!(e, Error::Shape { tensor: "x_scales", .. })
        }),
        ("NVFP4 x without its encode scale", &nv_plan, nx, ns, None, |e| {
            matches!(e, Error::Shape { tensor: "x_global", .. })
        }),
        ("bf16 x on an NVFP4-x plan", &nv_plan, bf.view(m, k / 2, k / 2, DType::BF16), ns, ng, |e| {
            matches!(e, Error::DType { tensor: "x", .. })
        }),
        ("MXFP8 scales with NVFP4 x", &nv_plan, nx, mxs, ng, |e| matches!(e, Error::Shape { tensor: "x_scales", .. })),
        ("misaligned NVFP4 codes", &nv_plan, shifted, ns, ng, |e| matches!(e, Error::Misaligned { tensor: "x", .. })),
        ("a tensor scale with MXFP8 x", &mx_plan, mxx, mxs, ng, |e| {
            matches!(e, Error::Shape { tensor: "x_global", .. })
        }),
        ("NVFP4 codes on an MXFP8-x plan", &mx_plan, nx, mxs, None, |e| matches!(e, Error::Shape { tensor: "x", .. })),
    ];
    for (name, plan, x, x_scales, x_global, is_expected) in cases {
        let rows = x.shape()[0];
        let args =
            Args { x, x_scales, x_global, w: &packed, bias: None, y: y.view_mut(rows, n, n, DType::BF16), alpha: 1.0 };
        refused(name, gemv::run(plan, args, aligned_scratch(&mut scratch, bytes), stream), is_expected)?;
    }
    untouched(stream, &[&y])
}

/// Block FP8 x with f32 scales given u8 scales, no scales, or misaligned scales: typed errors, y
/// stays poisoned.
fn pre_f32_scales_bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let (n, k, m) = (256, 256, 4);
    let stream = dev.stream();
    let format = WeightFormat::BlockFp8 { tile: 128, scale: Fp8ScaleKind::F32 };
    let packed = pack_weight(&weight(format, n, k, 3, 0, false)?, stream).map_err(err)?;
    let x_c: Vec<bf16> = cast::<bf16>(&uniform(4, m * k, -1.0, 1.0));
    let (f32x, uex) = (
        XFormat::BlockFp8 { group: 128, scale: Fp8ScaleKind::F32 },
        XFormat::BlockFp8 { group: 128, scale: Fp8ScaleKind::Ue8m0 },
    );
    let fx = PreX::upload(stream, &reference::pre_quantized(m, k, &x_c, f32x).map_err(err)?, 0)?;
    let ux = PreX::upload(stream, &reference::pre_quantized(m, k, &x_c, uex).map_err(err)?, 0)?;
    let q =
        Query { n, k, weight: format, x_format: f32x, out_dtype: DType::BF16, bias: None, max_rows: 8, x_quant: None };
    let plan = gemv::plan(&q, dev).map_err(err)?;
    if !plan.scratch_layout().regions().iter().any(|r| r.name == "x_scales_f32" && r.bytes == 8 * (k / 128) * 4) {
        return Err(format!("no x_scales_f32 region of 8 rows × K/128 f32: {:?}", plan.scratch_layout().regions()));
    }
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    let bytes = plan.scratch_layout().total_bytes();
    let mut scratch = alloc_scratch(stream, bytes).map_err(err)?;
    let mut y = FloatBuf::poisoned(stream, m * n, DType::BF16)?;
    let (xv, fs, _) = fx.views(m);
    let (_, us, _) = ux.views(m);
    let fs = fs.ok_or("f32 scales")?;
    // SAFETY: never dereferenced (2 bytes into the f32 scales): rejected before a launch.
    let shifted =
        unsafe { TensorRef::from_raw(fs.ptr() + 2, &[m, k / 128], &[k as isize / 128, 1], DType::F32) }.map_err(err)?;
    type Check = fn(&Error) -> bool;
    let cases: Vec<(&str, Option<TensorRef<'_>>, Check)> = vec![
        ("u8 scales on an f32-scale plan", us, |e| matches!(e, Error::DType { tensor: "x_scales", .. })),
        ("no scales", None, |e| matches!(e, Error::Shape { tensor: "x_scales", .. })),
        ("misaligned f32 scales", Some(shifted), |e| matches!(e, Error::Misaligned { tensor: "x_scales", .. })),
    ];
    for (name, x_scales, is_expected) in cases {
        let args = Args {
            x: xv,
            x_scales,
            x_global: None,
            w: &packed,
            bias: None,
            y: y.view_mut(m, n, n, DType::BF16),
            alpha: 1.0,
        };
        refused(name, gemv::run(&plan, args, aligned_scratch(&mut scratch, bytes), stream), is_expected)?;
    }
    untouched(stream, &[&y])
}

/// Which fixed linear a trial runs.
#[derive(Clone, Copy, Debug)]
enum Lin {
    /// `gemm.block_fp8_linear` with `tile × tile` weight tiles and f32 / UE8M0 weight scales.
    BlockFp8(usize, Fp8ScaleKind),
    Mxfp8,
    TensorFp8,
}

/// A fixed linear prepared by a session (not frozen: other trials of the process prepare
/// meanwhile), run at every M of `ms`, against the oracle on every
/// row (x quantized as b12x-quant would: 1 × tile UE8M0 / MXFP8 in the call; per-tensor E4M3 on
/// the host with its scale on the device).
fn check_linear(dev: &Arc<Device>, lin: Lin, n: usize, k: usize, ms: &[usize], out: DType) -> TrialResult {
    use b12x_gemm::blockscaled::linear::{self, block_fp8_linear, mxfp8_linear, tensor_fp8_linear};
    let stream = dev.stream();
    let max_rows = ms.iter().copied().max().unwrap_or(1);
    let (format, plan) = match lin {
        Lin::BlockFp8(tile, scale) => {
            let q = block_fp8_linear::Query { n, k, tile, weight_scale: scale, out_dtype: out, bias: None, max_rows };
            (WeightFormat::BlockFp8 { tile, scale }, block_fp8_linear::plan(&q, dev))
        }
        Lin::Mxfp8 => {
            let q = mxfp8_linear::Query { n, k, out_dtype: out, bias: None, max_rows };
            (WeightFormat::Mxfp8, mxfp8_linear::plan(&q, dev))
        }
        Lin::TensorFp8 => {
            let q = tensor_fp8_linear::Query { n, k, out_dtype: out, bias: None, max_rows };
            (WeightFormat::TensorFp8, tensor_fp8_linear::plan(&q, dev))
        }
    };
    let plan = plan.map_err(err)?;
    let w = weight(format, n, k, 11, 0, false)?;
    let packed = pack_weight(&w, stream).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    let bytes = plan.scratch_layout().total_bytes();
    let mut scratch = alloc_scratch(stream, bytes).map_err(err)?;
    let rows: Vec<usize> = (0..n).collect();
    for &m in ms {
        let x_c: Vec<bf16> = cast::<bf16>(&uniform(20 + m as u64, m * k, -2.0, 2.0));
        let a = match lin {
            Lin::BlockFp8(tile, _) => reference::activation(m, k, &x_c, Some(XQuant::BlockFp8Ue8m0 { group: tile })),
            Lin::Mxfp8 => reference::activation(m, k, &x_c, Some(XQuant::Mxfp8)),
            Lin::TensorFp8 => reference::pre_quantized(m, k, &x_c, XFormat::TensorFp8),
        }
        .map_err(err)?;
        let want = reference::exact(&a, &w, 0.5, None, &rows).map_err(err)?;
        let x_bf = FloatBuf::upload(stream, &x_c.iter().map(|v| v.to_f32()).collect::<Vec<_>>(), DType::BF16)?;
        let pre = match lin {
            Lin::TensorFp8 => Some(PreX::upload(stream, &a, 0)?),
            _ => None,
        };
        let mut y = FloatBuf::poisoned(stream, m * n, out)?;
        let (x, x_scale) = match &pre {
            Some(p) => {
                let (x, _, g) = p.views(m);
                (x, g)
            }
            None => (x_bf.view(m, k, k, DType::BF16), None),
        };
        let args = linear::Args { x, x_scale, w: &packed, bias: None, y: y.view_mut(m, n, n, out), alpha: 0.5 };
        linear::run(&plan, args, aligned_scratch(&mut scratch, bytes), stream).map_err(err)?;
        stream.synchronize().map_err(err)?;
        let got = y.download(stream)?;
        reference::check_bound(&format!("{lin:?} {n}x{k} m={m}"), out, &got, &want, &[m, n])?;
    }
    Ok(())
}

/// The fixed linears run prepared plans only: an unprepared plan is `NotPrepared` (the generic op
/// would load its default config), nothing launched; a missing activation scale is typed.
fn linear_prepared_only(dev: &Arc<Device>) -> TrialResult {
    use b12x_gemm::blockscaled::linear::{self, tensor_fp8_linear};
    let (n, k, m) = (256, 256, 4);
    let stream = dev.stream();
    let q = tensor_fp8_linear::Query { n, k, out_dtype: DType::BF16, bias: None, max_rows: 8 };
    let plan = tensor_fp8_linear::plan(&q, dev).map_err(err)?;
    let packed = pack_weight(&weight(WeightFormat::TensorFp8, n, k, 3, 0, false)?, stream).map_err(err)?;
    let x_c: Vec<bf16> = cast::<bf16>(&uniform(4, m * k, -1.0, 1.0));
    let pre = PreX::upload(stream, &reference::pre_quantized(m, k, &x_c, XFormat::TensorFp8).map_err(err)?, 0)?;
    let bytes = plan.scratch_layout().total_bytes();
    let mut scratch = alloc_scratch(stream, bytes).map_err(err)?;
    let mut y = FloatBuf::poisoned(stream, m * n, DType::BF16)?;
    let (x, _, g) = pre.views(m);
    let args = linear::Args { x, x_scale: g, w: &packed, bias: None, y: y.view_mut(m, n, n, DType::BF16), alpha: 1.0 };
    match linear::run(&plan, args, aligned_scratch(&mut scratch, bytes), stream) {
        Err(Error::NotPrepared { op: "gemm.tensor_fp8_linear", .. }) => {}
        other => return Err(format!("unprepared plan: expected NotPrepared, got {other:?}")),
    }
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    let args =
        linear::Args { x, x_scale: None, w: &packed, bias: None, y: y.view_mut(m, n, n, DType::BF16), alpha: 1.0 };
    match linear::run(&plan, args, aligned_scratch(&mut scratch, bytes), stream) {
        Err(Error::Shape { tensor: "x_scale", .. }) => {}
        other => return Err(format!("no activation scale: expected Shape, got {other:?}")),
    }
    untouched(stream, &[&y])?;
    // Prepared, the same call runs.
    let args = linear::Args { x, x_scale: g, w: &packed, bias: None, y: y.view_mut(m, n, n, DType::BF16), alpha: 1.0 };
    linear::run(&plan, args, aligned_scratch(&mut scratch, bytes), stream).map_err(err)?;
    stream.synchronize().map_err(err)
}

/// An MXFP8 weight whose scale bytes span more binades than the BF16 path holds exactly (1 and
/// 200): a typed error, nothing launched.
fn mxfp8_scale_range_refused(dev: &Arc<Device>) -> TrialResult {
    let (n, k, m) = (128, 64, 2);
    let stream = dev.stream();
    let Weight::Mx(mut q) = weight(WeightFormat::Mxfp8, n, k, 7, 0, false)? else { unreachable!() };
    q.scales[0] = 1;
    q.scales[1] = 200;
    let packed = pack_weight(&Weight::Mx(q), stream).map_err(err)?;
    let query = Query {
        n,
        k,
        weight: WeightFormat::Mxfp8,
        x_format: XFormat::Bf16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: 4,
        x_quant: None,
    };
    let plan = gemv::plan(&query, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    let x = FloatBuf::upload(stream, &vec![1.0; m * k], DType::BF16)?;
    let mut y = FloatBuf::poisoned(stream, m * n, DType::BF16)?;
    let mut scratch = alloc_scratch(stream, plan.scratch_layout().total_bytes()).map_err(err)?;
    let args = Args {
        x: x.view(m, k, k, DType::BF16),
        x_scales: None,
        x_global: None,
        w: &packed,
        bias: None,
        y: y.view_mut(m, n, n, DType::BF16),
        alpha: 1.0,
    };
    match gemv::run(&plan, args, aligned_scratch(&mut scratch, plan.scratch_layout().total_bytes()), stream) {
        Err(Error::InvalidQuery { field: "w", .. }) => {}
        other => return Err(format!("expected InvalidQuery on w, got {other:?}")),
    }
    untouched(stream, &[&y])
}

/// A format's part of a trial name.
fn label(format: WeightFormat) -> String {
    match format {
        WeightFormat::BlockFp8 { tile, scale } => format!("BlockFp8_{tile}_{scale:?}"),
        f => format!("{f:?}"),
    }
}

fn main() {
    let mut trials = Vec::new();
    for &c in CASES.iter().filter(|c| !(c.large && reduced_profile())) {
        let more = if SOME.contains(&c.name) { &MORE_FORMATS[..] } else { &[] };
        for &format in FORMATS.iter().chain(more) {
            trials.push(GpuTrial::new(format!("{}::{}", c.name, label(format)), move |d| check_case(d, c, format)));
        }
    }
    trials.push(GpuTrial::new("mxfp8_scale_range_refused", mxfp8_scale_range_refused));
    // Activations quantized inside the call (XQuant): W4A8 (MXFP4 × MXFP8), MXFP8 × MXFP8, block
    // FP8 × 1×128 / 1×32 UE8M0 (block_fp8_linear's math), NVFP4 weights × MXFP8, with padded x
    // rows, a block of zeros and a NaN.
    let by_name = |name: &str| *CASES.iter().find(|c| c.name == name).expect("case");
    let blk = |tile, scale| WeightFormat::BlockFp8 { tile, scale };
    let special_x = Case { special_x: true, ..case("special_x_f32", 1000, 2048, &[3]) };
    let fused = [
        (by_name("dsv4_4096x7168"), WeightFormat::Mxfp4, XQuant::Mxfp8),
        (by_name("dsv4_4096x7168"), WeightFormat::Mxfp8, XQuant::Mxfp8),
        (by_name("dsv4_wq_a_7168x1536"), blk(128, Fp8ScaleKind::F32), XQuant::BlockFp8Ue8m0 { group: 128 }),
        (by_name("awkward_n1000_bias"), blk(32, Fp8ScaleKind::Ue8m0), XQuant::BlockFp8Ue8m0 { group: 32 }),
        (by_name("padded_rows"), WeightFormat::Mxfp4, XQuant::Mxfp8),
        (by_name("tiny_1x32"), WeightFormat::Nvfp4, XQuant::Mxfp8),
        (special_x, WeightFormat::Mxfp8, XQuant::Mxfp8),
        (special_x, blk(128, Fp8ScaleKind::F32), XQuant::BlockFp8Ue8m0 { group: 128 }),
    ];
    for (c, format, xq) in fused {
        let x = match xq {
            XQuant::Mxfp8 => "x_mxfp8".to_string(),
            XQuant::BlockFp8Ue8m0 { group } => format!("x_blockfp8_1x{group}"),
        };
        let name = format!("{}::{}::{x}", c.name, label(format));
        trials.push(GpuTrial::new(name, move |d| check_case_x(d, c, format, XIn::Bf16(Some(xq)))));
    }
    // Pre-quantized activations (b12x-quant's formats, row-major scales, padded rows): NVFP4 ×
    // NVFP4, W4A8 (MXFP4 × MXFP8), MXFP8 × MXFP8, block FP8 × 1×128 / 1×32 UE8M0, per-tensor
    // E4M3 × E4M3 (tensor_fp8_linear's math), decode and tiled M, every output dtype.
    let ue = |group| XFormat::BlockFp8 { group, scale: Fp8ScaleKind::Ue8m0 };
    let pre = [
        (by_name("dsv4_wq_a_7168x1536"), WeightFormat::Nvfp4, XFormat::Nvfp4),
        (by_name("awkward_prime_n_f16"), WeightFormat::Nvfp4, XFormat::Nvfp4),
        (by_name("padded_rows"), WeightFormat::Nvfp4, XFormat::Nvfp4),
        (by_name("dsv4_4096x7168"), WeightFormat::Mxfp4, XFormat::Mxfp8),
        (by_name("padded_rows"), WeightFormat::Mxfp4, XFormat::Mxfp8),
        (by_name("dsv4_wkv_576x7168_f32"), WeightFormat::Mxfp8, XFormat::Mxfp8),
        (by_name("dsv4_wq_a_7168x1536"), blk(128, Fp8ScaleKind::F32), ue(128)),
        (by_name("awkward_n1000_bias"), blk(32, Fp8ScaleKind::Ue8m0), ue(32)),
        (by_name("awkward_n129_k96_f32"), blk(32, Fp8ScaleKind::F32), ue(32)),
        (by_name("qwen3_30b_expert_down_2048x768"), WeightFormat::TensorFp8, XFormat::TensorFp8),
        (by_name("padded_rows"), WeightFormat::TensorFp8, XFormat::TensorFp8),
        (by_name("tiny_1x32"), WeightFormat::Mxfp8, XFormat::TensorFp8),
        (special_x, WeightFormat::Nvfp4, XFormat::Nvfp4),
        (special_x, WeightFormat::Mxfp8, XFormat::Mxfp8),
    ];
    for (c, format, xf) in pre {
        let name = format!("{}::{}::pre_{}", c.name, label(format), xf.name());
        trials.push(GpuTrial::new(name, move |d| check_case_x(d, c, format, XIn::Pre(xf))));
    }
    trials.push(GpuTrial::new("pre_quantized_bad_inputs_launch_nothing", pre_quantized_bad_inputs));
    // Block FP8 1 × 128 activations with f32 scales (DeepSeek-V3's recipe) × block-FP8 weights:
    // x̂ = the codes, the scales in the promotions of the decode, tiled and wgmma kernels (every
    // config pinned; M over every bucket kind), 32² and 128² tiles, f32 and UE8M0 weight scales,
    // padded rows, every output dtype, a block of zeros and a NaN.
    let f32x = XFormat::BlockFp8 { group: 128, scale: Fp8ScaleKind::F32 };
    let pre_f32 = [
        (by_name("dsv4_wq_a_7168x1536"), blk(128, Fp8ScaleKind::F32)),
        (by_name("awkward_n1000_bias"), blk(32, Fp8ScaleKind::Ue8m0)),
        (by_name("padded_rows"), blk(32, Fp8ScaleKind::F32)),
        (by_name("dsv4_wkv_576x7168_f32"), blk(128, Fp8ScaleKind::Ue8m0)),
        (Case { out: DType::F16, ..by_name("llama3_8b_qkv_6144x4096") }, blk(128, Fp8ScaleKind::F32)),
        (Case { ms: &[3, 40], ..special_x }, blk(128, Fp8ScaleKind::F32)),
    ];
    for (c, format) in pre_f32 {
        let name = format!("{}::{}::pre_blockfp8_f32", c.name, label(format));
        trials.push(GpuTrial::new(name, move |d| check_case_x(d, c, format, XIn::Pre(f32x))));
    }
    trials.push(GpuTrial::new("pre_f32_scales_bad_inputs_launch_nothing", pre_f32_scales_bad_inputs));
    // The SM120 native kernels (MXFP8 x × MXFP8 weight, block-scaled MMAs): on the H200 their
    // emulated build — staging, loaders, fragment and scale registers, split-K, epilogue — at the
    // middle and prefill M (the decode buckets stay on the decode kernels). Every config pinned.
    let native = [
        Case { ms: &[17, 64, 128, 1000], ..by_name("dsv4_wq_a_7168x1536") },
        by_name("awkward_n1000_bias"),
        by_name("awkward_prime_n_f16"),
        by_name("awkward_n129_k96_f32"),
        by_name("padded_rows"),
        Case { ms: &[100], ..by_name("llama3_8b_qkv_6144x4096") },
    ];
    for c in native {
        let name = format!("{}::Mxfp8::native_mxf8", c.name);
        trials.push(GpuTrial::new(name, move |d| check_case_x(d, c, WeightFormat::Mxfp8, XIn::Native(XFormat::Mxfp8))));
    }
    // UE8M0 block-FP8 weights (128² and 32² tiles) × block FP8 / MXFP8 x, given or quantized in the
    // call (gemm.block_fp8_linear's and gemm.mxfp8_linear's math on SM120).
    let ue8 = Fp8ScaleKind::Ue8m0;
    let xb = |group| XFormat::BlockFp8 { group, scale: Fp8ScaleKind::Ue8m0 };
    let native_more = [
        (Case { ms: &[17, 64, 1000], ..by_name("dsv4_wq_a_7168x1536") }, blk(128, ue8), XIn::Native(xb(128))),
        (by_name("awkward_n1000_bias"), blk(32, ue8), XIn::Native(xb(32))),
        (by_name("awkward_n129_k96_f32"), blk(32, ue8), XIn::Native(XFormat::Mxfp8)),
        (by_name("awkward_prime_n_f16"), blk(128, ue8), XIn::Native(xb(32))),
        (
            Case { ms: &[17, 200], ..by_name("dsv4_4096x7168") },
            blk(128, ue8),
            XIn::NativeQuant(XQuant::BlockFp8Ue8m0 { group: 128 }),
        ),
        (by_name("padded_rows"), WeightFormat::Mxfp8, XIn::NativeQuant(XQuant::Mxfp8)),
        (Case { ms: &[17, 40], ..special_x }, WeightFormat::Mxfp8, XIn::NativeQuant(XQuant::Mxfp8)),
        // W4A8 (MXFP4 weights: E2M1 converted to byte containers in registers) × every E4M3 x
        // with UE8M0 scales, given or quantized in the call.
        (
            Case { ms: &[17, 64, 128, 1000], ..by_name("dsv4_wq_a_7168x1536") },
            WeightFormat::Mxfp4,
            XIn::Native(xb(128)),
        ),
        (by_name("awkward_n1000_bias"), WeightFormat::Mxfp4, XIn::Native(XFormat::Mxfp8)),
        (by_name("awkward_n129_k96_f32"), WeightFormat::Mxfp4, XIn::Native(XFormat::Mxfp8)),
        (by_name("awkward_prime_n_f16"), WeightFormat::Mxfp4, XIn::Native(xb(32))),
        (Case { ms: &[17, 200], ..by_name("dsv4_4096x7168") }, WeightFormat::Mxfp4, XIn::NativeQuant(XQuant::Mxfp8)),
        (by_name("padded_rows"), WeightFormat::Mxfp4, XIn::NativeQuant(XQuant::BlockFp8Ue8m0 { group: 32 })),
        (Case { ms: &[17, 40], ..special_x }, WeightFormat::Mxfp4, XIn::NativeQuant(XQuant::Mxfp8)),
    ];
    // NVFP4 x × NVFP4 weights (kind::mxf4nvf4: the weight's words converted to packed nibbles in
    // registers, x staged in their order, UE4M3 scales per 16 k): the M list above 16,
    // awkward N and K (K = 96 and 32 end inside a 64-k MMA step), padded rows, bias, every output
    // dtype, small scales, split-K, a block of zeros and a NaN.
    let nv4 = XIn::Native(XFormat::Nvfp4);
    let native_nvf4 = [
        (Case { ms: &[17, 64, 128, 1000], ..by_name("dsv4_wq_a_7168x1536") }, WeightFormat::Nvfp4, nv4),
        (by_name("awkward_n1000_bias"), WeightFormat::Nvfp4, nv4),
        (by_name("awkward_n129_k96_f32"), WeightFormat::Nvfp4, nv4),
        (by_name("awkward_prime_n_f16"), WeightFormat::Nvfp4, nv4),
        (Case { ms: &[17, 33], ..by_name("tiny_1x32") }, WeightFormat::Nvfp4, nv4),
        (Case { ms: &[17, 200], ..by_name("dsv4_4096x7168") }, WeightFormat::Nvfp4, nv4),
        (by_name("padded_rows"), WeightFormat::Nvfp4, nv4),
        // Rows padded by 4 bytes of codes: x's rows only 4-byte aligned (the staging's loads).
        (Case { pad: 4, ..case("padded_rows_4", 2048, 2048, &[17, 40]) }, WeightFormat::Nvfp4, nv4),
        (Case { ms: &[17, 40], ..by_name("small_scales_f32") }, WeightFormat::Nvfp4, nv4),
        (Case { ms: &[17, 40], ..special_x }, WeightFormat::Nvfp4, nv4),
    ];
    for (c, format, xin) in native_more.into_iter().chain(native_nvf4) {
        let x = match xin {
            XIn::Native(f) => format!("native_{}", f.name()),
            XIn::NativeQuant(q) => format!("native_quant_{q:?}"),
            _ => unreachable!(),
        };
        let name = format!("{}::{}::{x}", c.name, label(format));
        trials.push(GpuTrial::new(name, move |d| check_case_x(d, c, format, xin)));
    }
    // The fixed linears (prepared-only): DeepSeek-V4 shapes, decode and tiled M.
    type LinCase = (&'static str, Lin, usize, usize, &'static [usize], DType);
    let linears: [LinCase; 6] = [
        (
            "block_fp8_128_f32_wq_a_1536x7168",
            Lin::BlockFp8(128, Fp8ScaleKind::F32),
            1536,
            7168,
            &[1, 16, 64],
            DType::BF16,
        ),
        ("block_fp8_128_ue8m0_wkv_576x7168", Lin::BlockFp8(128, Fp8ScaleKind::Ue8m0), 576, 7168, &[3, 40], DType::F32),
        ("block_fp8_32_f32_1000x1056", Lin::BlockFp8(32, Fp8ScaleKind::F32), 1000, 1056, &[2, 33], DType::F16),
        ("mxfp8_4096x2048", Lin::Mxfp8, 4096, 2048, &[1, 17], DType::BF16),
        ("tensor_fp8_2048x768", Lin::TensorFp8, 2048, 768, &[3, 100], DType::BF16),
        ("tensor_fp8_129x96_f32", Lin::TensorFp8, 129, 96, &[1, 16, 129], DType::F32),
    ];
    for (name, lin, n, k, ms, out) in linears {
        trials.push(GpuTrial::new(format!("linear::{name}"), move |d| check_linear(d, lin, n, k, ms, out)));
    }
    trials.push(GpuTrial::new("linear::prepared_only", linear_prepared_only));
    trials.push(GpuTrial::new("graph_replay_equals_eager", graph_equals_eager));
    trials.push(GpuTrial::new("graph_replay_equals_eager_tiled", graph_replay_equals_eager_tiled));
    trials.push(GpuTrial::new("run_allocates_nothing", run_allocates_nothing));
    trials.push(GpuTrial::new("bad_inputs_launch_nothing", bad_inputs));
    run_gpu_trials(trials)
}
