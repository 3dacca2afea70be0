//! A Llama / Qwen-style dense decoder layer's decode step from b12x ops (see the crate docs).
//!
//! - [`Config`]: the geometry ([`Config::qwen3_8b`]: hidden 4096, H 32, Hkv 8, D 128,
//!   intermediate 12288, θ 1e6, NeoX rope over the whole head). No QK-norm (Qwen3 has one; this
//!   layer is the composition).
//! - [`HostWeights`]: seeded random weights in a [`WeightFormat`]: BF16, block FP8 (128 × 128
//!   tiles, f32 scales, W8A16: `gemm.blockscaled`) or NVFP4 (W4A16). The fused linears are
//!   W_qkv `[(H + 2·Hkv)·D, hidden]` (Q rows, then K, then V), W_o `[hidden, H·D]`, W_gate_up
//!   `[2·I, hidden]` (gate rows first) and W_down `[hidden, I]`.
//! - [`Layer`]: every op's plan for a [`Capacity`]; [`Layer::plans`] for one
//!   `PreparationSession`; [`Layer::step`] enqueues the step's ten ops on a stream (only
//!   launches: capture it as one graph with `PreparationSession::capture`).
//! - [`State`]: the device buffers of a batch of B requests (activations, the paged KV cache,
//!   page table, lengths, positions, scratch, the error word); [`Batch`] is the host's page
//!   allocator: [`Batch::advance`] adds one token per request (a new page when one fills) and
//!   [`State::upload_batch`] writes lengths, positions and the page table into the same device
//!   buffers, so a captured graph replays the next step.
//!
//! Rounding points (the reference reproduces them): every op's output is rounded to bf16 (the
//! residual sums inside `norm.rmsnorm` too); K and V are cached in bf16 after rope.

use b12x_attention::paging::ErrorWord;
use b12x_attention::{kv_append, paged, rope};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::{DType, Device, Error, OpPlan, Result, Scratch, TensorMut, TensorRef};
use b12x_gemm::bf16_gemv;
use b12x_gemm::blockscaled::gemv as bsgemv;
use b12x_gemm::blockscaled::gemv::XFormat;
use b12x_gemm::blockscaled::pack::{pack_weight, PackedWeight};
use b12x_gemm::blockscaled::{pack, Weight};
use b12x_norm::{rmsnorm, silu_and_mul};
use b12x_quant::block::{quantize_block_fp8, quantize_nvfp4, Fp8ScaleKind};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// The layer's geometry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub intermediate: usize,
    /// Rope θ (NeoX pairs over the whole head).
    pub rope_theta: f32,
    /// RMSNorm ε.
    pub eps: f32,
    /// Tokens per KV page.
    pub page_size: usize,
}

impl Config {
    /// Qwen3-8B's dense layer shape (without its QK-norm).
    pub fn qwen3_8b() -> Self {
        Config {
            hidden: 4096,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            intermediate: 12288,
            rope_theta: 1e6,
            eps: 1e-6,
            page_size: 16,
        }
    }
    /// Columns of the fused QKV projection.
    pub fn qkv_cols(&self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }
    /// `(N, K)` of the four linears, in [`LINEARS`] order.
    pub fn linear_shapes(&self) -> [(usize, usize); 4] {
        let (h, q) = (self.hidden, self.heads * self.head_dim);
        [(self.qkv_cols(), h), (h, q), (2 * self.intermediate, h), (h, self.intermediate)]
    }
    /// The softmax scale, `1/√D`.
    pub fn softmax_scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }
}

/// The four linears, in weight order.
pub const LINEARS: [&str; 4] = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"];

/// How the linears' weights are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// BF16 weights, `gemm.bf16_gemv`.
    Bf16,
    /// Block FP8 (E4M3, one f32 scale per 128 × 128 tile), BF16 activations (W8A16),
    /// `gemm.blockscaled`.
    BlockFp8,
    /// NVFP4 (E2M1, UE4M3 per 16, f32 tensor scale), BF16 activations (W4A16), `gemm.blockscaled`.
    Nvfp4,
}

impl WeightFormat {
    pub const ALL: [WeightFormat; 3] = [WeightFormat::Bf16, WeightFormat::BlockFp8, WeightFormat::Nvfp4];
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::Bf16 => "bf16",
            WeightFormat::BlockFp8 => "block_fp8",
            WeightFormat::Nvfp4 => "nvfp4",
        }
    }
    /// Bytes of a `[n, k]` weight as the kernels read it: the packed codes and scales (one f32
    /// per 128 × 128 tile for block FP8, rows padded to 16 bytes; one UE4M3 per 16 for NVFP4, in
    /// 128 × 4 tiles).
    pub fn weight_bytes(self, n: usize, k: usize) -> usize {
        match self {
            WeightFormat::Bf16 => 2 * n * k,
            WeightFormat::BlockFp8 => n * k + n.div_ceil(128) * pack::block_scale_ld(k, 128) * 4,
            // Swizzled 128 × 4 scale tiles: rows padded to 128, scale columns to 4.
            WeightFormat::Nvfp4 => n * k / 2 + n.next_multiple_of(128) * (k / 16).next_multiple_of(4),
        }
    }
}

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
    /// In [`LINEARS`] order.
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
        let up = |v: &[f32]| -> Result<CudaSlice<bf16>> {
            Ok(stream.clone_htod(&v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>())?)
        };
        let mut linears = Vec::new();
        for l in &self.linears {
            linears.push(match &l.quantized {
                None => DeviceLinear::Bf16(up(&l.values)?),
                Some(w) => DeviceLinear::Packed(Box::new(pack_weight(w, stream)?)),
            });
        }
        Ok(DeviceWeights { ln1: up(&self.ln1)?, ln2: up(&self.ln2)?, linears })
    }
}

/// One linear's weight on the device.
pub enum DeviceLinear {
    Bf16(CudaSlice<bf16>),
    Packed(Box<PackedWeight>),
}

/// The layer's weights on the device.
pub struct DeviceWeights {
    pub ln1: CudaSlice<bf16>,
    pub ln2: CudaSlice<bf16>,
    pub linears: Vec<DeviceLinear>,
}

/// What a [`Layer`] is planned for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Largest B (requests, one new token each).
    pub max_batch: usize,
    /// Page-table entries per request: contexts up to `max_pages · P`.
    pub max_pages: usize,
    /// Pages in the cache.
    pub num_pages: usize,
}

enum LinearPlan {
    Bf16(bf16_gemv::Plan),
    Packed(bsgemv::Plan),
}

impl LinearPlan {
    fn op_plan(&self) -> &dyn OpPlan {
        match self {
            LinearPlan::Bf16(p) => p,
            LinearPlan::Packed(p) => p,
        }
    }
    fn scratch_bytes(&self) -> usize {
        match self {
            LinearPlan::Bf16(p) => p.scratch_layout().total_bytes(),
            LinearPlan::Packed(p) => p.scratch_layout().total_bytes(),
        }
    }
}

/// The ten ops of a step, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    AddNorm1,
    QkvProj,
    Rope,
    KvAppend,
    Attention,
    OProj,
    AddNorm2,
    GateUpProj,
    SiluAndMul,
    DownProj,
}

impl Op {
    pub const ALL: [Op; 10] = [
        Op::AddNorm1,
        Op::QkvProj,
        Op::Rope,
        Op::KvAppend,
        Op::Attention,
        Op::OProj,
        Op::AddNorm2,
        Op::GateUpProj,
        Op::SiluAndMul,
        Op::DownProj,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Op::AddNorm1 => "add_rmsnorm_1",
            Op::QkvProj => "qkv_proj",
            Op::Rope => "rope",
            Op::KvAppend => "kv_append",
            Op::Attention => "attention",
            Op::OProj => "o_proj",
            Op::AddNorm2 => "add_rmsnorm_2",
            Op::GateUpProj => "gate_up_proj",
            Op::SiluAndMul => "silu_and_mul",
            Op::DownProj => "down_proj",
        }
    }
}

/// How the layer's ops launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayerOptions {
    /// Programmatic dependent launch for the ops that offer it (`gemm.bf16_gemv`'s `pdl`,
    /// `attention.paged`'s `PlanOptions::pdl`): each starts while the kernel before it finishes,
    /// reading only what that kernel does not write (weights; lengths and page tables) before
    /// its wait. Safe in this step: no op writes a weight, and only the host writes lengths and
    /// page tables (between steps). Preparing a PDL `bf16_gemv` plan races chains of calls on
    /// copies of its weight (up to eight, at most 1 GiB). The step's other kernels
    /// (`norm.rmsnorm`, `attention.rope`, `attention.kv_append`, `activation.silu_and_mul`) let
    /// the next PDL kernel launch as soon as they start, so a GEMV streams its weight while the
    /// small op before it runs.
    pub pdl: bool,
    /// `attention.paged`'s split cap (`PlanOptions::max_splits`; `None`: the op's default).
    /// Small batches may merge fewer, longer splits in a cluster faster than the default's many
    /// short ones merged through the scratch.
    pub attention_splits: Option<usize>,
}

/// Every op's plan for one configuration, weight format and capacity.
pub struct Layer {
    pub cfg: Config,
    pub format: WeightFormat,
    pub cap: Capacity,
    pub options: LayerOptions,
    norm: rmsnorm::Plan,
    linears: Vec<LinearPlan>,
    rope: rope::Plan,
    append: kv_append::Plan,
    attn: paged::Plan,
    act: silu_and_mul::Plan,
}

impl Layer {
    /// Plans every op (allocates, compiles and launches nothing).
    pub fn new(cfg: &Config, format: WeightFormat, cap: Capacity, dev: &Arc<Device>) -> Result<Self> {
        Self::with_options(cfg, format, cap, LayerOptions::default(), dev)
    }

    /// [`Layer::new`] with [`LayerOptions`].
    pub fn with_options(
        cfg: &Config,
        format: WeightFormat,
        cap: Capacity,
        options: LayerOptions,
        dev: &Arc<Device>,
    ) -> Result<Self> {
        let (h, hkv, d, p) = (cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.page_size);
        let b = cap.max_batch;
        let norm = rmsnorm::plan(
            &rmsnorm::Query { cols: cfg.hidden, dtype: DType::BF16, max_tokens: b, eps: cfg.eps, residual: true },
            dev,
        )?;
        let mut linears = Vec::new();
        for (n, k) in cfg.linear_shapes() {
            linears.push(match format {
                WeightFormat::Bf16 => LinearPlan::Bf16(bf16_gemv::plan(
                    &bf16_gemv::Query {
                        n,
                        k,
                        x_dtype: DType::BF16,
                        out_dtype: DType::BF16,
                        bias: None,
                        max_rows: b,
                        aligned: true,
                        pdl: options.pdl,
                    },
                    dev,
                )?),
                WeightFormat::BlockFp8 | WeightFormat::Nvfp4 => {
                    let weight = if format == WeightFormat::Nvfp4 {
                        pack::WeightFormat::Nvfp4
                    } else {
                        pack::WeightFormat::BlockFp8 { tile: 128, scale: Fp8ScaleKind::F32 }
                    };
                    LinearPlan::Packed(bsgemv::plan(
                        &bsgemv::Query {
                            n,
                            k,
                            weight,
                            x_format: XFormat::Bf16,
                            out_dtype: DType::BF16,
                            bias: None,
                            max_rows: b,
                            x_quant: None,
                        },
                        dev,
                    )?)
                }
            });
        }
        let rope = rope::plan(
            &rope::Query {
                heads: h,
                kv_heads: hkv,
                head_dim: d,
                rotary_dim: d,
                rotary_offset: 0,
                style: rope::RopeStyle::Neox,
                base: cfg.rope_theta,
                yarn: None,
                dtype: DType::BF16,
                max_tokens: b,
                max_position: cap.max_pages * p,
                cos_sin: rope::CosSin::Computed,
            },
            dev,
        )?;
        let append = kv_append::plan(
            &kv_append::Query {
                kv_heads: hkv,
                head_dim: d,
                page_size: p,
                dtype: DType::BF16,
                cache_dtype: DType::BF16,
                max_batch: b,
                max_tokens: b,
                max_pages: cap.max_pages,
                num_pages: cap.num_pages,
            },
            dev,
        )?;
        let attn = paged::plan_with(
            &paged::Query {
                heads: h,
                kv_heads: hkv,
                head_dim: d,
                page_size: p,
                q_dtype: DType::BF16,
                kv_dtype: DType::BF16,
                scale: cfg.softmax_scale(),
                window_left: -1,
                sinks: false,
                max_batch: b,
                max_tokens: b,
                max_q_len: 1,
                max_pages: cap.max_pages,
                num_pages: cap.num_pages,
            },
            dev,
            paged::PlanOptions { pdl: options.pdl, max_splits: options.attention_splits, ..Default::default() },
        )?;
        let act = silu_and_mul::plan(
            &silu_and_mul::Query {
                intermediate: cfg.intermediate,
                dtype: DType::BF16,
                max_tokens: b,
                limit: None,
                out: None,
            },
            dev,
        )?;
        Ok(Layer { cfg: *cfg, format, cap, options, norm, linears, rope, append, attn, act })
    }

    /// Every plan, for one `PreparationSession::prepare`.
    pub fn plans(&self) -> Vec<&dyn OpPlan> {
        let mut v: Vec<&dyn OpPlan> = vec![&self.norm];
        v.extend(self.linears.iter().map(LinearPlan::op_plan));
        v.extend([&self.rope as &dyn OpPlan, &self.append, &self.attn, &self.act]);
        v
    }

    /// Device buffers for a batch of `b ≤ max_batch` requests (zeroed; the KV cache zeroed).
    pub fn state(&self, stream: &Arc<CudaStream>, b: usize) -> Result<State> {
        if b == 0 || b > self.cap.max_batch {
            return Err(Error::Capacity { what: "B (requests)", got: b, capacity: self.cap.max_batch });
        }
        let c = &self.cfg;
        let z = |n: usize| -> Result<CudaSlice<bf16>> { Ok(stream.alloc_zeros::<bf16>(n)?) };
        let cache = self.cap.num_pages * c.page_size * c.kv_heads * c.head_dim;
        let mut scratch = Vec::new();
        for bytes in
            self.linears.iter().map(LinearPlan::scratch_bytes).chain([self.attn.scratch_layout().total_bytes()])
        {
            scratch.push(if bytes > 0 { Some(stream.alloc_zeros::<u8>(bytes)?) } else { None });
        }
        Ok(State {
            b,
            x: z(b * c.hidden)?,
            residual: z(b * c.hidden)?,
            h: z(b * c.hidden)?,
            qkv: z(b * c.qkv_cols())?,
            o: z(b * c.heads * c.head_dim)?,
            proj: z(b * c.hidden)?,
            gate_up: z(b * 2 * c.intermediate)?,
            act: z(b * c.intermediate)?,
            y: z(b * c.hidden)?,
            k_cache: z(cache)?,
            v_cache: z(cache)?,
            page_table: stream.alloc_zeros::<i32>(b * self.cap.max_pages)?,
            seq_lens: stream.alloc_zeros::<i32>(b)?,
            cu_seqlens_q: stream.clone_htod(&(0..=b as i32).collect::<Vec<_>>())?,
            positions: stream.alloc_zeros::<i32>(b)?,
            scratch,
            error: ErrorWord::new(stream)?,
        })
    }

    /// Enqueues the whole decode step on `stream`: the ten ops of [`Op::ALL`].
    pub fn step(&self, w: &DeviceWeights, st: &mut State, stream: &Arc<CudaStream>) -> Result<()> {
        for op in Op::ALL {
            self.run_op(op, w, st, stream)?;
        }
        Ok(())
    }

    /// Enqueues one op of the step (the bench times them one by one).
    pub fn run_op(&self, op: Op, w: &DeviceWeights, st: &mut State, stream: &Arc<CudaStream>) -> Result<()> {
        let c = &self.cfg;
        let (b, hd) = (st.b, c.hidden);
        let (h, hkv, d) = (c.heads, c.kv_heads, c.head_dim);
        let qkv_widths = [h * d, hkv * d, hkv * d];
        let cache_shape = [self.cap.num_pages, c.page_size, hkv, d];
        match op {
            Op::AddNorm1 | Op::AddNorm2 => {
                let (x, ln) = if op == Op::AddNorm1 { (&st.x, &w.ln1) } else { (&st.proj, &w.ln2) };
                let args = rmsnorm::Args {
                    x: TensorRef::from_slice(x, &[b, hd])?,
                    residual: Some(TensorMut::from_slice(&mut st.residual, &[b, hd])?),
                    w: TensorRef::from_slice(ln, &[hd])?,
                    y: TensorMut::from_slice(&mut st.h, &[b, hd])?,
                };
                rmsnorm::run(&self.norm, args, Scratch::none(), stream)
            }
            Op::QkvProj => self.linear(0, w, &st.h, &mut st.qkv, b, &mut st.scratch[0], stream),
            Op::OProj => self.linear(1, w, &st.o, &mut st.proj, b, &mut st.scratch[1], stream),
            Op::GateUpProj => self.linear(2, w, &st.h, &mut st.gate_up, b, &mut st.scratch[2], stream),
            Op::DownProj => self.linear(3, w, &st.act, &mut st.y, b, &mut st.scratch[3], stream),
            Op::Rope => {
                let mut parts = TensorMut::from_slice(&mut st.qkv, &[b, c.qkv_cols()])?.split_last(&qkv_widths)?;
                parts.truncate(2);
                let k = parts.pop().ok_or_else(|| missing("k"))?.unflatten_last(&[hkv, d])?;
                let q = parts.pop().ok_or_else(|| missing("q"))?.unflatten_last(&[h, d])?;
                let args = rope::Args {
                    q,
                    k: Some(k),
                    positions: TensorRef::from_slice(&st.positions, &[b])?,
                    cos_sin: None,
                    error: st.error.view()?,
                };
                rope::run(&self.rope, args, Scratch::none(), stream)
            }
            Op::KvAppend => {
                let parts = TensorRef::from_slice(&st.qkv, &[b, c.qkv_cols()])?.split_last(&qkv_widths)?;
                let args = kv_append::Args {
                    k: parts[1].unflatten_last(&[hkv, d])?,
                    v: parts[2].unflatten_last(&[hkv, d])?,
                    k_cache: TensorMut::from_slice(&mut st.k_cache, &cache_shape)?,
                    v_cache: TensorMut::from_slice(&mut st.v_cache, &cache_shape)?,
                    k_scale: None,
                    v_scale: None,
                    page_table: TensorRef::from_slice(&st.page_table, &[b, self.cap.max_pages])?,
                    seq_lens: TensorRef::from_slice(&st.seq_lens, &[b])?,
                    cu_seqlens_q: TensorRef::from_slice(&st.cu_seqlens_q, &[b + 1])?,
                    error: st.error.view()?,
                };
                kv_append::run(&self.append, args, Scratch::none(), stream)
            }
            Op::Attention => {
                let parts = TensorRef::from_slice(&st.qkv, &[b, c.qkv_cols()])?.split_last(&qkv_widths)?;
                let scratch = scratch_of(&mut st.scratch[4]);
                let args = paged::Args {
                    q: parts[0].unflatten_last(&[h, d])?,
                    k_cache: TensorRef::from_slice(&st.k_cache, &cache_shape)?,
                    v_cache: TensorRef::from_slice(&st.v_cache, &cache_shape)?,
                    k_scale: None,
                    v_scale: None,
                    sinks: None,
                    page_table: TensorRef::from_slice(&st.page_table, &[b, self.cap.max_pages])?,
                    seq_lens: TensorRef::from_slice(&st.seq_lens, &[b])?,
                    cu_seqlens_q: TensorRef::from_slice(&st.cu_seqlens_q, &[b + 1])?,
                    o: TensorMut::from_slice(&mut st.o, &[b, h, d])?,
                    lse: None,
                    error: st.error.view()?,
                };
                paged::run(&self.attn, args, scratch, stream)
            }
            Op::SiluAndMul => {
                let args = silu_and_mul::Args {
                    x: TensorRef::from_slice(&st.gate_up, &[b, 2 * c.intermediate])?,
                    y: Some(TensorMut::from_slice(&mut st.act, &[b, c.intermediate])?),
                    codes: None,
                    scales: None,
                    enc: None,
                };
                silu_and_mul::run(&self.act, args, Scratch::none(), stream)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn linear(
        &self,
        i: usize,
        w: &DeviceWeights,
        x: &CudaSlice<bf16>,
        y: &mut CudaSlice<bf16>,
        b: usize,
        scratch: &mut Option<CudaSlice<u8>>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let (n, k) = self.cfg.linear_shapes()[i];
        let scratch = scratch_of(scratch);
        let (xv, yv) = (TensorRef::from_slice(x, &[b, k])?, TensorMut::from_slice(y, &[b, n])?);
        match (&self.linears[i], &w.linears[i]) {
            (LinearPlan::Bf16(p), DeviceLinear::Bf16(wt)) => {
                let args = bf16_gemv::Args { x: xv, w: TensorRef::from_slice(wt, &[n, k])?, bias: None, y: yv };
                bf16_gemv::run(p, args, scratch, stream)
            }
            (LinearPlan::Packed(p), DeviceLinear::Packed(wt)) => {
                let args = bsgemv::Args { x: xv, x_scales: None, x_global: None, w: wt, bias: None, y: yv, alpha: 1.0 };
                bsgemv::run(p, args, scratch, stream)
            }
            _ => Err(Error::InvalidQuery {
                op: "b12x-layers",
                field: "weights",
                reason: format!("{} weights do not match the layer's {:?} plans", LINEARS[i], self.format),
            }),
        }
    }
}

/// An op's scratch buffer, or none when its layout is empty.
fn scratch_of(s: &mut Option<CudaSlice<u8>>) -> Scratch<'_> {
    match s {
        Some(s) => Scratch::from_slice(s),
        None => Scratch::none(),
    }
}

fn missing(what: &str) -> Error {
    Error::InvalidQuery { op: "b12x-layers", field: "qkv", reason: format!("no {what} columns") }
}

/// The device buffers of one batch (see the module docs). Public fields are the layer's inputs
/// and outputs: write `x` and `residual` before a step; read `y` and `residual` after it.
pub struct State {
    pub b: usize,
    /// `[B, hidden]`: the layer's input (the previous layer's output).
    pub x: CudaSlice<bf16>,
    /// `[B, hidden]`: the residual stream, updated in place (twice per step).
    pub residual: CudaSlice<bf16>,
    h: CudaSlice<bf16>,
    qkv: CudaSlice<bf16>,
    o: CudaSlice<bf16>,
    proj: CudaSlice<bf16>,
    gate_up: CudaSlice<bf16>,
    act: CudaSlice<bf16>,
    /// `[B, hidden]`: the layer's output (the MLP's; add it to `residual` in the next layer).
    pub y: CudaSlice<bf16>,
    /// `[num_pages, P, Hkv, D]`.
    pub k_cache: CudaSlice<bf16>,
    pub v_cache: CudaSlice<bf16>,
    page_table: CudaSlice<i32>,
    seq_lens: CudaSlice<i32>,
    cu_seqlens_q: CudaSlice<i32>,
    positions: CudaSlice<i32>,
    scratch: Vec<Option<CudaSlice<u8>>>,
    /// The attention ops' fault bits (rope, kv_append, paged).
    pub error: ErrorWord,
}

impl State {
    /// Writes the batch's lengths (including the new token), positions (`L_b − 1`) and page
    /// table into the device buffers a captured step reads.
    pub fn upload_batch(&mut self, batch: &Batch, stream: &Arc<CudaStream>) -> Result<()> {
        if batch.lens.len() != self.b {
            return Err(Error::Shape {
                tensor: "batch",
                expected: format!("{} requests", self.b),
                actual: vec![batch.lens.len()],
            });
        }
        stream.memcpy_htod(&batch.lens, &mut self.seq_lens)?;
        let pos: Vec<i32> = batch.lens.iter().map(|&l| l - 1).collect();
        stream.memcpy_htod(&pos, &mut self.positions)?;
        stream.memcpy_htod(&batch.page_table(), &mut self.page_table)?;
        Ok(())
    }
    /// Uploads `[B, hidden]` values (rounded to bf16) into `x` and `residual`.
    pub fn upload_inputs(&mut self, x: &[f32], residual: &[f32], stream: &Arc<CudaStream>) -> Result<()> {
        let bf = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
        stream.memcpy_htod(&bf(x), &mut self.x)?;
        stream.memcpy_htod(&bf(residual), &mut self.residual)?;
        Ok(())
    }
    /// Fills `[cache tokens]` of both caches from host bf16 values (`[num_pages, P, Hkv, D]`).
    pub fn upload_cache(&mut self, k: &[bf16], v: &[bf16], stream: &Arc<CudaStream>) -> Result<()> {
        stream.memcpy_htod(k, &mut self.k_cache)?;
        stream.memcpy_htod(v, &mut self.v_cache)?;
        Ok(())
    }
    /// `(y, residual)` as f32 (synchronizes the stream).
    pub fn outputs(&self, stream: &Arc<CudaStream>) -> Result<(Vec<f32>, Vec<f32>)> {
        let f = |v: Vec<bf16>| v.into_iter().map(f32::from).collect::<Vec<_>>();
        Ok((f(stream.clone_dtoh(&self.y)?), f(stream.clone_dtoh(&self.residual)?)))
    }
}

/// The host's view of a batch: context lengths and page lists, with a free-page pool.
#[derive(Clone, Debug)]
pub struct Batch {
    /// Context lengths including the newest token (what `seq_lens` holds).
    pub lens: Vec<i32>,
    /// Each request's pages, in order.
    pub pages: Vec<Vec<i32>>,
    free: Vec<i32>,
    max_pages: usize,
    page_size: usize,
}

impl Batch {
    /// Requests with `contexts[b]` tokens already cached (before the first step), pages drawn
    /// from a seeded shuffle of all `num_pages` pages (scattered, never shared).
    pub fn new(contexts: &[usize], page_size: usize, max_pages: usize, num_pages: usize, seed: u64) -> Result<Self> {
        let mut free: Vec<i32> = (0..num_pages as i32).collect();
        free.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        let mut pages = Vec::new();
        for &c in contexts {
            if c.div_ceil(page_size) > max_pages {
                return Err(Error::Capacity { what: "context pages", got: c.div_ceil(page_size), capacity: max_pages });
            }
            let mut mine = Vec::new();
            for _ in 0..c.div_ceil(page_size) {
                mine.push(free.pop().ok_or(Error::Capacity {
                    what: "pages",
                    got: num_pages + 1,
                    capacity: num_pages,
                })?);
            }
            pages.push(mine);
        }
        let lens = contexts.iter().map(|&c| c as i32).collect();
        Ok(Batch { lens, pages, free, max_pages, page_size })
    }
    /// One new token per request: a fresh page where the last one is full. On an error (no page
    /// left, or a page table full) nothing changes.
    pub fn advance(&mut self) -> Result<()> {
        let need = self.lens.iter().filter(|&&l| l as usize % self.page_size == 0).count();
        if need > self.free.len() {
            return Err(Error::Capacity { what: "free pages", got: need, capacity: self.free.len() });
        }
        if let Some(p) = self
            .lens
            .iter()
            .zip(&self.pages)
            .find(|(&l, p)| l as usize % self.page_size == 0 && p.len() == self.max_pages)
        {
            return Err(Error::Capacity { what: "context pages", got: p.1.len() + 1, capacity: self.max_pages });
        }
        for (l, pages) in self.lens.iter_mut().zip(&mut self.pages) {
            if *l as usize % self.page_size == 0 {
                if pages.len() == self.max_pages {
                    return Err(Error::Capacity {
                        what: "context pages",
                        got: pages.len() + 1,
                        capacity: self.max_pages,
                    });
                }
                pages.push(self.free.pop().ok_or(Error::Capacity { what: "free pages", got: 1, capacity: 0 })?);
            }
            *l += 1;
        }
        Ok(())
    }
    /// `[B, max_pages]`, unused entries −1.
    pub fn page_table(&self) -> Vec<i32> {
        let mut t = vec![-1i32; self.lens.len() * self.max_pages];
        for (b, pages) in self.pages.iter().enumerate() {
            t[b * self.max_pages..][..pages.len()].copy_from_slice(pages);
        }
        t
    }
    /// Bytes of KV the step's attention reads (every context token's K and V, bf16).
    pub fn kv_bytes(&self, cfg: &Config) -> usize {
        self.lens.iter().map(|&l| l as usize).sum::<usize>() * cfg.kv_heads * cfg.head_dim * 2 * 2
    }
}

/// What [`decode_run`] measured.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Per step: `1 − cos` of the GPU's `y` and `residual` against the reference layer's.
    pub y_cosine_diff: Vec<f64>,
    pub residual_cosine_diff: Vec<f64>,
    /// Per step: the graph replay's `y` and `residual` equal the eager step's bitwise.
    pub replay_equals_eager: Vec<bool>,
    /// Free device memory before the first eager step and after the last one (equal: no
    /// allocation after freeze).
    pub mem_free_before_after: (usize, usize),
    /// The error word after the run (0: no fault).
    pub faults: u32,
    /// Pages allocated during the run (contexts crossing a page boundary).
    pub new_pages: usize,
    /// (plan, bucket) selections that were missing at `freeze()` or differ after the run from
    /// the ones `freeze()` saw: kernel resolutions after freeze (0; with the device frozen any
    /// resolution is also an `Error::KernelResolutionFrozen`).
    pub resolutions_after_freeze: usize,
    /// The device stayed frozen from `freeze()` to the last step.
    pub frozen_throughout: bool,
}

/// Every bucket's prepared selection of every plan (`None` where unprepared).
fn selections(plans: &[&dyn OpPlan]) -> Vec<Option<Arc<b12x_core::Selected>>> {
    plans.iter().flat_map(|p| (0..p.buckets().len()).map(|b| p.slot().get(b))).collect()
}

/// The example's and the GPU test's scenario: weights of `format`, B = `contexts.len()` requests
/// with those cached contexts (random K/V), every plan prepared by one session and frozen, the
/// step captured as one graph on one state and run eagerly on another; then `steps` steps, each
/// with a new token per request (a new page where one fills), fresh random inputs, the graph
/// replayed, the eager step run, and the reference layer stepped. `reference: false` skips the
/// CPU layer (its cosine rows stay empty).
#[allow(clippy::too_many_arguments)]
pub fn decode_run(
    dev: &Arc<Device>,
    cfg: &Config,
    format: WeightFormat,
    options: LayerOptions,
    contexts: &[usize],
    steps: usize,
    reference: bool,
    seed: u64,
) -> Result<RunReport> {
    let stream = dev.stream();
    let b = contexts.len();
    let p = cfg.page_size;
    let max_ctx = contexts.iter().copied().max().unwrap_or(0) + steps;
    let max_pages = max_ctx.div_ceil(p);
    let num_pages = contexts.iter().map(|&c| (c + steps).div_ceil(p)).sum::<usize>() + 8;
    let cap = Capacity { max_batch: b, max_pages, num_pages };
    let weights = HostWeights::random(cfg, format, seed)?;
    let dw = weights.upload(stream)?;
    let layer = Layer::with_options(cfg, format, cap, options, dev)?;
    let mut session = b12x_core::PreparationSession::new(dev)?;
    session.prepare(&layer.plans())?;
    session.freeze();
    let at_freeze = selections(&layer.plans());
    let mut frozen = dev.is_frozen();

    // Cached contexts: random K/V in [-1, 1] (bf16), the same in both device states and the
    // reference.
    let mut batch = Batch::new(contexts, p, max_pages, num_pages, seed ^ 0x5eed)?;
    let row = cfg.kv_heads * cfg.head_dim;
    let mut kc = vec![bf16::ZERO; num_pages * p * row];
    let mut vc = kc.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xcace);
    let mut kv = Vec::new();
    for (r, &c) in contexts.iter().enumerate() {
        let k: Vec<f32> = (0..c * row).map(|_| bf16::from_f32(rng.random_range(-1.0..1.0)).to_f32()).collect();
        let v: Vec<f32> = (0..c * row).map(|_| bf16::from_f32(rng.random_range(-1.0..1.0)).to_f32()).collect();
        for t in 0..c {
            let slot = (batch.pages[r][t / p] as usize * p + t % p) * row;
            for e in 0..row {
                kc[slot + e] = bf16::from_f32(k[t * row + e]);
                vc[slot + e] = bf16::from_f32(v[t * row + e]);
            }
        }
        kv.push(crate::reference::RequestKv { k, v });
    }
    let mut eager = layer.state(stream, b)?;
    let mut replay = layer.state(stream, b)?;
    eager.upload_cache(&kc, &vc, stream)?;
    replay.upload_cache(&kc, &vc, stream)?;
    drop((kc, vc));
    let mut cpu = crate::reference::Layer::new(cfg, &weights, if reference { kv } else { Vec::new() });

    let graph = session.capture(stream, |s| layer.step(&dw, &mut replay, s))?;
    let mut report = RunReport::default();
    let pages_before: usize = batch.pages.iter().map(Vec::len).sum();
    stream.synchronize()?;
    let free_before = dev.mem_free()?;
    let mut inputs = ChaCha8Rng::seed_from_u64(seed ^ 0x1197);
    for _ in 0..steps {
        batch.advance()?;
        let n = b * cfg.hidden;
        let x: Vec<f32> = (0..n).map(|_| bf16::from_f32(inputs.random_range(-1.0..1.0)).to_f32()).collect();
        let mut res: Vec<f32> = (0..n).map(|_| bf16::from_f32(inputs.random_range(-2.0..2.0)).to_f32()).collect();
        for st in [&mut eager, &mut replay] {
            st.upload_batch(&batch, stream)?;
            st.upload_inputs(&x, &res, stream)?;
        }
        layer.step(&dw, &mut eager, stream)?;
        frozen &= dev.is_frozen();
        // SAFETY: the graph replays `replay`'s buffers and the weights, alive until the end.
        unsafe { graph.launch() }?;
        let (ye, re) = eager.outputs(stream)?;
        let (yr, rr) = replay.outputs(stream)?;
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        report.replay_equals_eager.push(same(&ye, &yr) && same(&re, &rr));
        if reference {
            let y = cpu.step(&x, &mut res);
            report.y_cosine_diff.push(crate::reference::cosine_diff(&ye, &y));
            report.residual_cosine_diff.push(crate::reference::cosine_diff(&re, &res));
        }
    }
    stream.synchronize()?;
    report.mem_free_before_after = (free_before, dev.mem_free()?);
    report.faults = eager.error.read(stream)?.0 | replay.error.read(stream)?.0;
    report.new_pages = batch.pages.iter().map(Vec::len).sum::<usize>() - pages_before;
    let after = selections(&layer.plans());
    report.resolutions_after_freeze = at_freeze
        .iter()
        .zip(&after)
        .filter(|(a, b)| match (a, b) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
            _ => true,
        })
        .count();
    report.frozen_throughout = frozen && dev.is_frozen();
    drop(graph);
    session.close();
    Ok(report)
}

/// Cosine-difference bound of the GPU layer against the reference, per weight format. The
/// reference computes with the same weight values (dequantized for block FP8 / NVFP4) and the
/// same bf16 rounding points, so what remains is summation order and 1-ULP differences of single
/// roundings, alike for every format.
pub fn cosine_bound(format: WeightFormat) -> f64 {
    match format {
        WeightFormat::Bf16 | WeightFormat::BlockFp8 | WeightFormat::Nvfp4 => 1e-4,
    }
}
