//! Benchmark of `attention.rope` (DESIGN.md §7: one call per graph replay, L2 flushed before each
//! sample, medians): Qwen3-8B heads (H 32, Hkv 8, D 128, NeoX, θ 1e6) rotated in place in a fused
//! QKV buffer, cos/sin computed in the kernel or read from the table, and DeepSeek-V4's form
//! (GPT-J pairs, the last 64 of 512 dims, YaRN) with H 64, Hkv 1; T ∈ {1, 64, 4096, 32768},
//! positions random below 32k.
//!
//! Bytes: the rotated elements of q and k read and written, the positions, and (table mode) the
//! table rows read (R · 4 bytes per token). `read_probe` rows: the read kernel on the same byte
//! count. `B12X_BENCH_QUICK=1` drops T = 32768.
//!
//! Run: `cargo bench -p b12x-attention --bench rope` (rows go to `bench-results/rope.{json,md}`).

use b12x_attention::paging::ErrorWord;
use b12x_attention::rope::{self, Args, CosSin, Query, RopeStyle, Yarn};
use b12x_core::bench::{add_read_probe, samples, selected, time_graph, BenchReport};
use b12x_core::testing::{gpu, random_bf16_bytes};
use b12x_core::{DType, Device, PreparationSession, Result, Scratch, TensorMut, TensorRef};
use std::sync::Arc;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("rope bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let mut report = BenchReport::new("rope", &dev)?;
    report.note(
        "attention.rope in place on a fused QKV buffer. qwen3: H 32, Hkv 8, D 128, NeoX, θ 1e6; v4: H 64, Hkv 1, \
         D 512, GPT-J pairs on the last 64 dims, YaRN (θ 160000, factor 16). Bytes = rotated q/k elements read + \
         written, positions, table rows (table mode).",
    );
    let tokens: &[usize] = if b12x_core::bench::quick() { &[1, 64, 4096] } else { &[1, 64, 4096, 32768] };
    for &t in tokens {
        for cos_sin in [CosSin::Computed, CosSin::Table] {
            let qwen = Query {
                heads: 32,
                kv_heads: 8,
                head_dim: 128,
                rotary_dim: 128,
                rotary_offset: 0,
                style: RopeStyle::Neox,
                base: 1e6,
                yarn: None,
                dtype: DType::BF16,
                max_tokens: t,
                max_position: 32768,
                cos_sin,
            };
            let v4 = Query {
                heads: 64,
                kv_heads: 1,
                head_dim: 512,
                rotary_dim: 64,
                rotary_offset: 448,
                style: RopeStyle::Gptj,
                base: 160000.0,
                yarn: Some(Yarn::deepseek_v4()),
                ..qwen.clone()
            };
            for (name, q) in [("qwen3", qwen), ("v4", v4)] {
                let mode = if cos_sin == CosSin::Table { "table" } else { "computed" };
                let case = format!("rope/{name}/{mode}/T{t}");
                if selected(&case) {
                    bench_case(&dev, &mut report, &case, &q, t)?;
                }
            }
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}

fn bench_case(dev: &Arc<Device>, report: &mut BenchReport, case: &str, q: &Query, t: usize) -> Result<()> {
    let plan = rope::plan(q, dev)?;
    let mut session = PreparationSession::new(dev)?;
    session.prepare(&[&plan])?;
    let st = dev.stream();
    let (h, hkv, d) = (q.heads, q.kv_heads, q.head_dim);
    let cols = (h + 2 * hkv) * d;
    let buf = random_bf16_bytes(st, 3, t * cols)?;
    let pos: Vec<i32> = (0..t).map(|i| ((i as u64 * 2654435761) % q.max_position as u64) as i32).collect();
    let pos = st.clone_htod(&pos)?;
    let table = if q.cos_sin == CosSin::Table { Some(st.clone_htod(&plan.cos_sin_table())?) } else { None };
    let mut err = ErrorWord::new(st)?;
    let ptr = TensorRef::from_slice(&buf, &[buf.len()])?.ptr();
    let time = time_graph(dev, samples(), |s| {
        // SAFETY: views inside `buf` (t · cols bf16 values), which outlives the graph.
        let whole = unsafe { TensorMut::from_raw(ptr, &[t, cols], &[cols as isize, 1], DType::BF16)? };
        let mut parts = whole.split_last(&[h * d, hkv * d, hkv * d])?;
        parts.truncate(2);
        let k = parts.pop().map(|k| k.unflatten_last(&[hkv, d])).transpose()?;
        let qv = parts.pop().map(|x| x.unflatten_last(&[h, d])).transpose()?;
        let qv = qv.ok_or(b12x_core::Error::InvalidQuery { op: "bench", field: "q", reason: "missing".into() })?;
        let args = Args {
            q: qv,
            k,
            positions: TensorRef::from_slice(&pos, &[t])?,
            cos_sin: match &table {
                Some(tab) => Some(TensorRef::from_slice(tab, &[q.max_position, q.rotary_dim])?),
                None => None,
            },
            error: err.view()?,
        };
        rope::run(&plan, args, Scratch::none(), s)
    })?;
    let table_bytes = if q.cos_sin == CosSin::Table { t * q.rotary_dim * 4 } else { 0 };
    let bytes = 2 * t * (h + hkv) * q.rotary_dim * 2 + 4 * t + table_bytes;
    report.add(case, "t256", &time, bytes as f64, 0.0);
    if t >= 4096 {
        add_read_probe(report, dev, &format!("{case}/read_probe"), bytes)?;
    }
    session.close();
    Ok(())
}
