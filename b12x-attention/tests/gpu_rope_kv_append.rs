//! GPU validation of `attention.rope_kv_append` (libtest-mimic; listed as ignored without a CUDA
//! device): the fused op against the two ops it replaces, run on the same inputs on the GPU —
//! `attention.rope` on (q, k), then `attention.kv_append` of the rotated k and v. Both are
//! validated against their CPU oracles (`gpu_rope.rs`, `gpu_kv_append.rs`), so bitwise equality
//! here carries those oracles over.
//!
//! Every trial works on one fused QKV buffer `[T, (H + 2·Hkv)·D + 8]` (padded rows, as a QKV
//! projection leaves it) and caches filled with random bytes, and requires **bitwise**: the q
//! columns equal to rope's, both caches equal to kv_append's after rope (every byte, so nothing
//! outside the new tokens' slots is touched), the error word equal, and the fused call's k and
//! v columns (and the padding) unchanged. Cases: Qwen3-8B heads (NeoX over all 128 dims),
//! partial rotary (NeoX R = 32 of D = 64; GPT-J R = 64 at offset 64 of 128), DeepSeek-V4's YaRN
//! numbers on the last 64 of 256 dims (GPT-J), cos/sin computed and from the table, bf16 and f16,
//! BF16/FP16 and E4M3 caches, decode and extend batches with page-boundary lengths and batch
//! padding, NeoX pairs with a rotary offset, bad positions and the kv_append suite's bad page
//! ids, lengths and packings (masked and reported as the two ops do), 300 requests (the batch
//! read in global memory, not staged in shared memory). Every case also runs the fused op with a
//! warm part (`with_warm_cache`, 7 CTAs, the three read modes by seed), which must leave every
//! result bit and the error word as they are. Further trials: graph
//! replay equals eager after lengths and positions change, a PDL plan launched right behind a
//! long kernel that writes the QKV buffer (an identity `gemm.bf16_gemv`) equals the plain pair
//! after the same kernel (its positions, slots and cos / sin are read before its wait; q, k and
//! v must not be; it carries a warm part of one CTA per SM), `run` allocates nothing, bad inputs
//! (a warm part of 0 or too many CTAs,
//! mismatched queries, q overlapping k, v or a cache, the error word inside the page table, a
//! T mismatch) are typed errors that launch nothing.

mod common;

use b12x_attention::paging::ErrorWord;
use b12x_attention::rope::{self, CosSin, RopeStyle, Yarn};
use b12x_attention::{kv_append, rope_kv_append};
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
    yarn: bool,
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
    seed: u64,
}

impl Case {
    fn new(g: Geo, reqs: &[Req], padding: usize, seed: u64) -> Case {
        let batch = make_batch(reqs, g.p, seed, padding);
        // Each new token's position is its place in its context; padding rows get 0.
        let mut positions = vec![0i32; batch.rows];
        for b in 0..batch.lens.len() {
            let (r0, r1) = (batch.cu[b], batch.cu[b + 1]);
            for r in r0..r1 {
                positions[r as usize] = batch.lens[b] - (r1 - r0) + (r - r0);
            }
        }
        Case { g, batch, positions, seed }
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
    fn query(&self) -> rope_kv_append::Query {
        let g = self.g;
        let rows = self.batch.rows.max(1);
        rope_kv_append::Query {
            rope: rope::Query {
                heads: g.h,
                kv_heads: g.hkv,
                head_dim: g.d,
                rotary_dim: g.r,
                rotary_offset: g.off,
                style: g.style,
                base: if g.yarn { 160000.0 } else { 1e6 },
                yarn: if g.yarn { Some(Yarn::deepseek_v4()) } else { None },
                dtype: g.dtype,
                max_tokens: rows,
                max_position: self.max_position(),
                cos_sin: if g.table { CosSin::Table } else { CosSin::Computed },
            },
            append: kv_append::Query {
                kv_heads: g.hkv,
                head_dim: g.d,
                page_size: g.p,
                dtype: g.dtype,
                cache_dtype: if g.e4m3 { DType::E4M3 } else { g.dtype },
                max_batch: self.batch.lens.len(),
                max_tokens: rows,
                max_pages: self.batch.max_pages,
                num_pages: self.batch.num_pages,
            },
        }
    }
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
    error: ErrorWord,
}

/// The host inputs: the QKV buffer's bytes, the caches' initial bytes, the scales.
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
    let cache = (0..c.cache_bytes()).map(|_| rng.random::<u8>()).collect();
    let scales = (0..2 * c.batch.lens.len() * c.g.hkv).map(|_| rng.random_range(0.005f32..0.05)).collect();
    Host { qkv, cache, scales }
}

fn upload(c: &Case, h: &Host, table: &[f32], s: &Arc<CudaStream>) -> Result<Dev, String> {
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
        error: ErrorWord::new(s).map_err(err)?,
    })
}

/// The views of one call: q, k, v column slices of the QKV buffer, the caches, the batch.
struct Views<'a> {
    q: TensorMut<'a>,
    k: TensorMut<'a>,
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
    let sst = [g.hkv as isize, 1];
    // SAFETY: every view lies within its buffer (the QKV rows hold H + 2·Hkv heads plus the
    // padding; caches and scales as sized by `upload`), and the test keeps the buffers alive.
    unsafe {
        Ok(Views {
            q: TensorMut::from_raw(col(0), &[rows, g.h, g.d], &st, g.dtype).map_err(err)?,
            k: TensorMut::from_raw(col(g.h), &[rows, g.hkv, g.d], &st, g.dtype).map_err(err)?,
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
            error: d.error.view().map_err(err)?,
        })
    }
}

fn fused_args<'a>(v: Views<'a>) -> rope_kv_append::Args<'a> {
    // SAFETY: the same memory as the k view, read only from here on.
    let k = unsafe { TensorRef::from_raw(v.k.ptr(), v.k.shape(), v.k.strides(), v.k.dtype()) }.expect("k view");
    rope_kv_append::Args {
        k,
        q: v.q,
        v: v.v,
        k_cache: v.k_cache,
        v_cache: v.v_cache,
        k_scale: v.k_scale,
        v_scale: v.v_scale,
        page_table: v.pt,
        seq_lens: v.lens,
        cu_seqlens_q: v.cu,
        positions: v.pos,
        cos_sin: v.table,
        error: v.error,
    }
}

/// The plans of the two ops and of the fused one, prepared in one session.
struct Plans {
    rope: rope::Plan,
    append: kv_append::Plan,
    fused: rope_kv_append::Plan,
    /// `fused` with a warm part (every read mode, by `seed % 3`; 7 CTAs: several pieces each).
    warm: rope_kv_append::Plan,
    session: PreparationSession,
}

fn warm_read(seed: u64) -> rope_kv_append::WarmRead {
    use rope_kv_append::WarmRead::*;
    [LoadEvictLast, Load, PrefetchEvictLast][seed as usize % 3]
}

fn plans_seeded(dev: &Arc<Device>, q: &rope_kv_append::Query, seed: u64) -> Result<Plans, String> {
    let rope = rope::plan(&q.rope, dev).map_err(err)?;
    let append = kv_append::plan(&q.append, dev).map_err(err)?;
    let fused = rope_kv_append::plan(q, dev).map_err(err)?;
    let w = rope_kv_append::WarmCache { blocks: 7, read: warm_read(seed) };
    let warm = rope_kv_append::plan(q, dev).map_err(err)?.with_warm_cache(Some(w)).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&rope, &append, &fused, &warm]).map_err(err)?;
    Ok(Plans { rope, append, fused, warm, session })
}

fn plans(dev: &Arc<Device>, q: &rope_kv_append::Query) -> Result<Plans, String> {
    plans_seeded(dev, q, 0)
}

/// rope on (q, k), then kv_append of the rotated k and v: the reference result.
fn run_unfused(p: &Plans, v: Views<'_>, s: &Arc<CudaStream>) -> Result<(), String> {
    let Views { q, mut k, v, k_cache, v_cache, k_scale, v_scale, pt, lens, cu, pos, table, mut error } = v;
    rope::run(
        &p.rope,
        rope::Args { q, k: Some(k.reborrow()), positions: pos, cos_sin: table, error: error.reborrow() },
        Scratch::none(),
        s,
    )
    .map_err(err)?;
    kv_append::run(
        &p.append,
        kv_append::Args {
            k: k.as_ref(),
            v,
            k_cache,
            v_cache,
            k_scale,
            v_scale,
            page_table: pt,
            seq_lens: lens,
            cu_seqlens_q: cu,
            error,
        },
        Scratch::none(),
        s,
    )
    .map_err(err)
}

/// Runs both paths (and the fused op with a warm part) on fresh copies of the inputs and
/// compares them bitwise.
fn check(dev: &Arc<Device>, c: &Case) -> TrialResult {
    let s = dev.stream();
    let q = c.query();
    let p = plans_seeded(dev, &q, c.seed)?;
    let table = if c.g.table { p.fused.cos_sin_table() } else { Vec::new() };
    if c.g.table && table != p.rope.cos_sin_table() {
        return Err("the fused plan's cos/sin table differs from rope's".into());
    }
    let h = host_inputs(c);
    let mut a = upload(c, &h, &table, s)?;
    let mut b = upload(c, &h, &table, s)?;
    run_unfused(&p, views(c, &mut a)?, s)?;
    rope_kv_append::run(&p.fused, fused_args(views(c, &mut b)?), Scratch::none(), s).map_err(err)?;
    compare(c, &h, &a, &b, s)?;
    let mut w = upload(c, &h, &table, s)?;
    rope_kv_append::run(&p.warm, fused_args(views(c, &mut w)?), Scratch::none(), s).map_err(err)?;
    compare(c, &h, &a, &w, s).map_err(|e| format!("with the warm part ({:?}): {e}", p.warm.warm_cache()))
}

fn compare(c: &Case, h: &Host, a: &Dev, b: &Dev, s: &Arc<CudaStream>) -> TrialResult {
    let g = c.g;
    let es = c.es();
    let (qa, qb) = (s.clone_dtoh(&a.qkv).map_err(err)?, s.clone_dtoh(&b.qkv).map_err(err)?);
    let row_bytes = c.stride() * es;
    let q_end = g.h * g.d * es;
    for r in 0..c.batch.rows {
        let (ra, rb, r0) = (
            &qa[r * row_bytes..][..row_bytes],
            &qb[r * row_bytes..][..row_bytes],
            &h.qkv[r * row_bytes..][..row_bytes],
        );
        if ra[..q_end] != rb[..q_end] {
            let i = (0..q_end).find(|&i| ra[i] != rb[i]).unwrap_or(0) / es;
            return Err(format!("q[{r}, {}, {}] differs from rope's", i / g.d, i % g.d));
        }
        if rb[q_end..] != r0[q_end..] {
            let i = (q_end..row_bytes).find(|&i| rb[i] != r0[i]).unwrap_or(0) / es;
            return Err(format!("row {r}: element {i} (k, v or padding) was written by the fused op"));
        }
    }
    for (name, ca, cb) in [("k_cache", &a.k_cache, &b.k_cache), ("v_cache", &a.v_cache, &b.v_cache)] {
        let (x, y) = (s.clone_dtoh(ca).map_err(err)?, s.clone_dtoh(cb).map_err(err)?);
        if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
            let n = (0..x.len()).filter(|&j| x[j] != y[j]).count();
            return Err(format!(
                "{name} byte {i} = 0x{:x}, rope then kv_append wrote 0x{:x} ({n} bytes differ)",
                y[i], x[i]
            ));
        }
    }
    let (ea, eb) = (a.error.read(s).map_err(err)?, b.error.read(s).map_err(err)?);
    if ea.0 != eb.0 {
        return Err(format!("error word {eb}, rope then kv_append: {ea}"));
    }
    Ok(())
}

fn qwen3(dtype: DType, e4m3: bool, table: bool) -> Geo {
    Geo { h: 32, hkv: 8, d: 128, r: 128, off: 0, style: RopeStyle::Neox, yarn: false, dtype, e4m3, table, p: 16 }
}

/// Decode: one new token per request, lengths at and around page boundaries; extend: several.
fn decode_reqs() -> Vec<Req> {
    vec![(1, 1), (16, 1), (17, 1), (33, 1), (300, 1), (4095, 1), (32, 1)]
}
fn extend_reqs() -> Vec<Req> {
    vec![(40, 7), (0, 0), (16, 16), (300, 17), (1, 1), (64, 3)]
}

fn trials() -> Vec<GpuTrial> {
    let mut out = Vec::new();
    let geos: Vec<(&str, Geo)> = vec![
        ("qwen3_bf16", qwen3(DType::BF16, false, false)),
        ("qwen3_bf16_table", qwen3(DType::BF16, false, true)),
        ("qwen3_f16_e4m3", qwen3(DType::F16, true, false)),
        ("qwen3_bf16_table_e4m3", qwen3(DType::BF16, true, true)),
        ("neox_r32_of_64_f16", Geo { h: 16, hkv: 4, d: 64, r: 32, off: 0, ..qwen3(DType::F16, false, false) }),
        ("neox_r64_at_64_of_128", Geo { h: 8, hkv: 2, r: 64, off: 64, ..qwen3(DType::BF16, false, false) }),
        ("neox_r64_at_32_of_128_f16_table", Geo { h: 8, hkv: 2, r: 64, off: 32, ..qwen3(DType::F16, false, true) }),
        (
            "gptj_r64_at_64_of_128_e4m3",
            Geo { h: 8, hkv: 2, r: 64, off: 64, style: RopeStyle::Gptj, ..qwen3(DType::BF16, true, false) },
        ),
        (
            "deepseek_v4_yarn_last_64_of_256",
            Geo {
                h: 16,
                hkv: 1,
                d: 256,
                r: 64,
                off: 192,
                style: RopeStyle::Gptj,
                yarn: true,
                ..qwen3(DType::BF16, false, true)
            },
        ),
        (
            "deepseek_v4_yarn_last_64_of_256_computed",
            Geo {
                h: 16,
                hkv: 1,
                d: 256,
                r: 64,
                off: 192,
                style: RopeStyle::Gptj,
                yarn: true,
                ..qwen3(DType::BF16, false, false)
            },
        ),
    ];
    for (name, g) in geos {
        out.push(GpuTrial::new(format!("{name}::decode"), move |dev| check(dev, &Case::new(g, &decode_reqs(), 2, 1))));
        out.push(GpuTrial::new(format!("{name}::extend"), move |dev| check(dev, &Case::new(g, &extend_reqs(), 3, 2))));
    }
    // Faults: a position outside [0, max_position) (row left unrotated, K appended unrotated,
    // FAULT_POSITION) and a page id past the pool (row skipped, FAULT_PAGE_ID).
    for (name, g) in [("bf16", qwen3(DType::BF16, false, false)), ("e4m3_table", qwen3(DType::BF16, true, true))] {
        out.push(GpuTrial::new(format!("faults::{name}"), move |dev| {
            let mut c = Case::new(g, &decode_reqs(), 1, 3);
            c.positions[1] = c.max_position() as i32;
            c.positions[3] = -1;
            check(dev, &c)?;
            let mut c = Case::new(g, &decode_reqs(), 1, 4);
            c.batch.pt[c.batch.max_pages] = c.batch.num_pages as i32;
            check(dev, &c)
        }));
    }
    // The untrusted-index cases of the kv_append suite (bad page ids, lengths and packings):
    // the same masking and the same error word as kv_append after rope.
    for (name, mutate) in FAULTS {
        let g = qwen3(DType::BF16, false, false);
        out.push(GpuTrial::new(format!("untrusted_indices::{name}"), move |dev| {
            let mut c = Case::new(g, &[(40, 3), (17, 2), (5, 1)], 0, 9);
            mutate(&mut c.batch);
            check(dev, &c)
        }));
    }
    // More requests than the kernel stages in shared memory (kRopeKvSmemCu = 256): the batch is
    // read in global memory.
    for (name, g) in [("bf16", qwen3(DType::BF16, false, false)), ("e4m3", qwen3(DType::BF16, true, false))] {
        out.push(GpuTrial::new(format!("large_batch::{name}"), move |dev| {
            let reqs: Vec<Req> = (0..300).map(|i| (1 + (i * 37) % 70, 1)).collect();
            check(dev, &Case::new(g, &reqs, 1, 11))
        }));
    }
    out.push(GpuTrial::new("graph_replay_equals_eager", graph_replay));
    for (name, g) in [("bf16", qwen3(DType::BF16, false, false)), ("bf16_table_e4m3", qwen3(DType::BF16, true, true))] {
        out.push(GpuTrial::new(format!("pdl_after_long_kernel::{name}"), move |dev| {
            pdl_after_long_kernel(dev, g, false)
        }));
        out.push(GpuTrial::new(format!("pdl_after_long_kernel::{name}_early_release"), move |dev| {
            pdl_after_long_kernel(dev, g, true)
        }));
    }
    out.push(GpuTrial::new("run_allocates_nothing", |dev| {
        let c = Case::new(qwen3(DType::BF16, false, false), &decode_reqs(), 0, 5);
        let p = plans(dev, &c.query())?;
        let h = host_inputs(&c);
        let s = dev.stream();
        let mut d = upload(&c, &h, &[], s)?;
        check_run_allocates_nothing(dev, s, 20, || {
            let v = views(&c, &mut d).map_err(|e| Error::SessionState { state: "test", what: e })?;
            rope_kv_append::run(&p.fused, fused_args(v), Scratch::none(), s)
        })
    }));
    out.push(GpuTrial::new("bad_inputs_are_typed_errors", bad_inputs));
    out
}

/// The QKV buffer written by a ~20 µs kernel right before the call: `gemm.bf16_gemv` with an
/// identity W (`y = x · Iᵀ = x`, exact: one nonzero product per output) copies the host QKV rows
/// into the poisoned buffer. Reference: that kernel (plain), then rope and kv_append; under test:
/// that kernel with PDL, then the fused op with PDL, launched while the copy still runs. The
/// fused call reads positions, the batch and the table before its wait and q, k, v after it.
/// Eager, then captured and replayed twice on fresh poison. How well it catches an early read
/// (session 38's review, mutant kernels on the H200): K and V loaded before the wait failed both
/// trials 3 of 3 runs; q loaded before the wait failed the table / E4M3 trial 3 of 3 but the
/// BF16 one only 1 of 3 (the copy's first CTAs write the q columns, and finish early).
/// Moving q's rows to the copy's last CTAs would make it reliable. `early_release`: the fused
/// plan also releases the next kernel at entry (`Plan::with_early_release`; nothing follows it
/// here, so its results must simply not change).
fn pdl_after_long_kernel(dev: &Arc<Device>, g: Geo, early_release: bool) -> TrialResult {
    use b12x_gemm::bf16_gemv;
    let s = dev.stream();
    let c = Case::new(g, &decode_reqs(), 2, 7);
    let q = c.query();
    let p = plans(dev, &q)?;
    // With a warm part (one CTA per SM, as a decode step would): it reads the caches beside the
    // copy and must not disturb the result.
    let w = rope_kv_append::WarmCache { blocks: dev.sm_count(), read: rope_kv_append::WarmRead::default() };
    let fused = rope_kv_append::plan(&q, dev)
        .map_err(err)?
        .with_pdl(true)
        .with_early_release(early_release)
        .with_warm_cache(Some(w))
        .map_err(err)?;
    if fused.early_release() != early_release {
        return Err("with_early_release did not set the flag".into());
    }
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
    session.prepare(&[&fused, &copy, &copy_pdl]).map_err(err)?;
    let table = if g.table { fused.cos_sin_table() } else { Vec::new() };
    let h = host_inputs(&c);
    let one = b12x_core::half::bf16::ONE.to_bits().to_le_bytes();
    let mut eye = vec![0u8; n * n * 2];
    for i in 0..n {
        eye[(i * n + i) * 2..][..2].copy_from_slice(&one);
    }
    let eye = s.clone_htod(&eye).map_err(err)?;
    let x = s.clone_htod(&h.qkv).map_err(err)?;
    let scratch_bytes = copy.scratch_layout().total_bytes().max(copy_pdl.scratch_layout().total_bytes()).max(1);
    let mut scratch = s.alloc_zeros::<u8>(scratch_bytes).map_err(err)?;
    let poison = vec![0xffu8; h.qkv.len()];
    // The copy writes the whole QKV buffer (`y`, a device address: the fused call's views alias it).
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
    let mut a = upload(&c, &h, &table, s)?;
    s.memcpy_htod(&poison, &mut a.qkv).map_err(err)?;
    run_copy(&copy, addr(&a)?, &mut scratch, s).map_err(err)?;
    run_unfused(&p, views(&c, &mut a)?, s)?;
    let mut b = upload(&c, &h, &table, s)?;
    s.memcpy_htod(&poison, &mut b.qkv).map_err(err)?;
    run_copy(&copy_pdl, addr(&b)?, &mut scratch, s).map_err(err)?;
    rope_kv_append::run(&fused, fused_args(views(&c, &mut b)?), Scratch::none(), s).map_err(err)?;
    compare(&c, &h, &a, &b, s).map_err(|e| format!("eager: {e}"))?;
    // The same pair captured once, replayed twice on fresh inputs (poisoned QKV, the caches and
    // the error word as uploaded).
    let mut r = upload(&c, &h, &table, s)?;
    let y = addr(&r)?;
    let exec = session
        .capture(s, |st| {
            run_copy(&copy_pdl, y, &mut scratch, st)?;
            let v = views(&c, &mut r).map_err(|e| Error::SessionState { state: "test", what: e })?;
            rope_kv_append::run(&fused, fused_args(v), Scratch::none(), st)
        })
        .map_err(err)?;
    for replay in 0..2 {
        let fresh = upload(&c, &h, &table, s)?;
        s.memcpy_htod(&poison, &mut r.qkv).map_err(err)?;
        s.memcpy_dtod(&fresh.k_cache, &mut r.k_cache).map_err(err)?;
        s.memcpy_dtod(&fresh.v_cache, &mut r.v_cache).map_err(err)?;
        r.error.clear(s).map_err(err)?;
        // SAFETY: every buffer the graph uses lives in `r`, `x`, `eye` and `scratch`, alive here.
        unsafe { exec.launch() }.map_err(err)?;
        compare(&c, &h, &a, &r, s).map_err(|e| format!("replay {replay}: {e}"))?;
    }
    Ok(())
}

/// A captured fused call replays like an eager one after the lengths and positions change.
fn graph_replay(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let g = qwen3(DType::BF16, false, false);
    // Step 1's batch; step 0 (what the graph is captured with) has every request one token
    // shorter on the same pages. Captured on step 0, replayed after uploading step 1's lengths
    // and positions: equals an eager run on step 1.
    let c1 = Case::new(g, &decode_reqs(), 0, 6);
    let mut c0 = c1.clone();
    for l in &mut c0.batch.lens {
        *l -= 1;
    }
    c0.positions = c0.positions.iter().map(|x| x - 1).collect();
    let p = plans(dev, &c0.query())?;
    let h = host_inputs(&c0);
    // Eager on step 1's batch.
    let mut eager = upload(&c1, &h, &[], s)?;
    rope_kv_append::run(&p.fused, fused_args(views(&c1, &mut eager)?), Scratch::none(), s).map_err(err)?;
    // Captured on step 0's, replayed after uploading step 1's lengths and positions.
    let mut graph = upload(&c0, &h, &[], s)?;
    let exec = {
        let v = views(&c0, &mut graph)?;
        p.session.capture(s, |st| rope_kv_append::run(&p.fused, fused_args(v), Scratch::none(), st)).map_err(err)?
    };
    s.memcpy_htod(&c1.batch.lens, &mut graph.lens).map_err(err)?;
    s.memcpy_htod(&c1.positions, &mut graph.pos).map_err(err)?;
    // SAFETY: every buffer the graph uses lives in `graph`, which outlives the launch.
    unsafe { exec.launch() }.map_err(err)?;
    compare_devs(&eager, &graph, s)
}

fn compare_devs(a: &Dev, b: &Dev, s: &Arc<CudaStream>) -> TrialResult {
    for (name, x, y) in
        [("qkv", &a.qkv, &b.qkv), ("k_cache", &a.k_cache, &b.k_cache), ("v_cache", &a.v_cache, &b.v_cache)]
    {
        if s.clone_dtoh(x).map_err(err)? != s.clone_dtoh(y).map_err(err)? {
            return Err(format!("{name}: graph replay differs from eager"));
        }
    }
    let (ea, eb) = (a.error.read(s).map_err(err)?, b.error.read(s).map_err(err)?);
    if ea.0 != eb.0 || ea.0 != 0 {
        return Err(format!("error words: eager {ea}, replay {eb}"));
    }
    Ok(())
}

/// Bad queries and arguments: typed errors, nothing launched (the caches stay as they were).
fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let c = Case::new(qwen3(DType::BF16, false, false), &decode_reqs(), 0, 7);
    let q = c.query();
    let expect_query = |q: rope_kv_append::Query, field: &str| -> TrialResult {
        match rope_kv_append::plan(&q, dev) {
            Err(Error::InvalidQuery { field: f, .. }) if f == field => Ok(()),
            other => Err(format!("{field}: want InvalidQuery, got {other:?}")),
        }
    };
    expect_query(
        rope_kv_append::Query { rope: rope::Query { kv_heads: 4, ..q.rope.clone() }, ..q.clone() },
        "rope.kv_heads",
    )?;
    expect_query(
        rope_kv_append::Query { rope: rope::Query { max_tokens: 3, ..q.rope.clone() }, ..q.clone() },
        "rope.max_tokens",
    )?;
    expect_query(
        rope_kv_append::Query { rope: rope::Query { rotary_dim: 8, ..q.rope.clone() }, ..q.clone() },
        "rope.rotary_dim",
    )?;
    expect_query(
        rope_kv_append::Query { append: kv_append::Query { page_size: 8, ..q.append.clone() }, ..q.clone() },
        "page_size",
    )?;
    for blocks in [0, rope_kv_append::MAX_WARM_BLOCKS + 1] {
        let w = rope_kv_append::WarmCache { blocks, read: rope_kv_append::WarmRead::Load };
        match rope_kv_append::plan(&q, dev).map_err(err)?.with_warm_cache(Some(w)) {
            Err(Error::InvalidQuery { field: "warm.blocks", .. }) => {}
            other => {
                return Err(format!("warm blocks {blocks}: want InvalidQuery(warm.blocks), got {:?}", other.err()))
            }
        }
    }
    let p = plans(dev, &q)?;
    let h = host_inputs(&c);
    let mut d = upload(&c, &h, &[], s)?;
    let rows = c.batch.rows;
    let st = [c.stride() as isize, c.g.d as isize, 1];
    // k given as a view over q's columns: q is written while k is read.
    let v = views(&c, &mut d)?;
    let mut a = fused_args(v);
    // SAFETY: q's first Hkv heads, within the buffer.
    a.k = unsafe { TensorRef::from_raw(a.q.ptr(), &[rows, c.g.hkv, c.g.d], &st, c.g.dtype) }.map_err(err)?;
    match rope_kv_append::run(&p.fused, a, Scratch::none(), s) {
        Err(Error::Aliasing { .. }) => {}
        other => return Err(format!("k overlapping q: want Aliasing, got {other:?}")),
    }
    // q (and positions) with T − 1 rows against k and v with T: the fused op's own check.
    let v = views(&c, &mut d)?;
    let mut a = fused_args(v);
    // SAFETY: the first rows − 1 rows of q and of the positions.
    unsafe {
        a.q = TensorMut::from_raw(a.q.ptr(), &[rows - 1, c.g.h, c.g.d], &st, c.g.dtype).map_err(err)?;
        a.positions = TensorRef::from_raw(a.positions.ptr(), &[rows - 1], &[1], DType::I32).map_err(err)?;
    }
    match rope_kv_append::run(&p.fused, a, Scratch::none(), s) {
        Err(Error::Shape { tensor: "q", .. }) => {}
        other => return Err(format!("q with T − 1 rows: want Shape(q), got {other:?}")),
    }
    // A cache overlapping q, and the error word inside the page table.
    let v = views(&c, &mut d)?;
    let mut a = fused_args(v);
    let shape = a.k_cache.shape().to_vec();
    let strides = a.k_cache.strides().to_vec();
    // SAFETY: a refused view (never written): q's base with the cache's geometry is checked only.
    a.v_cache = unsafe { TensorMut::from_raw(a.q.ptr(), &shape, &strides, a.v_cache.dtype()) }.map_err(err)?;
    match rope_kv_append::run(&p.fused, a, Scratch::none(), s) {
        Err(Error::Aliasing { .. }) => {}
        other => return Err(format!("v_cache over q: want Aliasing, got {other:?}")),
    }
    let v = views(&c, &mut d)?;
    let mut a = fused_args(v);
    // SAFETY: a refused view (never written).
    a.error = unsafe { TensorMut::from_raw(a.page_table.ptr(), &[1], &[1], DType::I32) }.map_err(err)?;
    match rope_kv_append::run(&p.fused, a, Scratch::none(), s) {
        Err(Error::Aliasing { .. }) => {}
        other => return Err(format!("error word inside the page table: want Aliasing, got {other:?}")),
    }
    // v given as a view over q's columns.
    let v = views(&c, &mut d)?;
    let mut a = fused_args(v);
    // SAFETY: q's first Hkv heads, within the buffer.
    a.v = unsafe { TensorRef::from_raw(a.q.ptr(), &[rows, c.g.hkv, c.g.d], &st, c.g.dtype) }.map_err(err)?;
    match rope_kv_append::run(&p.fused, a, Scratch::none(), s) {
        Err(Error::Aliasing { .. }) => {}
        other => return Err(format!("v overlapping q: want Aliasing, got {other:?}")),
    }
    // Nothing launched: the caches still hold their initial bytes and no fault is set.
    if s.clone_dtoh(&d.k_cache).map_err(err)? != h.cache || s.clone_dtoh(&d.v_cache).map_err(err)? != h.cache {
        return Err("a refused call wrote the caches".into());
    }
    if d.error.read(s).map_err(err)?.0 != 0 {
        return Err("a refused call set a fault".into());
    }
    Ok(())
}

fn main() {
    run_gpu_trials(trials())
}
