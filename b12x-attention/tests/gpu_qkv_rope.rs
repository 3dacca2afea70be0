//! GPU validation of `gemm.bf16_gemv`'s rope + KV-append epilogue (`YAct::RopeAppend`, the
//! `_rope` / `_addnorm_rope` entry points) against the pair it replaces (libtest-mimic; listed
//! as ignored without a CUDA device): the plain GEMV pinned to the same config without `_rope`
//! on W in its plain row order, then `attention.rope_kv_append` on its output (q rotated in place,
//! the rotated k and v appended; `cu_seqlens_q = [0, 1, …, M]`). Both are validated against
//! their CPU oracles elsewhere (`gemm`'s `gpu_bf16_gemv`, `gpu_rope_kv_append`), so bitwise
//! equality here carries them over.
//!
//! Every trial pins each `_rope` candidate of M's bucket in turn and requires **bitwise**: y
//! (q rotated, k and v as the projection stores them) equal to the pair's QKV buffer, both caches
//! (filled with random values first: every byte, so nothing outside the new tokens' slots is
//! touched) equal, and the error word equal. Cases: Qwen3-style heads (H 8, Hkv 2, D 128) at
//! M = 1, 3, 8, NeoX and GPT-J, cos / sin computed and from the table, with and without the
//! fused add+RMSNorm x load (`_addnorm_rope`, its residual written as the plain `_addnorm` twin
//! writes it), D = 64, and a batch with faults (a length of 0, a length past the pages, a bad page
//! id, a position outside the table: the same bits and the same untouched slots as the pair).

use b12x_attention::paging::ErrorWord;
use b12x_attention::rope::{self, CosSin, RopeStyle};
use b12x_attention::{kv_append, rope_kv_append};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{run_gpu_trials, GpuTrial};
use b12x_core::{DType, Device, OpPlan, PreparationSession, Scratch, TensorMut, TensorRef};
use b12x_gemm::bf16_gemv::{self, Args, Query, RopeAppend, RopeArgs, XAct, YAct};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

type TrialResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

const K: usize = 512;
const P: usize = 16;
const MAX_PAGES: usize = 4;

#[derive(Clone, Copy, Debug)]
struct Case {
    h: usize,
    hkv: usize,
    d: usize,
    m: usize,
    neox: bool,
    table: bool,
    norm: bool,
    /// norm 1 as a scale (`XAct::AddRmsScale`: the `_addrms_rope` configs against `_addrms`).
    scale: bool,
    faults: bool,
}

fn bf16s(rng: &mut ChaCha8Rng, n: usize, scale: f32) -> Vec<bf16> {
    (0..n).map(|_| bf16::from_f32(rng.random_range(-1.0f32..1.0) * scale)).collect()
}

fn upload<T: b12x_core::cudarc::driver::DeviceRepr + Clone>(
    s: &Arc<CudaStream>,
    v: &[T],
) -> Result<CudaSlice<T>, String> {
    s.clone_htod(v).map_err(err)
}

fn bits(s: &Arc<CudaStream>, v: &CudaSlice<bf16>) -> Result<Vec<u16>, String> {
    Ok(s.clone_dtoh(v).map_err(err)?.iter().map(|x| x.to_bits()).collect())
}

fn same(what: &str, a: &[u16], b: &[u16]) -> TrialResult {
    if let Some(i) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) {
        return Err(format!(
            "{what}: first difference at {i}: {:?} vs {:?} (len {} / {})",
            a.get(i),
            b.get(i),
            a.len(),
            b.len()
        ));
    }
    Ok(())
}

fn check(dev: &Arc<Device>, c: Case) -> TrialResult {
    let s = dev.stream();
    let (h, hkv, d, m) = (c.h, c.hkv, c.d, c.m);
    let n = (h + 2 * hkv) * d;
    let num_pages = m * MAX_PAGES + 3;
    let mut rng = ChaCha8Rng::seed_from_u64((m * 131 + d + usize::from(c.neox) * 7 + usize::from(c.table) * 3) as u64);
    let w_h = bf16s(&mut rng, n * K, 0.05);
    let x_h = bf16s(&mut rng, m * K, 1.0);
    let res_h = bf16s(&mut rng, m * K, 1.0);
    let norm_w_h = bf16s(&mut rng, K, 1.0);
    // The epilogue's row order.
    let order = bf16_gemv::rope_row_order(h, hkv, d, c.neox);
    let w_rope_h = bf16_gemv::reorder_rows(&w_h, K, &order);
    // Pages: a random permutation; lengths 1..=MAX_PAGES·P, position = length − 1 (+ a shift).
    let mut pages: Vec<i32> = (0..num_pages as i32).collect();
    for i in (1..pages.len()).rev() {
        pages.swap(i, rng.random_range(0..=i));
    }
    let mut page_table = vec![0i32; m * MAX_PAGES];
    for (i, p) in page_table.iter_mut().enumerate() {
        *p = pages[i];
    }
    let max_position = MAX_PAGES * P + 8;
    let mut seq_lens: Vec<i32> = (0..m).map(|_| rng.random_range(1..=(MAX_PAGES * P) as i32)).collect();
    let mut positions: Vec<i32> = seq_lens.iter().map(|&l| l - 1 + rng.random_range(0..8)).collect();
    if c.faults {
        seq_lens[0] = 0; // FAULT_QUERY_LAYOUT
        if m > 1 {
            seq_lens[1] = (MAX_PAGES * P + 1) as i32; // FAULT_LENGTH
        }
        if m > 2 {
            let l = seq_lens[2] as usize;
            page_table[2 * MAX_PAGES + (l - 1) / P] = -1; // FAULT_PAGE_ID
        }
        if m > 3 {
            positions[3] = max_position as i32; // FAULT_POSITION
        }
    }
    let cache_h = bf16s(&mut rng, num_pages * P * hkv * d, 2.0);
    let rope_q = rope::Query {
        heads: h,
        kv_heads: hkv,
        head_dim: d,
        rotary_dim: d,
        rotary_offset: 0,
        style: if c.neox { RopeStyle::Neox } else { RopeStyle::Gptj },
        base: 1.0e6,
        yarn: None,
        dtype: DType::BF16,
        max_tokens: 8,
        max_position,
        cos_sin: if c.table { CosSin::Table } else { CosSin::Computed },
    };
    let freqs = rope_q.frequencies();
    let mut inv_freq = [0.0f32; bf16_gemv::ROPE_MAX_PAIRS];
    inv_freq[..d / 2].copy_from_slice(&freqs.inv_freq[..d / 2]);
    let epi = RopeAppend {
        heads: h,
        kv_heads: hkv,
        head_dim: d,
        page_size: P,
        num_pages,
        max_pages: MAX_PAGES,
        max_position,
        neox: c.neox,
        scale: freqs.scale,
        inv_freq: if c.table { None } else { Some(inv_freq) },
    };
    let x_act = if c.norm {
        XAct::AddRmsNorm { eps: 1e-6 }
    } else if c.scale {
        XAct::AddRmsScale { eps: 1e-6 }
    } else {
        XAct::None
    };
    let q = Query {
        n,
        k: K,
        x_dtype: DType::BF16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: 8,
        aligned: true,
        pdl: false,
        x_act,
        y_act: YAct::RopeAppend(epi),
    };
    let fused = bf16_gemv::plan(&q, dev).map_err(err)?;
    let plain = bf16_gemv::plan(&Query { y_act: YAct::None, ..q.clone() }, dev).map_err(err)?;
    let append_q = kv_append::Query {
        kv_heads: hkv,
        head_dim: d,
        page_size: P,
        dtype: DType::BF16,
        cache_dtype: DType::BF16,
        max_batch: 8,
        max_tokens: 8,
        max_pages: MAX_PAGES,
        num_pages,
    };
    let pair =
        rope_kv_append::plan(&rope_kv_append::Query { rope: rope_q.clone(), append: append_q }, dev).map_err(err)?;
    let rope_plan = rope::plan(&rope_q, dev).map_err(err)?;
    let table = upload(s, &rope_plan.cos_sin_table())?;

    let (w, w_rope, x) = (upload(s, &w_h)?, upload(s, &w_rope_h)?, upload(s, &x_h)?);
    let (res, norm_w) = (upload(s, &res_h)?, upload(s, &norm_w_h)?);
    let (pt, lens, pos) = (upload(s, &page_table)?, upload(s, &seq_lens)?, upload(s, &positions)?);
    let cu: Vec<i32> = (0..=m as i32).collect();
    let cu = upload(s, &cu)?;
    let cache_shape = [num_pages, P, hkv, d];
    let bucket = b12x_core::plan::bucket_of(fused.buckets(), m).ok_or("no bucket")?;
    let label = fused.buckets()[bucket].label();
    let configs = fused.candidates(bucket);
    if configs.is_empty() || configs.iter().any(|id| !id.contains("_rope_")) {
        return Err(format!("unexpected candidates {configs:?}"));
    }
    let scratch_bytes = fused.scratch_layout().total_bytes().max(plain.scratch_layout().total_bytes()).max(16);
    let mut scratch = s.alloc_zeros::<u8>(scratch_bytes).map_err(err)?;
    for id in configs {
        let twin = id.replace("_rope", "");
        let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
        session.pin(&fused, &label, &id);
        session.pin(&plain, &label, &twin);
        session.prepare(&[&fused, &plain, &pair]).map_err(err)?;
        // The pair: plain GEMV (W in plain order), then rope_kv_append on its output.
        let mut y_ref = s.alloc_zeros::<bf16>(m * n).map_err(err)?;
        let (mut kc_ref, mut vc_ref) = (upload(s, &cache_h)?, upload(s, &cache_h)?);
        let mut ro_ref = s.alloc_zeros::<bf16>(m * K).map_err(err)?;
        let mut err_ref = ErrorWord::new(s).map_err(err)?;
        {
            // The folded norm's tensors: `add_norm` (exact) or `rms` (as a scale).
            let (an, rms) = if c.norm || c.scale {
                let residual = TensorRef::from_slice(&res, &[m, K]).map_err(err)?;
                let residual_out = TensorMut::from_slice(&mut ro_ref, &[m, K]).map_err(err)?;
                if c.norm {
                    let norm_w = TensorRef::from_slice(&norm_w, &[K]).map_err(err)?;
                    (Some(bf16_gemv::AddNorm { residual, residual_out, norm_w }), None)
                } else {
                    (None, Some(bf16_gemv::RmsArgs::Add { residual, residual_out }))
                }
            } else {
                (None, None)
            };
            let args = Args {
                x: TensorRef::from_slice(&x, &[m, K]).map_err(err)?,
                w: TensorRef::from_slice(&w, &[n, K]).map_err(err)?,
                bias: None,
                y: TensorMut::from_slice(&mut y_ref, &[m, n]).map_err(err)?,
                add_norm: an,
                rope: None,
                rms,
            };
            bf16_gemv::run(&plain, args, Scratch::from_slice(&mut scratch), s).map_err(err)?;
        }
        {
            let mut parts = TensorMut::from_slice(&mut y_ref, &[m, n])
                .map_err(err)?
                .split_last(&[h * d, hkv * d, hkv * d])
                .map_err(err)?;
            let v = parts.pop().ok_or("v")?.unflatten_last(&[hkv, d]).map_err(err)?;
            let k = parts.pop().ok_or("k")?.unflatten_last(&[hkv, d]).map_err(err)?;
            let qv = parts.pop().ok_or("q")?.unflatten_last(&[h, d]).map_err(err)?;
            let args = rope_kv_append::Args {
                q: qv,
                k: k.as_ref(),
                v: v.as_ref(),
                k_cache: TensorMut::from_slice(&mut kc_ref, &cache_shape).map_err(err)?,
                v_cache: TensorMut::from_slice(&mut vc_ref, &cache_shape).map_err(err)?,
                k_scale: None,
                v_scale: None,
                page_table: TensorRef::from_slice(&pt, &[m, MAX_PAGES]).map_err(err)?,
                seq_lens: TensorRef::from_slice(&lens, &[m]).map_err(err)?,
                cu_seqlens_q: TensorRef::from_slice(&cu, &[m + 1]).map_err(err)?,
                positions: TensorRef::from_slice(&pos, &[m]).map_err(err)?,
                cos_sin: if c.table {
                    Some(TensorRef::from_slice(&table, &[max_position, d]).map_err(err)?)
                } else {
                    None
                },
                error: err_ref.view().map_err(err)?,
            };
            rope_kv_append::run(&pair, args, Scratch::none(), s).map_err(err)?;
        }
        // The fused call: W in the epilogue's order.
        let mut y = s.alloc_zeros::<bf16>(m * n).map_err(err)?;
        let (mut kc, mut vc) = (upload(s, &cache_h)?, upload(s, &cache_h)?);
        let mut ro = s.alloc_zeros::<bf16>(m * K).map_err(err)?;
        let mut err_fused = ErrorWord::new(s).map_err(err)?;
        {
            // The folded norm's tensors: `add_norm` (exact) or `rms` (as a scale).
            let (an, rms) = if c.norm || c.scale {
                let residual = TensorRef::from_slice(&res, &[m, K]).map_err(err)?;
                let residual_out = TensorMut::from_slice(&mut ro, &[m, K]).map_err(err)?;
                if c.norm {
                    let norm_w = TensorRef::from_slice(&norm_w, &[K]).map_err(err)?;
                    (Some(bf16_gemv::AddNorm { residual, residual_out, norm_w }), None)
                } else {
                    (None, Some(bf16_gemv::RmsArgs::Add { residual, residual_out }))
                }
            } else {
                (None, None)
            };
            let args = Args {
                x: TensorRef::from_slice(&x, &[m, K]).map_err(err)?,
                w: TensorRef::from_slice(&w_rope, &[n, K]).map_err(err)?,
                bias: None,
                y: TensorMut::from_slice(&mut y, &[m, n]).map_err(err)?,
                add_norm: an,
                rope: Some(RopeArgs {
                    positions: TensorRef::from_slice(&pos, &[m]).map_err(err)?,
                    seq_lens: TensorRef::from_slice(&lens, &[m]).map_err(err)?,
                    page_table: TensorRef::from_slice(&pt, &[m, MAX_PAGES]).map_err(err)?,
                    cos_sin: if c.table {
                        Some(TensorRef::from_slice(&table, &[max_position, d]).map_err(err)?)
                    } else {
                        None
                    },
                    k_cache: TensorMut::from_slice(&mut kc, &cache_shape).map_err(err)?,
                    v_cache: TensorMut::from_slice(&mut vc, &cache_shape).map_err(err)?,
                    error: err_fused.view().map_err(err)?,
                }),
                rms,
            };
            bf16_gemv::run(&fused, args, Scratch::from_slice(&mut scratch), s).map_err(err)?;
        }
        s.synchronize().map_err(err)?;
        same(&format!("y [{id}]"), &bits(s, &y)?, &bits(s, &y_ref)?)?;
        same(&format!("k_cache [{id}]"), &bits(s, &kc)?, &bits(s, &kc_ref)?)?;
        same(&format!("v_cache [{id}]"), &bits(s, &vc)?, &bits(s, &vc_ref)?)?;
        if c.norm || c.scale {
            same(&format!("residual_out [{id}]"), &bits(s, &ro)?, &bits(s, &ro_ref)?)?;
        }
        let (ef, er) = (err_fused.read(s).map_err(err)?, err_ref.read(s).map_err(err)?);
        if ef.0 != er.0 {
            return Err(format!("error word [{id}]: fused {:#x}, pair {:#x}", ef.0, er.0));
        }
        if c.faults != (ef.0 != 0) {
            return Err(format!("error word [{id}]: {:#x} with faults {}", ef.0, c.faults));
        }
        session.close();
    }
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    let base = Case { h: 8, hkv: 2, d: 128, m: 1, neox: true, table: false, norm: false, scale: false, faults: false };
    for m in [1, 3, 8] {
        for (neox, table, norm) in
            [(true, false, false), (true, true, false), (false, false, false), (true, false, true)]
        {
            let c = Case { m, neox, table, norm, ..base };
            let name = format!(
                "qkv_rope::{}_{}{}::m{m}",
                if neox { "neox" } else { "gptj" },
                if table { "table" } else { "computed" },
                if norm { "_addnorm" } else { "" }
            );
            trials.push(GpuTrial::new(name, move |dev| check(dev, c)));
        }
    }
    trials.push(GpuTrial::new("qkv_rope::d64::m5", move |dev| check(dev, Case { d: 64, h: 4, m: 5, ..base })));
    trials.push(GpuTrial::new("qkv_rope::faults::m6", move |dev| check(dev, Case { m: 6, faults: true, ..base })));
    trials.push(GpuTrial::new("qkv_rope::faults_table_addnorm::m4", move |dev| {
        check(dev, Case { m: 4, faults: true, table: true, norm: true, ..base })
    }));
    // Norm 1 as a scale (`_addrms_rope` against `_addrms`, then rope_kv_append).
    for m in [1, 3, 8] {
        trials.push(GpuTrial::new(format!("qkv_rope::neox_computed_addrms::m{m}"), move |dev| {
            check(dev, Case { m, scale: true, ..base })
        }));
    }
    trials.push(GpuTrial::new("qkv_rope::faults_table_addrms::m4", move |dev| {
        check(dev, Case { m: 4, faults: true, table: true, scale: true, ..base })
    }));
    run_gpu_trials(trials)
}
