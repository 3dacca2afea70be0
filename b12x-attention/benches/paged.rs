//! Benchmark of `attention.paged` decode (one new token per request) over B ∈ {8, 32, 128} ×
//! context ∈ {2k, 8k, 32k} with Llama-3-8B heads (H 32, Hkv 8, D 128), P = 16 and every
//! request's pages scattered over the cache (a seeded permutation), BF16 and E4M3 KV, with the
//! method of DESIGN.md §7: one op call per CUDA graph replay, L2 flushed before each sample,
//! median of `bench::samples()`.
//!
//! Bytes are the compulsory traffic: every request's K and V (B · ctx · Hkv · D · 2 elements),
//! q, o and the page table. Inputs are seeded random, distributed like the peer's `randn` up to
//! a scale (the kernel's running maximum moves with the data): q on the host, the caches as one
//! 64 MB random block (unit-variance BF16, or E4M3 codes of values of magnitude ≤ 56 with scales
//! 0.01) tiled over the cache by device copies (a 17 GB host fill would dominate the run); the
//! oracle is checked by `tests/gpu_paged.rs`. Peers come from `B12X_PEER_JSON`
//! (bench/peers.py: `torch.nn.functional.scaled_dot_product_attention` with q_len 1 and
//! `enable_gqa=True` on the same geometry laid out contiguously), keyed `paged_decode/B{b}_ctx{c}`;
//! the E4M3 rows are compared with the same SDPA (BF16) row. `B12X_BENCH_QUICK=1` keeps B = 8.
//!
//! After the cases, `read_probe/{MB}` rows time the project's read probes on each distinct KV byte
//! count (the size-matched ceiling of each row; below ~300 MB a read does not reach the 2 GB
//! ceiling the `% ceiling` column uses).
//!
//! A second table, `paged_decode_x8/…` (the shapes whose K and V take at most 512 MB: where one
//! call's launch and tail weigh most), times the steady state of a decode graph by DESIGN.md §7's
//! "fixed number of back-to-back calls": each graph replay holds [`CALLS`] calls, each on its own
//! K and V caches (as consecutive layers, sharing the page table, lengths, q and o), L2 flushed
//! before the sample; the row's time is the sample's median / [`CALLS`]. `read_probe_x8/…` rows
//! time the read probes the same way, and the peer (`paged_decode_x8/…` in peers.py: SDPA on 8
//! distinct contiguous K/V) too.
//!
//! `B12X_PAGED_SPLIT_CAP=N` and `B12X_PAGED_STAGES=S` plan every case with split cap N or ring
//! depth S (where the case has that depth) instead of the plan's defaults, `B12X_PAGED_CLUSTER=0|1` with the scratch or the
//! cluster merge of the splits (to sweep them; the config column says which a row ran with);
//! `B12X_PAGED_BATCHES=1,4` runs other batch sizes (no SDPA peer unless `peers.py` has them);
//! `B12X_PAGED_PDL=1` plans every case with `PlanOptions::pdl` (the x8 rows then show what PDL
//! hides between back-to-back calls); `B12X_PAGED_WARPS=8` with the 8-warp decode variants
//! (`PlanOptions::warps`, 8-row tiles only).
//!
//! Run: `cargo bench -p b12x-attention --bench paged` (rows go to `bench-results/paged.{json,md}`).

use b12x_attention::paged::{self, Args, PlanOptions, Query};
use b12x_attention::paging::ErrorWord;
use b12x_core::bench::{samples, time_graph, BenchReport};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::gpu;
use b12x_core::{DType, Device, PreparationSession, Result, Scratch, TensorMut, TensorRef};
use b12x_quant::codec::e4m3_encode;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const BATCHES: [usize; 3] = [8, 32, 128];
const CONTEXTS: [usize; 3] = [2048, 8192, 32768];
const H: usize = 32;
const HKV: usize = 8;
const D: usize = 128;
const P: usize = 16;
/// Back-to-back calls per graph replay in the `paged_decode_x8` table (each on its own caches).
const CALLS: usize = 8;
/// The `paged_decode_x8` table takes the shapes whose K + V of one call take at most this.
const CALLS_MAX_KV_BYTES: usize = 512 << 20;

/// K + V bytes of one call.
fn kv_bytes(b: usize, ctx: usize, kv: DType) -> usize {
    b * ctx * HKV * D * 2 * kv.size_bytes()
}

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("paged bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let quick = b12x_core::bench::quick();
    let batches = batches(quick);
    let mut report = BenchReport::new("paged", &dev)?;
    report.note(
        "Decode, Llama-3-8B heads (H 32, Hkv 8, D 128), P = 16, pages scattered; bytes = K + V of every request + q, o, \
         page table. Peer: SDPA (q_len 1, enable_gqa) on contiguous BF16 K/V of the same shape; E4M3 rows against the \
         same BF16 peer.",
    );
    report.note(&format!(
        "Rows `paged_decode_x{CALLS}/…` and `read_probe_x{CALLS}/…` (and their peer): each graph replay holds {CALLS} \
         back-to-back calls, each on its own K and V caches (as consecutive layers); time = the sample's median / \
         {CALLS}. Every other row: one call per replay."
    ));
    for &b in &batches {
        for ctx in CONTEXTS {
            for kv in [DType::BF16, DType::E4M3] {
                bench_case(&dev, &mut report, b, ctx, kv, 1)?;
            }
        }
    }
    for &b in &batches {
        for ctx in CONTEXTS.into_iter().filter(|&c| kv_bytes(b, c, DType::BF16) <= CALLS_MAX_KV_BYTES) {
            let bytes = kv_bytes(b, ctx, DType::BF16);
            let probe = format!("read_probe_x{CALLS}/{}MB", bytes >> 20);
            if b12x_core::bench::selected(&probe) {
                b12x_core::bench::add_read_probe_calls(&mut report, &dev, &probe, bytes, CALLS)?;
            }
            for kv in [DType::BF16, DType::E4M3] {
                bench_case(&dev, &mut report, b, ctx, kv, CALLS)?;
            }
        }
    }
    // Size-matched ceilings: the project's read probes on each distinct KV byte count (below
    // ~300 MB a graph-replayed read does not reach the 2 GB ceiling; CONTRIBUTING.md).
    if b12x_core::bench::selected("read_probe") {
        let mut sizes: Vec<usize> = batches
            .iter()
            .flat_map(|&b| CONTEXTS.into_iter().flat_map(move |c| [1, 2].map(|es| b * c * HKV * D * 2 * es)))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        for bytes in sizes {
            b12x_core::bench::add_read_probe(&mut report, &dev, &format!("read_probe/{}MB", bytes >> 20), bytes)?;
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}

/// A uniform sample of unit variance.
fn unit(rng: &mut ChaCha8Rng) -> f32 {
    rng.random_range(-1.732f32..1.732)
}

/// `bytes` of cache: a seeded 64 MB block of random elements (BF16 of unit variance, or E4M3
/// codes of 32 · unit) copied over the whole buffer on the device.
fn random_cache(s: &Arc<CudaStream>, bytes: usize, kv: DType, seed: u64) -> Result<CudaSlice<u8>> {
    const BLOCK: usize = 64 << 20;
    let n = BLOCK.min(bytes);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let host: Vec<u8> = if kv == DType::E4M3 {
        (0..n).map(|_| e4m3_encode(32.0 * unit(&mut rng))).collect()
    } else {
        (0..n / 2).flat_map(|_| bf16::from_f32(unit(&mut rng)).to_bits().to_le_bytes()).collect()
    };
    let block = s.clone_htod(&host)?;
    let mut c = s.alloc_zeros::<u8>(bytes)?;
    let mut off = 0;
    while off < bytes {
        let len = n.min(bytes - off);
        s.memcpy_dtod(&block.slice(0..len), &mut c.slice_mut(off..off + len))?;
        off += len;
    }
    Ok(c)
}

/// The batch sizes to run: `B12X_PAGED_BATCHES` (comma-separated) if set, else [`BATCHES`]
/// (only 8 with `B12X_BENCH_QUICK=1`).
fn batches(quick: bool) -> Vec<usize> {
    match std::env::var("B12X_PAGED_BATCHES") {
        Ok(v) => v
            .split(',')
            .map(|b| b.trim().parse().unwrap_or_else(|_| panic!("B12X_PAGED_BATCHES: numbers, got {v}")))
            .collect(),
        Err(_) => BATCHES.into_iter().filter(|&b| !quick || b == 8).collect(),
    }
}

/// The number in environment variable `name`, if set.
fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}: a number, got {v}")))
}

/// One row: `calls` back-to-back calls per graph replay, each on its own K and V caches.
fn bench_case(
    dev: &Arc<Device>,
    report: &mut BenchReport,
    b: usize,
    ctx: usize,
    kv: DType,
    calls: usize,
) -> Result<()> {
    let suffix = if calls == 1 { String::new() } else { format!("_x{calls}") };
    let peer_case = format!("paged_decode{suffix}/B{b}_ctx{ctx}");
    let case = if kv == DType::E4M3 { format!("{peer_case}_e4m3") } else { peer_case.clone() };
    if !b12x_core::bench::selected(&case) {
        return Ok(());
    }
    let s = dev.stream();
    let pages_per_req = ctx / P;
    let num_pages = b * pages_per_req;
    let es = kv.size_bytes();
    let cache_bytes = num_pages * P * HKV * D * es;
    let (kc, vc) = (random_cache(s, cache_bytes, kv, 1)?, random_cache(s, cache_bytes, kv, 2)?);
    // The other back-to-back calls' caches (copies: the values do not change the speed).
    let more = (1..calls).map(|_| Ok((s.clone_dtod(&kc)?, s.clone_dtod(&vc)?))).collect::<Result<Vec<_>>>()?;
    let mut pages: Vec<i32> = (0..num_pages as i32).collect();
    pages.shuffle(&mut ChaCha8Rng::seed_from_u64(ctx as u64 + b as u64));
    let pt = s.clone_htod(&pages)?;
    let lens = s.clone_htod(&vec![ctx as i32; b])?;
    let cu = s.clone_htod(&(0..=b as i32).collect::<Vec<_>>())?;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let q_h: Vec<bf16> = (0..b * H * D).map(|_| bf16::from_f32(unit(&mut rng))).collect();
    let qx = s.clone_htod(&q_h)?;
    let mut o = s.alloc_zeros::<bf16>(b * H * D)?;
    let scales = s.clone_htod(&vec![0.01f32; 2 * b * HKV])?;
    let mut err = ErrorWord::new(s)?;

    let query = Query {
        heads: H,
        kv_heads: HKV,
        head_dim: D,
        page_size: P,
        q_dtype: DType::BF16,
        kv_dtype: kv,
        scale: 1.0 / (D as f32).sqrt(),
        window_left: -1,
        sinks: false,
        max_batch: b,
        max_tokens: b,
        max_q_len: 1,
        max_pages: pages_per_req,
        num_pages,
    };
    let plan = paged::plan_with(
        &query,
        dev,
        PlanOptions {
            max_splits: env_usize("B12X_PAGED_SPLIT_CAP"),
            // A depth this case has no variant of (6 with an E4M3 cache) keeps the default.
            stages: env_usize("B12X_PAGED_STAGES").filter(|s| query.stage_options().contains(s)),
            cluster_merge: env_usize("B12X_PAGED_CLUSTER").map(|v| v != 0),
            pdl: env_usize("B12X_PAGED_PDL").is_some_and(|v| v != 0),
            // The wide variants exist for 8-row tiles only: other cases keep the default.
            warps: env_usize("B12X_PAGED_WARPS")
                .map(|w| w as u32)
                .filter(|&w| w != paged::WIDE_WARPS || query.eight_row_tiles()),
        },
    )?;
    let mut session = PreparationSession::new(dev)?;
    let config = session.prepare(&[&plan])?.last().map(|sel| sel.config.clone()).unwrap_or_default();
    let mut scratch = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes().max(1))?;
    let cache_shape = [num_pages, P, HKV, D];
    let strides = b12x_core::contiguous_strides(&cache_shape);
    let raw = |c: &CudaSlice<u8>| -> Result<u64> { Ok(TensorRef::from_slice(c, &[c.len()])?.ptr()) };
    // (K, V) of each back-to-back call: its own caches, the first call's first.
    let caches = std::iter::once((&kc, &vc))
        .chain(more.iter().map(|(k, v)| (k, v)))
        .map(|(k, v)| Ok((raw(k)?, raw(v)?)))
        .collect::<Result<Vec<_>>>()?;
    let sp = TensorRef::from_slice(&scales, &[2 * b * HKV])?.ptr();
    let qp = TensorRef::from_slice(&qx, &[b * H * D])?.ptr();
    let op = TensorMut::from_slice(&mut o, &[b * H * D])?.ptr();
    let e4m3 = kv == DType::E4M3;
    let mut call_on = |st: &Arc<CudaStream>, (kp, vp): (u64, u64)| -> Result<()> {
        let row = [(H * D) as isize, D as isize, 1];
        // SAFETY: every view lies inside its buffer as allocated above.
        let args = unsafe {
            Args {
                q: TensorRef::from_raw(qp, &[b, H, D], &row, DType::BF16)?,
                k_cache: TensorRef::from_raw(kp, &cache_shape, &strides, kv)?,
                v_cache: TensorRef::from_raw(vp, &cache_shape, &strides, kv)?,
                k_scale: if e4m3 {
                    Some(TensorRef::from_raw(sp, &[b, HKV], &[HKV as isize, 1], DType::F32)?)
                } else {
                    None
                },
                v_scale: if e4m3 {
                    Some(TensorRef::from_raw(sp + (b * HKV * 4) as u64, &[b, HKV], &[HKV as isize, 1], DType::F32)?)
                } else {
                    None
                },
                sinks: None,
                page_table: TensorRef::from_slice(&pt, &[b, pages_per_req])?,
                seq_lens: TensorRef::from_slice(&lens, &[b])?,
                cu_seqlens_q: TensorRef::from_slice(&cu, &[b + 1])?,
                o: TensorMut::from_raw(op, &[b, H, D], &row, DType::BF16)?,
                lse: None,
                error: err.view()?,
            }
        };
        paged::run(&plan, args, Scratch::from_slice(&mut scratch), st)
    };
    call_on(s, caches[0])?;
    let times = time_graph(dev, samples(), |st| caches.iter().try_for_each(|&c| call_on(st, c)))?;
    let times: Vec<f64> = times.iter().map(|t| t / calls as f64).collect();
    let bytes = kv_bytes(b, ctx, kv) as f64 + (2 * b * H * D * 2 + b * pages_per_req * 4) as f64;
    let merge = if plan.cluster_merge() { " cluster_merge" } else { "" };
    let config = format!("{config} stages={} max_splits={}{merge}", plan.stages(), plan.max_splits());
    report.add_vs(&case, &peer_case, &config, &times, bytes, 4.0 * (b * H * ctx * D) as f64);
    if !err.read(s)?.is_clear() {
        panic!("{case}: the error word is set: {}", err.read(s)?);
    }
    session.close();
    Ok(())
}
