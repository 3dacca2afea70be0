//! Benchmark of `attention.rope_paged` against the two launches it replaces, with Qwen3-8B's
//! heads (H 32, Hkv 8, D 128, NeoX over the whole head, cos/sin computed), P = 16, pages
//! scattered, a BF16 cache, PDL plans, with the method of DESIGN.md §7 (graph replays, L2 flushed
//! before each sample, medians of `bench::samples()`).
//!
//! - `rope_paged/decode_B{b}_ctx{c}/{fused,rope_kv_append_then_paged}`: one new token per
//!   request, B ∈ {1, 8, 64}, contexts 2k and 8k (B = 64: 2k): the fused launch, and
//!   `attention.rope_kv_append` then `attention.paged` (same `PlanOptions`) in one graph. Each
//!   graph holds 8 calls back to back (a decode graph's steady state; the row is per call), on
//!   8 copies of the inputs and caches, as consecutive layers would.
//!
//! Bytes: the batch's cached K and V read (the read ceiling's bytes), plus q, the new k and v
//! rows and their slots. Results are checked bitwise against the pair by
//! `tests/gpu_rope_paged.rs`.
//!
//! Run: `cargo bench -p b12x-attention --bench rope_paged` (rows go to
//! `bench-results/rope_paged.{json,md}`).

use b12x_attention::paging::ErrorWord;
use b12x_attention::rope::{self, CosSin, RopeStyle};
use b12x_attention::{kv_append, paged, rope_kv_append, rope_paged};
use b12x_core::bench::{samples, selected, time_graph, BenchReport};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
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
/// Calls per graph (each on its own copy of the inputs).
const CALLS: usize = 8;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("rope_paged bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let mut report = BenchReport::new("rope_paged", &dev)?;
    report.note(
        "Qwen3-8B heads (H 32, Hkv 8, D 128, NeoX, cos/sin computed), P = 16, pages scattered, BF16 cache, PDL \
         plans, 8 calls per graph on 8 copies (row = per call). fused: attention.rope_paged; \
         rope_kv_append_then_paged: attention.rope_kv_append then attention.paged. Bytes = cached K and V read + q, \
         new k, v and their slots.",
    );
    for (b, ctx) in [(1, 2048), (1, 8192), (8, 2048), (8, 8192), (64, 2048)] {
        let name = format!("decode_B{b}_ctx{ctx}");
        if selected(&format!("rope_paged/{name}")) {
            bench_case(&dev, &mut report, &name, b, ctx)?;
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}

/// One copy of a call's buffers.
struct Bufs {
    qkv: CudaSlice<u8>,
    kc: CudaSlice<u8>,
    vc: CudaSlice<u8>,
    o: CudaSlice<u8>,
    scratch: CudaSlice<u8>,
    err: ErrorWord,
}

fn bench_case(dev: &Arc<Device>, report: &mut BenchReport, name: &str, b: usize, ctx: usize) -> Result<()> {
    let max_pages = ctx.div_ceil(P);
    let num_pages = b * max_pages;
    let attention = paged::Query {
        heads: H,
        kv_heads: HKV,
        head_dim: D,
        page_size: P,
        q_dtype: DType::BF16,
        kv_dtype: DType::BF16,
        scale: 1.0 / (D as f32).sqrt(),
        window_left: -1,
        sinks: false,
        max_batch: b,
        max_tokens: b,
        max_q_len: 1,
        max_pages,
        num_pages,
    };
    let rope_q = rope::Query {
        heads: H,
        kv_heads: HKV,
        head_dim: D,
        rotary_dim: D,
        rotary_offset: 0,
        style: RopeStyle::Neox,
        base: 1e6,
        yarn: None,
        dtype: DType::BF16,
        max_tokens: b,
        max_position: max_pages * P,
        cos_sin: CosSin::Computed,
    };
    let append_q = kv_append::Query {
        kv_heads: HKV,
        head_dim: D,
        page_size: P,
        dtype: DType::BF16,
        cache_dtype: DType::BF16,
        max_batch: b,
        max_tokens: b,
        max_pages,
        num_pages,
    };
    let opts = paged::PlanOptions { pdl: true, ..Default::default() };
    let fused =
        rope_paged::plan_with(&rope_paged::Query { rope: rope_q.clone(), attention: attention.clone() }, dev, opts)?;
    let pair = rope_kv_append::plan(&rope_kv_append::Query { rope: rope_q, append: append_q }, dev)?.with_pdl(true);
    let attn = paged::plan_with(&attention, dev, opts)?;
    let mut session = PreparationSession::new(dev)?;
    session.prepare(&[&fused, &pair, &attn])?;
    let st = dev.stream();
    let cols = (H + 2 * HKV) * D;
    let cache_bytes = num_pages * P * HKV * D * 2;
    let scratch_bytes = fused.scratch_layout().total_bytes().max(attn.scratch_layout().total_bytes()).max(1);
    let mut bufs = Vec::new();
    for i in 0..CALLS {
        bufs.push(Bufs {
            qkv: random_bf16_bytes(st, 3 + i as u64, b * cols)?,
            kc: random_bf16_bytes(st, 100 + i as u64, cache_bytes / 2)?,
            vc: random_bf16_bytes(st, 200 + i as u64, cache_bytes / 2)?,
            o: st.alloc_zeros::<u8>(b * H * D * 2)?,
            scratch: st.alloc_zeros::<u8>(scratch_bytes)?,
            err: ErrorWord::new(st)?,
        });
    }
    let mut pages: Vec<i32> = (0..num_pages as i32).collect();
    pages.shuffle(&mut ChaCha8Rng::seed_from_u64(5));
    let pt = st.clone_htod(&pages)?;
    let seq = st.clone_htod(&vec![ctx as i32; b])?;
    let cu = st.clone_htod(&(0..=b as i32).collect::<Vec<_>>())?;
    let pos = st.clone_htod(&vec![ctx as i32 - 1; b])?;
    let row = [cols as isize, D as isize, 1];
    let cache_shape = [num_pages, P, HKV, D];
    let cache_strides = b12x_core::contiguous_strides(&cache_shape);
    // The views of copy i (raw: the graph closures re-create them per call).
    let ptrs: Vec<(u64, u64, u64, u64)> = bufs
        .iter_mut()
        .map(|x| -> Result<_> {
            Ok((
                TensorRef::from_slice(&x.qkv, &[x.qkv.len()])?.ptr(),
                TensorMut::from_slice(&mut x.kc, &[cache_bytes])?.ptr(),
                TensorMut::from_slice(&mut x.vc, &[cache_bytes])?.ptr(),
                TensorMut::from_slice(&mut x.o, &[b * H * D * 2])?.ptr(),
            ))
        })
        .collect::<Result<_>>()?;
    // SAFETY (every view below): inside copy i's buffers, which outlive the calls; q, k and v are
    // disjoint column ranges of its QKV rows.
    let qkv_col = |i: usize, heads0: usize| ptrs[i].0 + (heads0 * D * 2) as u64;
    let q_ref = |i: usize| unsafe { TensorRef::from_raw(qkv_col(i, 0), &[b, H, D], &row, DType::BF16) };
    let q_mut = |i: usize| unsafe { TensorMut::from_raw(qkv_col(i, 0), &[b, H, D], &row, DType::BF16) };
    let k_ref = |i: usize| unsafe { TensorRef::from_raw(qkv_col(i, H), &[b, HKV, D], &row, DType::BF16) };
    let v_ref = |i: usize| unsafe { TensorRef::from_raw(qkv_col(i, H + HKV), &[b, HKV, D], &row, DType::BF16) };
    let kc = |i: usize| unsafe { TensorMut::from_raw(ptrs[i].1, &cache_shape, &cache_strides, DType::BF16) };
    let vc = |i: usize| unsafe { TensorMut::from_raw(ptrs[i].2, &cache_shape, &cache_strides, DType::BF16) };
    let kc_ref = |i: usize| unsafe { TensorRef::from_raw(ptrs[i].1, &cache_shape, &cache_strides, DType::BF16) };
    let vc_ref = |i: usize| unsafe { TensorRef::from_raw(ptrs[i].2, &cache_shape, &cache_strides, DType::BF16) };
    let o = |i: usize| unsafe {
        TensorMut::from_raw(ptrs[i].3, &[b, H, D], &b12x_core::contiguous_strides(&[b, H, D]), DType::BF16)
    };
    let batch = || -> Result<_> {
        Ok((
            TensorRef::from_slice(&pt, &[b, max_pages])?,
            TensorRef::from_slice(&seq, &[b])?,
            TensorRef::from_slice(&cu, &[b + 1])?,
            TensorRef::from_slice(&pos, &[b])?,
        ))
    };
    let scratch_ptrs: Vec<u64> = bufs
        .iter_mut()
        .map(|x| TensorMut::from_slice(&mut x.scratch, &[scratch_bytes]).map(|t| t.ptr()))
        .collect::<Result<_>>()?;
    let err_views = |i: usize, bufs: &mut Vec<Bufs>| -> Result<TensorMut<'static>> {
        let p = bufs[i].err.view()?.ptr();
        // SAFETY: the error word of copy i, alive for the bench.
        unsafe { TensorMut::from_raw(p, &[1], &[1], DType::I32) }
    };
    let scratch = |i: usize| -> Scratch<'static> {
        // SAFETY: copy i's scratch, alive for the bench.
        unsafe { Scratch::from_raw(scratch_ptrs[i], scratch_bytes) }
    };
    let mut errs = Vec::new();
    for i in 0..CALLS {
        errs.push(err_views(i, &mut bufs)?);
    }
    let mut fused_calls = |s: &Arc<CudaStream>| -> Result<()> {
        for (i, e) in errs.iter_mut().enumerate() {
            let (page_table, seq_lens, cu_seqlens_q, positions) = batch()?;
            let args = rope_paged::Args {
                q: q_ref(i)?,
                k: k_ref(i)?,
                v: v_ref(i)?,
                k_cache: kc(i)?,
                v_cache: vc(i)?,
                k_scale: None,
                v_scale: None,
                sinks: None,
                page_table,
                seq_lens,
                cu_seqlens_q,
                positions,
                cos_sin: None,
                o: o(i)?,
                lse: None,
                error: e.reborrow(),
            };
            rope_paged::run(&fused, args, scratch(i), s)?;
        }
        Ok(())
    };
    fused_calls(st)?;
    let fused_t = time_graph(dev, samples(), &mut fused_calls)?;
    let mut pair_calls = |s: &Arc<CudaStream>| -> Result<()> {
        for (i, e) in errs.iter_mut().enumerate() {
            let (page_table, seq_lens, cu_seqlens_q, positions) = batch()?;
            let args = rope_kv_append::Args {
                q: q_mut(i)?,
                k: k_ref(i)?,
                v: v_ref(i)?,
                k_cache: kc(i)?,
                v_cache: vc(i)?,
                k_scale: None,
                v_scale: None,
                page_table,
                seq_lens,
                cu_seqlens_q,
                positions,
                cos_sin: None,
                error: e.reborrow(),
            };
            rope_kv_append::run(&pair, args, Scratch::none(), s)?;
            let (page_table, seq_lens, cu_seqlens_q, _) = batch()?;
            let args = paged::Args {
                q: q_ref(i)?,
                k_cache: kc_ref(i)?,
                v_cache: vc_ref(i)?,
                k_scale: None,
                v_scale: None,
                sinks: None,
                page_table,
                seq_lens,
                cu_seqlens_q,
                o: o(i)?,
                lse: None,
                error: e.reborrow(),
            };
            paged::run(&attn, args, scratch(i), s)?;
        }
        Ok(())
    };
    pair_calls(st)?;
    let pair_t = time_graph(dev, samples(), &mut pair_calls)?;
    let per_call = |t: &[f64]| t.iter().map(|x| x / CALLS as f64).collect::<Vec<_>>();
    let bytes = (2 * b * (ctx - 1) * HKV * D * 2 + b * H * D * 2 + 4 * b * HKV * D * 2) as f64;
    let a = fused.attention();
    let variant = format!(
        "{} stages, {} warps, {} splits (cluster {})",
        a.stages(),
        a.warps(),
        a.max_splits(),
        a.cluster_merge()
    );
    report.add(&format!("rope_paged/{name}/fused"), &variant, &per_call(&fused_t), bytes, 0.0);
    report.add(&format!("rope_paged/{name}/rope_kv_append_then_paged"), "per call", &per_call(&pair_t), bytes, 0.0);
    for x in &bufs {
        let faults = x.err.read(st)?;
        if !faults.is_clear() {
            panic!("{name}: the error word is set: {faults}");
        }
    }
    session.close();
    Ok(())
}
