//! Benchmark of `attention.kv_append` with Llama-3-8B's KV geometry (Hkv 8, D 128), P = 16, every
//! request's pages scattered over the cache (a seeded permutation), BF16 k/v into a BF16 or an
//! E4M3 cache, with the method of DESIGN.md §7: one op call per CUDA graph replay, L2 flushed
//! before each sample, median of `bench::samples()`.
//!
//! - `kv_append/decode_B{b}_{cache}`: one new token per request, B ∈ {1, 8, 32, 128}, each request
//!   at its own context length (≤ 2k), the decode step's append. A latency row (a few hundred KB).
//! - `kv_append/prefill_T{t}_{cache}`: one request appending its whole prompt, T ∈ {4096, 65536}
//!   tokens: the bandwidth rows.
//!
//! Bytes are the compulsory traffic: k and v read, their cache slots written (1 byte per element
//! for E4M3), the scales (E4M3), `seq_lens`, `cu_seqlens_q` and the page-table entries the new
//! tokens land in. Inputs are seeded random values of unit variance (E4M3 scales 0.01: codes of
//! magnitude ≤ ~173, none saturated); the oracle is checked bitwise by `tests/gpu_kv_append.rs`.
//!
//! `copy_probe/{MB}` rows time the driver's device-to-device copy of each prefill row's k + v
//! bytes (read and written: the size-matched floor of an op that writes what it reads, the BF16
//! rows). Peers come from `B12X_PEER_JSON` (bench/peers.py, keyed as the rows): PyTorch's
//! `index_copy_` of k and v into the caches viewed as `[slots, Hkv, D]` at slot ids computed on
//! the host from a page table scattered the same way (the op computes them on the device), and for E4M3 the
//! division by the request's scales and the `float8_e4m3fn` cast first — what an engine without
//! a fused append kernel runs. `B12X_BENCH_QUICK=1` drops T = 65536.
//!
//! Run: `cargo bench -p b12x-attention --bench kv_append` (rows go to `bench-results/kv_append.{json,md}`).

use b12x_attention::kv_append::{self, Args, Query};
use b12x_attention::paging::ErrorWord;
use b12x_core::bench::{samples, time_graph, BenchReport};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::testing::{gpu, random_bf16_bytes};
use b12x_core::{DType, Device, PreparationSession, Result, Scratch, TensorMut, TensorRef};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const HKV: usize = 8;
const D: usize = 128;
const P: usize = 16;
/// Decode rows: batch sizes, and the context capacity of each request (its page-table row).
const DECODE_B: [usize; 4] = [1, 8, 32, 128];
const DECODE_CTX: usize = 2048;
/// Prefill rows: one request appending this many tokens.
const PREFILL_T: [usize; 2] = [4096, 65536];
/// The E4M3 caches' scale (every request and KV head).
const SCALE: f32 = 0.01;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("kv_append bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let quick = b12x_core::bench::quick();
    let mut report = BenchReport::new("kv_append", &dev)?;
    report.note(
        "Llama-3-8B KV heads (Hkv 8, D 128), P = 16, pages scattered; BF16 k/v into a BF16 or E4M3 cache. decode_B*: \
         one token per request (contexts ≤ 2k); prefill_T*: one request appending T tokens. Bytes = k + v read, cache \
         slots written, scales, lengths and the page-table entries used. Peer: PyTorch index_copy_ at host-computed \
         slot ids (E4M3: division by the scales and the float8_e4m3fn cast first). copy_probe rows: the driver's \
         device copy of the prefill rows' k + v bytes, read + written.",
    );
    for cache in [DType::BF16, DType::E4M3] {
        for b in DECODE_B {
            let lens: Vec<usize> = (0..b).map(|i| DECODE_CTX - (i * 389) % DECODE_CTX).collect();
            bench_case(&dev, &mut report, &format!("decode_B{b}"), &lens, 1, DECODE_CTX / P, cache)?;
        }
        for t in PREFILL_T.into_iter().filter(|&t| !quick || t <= 4096) {
            bench_case(&dev, &mut report, &format!("prefill_T{t}"), &[t], t, t / P, cache)?;
        }
    }
    for t in PREFILL_T.into_iter().filter(|&t| !quick || t <= 4096) {
        let bytes = 2 * t * HKV * D * 2;
        let case = format!("copy_probe/{}MB", bytes >> 20);
        if b12x_core::bench::selected(&case) {
            b12x_core::bench::add_copy_probe(&mut report, &dev, &case, bytes)?;
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}

/// One row: B = `lens.len()` requests with context lengths `lens` (the new tokens included), each
/// appending `q_len` tokens (the last of its context), page-table rows of `max_pages` entries
/// over a cache of B · `max_pages` scattered pages.
fn bench_case(
    dev: &Arc<Device>,
    report: &mut BenchReport,
    name: &str,
    lens: &[usize],
    q_len: usize,
    max_pages: usize,
    cache: DType,
) -> Result<()> {
    let case = format!("kv_append/{name}_{}", if cache == DType::E4M3 { "e4m3" } else { "bf16" });
    if !b12x_core::bench::selected(&case) {
        return Ok(());
    }
    let (b, t) = (lens.len(), lens.len() * q_len);
    let num_pages = b * max_pages;
    let query = Query {
        kv_heads: HKV,
        head_dim: D,
        page_size: P,
        dtype: DType::BF16,
        cache_dtype: cache,
        max_batch: b,
        max_tokens: t,
        max_pages,
        num_pages,
    };
    let plan = kv_append::plan(&query, dev)?;
    let mut session = PreparationSession::new(dev)?;
    let records = session.prepare(&[&plan])?;
    let config = records.last().map(|r| r.config.clone()).unwrap_or_default();
    let st = dev.stream();

    let row = HKV * D;
    let (k, v) = (random_bf16_bytes(st, 1, t * row)?, random_bf16_bytes(st, 2, t * row)?);
    let cache_bytes = num_pages * P * row * cache.size_bytes();
    let (mut kc, mut vc) = (st.alloc_zeros::<u8>(cache_bytes)?, st.alloc_zeros::<u8>(cache_bytes)?);
    let mut pages: Vec<i32> = (0..num_pages as i32).collect();
    pages.shuffle(&mut ChaCha8Rng::seed_from_u64(7));
    let pt = st.clone_htod(&pages)?;
    let seq = st.clone_htod(&lens.iter().map(|&l| l as i32).collect::<Vec<_>>())?;
    let cu = st.clone_htod(&(0..=b).map(|i| (i * q_len) as i32).collect::<Vec<_>>())?;
    let scales = st.clone_htod(&vec![SCALE; b * HKV])?;
    let mut err = ErrorWord::new(st)?;
    let e4m3 = cache == DType::E4M3;
    let raw = |c: &CudaSlice<u8>| -> Result<u64> { Ok(TensorRef::from_slice(c, &[c.len()])?.ptr()) };
    let (kp, vp) = (raw(&k)?, raw(&v)?);
    let kcp = TensorMut::from_slice(&mut kc, &[cache_bytes])?.ptr();
    let vcp = TensorMut::from_slice(&mut vc, &[cache_bytes])?.ptr();
    let (in_shape, cache_shape) = ([t, HKV, D], [num_pages, P, HKV, D]);
    let (in_strides, cache_strides) =
        ([row as isize, D as isize, 1], [(P * row) as isize, row as isize, D as isize, 1]);
    let mut call = |stream: &Arc<CudaStream>| -> Result<()> {
        // SAFETY: every view lies inside its buffer as allocated above, which outlives the calls.
        let args = unsafe {
            Args {
                k: TensorRef::from_raw(kp, &in_shape, &in_strides, DType::BF16)?,
                v: TensorRef::from_raw(vp, &in_shape, &in_strides, DType::BF16)?,
                k_cache: TensorMut::from_raw(kcp, &cache_shape, &cache_strides, cache)?,
                v_cache: TensorMut::from_raw(vcp, &cache_shape, &cache_strides, cache)?,
                k_scale: if e4m3 { Some(TensorRef::from_slice(&scales, &[b, HKV])?) } else { None },
                v_scale: if e4m3 { Some(TensorRef::from_slice(&scales, &[b, HKV])?) } else { None },
                page_table: TensorRef::from_slice(&pt, &[b, max_pages])?,
                seq_lens: TensorRef::from_slice(&seq, &[b])?,
                cu_seqlens_q: TensorRef::from_slice(&cu, &[b + 1])?,
                error: err.view()?,
            }
        };
        kv_append::run(&plan, args, Scratch::none(), stream)
    };
    call(st)?;
    let times = time_graph(dev, samples(), &mut call)?;
    // Page-table entries the new tokens land in: positions lens[i] - q_len .. lens[i] - 1.
    let used_pages: usize = lens.iter().map(|&l| (l - 1) / P - (l - q_len) / P + 1).sum();
    let scale_bytes = if e4m3 { 2 * b * HKV * 4 } else { 0 };
    let bytes = 2 * t * row * 2 + 2 * t * row * cache.size_bytes() + scale_bytes + 4 * (b + b + 1 + used_pages);
    report.add(&case, &config, &times, bytes as f64, 0.0);
    let faults = err.read(st)?;
    if !faults.is_clear() {
        panic!("{case}: the error word is set: {faults}");
    }
    session.close();
    Ok(())
}
