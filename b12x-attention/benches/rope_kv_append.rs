//! Benchmark of `attention.rope_kv_append` against the two ops it replaces, with Qwen3-8B's heads
//! (H 32, Hkv 8, D 128, NeoX over the whole head, cos/sin computed), P = 16, pages scattered, a
//! BF16 cache, with the method of DESIGN.md §7 (graph replays, L2 flushed before each sample,
//! medians of `bench::samples()`).
//!
//! - `rope_kv_append/decode_B{b}/{fused,rope_then_kv_append}`: one new token per request
//!   (contexts 2k), B ∈ {1, 8, 64}: the fused launch, and `attention.rope` then
//!   `attention.kv_append` captured in one graph — what the fusion saves per decode step.
//! - `rope_kv_append/prefill_T4096/…`: one request appending a 4096-token prompt.
//!
//! Bytes: q read and written, k and v read, their cache slots written (the compulsory traffic of
//! the fused op; the unfused pair also writes k back and reads it again). Results are checked
//! bitwise against the two ops by `tests/gpu_rope_kv_append.rs`.
//!
//! Run: `cargo bench -p b12x-attention --bench rope_kv_append` (rows go to
//! `bench-results/rope_kv_append.{json,md}`).

use b12x_attention::paging::ErrorWord;
use b12x_attention::rope::{self, CosSin, RopeStyle};
use b12x_attention::{kv_append, rope_kv_append};
use b12x_core::bench::{samples, selected, time_graph, BenchReport};
use b12x_core::cudarc::driver::CudaStream;
use b12x_core::testing::{gpu, random_bf16_bytes};
use b12x_core::{DType, Device, PreparationSession, Result, Scratch, TensorMut, TensorRef};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const H: usize = 32;
const HKV: usize = 8;
const D: usize = 128;
const P: usize = 16;
const CTX: usize = 2048;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("rope_kv_append bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let mut report = BenchReport::new("rope_kv_append", &dev)?;
    report.note(
        "Qwen3-8B heads (H 32, Hkv 8, D 128, NeoX, cos/sin computed), P = 16, pages scattered, BF16 cache. fused: \
         attention.rope_kv_append; rope_then_kv_append: attention.rope then attention.kv_append in one graph. Bytes = \
         q read + written, k and v read, their cache slots written.",
    );
    for (name, b, q_len) in
        [("decode_B1", 1, 1), ("decode_B8", 8, 1), ("decode_B64", 64, 1), ("prefill_T4096", 1, 4096)]
    {
        if selected(&format!("rope_kv_append/{name}")) {
            bench_case(&dev, &mut report, name, b, q_len)?;
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}

fn bench_case(dev: &Arc<Device>, report: &mut BenchReport, name: &str, b: usize, q_len: usize) -> Result<()> {
    let t = b * q_len;
    let ctx = CTX.max(q_len);
    let max_pages = ctx.div_ceil(P);
    let num_pages = b * max_pages;
    let q = rope_kv_append::Query {
        rope: rope::Query {
            heads: H,
            kv_heads: HKV,
            head_dim: D,
            rotary_dim: D,
            rotary_offset: 0,
            style: RopeStyle::Neox,
            base: 1e6,
            yarn: None,
            dtype: DType::BF16,
            max_tokens: t,
            max_position: max_pages * P,
            cos_sin: CosSin::Computed,
        },
        append: kv_append::Query {
            kv_heads: HKV,
            head_dim: D,
            page_size: P,
            dtype: DType::BF16,
            cache_dtype: DType::BF16,
            max_batch: b,
            max_tokens: t,
            max_pages,
            num_pages,
        },
    };
    let fused = rope_kv_append::plan(&q, dev)?;
    let rope_plan = rope::plan(&q.rope, dev)?;
    let append = kv_append::plan(&q.append, dev)?;
    let mut session = PreparationSession::new(dev)?;
    session.prepare(&[&fused, &rope_plan, &append])?;
    let st = dev.stream();
    let cols = (H + 2 * HKV) * D;
    let qkv = random_bf16_bytes(st, 3, t * cols)?;
    let cache_bytes = num_pages * P * HKV * D * 2;
    let (mut kc, mut vc) = (st.alloc_zeros::<u8>(cache_bytes)?, st.alloc_zeros::<u8>(cache_bytes)?);
    let mut pages: Vec<i32> = (0..num_pages as i32).collect();
    pages.shuffle(&mut ChaCha8Rng::seed_from_u64(5));
    let pt = st.clone_htod(&pages)?;
    let seq = st.clone_htod(&vec![ctx as i32; b])?;
    let cu = st.clone_htod(&(0..=b).map(|i| (i * q_len) as i32).collect::<Vec<_>>())?;
    let pos = st.clone_htod(&(0..t).map(|r| (ctx - q_len + r % q_len) as i32).collect::<Vec<_>>())?;
    let mut err = ErrorWord::new(st)?;
    let base = TensorRef::from_slice(&qkv, &[qkv.len()])?.ptr();
    let kcp = TensorMut::from_slice(&mut kc, &[cache_bytes])?.ptr();
    let vcp = TensorMut::from_slice(&mut vc, &[cache_bytes])?.ptr();
    let row = [cols as isize, D as isize, 1];
    let cache_shape = [num_pages, P, HKV, D];
    let cache_strides = b12x_core::contiguous_strides(&cache_shape);
    let col = |heads0: usize| base + (heads0 * D * 2) as u64;
    // SAFETY (every view below): inside the buffers allocated above, which outlive the calls;
    // q, k and v are disjoint column ranges of the QKV rows.
    let q_view = || unsafe { TensorMut::from_raw(col(0), &[t, H, D], &row, DType::BF16) };
    let k_mut = || unsafe { TensorMut::from_raw(col(H), &[t, HKV, D], &row, DType::BF16) };
    let k_ref = || unsafe { TensorRef::from_raw(col(H), &[t, HKV, D], &row, DType::BF16) };
    let v_ref = || unsafe { TensorRef::from_raw(col(H + HKV), &[t, HKV, D], &row, DType::BF16) };
    let caches = || unsafe {
        Ok::<_, b12x_core::Error>((
            TensorMut::from_raw(kcp, &cache_shape, &cache_strides, DType::BF16)?,
            TensorMut::from_raw(vcp, &cache_shape, &cache_strides, DType::BF16)?,
        ))
    };
    let mut fused_call = |s: &Arc<CudaStream>| -> Result<()> {
        let (k_cache, v_cache) = caches()?;
        let args = rope_kv_append::Args {
            q: q_view()?,
            k: k_ref()?,
            v: v_ref()?,
            k_cache,
            v_cache,
            k_scale: None,
            v_scale: None,
            page_table: TensorRef::from_slice(&pt, &[b, max_pages])?,
            seq_lens: TensorRef::from_slice(&seq, &[b])?,
            cu_seqlens_q: TensorRef::from_slice(&cu, &[b + 1])?,
            positions: TensorRef::from_slice(&pos, &[t])?,
            cos_sin: None,
            error: err.view()?,
        };
        rope_kv_append::run(&fused, args, Scratch::none(), s)
    };
    fused_call(st)?;
    let fused_t = time_graph(dev, samples(), &mut fused_call)?;
    let mut pair_call = |s: &Arc<CudaStream>| -> Result<()> {
        let args = rope::Args {
            q: q_view()?,
            k: Some(k_mut()?),
            positions: TensorRef::from_slice(&pos, &[t])?,
            cos_sin: None,
            error: err.view()?,
        };
        rope::run(&rope_plan, args, Scratch::none(), s)?;
        let (k_cache, v_cache) = caches()?;
        let args = kv_append::Args {
            k: k_ref()?,
            v: v_ref()?,
            k_cache,
            v_cache,
            k_scale: None,
            v_scale: None,
            page_table: TensorRef::from_slice(&pt, &[b, max_pages])?,
            seq_lens: TensorRef::from_slice(&seq, &[b])?,
            cu_seqlens_q: TensorRef::from_slice(&cu, &[b + 1])?,
            error: err.view()?,
        };
        kv_append::run(&append, args, Scratch::none(), s)
    };
    pair_call(st)?;
    let pair_t = time_graph(dev, samples(), &mut pair_call)?;
    let bytes = (2 * t * H * D * 2 + 2 * t * HKV * D * 2 + 2 * t * HKV * D * 2) as f64;
    report.add(&format!("rope_kv_append/{name}/fused"), "t256", &fused_t, bytes, 0.0);
    report.add(&format!("rope_kv_append/{name}/rope_then_kv_append"), "t256 + t256", &pair_t, bytes, 0.0);
    let faults = err.read(st)?;
    if !faults.is_clear() {
        panic!("{name}: the error word is set: {faults}");
    }
    session.close();
    Ok(())
}
