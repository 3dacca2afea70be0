//! GPU validation of `attention.rope_paged` (libtest-mimic; listed as ignored without a CUDA
//! device): the fused op against the two ops it replaces, on the same inputs on the GPU —
//! `attention.rope_kv_append` (rope on q, the rotated k and v into the cache), then
//! `attention.paged` on the rotated q with the same `paged::PlanOptions`. Both are validated
//! against their CPU oracles (`gpu_rope_kv_append.rs` → `gpu_rope.rs`, `gpu_kv_append.rs`;
//! `gpu_paged.rs`), so **bitwise** equality here carries those oracles over.
//!
//! Every trial works on one QKV buffer `[T, (H + 2·Hkv)·D + 8]` (padded rows, as a QKV projection
//! leaves it), caches filled with random bytes and poisoned outputs, and requires bitwise: o and
//! lse (every row, padding rows included: neither path writes them), both caches (every byte),
//! the error word, and the fused call's QKV buffer unchanged (q is read, not rotated in place).
//! Cases: Qwen3-8B heads (NeoX over all 128 dims; computed cos/sin and the table; BF16, FP16 and
//! E4M3 caches), partial rotary (NeoX R = 32 of D = 64; NeoX and GPT-J R = 64 at offset 64 of
//! 128), GPT-J over D = 96 with the table, decode batches with page-boundary lengths and a
//! 4095-token context (split over CTAs), an extend batch (up to 4 new tokens of a group of 2),
//! every 8-row variant (2-, 3-, 6-stage rings, 8 warps, one split, splits merged through scratch
//! and in a cluster, PDL), bad positions and the suite's bad page ids, lengths and packings.
//! Further trials: graph replay equals eager after lengths and positions change, a PDL plan
//! launched right behind a long kernel that writes the QKV buffer (an identity `gemm.bf16_gemv`)
//! equals the plain pair after the same kernel, `run` allocates nothing, bad queries and
//! arguments are typed errors that launch nothing.

mod common;

use b12x_attention::paging::ErrorWord;
use b12x_attention::rope::{self, CosSin, RopeStyle};
use b12x_attention::{paged, rope_kv_append, rope_paged};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::testing::{check_run_allocates_nothing, run_gpu_trials, GpuTrial};
use b12x_core::{DType, Device, Error, PreparationSession, Scratch, TensorMut, TensorRef};
use common::{err, make_batch, Batch, Req, TrialResult, FAULTS};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const PAD: usize = 8;

#[derive(Clone, Copy, Debug)]
struct Geo {
    h: usize,
    hkv: usize,
    d: usize,
    r: usize,
    off: usize,
    style: RopeStyle,
    dtype: DType,
    e4m3: bool,
    table: bool,
    p: usize,
}

#[derive(Clone)]
struct Case {
    g: Geo,
    batch: Batch,
    positions: Vec<i32>,
    max_q_len: usize,
    opts: paged::PlanOptions,
    seed: u64,
}

impl Case {
    fn new(g: Geo, reqs: &[Req], padding: usize, seed: u64) -> Case {
        let batch = make_batch(reqs, g.p, seed, padding);
        let mut positions = vec![0i32; batch.rows];
        for b in 0..batch.lens.len() {
            let (r0, r1) = (batch.cu[b], batch.cu[b + 1]);
            for r in r0..r1 {
                positions[r as usize] = batch.lens[b] - (r1 - r0) + (r - r0);
            }
        }
        let max_q_len = reqs.iter().map(|r| r.1.max(1) as usize).max().unwrap_or(1);
        Case { g, batch, positions, max_q_len, opts: paged::PlanOptions::default(), seed }
    }
    fn with(mut self, opts: paged::PlanOptions) -> Case {
        self.opts = opts;
        self
    }
    fn es(&self) -> usize {
        self.g.dtype.size_bytes()
    }
    fn stride(&self) -> usize {
        (self.g.h + 2 * self.g.hkv) * self.g.d + PAD
    }
    fn max_position(&self) -> usize {
        self.batch.max_pages * self.g.p
    }
    fn cache_bytes(&self) -> usize {
        self.batch.num_pages * self.g.p * self.g.hkv * self.g.d * if self.g.e4m3 { 1 } else { self.es() }
    }
    fn rope_query(&self) -> rope::Query {
        let g = self.g;
        rope::Query {
            heads: g.h,
            kv_heads: g.hkv,
            head_dim: g.d,
            rotary_dim: g.r,
            rotary_offset: g.off,
            style: g.style,
            base: 1e6,
            yarn: None,
            dtype: g.dtype,
            max_tokens: self.batch.rows.max(1),
            max_position: self.max_position(),
            cos_sin: if g.table { CosSin::Table } else { CosSin::Computed },
        }
    }
    fn query(&self) -> rope_paged::Query {
        let g = self.g;
        rope_paged::Query {
            rope: self.rope_query(),
            attention: paged::Query {
                heads: g.h,
                kv_heads: g.hkv,
                head_dim: g.d,
                page_size: g.p,
                q_dtype: g.dtype,
                kv_dtype: if g.e4m3 { DType::E4M3 } else { g.dtype },
                scale: 1.0 / (g.d as f32).sqrt(),
                window_left: -1,
                sinks: false,
                max_batch: self.batch.lens.len(),
                max_tokens: self.batch.rows.max(1),
                max_q_len: self.max_q_len,
                max_pages: self.batch.max_pages,
                num_pages: self.batch.num_pages,
            },
        }
    }
    fn pair_query(&self) -> rope_kv_append::Query {
        let q = self.query();
        rope_kv_append::Query { append: q.append_query(), rope: q.rope }
    }
}

struct Host {
    qkv: Vec<u8>,
    cache: Vec<u8>,
    scales: Vec<f32>,
}

fn host_inputs(c: &Case) -> Host {
    let mut rng = ChaCha8Rng::seed_from_u64(c.seed);
    let n = c.batch.rows * c.stride();
    let qkv: Vec<u8> = (0..n)
        .flat_map(|_| {
            let v: f32 = rng.random_range(-4.0..4.0);
            let bits = if c.g.dtype == DType::BF16 {
                b12x_core::half::bf16::from_f32(v).to_bits()
            } else {
                b12x_core::half::f16::from_f32(v).to_bits()
            };
            bits.to_le_bytes()
        })
        .collect();
    // Random bytes, but finite values: the stale slots past a length are read as zeros, the
    // context's must be numbers (E4M3 codes 0x7f / 0xff are NaN; bf16/f16 exponents all ones).
    let cache = if c.g.e4m3 {
        (0..c.cache_bytes()).map(|_| rng.random::<u8>() & 0xf7).collect()
    } else {
        (0..c.cache_bytes() / 2)
            .flat_map(|_| {
                let v: f32 = rng.random_range(-2.0..2.0);
                let bits = if c.g.dtype == DType::BF16 {
                    b12x_core::half::bf16::from_f32(v).to_bits()
                } else {
                    b12x_core::half::f16::from_f32(v).to_bits()
                };
                bits.to_le_bytes()
            })
            .collect()
    };
    let scales = (0..2 * c.batch.lens.len() * c.g.hkv).map(|_| rng.random_range(0.005f32..0.05)).collect();
    Host { qkv, cache, scales }
}

/// One set of device buffers.
struct Dev {
    qkv: CudaSlice<u8>,
    k_cache: CudaSlice<u8>,
    v_cache: CudaSlice<u8>,
    scales: CudaSlice<f32>,
    pt: CudaSlice<i32>,
    lens: CudaSlice<i32>,
    cu: CudaSlice<i32>,
    pos: CudaSlice<i32>,
    table: CudaSlice<f32>,
    o: CudaSlice<u8>,
    lse: CudaSlice<f32>,
    scratch: CudaSlice<u8>,
    error: ErrorWord,
}

fn upload(c: &Case, h: &Host, table: &[f32], scratch: usize, s: &Arc<CudaStream>) -> Result<Dev, String> {
    let rows = c.batch.rows;
    Ok(Dev {
        qkv: s.clone_htod(&h.qkv).map_err(err)?,
        k_cache: s.clone_htod(&h.cache).map_err(err)?,
        v_cache: s.clone_htod(&h.cache).map_err(err)?,
        scales: s.clone_htod(&h.scales).map_err(err)?,
        pt: s.clone_htod(&c.batch.pt).map_err(err)?,
        lens: s.clone_htod(&c.batch.lens).map_err(err)?,
        cu: s.clone_htod(&c.batch.cu).map_err(err)?,
        pos: s.clone_htod(&c.positions).map_err(err)?,
        table: s.clone_htod(if table.is_empty() { &[0f32; 4][..] } else { table }).map_err(err)?,
        o: s.clone_htod(&vec![0x5au8; rows * c.g.h * c.g.d * c.es()]).map_err(err)?,
        lse: s.clone_htod(&vec![-7.25f32; rows * c.g.h]).map_err(err)?,
        scratch: s.alloc_zeros::<u8>(scratch.max(1)).map_err(err)?,
        error: ErrorWord::new(s).map_err(err)?,
    })
}

/// The views of one call: q, k, v column slices of the QKV buffer, the caches, the batch, the
/// outputs.
struct Views<'a> {
    q: TensorMut<'a>,
    k: TensorRef<'a>,
    v: TensorRef<'a>,
    k_cache: TensorMut<'a>,
    v_cache: TensorMut<'a>,
    k_scale: Option<TensorRef<'a>>,
    v_scale: Option<TensorRef<'a>>,
    pt: TensorRef<'a>,
    lens: TensorRef<'a>,
    cu: TensorRef<'a>,
    pos: TensorRef<'a>,
    table: Option<TensorRef<'a>>,
    o: TensorMut<'a>,
    lse: TensorMut<'a>,
    scratch: Scratch<'a>,
    error: TensorMut<'a>,
}

fn views<'a>(c: &Case, d: &'a mut Dev) -> Result<Views<'a>, String> {
    let g = c.g;
    let (rows, es, b) = (c.batch.rows, c.es(), c.batch.lens.len());
    let base = TensorRef::from_slice(&d.qkv, &[d.qkv.len()]).map_err(err)?.ptr();
    let st = [c.stride() as isize, g.d as isize, 1];
    let col = |heads0: usize| base + (heads0 * g.d * es) as u64;
    let cache_shape = [c.batch.num_pages, g.p, g.hkv, g.d];
    let cache_dtype = if g.e4m3 { DType::U8 } else { g.dtype };
    let cstrides = b12x_core::contiguous_strides(&cache_shape);
    let kc = TensorRef::from_slice(&d.k_cache, &[d.k_cache.len()]).map_err(err)?.ptr();
    let vc = TensorRef::from_slice(&d.v_cache, &[d.v_cache.len()]).map_err(err)?.ptr();
    let sp = TensorRef::from_slice(&d.scales, &[d.scales.len()]).map_err(err)?.ptr();
    let op = TensorRef::from_slice(&d.o, &[d.o.len()]).map_err(err)?.ptr();
    let sst = [g.hkv as isize, 1];
    // SAFETY: every view lies within its buffer (the QKV rows hold H + 2·Hkv heads plus the
    // padding; caches, scales and o as sized by `upload`), and the test keeps the buffers alive.
    unsafe {
        Ok(Views {
            q: TensorMut::from_raw(col(0), &[rows, g.h, g.d], &st, g.dtype).map_err(err)?,
            k: TensorRef::from_raw(col(g.h), &[rows, g.hkv, g.d], &st, g.dtype).map_err(err)?,
            v: TensorRef::from_raw(col(g.h + g.hkv), &[rows, g.hkv, g.d], &st, g.dtype).map_err(err)?,
            k_cache: TensorMut::from_raw(kc, &cache_shape, &cstrides, cache_dtype).map_err(err)?,
            v_cache: TensorMut::from_raw(vc, &cache_shape, &cstrides, cache_dtype).map_err(err)?,
            k_scale: if g.e4m3 {
                Some(TensorRef::from_raw(sp, &[b, g.hkv], &sst, DType::F32).map_err(err)?)
            } else {
                None
            },
            v_scale: if g.e4m3 {
                Some(TensorRef::from_raw(sp + (b * g.hkv * 4) as u64, &[b, g.hkv], &sst, DType::F32).map_err(err)?)
            } else {
                None
            },
            pt: TensorRef::from_slice(&d.pt, &[b, c.batch.max_pages]).map_err(err)?,
            lens: TensorRef::from_slice(&d.lens, &[b]).map_err(err)?,
            cu: TensorRef::from_slice(&d.cu, &[b + 1]).map_err(err)?,
            pos: TensorRef::from_slice(&d.pos, &[rows]).map_err(err)?,
            table: if g.table {
                Some(TensorRef::from_slice(&d.table, &[c.max_position(), g.r]).map_err(err)?)
            } else {
                None
            },
            o: TensorMut::from_raw(op, &[rows, g.h, g.d], &b12x_core::contiguous_strides(&[rows, g.h, g.d]), g.dtype)
                .map_err(err)?,
            lse: TensorMut::from_slice(&mut d.lse, &[rows, g.h]).map_err(err)?,
            scratch: Scratch::from_slice(&mut d.scratch),
            error: d.error.view().map_err(err)?,
        })
    }
}

fn fused_args<'a>(v: Views<'a>) -> (rope_paged::Args<'a>, Scratch<'a>) {
    // SAFETY: the same memory as the q view, read only from here on.
    let q = unsafe { TensorRef::from_raw(v.q.ptr(), v.q.shape(), v.q.strides(), v.q.dtype()) }.expect("q view");
    let args = rope_paged::Args {
        q,
        k: v.k,
        v: v.v,
        k_cache: v.k_cache,
        v_cache: v.v_cache,
        k_scale: v.k_scale,
        v_scale: v.v_scale,
        sinks: None,
        page_table: v.pt,
        seq_lens: v.lens,
        cu_seqlens_q: v.cu,
        positions: v.pos,
        cos_sin: v.table,
        o: v.o,
        lse: Some(v.lse),
        error: v.error,
    };
    (args, v.scratch)
}

/// The pair's plans and the fused plan, prepared in one session.
struct Plans {
    pair: rope_kv_append::Plan,
    attention: paged::Plan,
    fused: rope_paged::Plan,
    session: PreparationSession,
}

fn plans(dev: &Arc<Device>, c: &Case) -> Result<Plans, String> {
    let pair = rope_kv_append::plan(&c.pair_query(), dev).map_err(err)?;
    let attention = paged::plan_with(&c.query().attention, dev, c.opts).map_err(err)?;
    let fused = rope_paged::plan_with(&c.query(), dev, c.opts).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&pair, &attention, &fused]).map_err(err)?;
    Ok(Plans { pair, attention, fused, session })
}

fn scratch_bytes(p: &Plans) -> usize {
    p.fused.scratch_layout().total_bytes().max(p.attention.scratch_layout().total_bytes())
}

/// rope_kv_append (q rotated in place), then paged on the rotated q: the reference.
fn run_pair(p: &Plans, v: Views<'_>, s: &Arc<CudaStream>) -> Result<(), String> {
    let Views {
        mut q,
        k,
        v,
        mut k_cache,
        mut v_cache,
        k_scale,
        v_scale,
        pt,
        lens,
        cu,
        pos,
        table,
        o,
        lse,
        scratch,
        mut error,
    } = v;
    rope_kv_append::run(
        &p.pair,
        rope_kv_append::Args {
            q: q.reborrow(),
            k,
            v,
            k_cache: k_cache.reborrow(),
            v_cache: v_cache.reborrow(),
            k_scale,
            v_scale,
            page_table: pt,
            seq_lens: lens,
            cu_seqlens_q: cu,
            positions: pos,
            cos_sin: table,
            error: error.reborrow(),
        },
        Scratch::none(),
        s,
    )
    .map_err(err)?;
    paged::run(
        &p.attention,
        paged::Args {
            q: q.as_ref(),
            k_cache: k_cache.as_ref(),
            v_cache: v_cache.as_ref(),
            k_scale,
            v_scale,
            sinks: None,
            page_table: pt,
            seq_lens: lens,
            cu_seqlens_q: cu,
            o,
            lse: Some(lse),
            error,
        },
        scratch,
        s,
    )
    .map_err(err)
}

fn run_fused(plan: &rope_paged::Plan, v: Views<'_>, s: &Arc<CudaStream>) -> Result<(), String> {
    let (args, scratch) = fused_args(v);
    rope_paged::run(plan, args, scratch, s).map_err(err)
}

fn check(dev: &Arc<Device>, c: &Case) -> TrialResult {
    let s = dev.stream();
    let p = plans(dev, c)?;
    let table = if c.g.table { p.fused.cos_sin_table() } else { Vec::new() };
    let h = host_inputs(c);
    let sb = scratch_bytes(&p);
    let mut a = upload(c, &h, &table, sb, s)?;
    let mut b = upload(c, &h, &table, sb, s)?;
    run_pair(&p, views(c, &mut a)?, s)?;
    run_fused(&p.fused, views(c, &mut b)?, s)?;
    compare(c, &h, &a, &b, s)
}

fn compare(c: &Case, h: &Host, a: &Dev, b: &Dev, s: &Arc<CudaStream>) -> TrialResult {
    let g = c.g;
    if s.clone_dtoh(&b.qkv).map_err(err)? != h.qkv {
        return Err("the fused call wrote its QKV buffer".into());
    }
    let (oa, ob) = (s.clone_dtoh(&a.o).map_err(err)?, s.clone_dtoh(&b.o).map_err(err)?);
    if let Some(i) = (0..oa.len()).find(|&i| oa[i] != ob[i]) {
        let e = i / c.es();
        let n = (0..oa.len()).filter(|&j| oa[j] != ob[j]).count();
        return Err(format!(
            "o[{}, {}, {}] differs from rope_kv_append then paged ({n} bytes differ)",
            e / (g.h * g.d),
            e / g.d % g.h,
            e % g.d
        ));
    }
    let (la, lb) = (s.clone_dtoh(&a.lse).map_err(err)?, s.clone_dtoh(&b.lse).map_err(err)?);
    if let Some(i) = (0..la.len()).find(|&i| la[i].to_bits() != lb[i].to_bits()) {
        return Err(format!("lse[{}, {}] = {}, the pair's {}", i / g.h, i % g.h, lb[i], la[i]));
    }
    for (name, ca, cb) in [("k_cache", &a.k_cache, &b.k_cache), ("v_cache", &a.v_cache, &b.v_cache)] {
        let (x, y) = (s.clone_dtoh(ca).map_err(err)?, s.clone_dtoh(cb).map_err(err)?);
        if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
            let n = (0..x.len()).filter(|&j| x[j] != y[j]).count();
            return Err(format!("{name} byte {i} = 0x{:x}, the pair wrote 0x{:x} ({n} bytes differ)", y[i], x[i]));
        }
    }
    let (ea, eb) = (a.error.read(s).map_err(err)?, b.error.read(s).map_err(err)?);
    if ea.0 != eb.0 {
        return Err(format!("error word {eb}, the pair's: {ea}"));
    }
    Ok(())
}

fn qwen3(dtype: DType, e4m3: bool, table: bool) -> Geo {
    Geo { h: 32, hkv: 8, d: 128, r: 128, off: 0, style: RopeStyle::Neox, dtype, e4m3, table, p: 16 }
}

/// Decode: one new token per request, lengths at and around page boundaries, one long context.
fn decode_reqs() -> Vec<Req> {
    vec![(1, 1), (16, 1), (17, 1), (33, 1), (300, 1), (4095, 1), (32, 1)]
}
/// Extend with a group of 2: up to 4 new tokens (8 rows of a tile).
fn extend_reqs() -> Vec<Req> {
    vec![(40, 4), (0, 0), (16, 4), (300, 3), (1, 1), (64, 2), (17, 4)]
}

fn opts(
    pdl: bool,
    max_splits: Option<usize>,
    stages: Option<usize>,
    warps: Option<u32>,
    cluster: Option<bool>,
) -> paged::PlanOptions {
    paged::PlanOptions { pdl, max_splits, stages, warps, cluster_merge: cluster }
}

fn trials() -> Vec<GpuTrial> {
    let mut out = Vec::new();
    let g2 = Geo { h: 8, hkv: 4, ..qwen3(DType::BF16, false, false) };
    let geos: Vec<(&str, Geo)> = vec![
        ("qwen3_bf16", qwen3(DType::BF16, false, false)),
        ("qwen3_bf16_table", qwen3(DType::BF16, false, true)),
        ("qwen3_bf16_e4m3", qwen3(DType::BF16, true, false)),
        ("qwen3_f16", qwen3(DType::F16, false, false)),
        ("neox_r32_of_64_f16", Geo { h: 16, hkv: 4, d: 64, r: 32, off: 0, ..qwen3(DType::F16, false, false) }),
        ("neox_r64_at_64_of_128", Geo { h: 8, hkv: 2, r: 64, off: 64, ..qwen3(DType::BF16, false, false) }),
        (
            "gptj_r64_at_64_of_128_e4m3_table",
            Geo { h: 8, hkv: 2, r: 64, off: 64, style: RopeStyle::Gptj, ..qwen3(DType::BF16, true, true) },
        ),
        (
            "gptj_d96_table",
            Geo { h: 8, hkv: 8, d: 96, r: 96, style: RopeStyle::Gptj, ..qwen3(DType::BF16, false, true) },
        ),
    ];
    for (name, g) in geos {
        out.push(GpuTrial::new(format!("{name}::decode"), move |dev| check(dev, &Case::new(g, &decode_reqs(), 2, 1))));
    }
    out.push(GpuTrial::new("g2_bf16::extend", move |dev| check(dev, &Case::new(g2, &extend_reqs(), 3, 2))));
    out.push(GpuTrial::new("g2_e4m3_table::extend", move |dev| {
        check(dev, &Case::new(Geo { e4m3: true, table: true, ..g2 }, &extend_reqs(), 3, 2))
    }));
    // Every 8-row variant and merge, plain and PDL, on the decode batch and on one long request.
    let variants: Vec<(&str, paged::PlanOptions)> = vec![
        ("s2", opts(false, None, Some(2), Some(4), None)),
        ("s3", opts(false, None, Some(3), Some(4), None)),
        ("s6", opts(false, None, Some(6), None, None)),
        ("s3_w8", opts(false, None, Some(3), Some(8), None)),
        ("one_split", opts(false, Some(1), None, None, None)),
        ("splits5_scratch", opts(false, Some(5), Some(3), Some(4), Some(false))),
        ("splits8_cluster", opts(false, Some(8), None, None, Some(true))),
        ("pdl_default", opts(true, None, None, None, None)),
        ("pdl_s6", opts(true, None, Some(6), None, None)),
    ];
    for (name, o) in variants {
        out.push(GpuTrial::new(format!("variants::{name}"), move |dev| {
            check(dev, &Case::new(qwen3(DType::BF16, false, false), &decode_reqs(), 1, 3).with(o))?;
            check(dev, &Case::new(qwen3(DType::BF16, false, false), &[(4096, 1)], 0, 4).with(o))?;
            let e4m3 = if o.stages == Some(6) { DType::F16 } else { DType::BF16 };
            check(dev, &Case::new(qwen3(e4m3, o.stages != Some(6), false), &[(2000, 1), (7, 1)], 0, 5).with(o))
        }));
    }
    // Faults: positions outside [0, max_position) (q row and new key unrotated, FAULT_POSITION),
    // a new token's page id past the pool (not stored; its block skipped, FAULT_PAGE_ID).
    for (name, g) in [("bf16", qwen3(DType::BF16, false, false)), ("e4m3_table", qwen3(DType::BF16, true, true))] {
        out.push(GpuTrial::new(format!("faults::{name}"), move |dev| {
            let mut c = Case::new(g, &decode_reqs(), 1, 6);
            c.positions[1] = c.max_position() as i32;
            c.positions[3] = -1;
            check(dev, &c)?;
            let mut c = Case::new(g, &decode_reqs(), 1, 7);
            // Request 2 (17 tokens): its new token is on its second page.
            c.batch.pt[2 * c.batch.max_pages + 1] = c.batch.num_pages as i32;
            check(dev, &c)
        }));
    }
    for (name, mutate) in FAULTS {
        out.push(GpuTrial::new(format!("untrusted_indices::{name}"), move |dev| {
            let mut c = Case::new(g2, &[(40, 3), (17, 2), (5, 1)], 0, 9);
            mutate(&mut c.batch);
            check(dev, &c)
        }));
    }
    out.push(GpuTrial::new("graph_replay_equals_eager", graph_replay));
    for (name, g) in [("bf16", qwen3(DType::BF16, false, false)), ("bf16_table_e4m3", qwen3(DType::BF16, true, true))] {
        out.push(GpuTrial::new(format!("pdl_after_long_kernel::{name}"), move |dev| pdl_after_long_kernel(dev, g)));
    }
    out.push(GpuTrial::new("run_allocates_nothing", |dev| {
        let c = Case::new(qwen3(DType::BF16, false, false), &decode_reqs(), 0, 5);
        let p = plans(dev, &c)?;
        let h = host_inputs(&c);
        let s = dev.stream();
        let mut d = upload(&c, &h, &[], scratch_bytes(&p), s)?;
        check_run_allocates_nothing(dev, s, 20, || {
            let v = views(&c, &mut d).map_err(|e| Error::SessionState { state: "test", what: e })?;
            let (args, scratch) = fused_args(v);
            rope_paged::run(&p.fused, args, scratch, s)
        })
    }));
    out.push(GpuTrial::new("bad_inputs_are_typed_errors", bad_inputs));
    out
}

/// The QKV buffer written by a long kernel right before the call: `gemm.bf16_gemv` with an
/// identity W copies the host QKV rows into the poisoned buffer. Reference: that kernel (plain),
/// then the pair; under test: that kernel with PDL, then the fused op with PDL (6-stage rings
/// where they exist: the most blocks issued before the wait), launched while the copy still
/// runs. Eager, then captured and replayed twice on fresh poison and caches.
fn pdl_after_long_kernel(dev: &Arc<Device>, g: Geo) -> TrialResult {
    use b12x_gemm::bf16_gemv;
    let s = dev.stream();
    let stages = if g.e4m3 { None } else { Some(6) };
    let c = Case::new(g, &decode_reqs(), 2, 8).with(opts(true, None, stages, None, None));
    let p = plans(dev, &c)?;
    let (n, rows) = (c.stride(), c.batch.rows);
    let gq = |pdl| bf16_gemv::Query {
        n,
        k: n,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: rows,
        aligned: true,
        pdl,
        x_act: bf16_gemv::XAct::None,
        y_act: bf16_gemv::YAct::None,
    };
    let (copy, copy_pdl) =
        (bf16_gemv::plan(&gq(false), dev).map_err(err)?, bf16_gemv::plan(&gq(true), dev).map_err(err)?);
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&p.fused, &copy, &copy_pdl]).map_err(err)?;
    let table = if g.table { p.fused.cos_sin_table() } else { Vec::new() };
    let h = host_inputs(&c);
    let one = b12x_core::half::bf16::ONE.to_bits().to_le_bytes();
    let mut eye = vec![0u8; n * n * 2];
    for i in 0..n {
        eye[(i * n + i) * 2..][..2].copy_from_slice(&one);
    }
    let eye = s.clone_htod(&eye).map_err(err)?;
    let x = s.clone_htod(&h.qkv).map_err(err)?;
    let scratch_bytes_g = copy.scratch_layout().total_bytes().max(copy_pdl.scratch_layout().total_bytes()).max(1);
    let mut gscratch = s.alloc_zeros::<u8>(scratch_bytes_g).map_err(err)?;
    let poison = vec![0xffu8; h.qkv.len()];
    let run_copy = |plan: &bf16_gemv::Plan, y: u64, scratch: &mut CudaSlice<u8>, st: &Arc<CudaStream>| {
        let xs = TensorRef::from_slice(&x, &[x.len()])?.ptr();
        let ws = TensorRef::from_slice(&eye, &[eye.len()])?.ptr();
        let st2 = [n as isize, 1];
        // SAFETY: x, W and y are whole buffers of rows·n, n·n and rows·n bf16, alive for the call.
        let args = unsafe {
            bf16_gemv::Args {
                x: TensorRef::from_raw(xs, &[rows, n], &st2, DType::BF16)?,
                w: TensorRef::from_raw(ws, &[n, n], &st2, DType::BF16)?,
                bias: None,
                y: TensorMut::from_raw(y, &[rows, n], &st2, DType::BF16)?,
                add_norm: None,
                rope: None,
                rms: None,
            }
        };
        bf16_gemv::run(plan, args, Scratch::from_slice(scratch), st)
    };
    let addr = |d: &Dev| TensorRef::from_slice(&d.qkv, &[d.qkv.len()]).map(|t| t.ptr()).map_err(err);
    let sb = scratch_bytes(&p);
    let mut a = upload(&c, &h, &table, sb, s)?;
    s.memcpy_htod(&poison, &mut a.qkv).map_err(err)?;
    run_copy(&copy, addr(&a)?, &mut gscratch, s).map_err(err)?;
    run_pair(&p, views(&c, &mut a)?, s)?;
    let mut b = upload(&c, &h, &table, sb, s)?;
    s.memcpy_htod(&poison, &mut b.qkv).map_err(err)?;
    run_copy(&copy_pdl, addr(&b)?, &mut gscratch, s).map_err(err)?;
    run_fused(&p.fused, views(&c, &mut b)?, s)?;
    compare(&c, &h, &a, &b, s).map_err(|e| format!("eager: {e}"))?;
    let mut r = upload(&c, &h, &table, sb, s)?;
    let y = addr(&r)?;
    let exec = session
        .capture(s, |st| {
            run_copy(&copy_pdl, y, &mut gscratch, st)?;
            let v = views(&c, &mut r).map_err(|e| Error::SessionState { state: "test", what: e })?;
            let (args, scratch) = fused_args(v);
            rope_paged::run(&p.fused, args, scratch, st)
        })
        .map_err(err)?;
    for replay in 0..2 {
        let fresh = upload(&c, &h, &table, sb, s)?;
        s.memcpy_htod(&poison, &mut r.qkv).map_err(err)?;
        s.memcpy_dtod(&fresh.k_cache, &mut r.k_cache).map_err(err)?;
        s.memcpy_dtod(&fresh.v_cache, &mut r.v_cache).map_err(err)?;
        s.memcpy_dtod(&fresh.o, &mut r.o).map_err(err)?;
        s.memcpy_dtod(&fresh.lse, &mut r.lse).map_err(err)?;
        r.error.clear(s).map_err(err)?;
        // SAFETY: every buffer the graph uses lives in `r`, `x`, `eye` and `gscratch`, alive here.
        unsafe { exec.launch() }.map_err(err)?;
        compare(&c, &h, &a, &r, s).map_err(|e| format!("replay {replay}: {e}"))?;
    }
    Ok(())
}

/// A captured fused call replays like an eager one after the lengths and positions change
/// (one token longer: a new slot, on a new page for the requests at a page boundary).
fn graph_replay(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let g = qwen3(DType::BF16, false, false);
    let c1 = Case::new(g, &decode_reqs(), 0, 6);
    let mut c0 = c1.clone();
    for l in &mut c0.batch.lens {
        *l -= 1;
    }
    c0.positions = c0.positions.iter().map(|x| x - 1).collect();
    // (4095 → 4094 keeps the capacity: max_pages from c1.)
    let p = plans(dev, &c1)?;
    let h = host_inputs(&c0);
    let sb = scratch_bytes(&p);
    let mut eager = upload(&c1, &h, &[], sb, s)?;
    run_fused(&p.fused, views(&c1, &mut eager)?, s)?;
    let mut graph = upload(&c0, &h, &[], sb, s)?;
    let exec = {
        let v = views(&c0, &mut graph)?;
        let (args, scratch) = fused_args(v);
        p.session.capture(s, |st| rope_paged::run(&p.fused, args, scratch, st)).map_err(err)?
    };
    s.memcpy_htod(&c1.batch.lens, &mut graph.lens).map_err(err)?;
    s.memcpy_htod(&c1.positions, &mut graph.pos).map_err(err)?;
    // SAFETY: every buffer the graph uses lives in `graph`, which outlives the launch.
    unsafe { exec.launch() }.map_err(err)?;
    for (name, x, y) in [
        ("o", &eager.o, &graph.o),
        ("k_cache", &eager.k_cache, &graph.k_cache),
        ("v_cache", &eager.v_cache, &graph.v_cache),
    ] {
        if s.clone_dtoh(x).map_err(err)? != s.clone_dtoh(y).map_err(err)? {
            return Err(format!("{name}: graph replay differs from eager"));
        }
    }
    let (ea, eb) = (eager.error.read(s).map_err(err)?, graph.error.read(s).map_err(err)?);
    if ea.0 != eb.0 || ea.0 != 0 {
        return Err(format!("error words: eager {ea}, replay {eb}"));
    }
    Ok(())
}

/// Bad queries and arguments: typed errors, nothing launched.
fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let c = Case::new(qwen3(DType::BF16, false, false), &decode_reqs(), 0, 7);
    let q = c.query();
    let expect_query = |q: rope_paged::Query, field: &str| -> TrialResult {
        match rope_paged::plan(&q, dev) {
            Err(Error::InvalidQuery { field: f, .. }) if f == field => Ok(()),
            other => Err(format!("{field}: want InvalidQuery, got {other:?}")),
        }
    };
    let with_attn = |a: paged::Query| rope_paged::Query { attention: a, ..q.clone() };
    let with_rope = |r: rope::Query| rope_paged::Query { rope: r, ..q.clone() };
    expect_query(with_attn(paged::Query { max_q_len: 4, ..q.attention.clone() }), "attention.max_q_len")?;
    expect_query(with_rope(rope::Query { heads: 16, ..q.rope.clone() }), "rope.heads")?;
    expect_query(with_rope(rope::Query { kv_heads: 4, ..q.rope.clone() }), "rope.kv_heads")?;
    expect_query(with_rope(rope::Query { dtype: DType::F16, ..q.rope.clone() }), "rope.dtype")?;
    expect_query(with_rope(rope::Query { max_tokens: 3, ..q.rope.clone() }), "rope.max_tokens")?;
    expect_query(with_rope(rope::Query { rotary_dim: 24, ..q.rope.clone() }), "rope.rotary_dim")?;
    let p = plans(dev, &c)?;
    let h = host_inputs(&c);
    let mut d = upload(&c, &h, &[], scratch_bytes(&p), s)?;
    let rows = c.batch.rows;
    let st = [c.stride() as isize, c.g.d as isize, 1];
    let expect = |what: &str, r: b12x_core::Result<()>, ok: fn(&Error) -> bool| -> TrialResult {
        match r {
            Err(e) if ok(&e) => Ok(()),
            other => Err(format!("{what}: got {other:?}")),
        }
    };
    // o over k's columns (o is written while k is read).
    {
        let (mut a, scratch) = fused_args(views(&c, &mut d)?);
        let ost = b12x_core::contiguous_strides(&[rows, c.g.h, c.g.d]);
        // SAFETY: a refused view (never written).
        a.o = unsafe { TensorMut::from_raw(a.k.ptr(), &[rows, c.g.h, c.g.d], &ost, c.g.dtype) }.map_err(err)?;
        expect("o over k", rope_paged::run(&p.fused, a, scratch, s), |e| matches!(e, Error::Aliasing { .. }))?;
    }
    // v_cache over q (the cache is written while q is read).
    {
        let (mut a, scratch) = fused_args(views(&c, &mut d)?);
        let (shape, strides) = (a.v_cache.shape().to_vec(), a.v_cache.strides().to_vec());
        // SAFETY: a refused view (never written).
        a.v_cache = unsafe { TensorMut::from_raw(a.q.ptr(), &shape, &strides, a.v_cache.dtype()) }.map_err(err)?;
        expect("v_cache over q", rope_paged::run(&p.fused, a, scratch, s), |e| matches!(e, Error::Aliasing { .. }))?;
    }
    // The error word inside the positions.
    {
        let (mut a, scratch) = fused_args(views(&c, &mut d)?);
        // SAFETY: a refused view (never written).
        a.error = unsafe { TensorMut::from_raw(a.positions.ptr(), &[1], &[1], DType::I32) }.map_err(err)?;
        expect("error in positions", rope_paged::run(&p.fused, a, scratch, s), |e| {
            matches!(e, Error::Aliasing { .. })
        })?;
    }
    // k and v with T − 1 rows (each the append's own check accepts; the fused op's does not).
    {
        let (mut a, scratch) = fused_args(views(&c, &mut d)?);
        // SAFETY: the first rows − 1 rows of k and of v.
        a.k = unsafe { TensorRef::from_raw(a.k.ptr(), &[rows - 1, c.g.hkv, c.g.d], &st, c.g.dtype) }.map_err(err)?;
        a.v = unsafe { TensorRef::from_raw(a.v.ptr(), &[rows - 1, c.g.hkv, c.g.d], &st, c.g.dtype) }.map_err(err)?;
        expect("k with T − 1 rows", rope_paged::run(&p.fused, a, scratch, s), |e| {
            matches!(e, Error::Shape { tensor: "k", .. })
        })?;
    }
    // positions with T − 1 rows, and a table in computed mode.
    {
        let (mut a, scratch) = fused_args(views(&c, &mut d)?);
        // SAFETY: the first rows − 1 positions.
        a.positions = unsafe { TensorRef::from_raw(a.positions.ptr(), &[rows - 1], &[1], DType::I32) }.map_err(err)?;
        expect("positions with T − 1 rows", rope_paged::run(&p.fused, a, scratch, s), |e| {
            matches!(e, Error::Shape { tensor: "positions", .. })
        })?;
    }
    {
        let (mut a, scratch) = fused_args(views(&c, &mut d)?);
        a.cos_sin = Some(a.positions);
        expect("a table in computed mode", rope_paged::run(&p.fused, a, scratch, s), |e| {
            matches!(e, Error::Shape { tensor: "cos_sin", .. })
        })?;
    }
    // Nothing launched: the caches, o and the error word are as uploaded.
    if s.clone_dtoh(&d.k_cache).map_err(err)? != h.cache || s.clone_dtoh(&d.v_cache).map_err(err)? != h.cache {
        return Err("a refused call wrote the caches".into());
    }
    if s.clone_dtoh(&d.o).map_err(err)?.iter().any(|&x| x != 0x5a) {
        return Err("a refused call wrote o".into());
    }
    if d.error.read(s).map_err(err)?.0 != 0 {
        return Err("a refused call set a fault".into());
    }
    Ok(())
}

fn main() {
    run_gpu_trials(trials())
}
