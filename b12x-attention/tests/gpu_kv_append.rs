//! GPU validation of `attention.kv_append` against the CPU oracle (libtest-mimic; every trial is
//! listed as ignored when no CUDA device is present).
//!
//! Each trial builds a batch (scattered, non-contiguous page tables from a seeded permutation),
//! fills both caches with a poison pattern on the host and the device, runs the op and compares
//! **the whole caches bitwise** with the oracle (so writes outside the new tokens' slots fail
//! too) and the error word with the oracle's fault bits. Cases: real model KV geometries
//! (Llama-3-8B, Qwen3-30B-A3B, gpt-oss-120b, a D = 256 and a D = 96 model) × BF16 / FP16 /
//! E4M3 caches × page sizes, decode (B = 1, 127), extend and prefill batches, lengths
//! 1, P−1, P, P+1, empty requests, padding rows, strided k/v rows (a fused QKV projection),
//! out-of-range page ids, bad lengths and a bad `cu_seqlens_q`. Further trials: a captured graph
//! replayed after the lengths and page tables change equals eager, `run` allocates nothing, a
//! frozen session rejects an unprepared plan, bad inputs are typed errors that launch nothing.
//! `B12X_TEST_PROFILE=reduced` drops the largest batches (sanitizer runs).

use b12x_attention::kv_append::{self, reference, reference::HostCache, Args, Query};
use b12x_attention::paging::{ErrorWord, Faults};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::{bf16, f16};
use b12x_core::testing::{check_run_allocates_nothing, reduced_profile, run_gpu_trials, shapes, uniform, GpuTrial};
use b12x_core::{DType, Device, Error, Scratch, TensorMut, TensorRef};
use std::sync::Arc;

/// Poison of the caches before a run: an element no run writes by accident.
const POISON16: u16 = 0x7fb1;
const POISON8: u8 = 0xa5;

#[derive(Clone, Copy, Debug)]
struct Geo {
    hkv: usize,
    d: usize,
    p: usize,
    dtype: DType,
    cache: DType,
}

mod common;
use common::{err, host, make_batch, prepared, Batch, Req, TrialResult, FAULTS};

/// Device buffers of one case.
struct Dev {
    kv: CudaSlice<u8>,
    k_cache: CudaSlice<u8>,
    v_cache: CudaSlice<u8>,
    scales: CudaSlice<f32>,
    pt: CudaSlice<i32>,
    lens: CudaSlice<i32>,
    cu: CudaSlice<i32>,
    error: ErrorWord,
}

/// The case: geometry, batch, host inputs (values as the dtype rounds them) and k/v row stride.
struct Case {
    g: Geo,
    batch: Batch,
    /// `[rows, row_stride]` values of k then v (row_stride ≥ Hkv·D: the rest is other heads).
    k: Vec<f32>,
    v: Vec<f32>,
    row_stride: usize,
    k_scale: Vec<f32>,
    v_scale: Vec<f32>,
}

fn case(g: Geo, batch: Batch, seed: u64, row_stride: usize) -> Case {
    let n = batch.rows * row_stride;
    let round = |v: Vec<f32>| common::round(g.dtype, v);
    // Values up to ±600: with scales around 0.5..2 some E4M3 codes saturate.
    let mut k = round(uniform(seed, n, -600.0, 600.0));
    if n > 3 {
        k[1] = f32::NAN;
        k[2] = -0.0;
    }
    let v = round(uniform(seed + 1, n, -4.0, 4.0));
    let b = batch.lens.len();
    let k_scale = uniform(seed + 2, b * g.hkv, 0.5, 2.0);
    let v_scale = uniform(seed + 3, b * g.hkv, 0.01, 0.1);
    Case { g, batch, k, v, row_stride, k_scale, v_scale }
}

impl Case {
    fn query(&self) -> Query {
        Query {
            kv_heads: self.g.hkv,
            head_dim: self.g.d,
            page_size: self.g.p,
            dtype: self.g.dtype,
            cache_dtype: self.g.cache,
            max_batch: self.batch.lens.len().max(1),
            max_tokens: self.batch.rows.max(1),
            max_pages: self.batch.max_pages,
            num_pages: self.batch.num_pages,
        }
    }
    fn cache_elems(&self) -> usize {
        self.batch.num_pages * self.g.p * self.g.hkv * self.g.d
    }
    fn e4m3(&self) -> bool {
        self.g.cache == DType::E4M3
    }
    fn in_bytes(&self, x: &[f32]) -> Vec<u8> {
        match self.g.dtype {
            DType::BF16 => x.iter().flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes()).collect(),
            _ => x.iter().flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes()).collect(),
        }
    }
    fn poison_bytes(&self) -> Vec<u8> {
        if self.e4m3() {
            vec![POISON8; self.cache_elems()]
        } else {
            POISON16.to_le_bytes().repeat(self.cache_elems())
        }
    }
    fn upload(&self, s: &Arc<CudaStream>) -> Result<Dev, String> {
        let mut kv = self.in_bytes(&self.k);
        kv.extend(self.in_bytes(&self.v));
        let mut scales = self.k_scale.clone();
        scales.extend(&self.v_scale);
        Ok(Dev {
            kv: s.clone_htod(&kv).map_err(err)?,
            k_cache: s.clone_htod(&self.poison_bytes()).map_err(err)?,
            v_cache: s.clone_htod(&self.poison_bytes()).map_err(err)?,
            scales: s.clone_htod(&scales).map_err(err)?,
            pt: s.clone_htod(&self.batch.pt).map_err(err)?,
            lens: s.clone_htod(&self.batch.lens).map_err(err)?,
            cu: s.clone_htod(&self.batch.cu).map_err(err)?,
            error: ErrorWord::new(s).map_err(err)?,
        })
    }
    /// The oracle's caches (as u16 codes) and faults.
    fn expected(&self) -> (Vec<u16>, Vec<u16>, u32) {
        let (hkv, d) = (self.g.hkv, self.g.d);
        // The oracle takes [rows, Hkv·D] rows.
        let dense = |x: &[f32]| -> Vec<f32> {
            (0..self.batch.rows).flat_map(|r| x[r * self.row_stride..][..hkv * d].to_vec()).collect()
        };
        let poison = if self.e4m3() { u16::from(POISON8) } else { POISON16 };
        let dtype = self.g.dtype;
        let code =
            move |v: f32| if dtype == DType::BF16 { bf16::from_f32(v).to_bits() } else { f16::from_f32(v).to_bits() };
        let hb = host(&self.batch, self.g.p);
        let mut out = Vec::new();
        let mut faults = 0;
        for (x, scale) in [(&self.k, &self.k_scale), (&self.v, &self.v_scale)] {
            let mut cache = vec![poison; self.cache_elems()];
            let kind = if self.e4m3() { HostCache::E4m3 { scale } } else { HostCache::Same };
            faults |= reference::append(&hb, hkv, d, &dense(x), kind, code, &mut cache);
            out.push(cache);
        }
        let v = out.pop().unwrap_or_default();
        (out.pop().unwrap_or_default(), v, faults)
    }
    fn args<'a>(&self, dev: &'a mut Dev) -> Result<Args<'a>, String> {
        let (b, rows, hkv, d, p) = (self.batch.lens.len(), self.batch.rows, self.g.hkv, self.g.d, self.g.p);
        let es = self.g.dtype.size_bytes();
        let base = TensorRef::from_slice(&dev.kv, &[dev.kv.len()]).map_err(err)?.ptr();
        let strides = [self.row_stride as isize, d as isize, 1];
        // SAFETY: k then v, each [rows, row_stride] elements of the dtype, inside `kv`.
        let (k, v) = unsafe {
            (
                TensorRef::from_raw(base, &[rows, hkv, d], &strides, self.g.dtype).map_err(err)?,
                TensorRef::from_raw(
                    base + (rows * self.row_stride * es) as u64,
                    &[rows, hkv, d],
                    &strides,
                    self.g.dtype,
                )
                .map_err(err)?,
            )
        };
        let cache_shape = [self.batch.num_pages, p, hkv, d];
        let cache = |c: &'a mut CudaSlice<u8>| -> Result<TensorMut<'a>, String> {
            if self.e4m3() {
                TensorMut::from_slice(c, &cache_shape).map_err(err)
            } else {
                let ptr = TensorMut::from_slice(c, &[c.len()]).map_err(err)?.ptr();
                let strides = b12x_core::contiguous_strides(&cache_shape);
                // SAFETY: the buffer holds the whole cache of 2-byte elements.
                unsafe { TensorMut::from_raw(ptr, &cache_shape, &strides, self.g.dtype) }.map_err(err)
            }
        };
        let (k_scale, v_scale) = if self.e4m3() {
            let sp = TensorRef::from_slice(&dev.scales, &[dev.scales.len()]).map_err(err)?.ptr();
            // SAFETY: k scales then v scales, [B, Hkv] f32 each.
            unsafe {
                (
                    Some(TensorRef::from_raw(sp, &[b, hkv], &[hkv as isize, 1], DType::F32).map_err(err)?),
                    Some(
                        TensorRef::from_raw(sp + (b * hkv * 4) as u64, &[b, hkv], &[hkv as isize, 1], DType::F32)
                            .map_err(err)?,
                    ),
                )
            }
        } else {
            (None, None)
        };
        Ok(Args {
            k,
            v,
            k_cache: cache(&mut dev.k_cache)?,
            v_cache: cache(&mut dev.v_cache)?,
            k_scale,
            v_scale,
            page_table: TensorRef::from_slice(&dev.pt, &[b, self.batch.max_pages]).map_err(err)?,
            seq_lens: TensorRef::from_slice(&dev.lens, &[b]).map_err(err)?,
            cu_seqlens_q: TensorRef::from_slice(&dev.cu, &[b + 1]).map_err(err)?,
            error: dev.error.view().map_err(err)?,
        })
    }
}

/// Downloads both caches as u16 codes and the fault bits.
fn results(c: &Case, d: &Dev, s: &Arc<CudaStream>) -> Result<(Vec<u16>, Vec<u16>, u32), String> {
    let widen = |bytes: Vec<u8>| -> Vec<u16> {
        if c.e4m3() {
            bytes.into_iter().map(u16::from).collect()
        } else {
            bytes.chunks_exact(2).map(|w| u16::from_le_bytes([w[0], w[1]])).collect()
        }
    };
    let k = widen(s.clone_dtoh(&d.k_cache).map_err(err)?);
    let v = widen(s.clone_dtoh(&d.v_cache).map_err(err)?);
    Ok((k, v, d.error.read(s).map_err(err)?.0))
}

fn compare(c: &Case, got: (Vec<u16>, Vec<u16>, u32), want: &(Vec<u16>, Vec<u16>, u32)) -> TrialResult {
    let (hkv, d, p) = (c.g.hkv, c.g.d, c.g.p);
    for (name, g, w) in [("k_cache", &got.0, &want.0), ("v_cache", &got.1, &want.1)] {
        if let Some(i) = (0..w.len()).find(|&i| g[i] != w[i]) {
            let (page, slot, head, e) = (i / (p * hkv * d), i / (hkv * d) % p, i / d % hkv, i % d);
            return Err(format!(
                "{name}[{page}, {slot}, {head}, {e}] = 0x{:x}, want 0x{:x} ({} mismatches)",
                g[i],
                w[i],
                (0..w.len()).filter(|&j| g[j] != w[j]).count()
            ));
        }
    }
    if got.2 != want.2 {
        return Err(format!("error word {} (0x{:x}), want {} (0x{:x})", Faults(got.2), got.2, Faults(want.2), want.2));
    }
    Ok(())
}

fn check(dev: &Arc<Device>, c: &Case) -> TrialResult {
    let s = dev.stream();
    let plan = kv_append::plan(&c.query(), dev).map_err(err)?;
    let session = prepared(dev, &plan)?;
    let mut d = c.upload(s)?;
    kv_append::run(&plan, c.args(&mut d)?, Scratch::none(), s).map_err(err)?;
    compare(c, results(c, &d, s)?, &c.expected())?;
    session.close();
    Ok(())
}

const GEOS: &[(&str, usize, usize)] = &[
    ("llama3_8b", shapes::LLAMA3_8B.kv_heads, shapes::LLAMA3_8B.head_dim),
    ("qwen3_30b_a3b", shapes::QWEN3_30B_A3B.kv_heads, shapes::QWEN3_30B_A3B.head_dim),
    ("gpt_oss_120b", shapes::GPT_OSS_120B.kv_heads, shapes::GPT_OSS_120B.head_dim),
    ("d256", 2, 256),
    ("d96", 4, 96),
];

/// Decode of B requests with lengths cycling through the page-boundary cases.
fn decode_reqs(b: usize, p: i32) -> Vec<Req> {
    let lens = [1, p - 1, p, p + 1, 3 * p + 5, 200];
    (0..b).map(|i| (lens[i % lens.len()], 1)).collect()
}

fn trials() -> Vec<GpuTrial> {
    let mut out = Vec::new();
    let dtypes =
        [(DType::BF16, DType::BF16), (DType::F16, DType::F16), (DType::BF16, DType::E4M3), (DType::F16, DType::E4M3)];
    for (gi, &(name, hkv, d)) in GEOS.iter().enumerate() {
        for (di, &(dtype, cache)) in dtypes.iter().enumerate() {
            let p = [16, 32, 64][(gi + di) % 3];
            let g = Geo { hkv, d, p, dtype, cache };
            let tag = format!("{name}::{}_{}::p{p}", dtype.name(), cache.name());
            let seed = (gi * 10 + di) as u64;
            let big = if reduced_profile() { 13 } else { 127 };
            out.push(GpuTrial::new(format!("{tag}::decode_b{big}"), move |dev| {
                check(dev, &case(g, make_batch(&decode_reqs(big, p as i32), p, seed, 0), seed, hkv * d))
            }));
            out.push(GpuTrial::new(format!("{tag}::decode_b1"), move |dev| {
                check(dev, &case(g, make_batch(&[(1, 1)], p, seed, 0), seed, hkv * d))
            }));
            // Extend / verify: several new tokens, an empty request, padding rows after cu[B].
            let reqs = [(2 * p as i32 + 3, 5), (0, 0), (p as i32, p as i32), (300, 17), (7, 1)];
            out.push(GpuTrial::new(format!("{tag}::extend_padded"), move |dev| {
                check(dev, &case(g, make_batch(&reqs, p, seed, 3), seed, hkv * d))
            }));
        }
    }
    let g = Geo { hkv: 8, d: 128, p: 16, dtype: DType::BF16, cache: DType::BF16 };
    out.push(GpuTrial::new("prefill_one_request_1000_tokens", move |dev| {
        check(dev, &case(g, make_batch(&[(1000, 1000)], 16, 7, 0), 7, 8 * 128))
    }));
    // k and v as slices of a fused QKV row ([H + 2 Hkv] heads of D, H = 32): row stride 48·D.
    for cache in [DType::BF16, DType::E4M3] {
        let g = Geo { cache, ..g };
        out.push(GpuTrial::new(format!("strided_fused_qkv_rows::{}", cache.name()), move |dev| {
            check(dev, &case(g, make_batch(&[(40, 3), (17, 2)], 16, 8, 0), 8, 48 * 128))
        }));
    }
    for (name, mutate) in FAULTS {
        out.push(GpuTrial::new(format!("untrusted_indices::{name}"), move |dev| {
            let mut b = make_batch(&[(40, 3), (17, 2), (5, 1)], 16, 9, 0);
            mutate(&mut b);
            check(dev, &case(g, b, 9, 8 * 128))
        }));
    }
    // The E4M3 division on every 16-bit input at 32 scales of every kind (store_chunk_e4m3's
    // fast path and its fallbacks), and a batch past the shared-memory packing (kSmemCu).
    for dtype in [DType::BF16, DType::F16] {
        out.push(GpuTrial::new(format!("e4m3_every_input_at_32_scales::{}", dtype.name()), move |dev| {
            check(dev, &every_input_case(dtype))
        }));
    }
    out.push(GpuTrial::new("decode_b2100_packing_in_global_memory", move |dev| {
        let g = Geo { cache: DType::E4M3, ..g };
        check(dev, &case(g, make_batch(&decode_reqs(2100, 16), 16, 13, 2), 13, 8 * 128))
    }));
    out.push(GpuTrial::new("graph_replay_after_lengths_and_pages_change", graph_replay));
    out.push(GpuTrial::new("run_allocates_nothing", allocates_nothing));
    out.push(GpuTrial::new("unprepared_plan_frozen", unprepared));
    out.push(GpuTrial::new("bad_inputs_launch_nothing", bad_inputs));
    out
}

/// K scales of `every_input_case`, one per (request, KV head): usual ones, both ends of the fast
/// path's range [2^-90, 2^100] and just past them, subnormal, zero, negative, infinite, NaN.
const EVERY_INPUT_K_SCALES: [f32; 16] = [
    0.01,
    0.5,
    1.0,
    3.7,
    f32::from_bits(0x12800000), // 2^-90
    f32::from_bits(0x12000000), // 2^-91
    1e-40,
    0.0,
    -0.0,
    -1.5,
    f32::NAN,
    f32::INFINITY,
    f32::from_bits(0x71800000), // 2^100
    f32::from_bits(0x72000000), // 2^101
    3e38,
    f32::MIN_POSITIVE,
];
/// V scales of `every_input_case`.
const EVERY_INPUT_V_SCALES: [f32; 16] = [
    1e-3,
    0.123_456_7,
    7.0,
    448.0,
    1e-20,
    1e20,
    f32::from_bits(0x13000000), // 2^-89
    0.75,
    f32::from_bits(0x21800000), // 2^-60
    1e-30,
    5e-39,
    f32::NEG_INFINITY,
    65504.0,
    1.0 / 3.0,
    f32::from_bits(0x0d800000), // 2^-100
    1e38,
];

/// E4M3 cache, Hkv 8, D 128, two requests appending 512 tokens each: each (request, KV head)
/// holds all 65536 codes of `dtype` once (k in code order, v in another), so with 16 K and 16 V
/// scales every input meets 32 scales; compared bitwise with the oracle's f32 division.
fn every_input_case(dtype: DType) -> Case {
    let g = Geo { hkv: 8, d: 128, p: 16, dtype, cache: DType::E4M3 };
    let value = |bits: u16| {
        if dtype == DType::BF16 {
            bf16::from_bits(bits).to_f32()
        } else {
            f16::from_bits(bits).to_f32()
        }
    };
    let (mut k, mut v) = (Vec::new(), Vec::new());
    for b in 0..2u32 {
        for t in 0..512u32 {
            for h in 0..8u32 {
                for e in 0..128u32 {
                    let n = t * 128 + e;
                    k.push(value(n as u16));
                    // An odd multiplier and an xor: a permutation of the codes.
                    v.push(value((n.wrapping_mul(40503) ^ (h * 4099 + b * 77)) as u16));
                }
            }
        }
    }
    Case {
        g,
        batch: make_batch(&[(512, 512), (512, 512)], 16, 17, 0),
        k,
        v,
        row_stride: 8 * 128,
        k_scale: EVERY_INPUT_K_SCALES.to_vec(),
        v_scale: EVERY_INPUT_V_SCALES.to_vec(),
    }
}

/// Capture one call, then change lengths and page tables in place (device values) and replay:
/// the cache must equal an eager run on the new values (and the oracle).
fn graph_replay(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let g = Geo { hkv: 8, d: 128, p: 16, dtype: DType::BF16, cache: DType::E4M3 };
    let first = case(g, make_batch(&[(40, 1), (17, 1), (5, 1)], 16, 11, 0), 11, 8 * 128);
    // Same shapes (B, rows, max_pages, num_pages), other pages and shorter lengths.
    let mut second = case(g, make_batch(&[(40, 1), (17, 1), (5, 1)], 16, 12, 0), 11, 8 * 128);
    second.batch.lens = vec![33, 16, 2];
    let plan = kv_append::plan(&first.query(), dev).map_err(err)?;
    let session = prepared(dev, &plan)?;
    let mut d = first.upload(s)?;
    let graph = {
        let args = first.args(&mut d)?;
        session.capture(s, |st| kv_append::run(&plan, args, Scratch::none(), st)).map_err(err)?
    };
    // SAFETY: every buffer the graph uses lives in `d`, which outlives the graph.
    unsafe { graph.launch() }.map_err(err)?;
    compare(&first, results(&first, &d, s)?, &first.expected())?;
    // New lengths and page table into the same buffers; fresh poison; replay.
    s.memcpy_htod(&second.batch.lens, &mut d.lens).map_err(err)?;
    s.memcpy_htod(&second.batch.pt, &mut d.pt).map_err(err)?;
    s.memcpy_htod(&second.poison_bytes(), &mut d.k_cache).map_err(err)?;
    s.memcpy_htod(&second.poison_bytes(), &mut d.v_cache).map_err(err)?;
    d.error.clear(s).map_err(err)?;
    let want = second.expected();
    unsafe { graph.launch() }.map_err(err)?;
    let replayed = results(&second, &d, s)?;
    compare(&second, replayed.clone(), &want)?;
    // Eager on the same values gives the same bits.
    s.memcpy_htod(&second.poison_bytes(), &mut d.k_cache).map_err(err)?;
    s.memcpy_htod(&second.poison_bytes(), &mut d.v_cache).map_err(err)?;
    kv_append::run(&plan, second.args(&mut d)?, Scratch::none(), s).map_err(err)?;
    let eager = results(&second, &d, s)?;
    if eager != replayed {
        return Err("eager and replayed caches differ".into());
    }
    Ok(())
}

fn allocates_nothing(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let g = Geo { hkv: 8, d: 128, p: 16, dtype: DType::BF16, cache: DType::BF16 };
    let c = case(g, make_batch(&decode_reqs(32, 16), 16, 13, 0), 13, 8 * 128);
    let plan = kv_append::plan(&c.query(), dev).map_err(err)?;
    let _session = prepared(dev, &plan)?;
    let mut d = c.upload(s)?;
    check_run_allocates_nothing(dev, s, 20, || {
        let args = c.args(&mut d).map_err(|e| Error::SessionState { state: "test", what: e })?;
        kv_append::run(&plan, args, Scratch::none(), s)
    })
}

fn unprepared(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let g = Geo { hkv: 4, d: 64, p: 32, dtype: DType::F16, cache: DType::F16 };
    let c = case(g, make_batch(&[(3, 1)], 32, 14, 0), 14, 4 * 64);
    let plan = kv_append::plan(&c.query(), dev).map_err(err)?;
    let other = kv_append::plan(&Query { max_tokens: 999, ..c.query() }, dev).map_err(err)?;
    let mut session = prepared(dev, &other)?;
    session.freeze();
    let mut d = c.upload(s)?;
    let r = kv_append::run(&plan, c.args(&mut d)?, Scratch::none(), s);
    session.close();
    match r {
        Err(Error::KernelResolutionFrozen { .. }) => Ok(()),
        other => Err(format!("expected KernelResolutionFrozen, got {other:?}")),
    }
}

/// Each bad input is a typed error and the caches stay poisoned (nothing launched).
fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let g = Geo { hkv: 8, d: 128, p: 16, dtype: DType::BF16, cache: DType::E4M3 };
    let c = case(g, make_batch(&[(40, 3), (17, 2)], 16, 15, 0), 15, 8 * 128);
    let plan = kv_append::plan(&c.query(), dev).map_err(err)?;
    let session = prepared(dev, &plan)?;
    let mut d = c.upload(s)?;
    let mut other = s.alloc_zeros::<u8>(1 << 20).map_err(err)?;
    type Edit = fn(&mut Args<'_>, &mut CudaSlice<u8>) -> Result<(), String>;
    let edits: &[(&str, Edit)] = &[
        ("missing k_scale", |a, _| {
            a.k_scale = None;
            Ok(())
        }),
        ("k wrong head_dim", |a, _| {
            // SAFETY: a smaller view of the same buffer.
            a.k = unsafe { TensorRef::from_raw(a.k.ptr(), &[5, 8, 64], &[1024, 64, 1], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("v wrong dtype", |a, _| {
            a.v = unsafe { TensorRef::from_raw(a.v.ptr(), &[5, 8, 128], &[1024, 128, 1], DType::F16) }.map_err(err)?;
            Ok(())
        }),
        ("misaligned k", |a, _| {
            a.k = unsafe { TensorRef::from_raw(a.k.ptr() + 2, &[5, 8, 128], &[1024, 128, 1], DType::BF16) }
                .map_err(err)?;
            Ok(())
        }),
        ("page_table wrong width", |a, o| {
            let p = TensorRef::from_slice(o, &[o.len()]).map_err(err)?.ptr();
            a.page_table = unsafe { TensorRef::from_raw(p, &[2, 1], &[1, 1], DType::I32) }.map_err(err)?;
            Ok(())
        }),
        ("batch over capacity", |a, o| {
            let p = TensorRef::from_slice(o, &[o.len()]).map_err(err)?.ptr();
            a.seq_lens = unsafe { TensorRef::from_raw(p, &[3], &[1], DType::I32) }.map_err(err)?;
            Ok(())
        }),
        ("cache overlaps k", |a, _| {
            let p = a.k.ptr();
            let shape = [a.k_cache.shape()[0], 16, 8, 128];
            let strides = b12x_core::contiguous_strides(&shape);
            a.k_cache = unsafe { TensorMut::from_raw(p, &shape, &strides, DType::E4M3) }.map_err(err)?;
            Ok(())
        }),
    ];
    for (name, edit) in edits {
        let mut args = c.args(&mut d)?;
        edit(&mut args, &mut other)?;
        match kv_append::run(&plan, args, Scratch::none(), s) {
            Err(Error::Shape { .. } | Error::DType { .. } | Error::Misaligned { .. } | Error::Capacity { .. })
            | Err(Error::Aliasing { .. }) => {}
            other => return Err(format!("{name}: expected a typed input error, got {other:?}")),
        }
    }
    s.synchronize().map_err(err)?;
    let (k, v, f) = results(&c, &d, s)?;
    if k.iter().chain(&v).any(|&x| x != u16::from(POISON8)) || f != 0 {
        return Err("a rejected call wrote the caches or the error word".into());
    }
    session.close();
    Ok(())
}

fn main() {
    run_gpu_trials(trials())
}
