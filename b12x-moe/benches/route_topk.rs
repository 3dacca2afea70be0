//! Benchmark of `moe.route_topk` over T ∈ {1, 8, 64, 4096} for the routers of the MoE issue's
//! models (DeepSeek-V4-Flash: sqrtsoftplus + bias, 256 experts, top-6; its hash layers;
//! Qwen3-30B-A3B: softmax, 128, top-8; gpt-oss-120b: softmax, 128, top-4), method of DESIGN.md
//! §7 (graph replay, L2 flushed, median). Bytes: the logits read and the ids and weights written
//! (plus the bias / the token ids and table rows read). Before timing, the call's result is
//! checked against the CPU oracle (selection through `check_selection`, weights within 1e-5).
//! No peer row (a decode router is launch-bound: its time is what matters, next to the fused
//! MoE that follows it). `B12X_BENCH_QUICK=1` keeps T ∈ {1, 4096}.
//!
//! Run: `cargo bench -p b12x-moe --bench route_topk` (rows go to
//! `bench-results/route_topk.{json,md}`).

use b12x_core::bench::{quick, samples, selected, time_graph, BenchReport};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::testing::{gpu, uniform};
use b12x_core::{PreparationSession, Result, Scratch, TensorMut, TensorRef};
use b12x_moe::route_topk::reference::{self, check_selection, keys, scores};
use b12x_moe::route_topk::{self, Args, Query, Router, Selection};
use std::sync::Arc;

const TOKENS: [usize; 4] = [1, 8, 64, 4096];
const QUICK_TOKENS: [usize; 2] = [1, 4096];

/// The call's outputs.
struct Out {
    ids: CudaSlice<i32>,
    w: CudaSlice<f32>,
    error: CudaSlice<i32>,
}

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("route_topk bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let routers = [
        ("deepseek_v4_flash", Router::deepseek_v4(256, 6, None)),
        ("deepseek_v4_hash", Router::deepseek_v4(256, 6, Some(129280))),
        ("qwen3_30b_a3b", Router::qwen3_moe(128, 8)),
        ("gpt_oss_120b", Router::gpt_oss(128, 4)),
    ];
    let mut report = BenchReport::new("route_topk", &dev)?;
    for (name, router) in routers {
        for t in TOKENS.into_iter().filter(|t| !quick() || QUICK_TOKENS.contains(t)) {
            let case = format!("route_topk/{name}/T{t}");
            if !selected(&case) {
                continue;
            }
            let s = dev.stream();
            let (e, k) = (router.experts, router.top_k);
            let logits_h = uniform(t as u64, t * e, -6.0, 6.0);
            let bias_h = uniform(7, e, -0.3, 0.3);
            let (vocab, hash) = match router.selection {
                Selection::Hash { vocab } => (vocab, true),
                Selection::TopK { .. } => (1, false),
            };
            let biased = matches!(router.selection, Selection::TopK { bias: true });
            let tok_h: Vec<i32> = (0..t).map(|i| (i * 7919 % vocab) as i32).collect();
            let table_h: Vec<i32> = (0..vocab * k).map(|i| (i * 31 % e) as i32).collect();
            let logits = s.clone_htod(&logits_h)?;
            let bias = s.clone_htod(&bias_h)?;
            let tok = s.clone_htod(&tok_h)?;
            let table = s.clone_htod(&table_h)?;
            let mut out = Out { ids: s.alloc_zeros(t * k)?, w: s.alloc_zeros(t * k)?, error: s.alloc_zeros(1)? };
            let plan = route_topk::plan(&Query { router, max_tokens: t }, &dev)?;
            let mut session = PreparationSession::new(&dev)?;
            let config = session.prepare(&[&plan])?.last().map(|x| x.config.clone()).unwrap_or_default();
            let call = |o: &mut Out, st: &Arc<CudaStream>| -> Result<()> {
                let args = Args {
                    logits: TensorRef::from_slice(&logits, &[t, e])?,
                    bias: biased.then(|| TensorRef::from_slice(&bias, &[e])).transpose()?,
                    token_ids: hash.then(|| TensorRef::from_slice(&tok, &[t])).transpose()?,
                    tid2eid: hash.then(|| TensorRef::from_slice(&table, &[vocab, k])).transpose()?,
                    ids: TensorMut::from_slice(&mut o.ids, &[t, k])?,
                    weights: TensorMut::from_slice(&mut o.w, &[t, k])?,
                    error: TensorMut::from_slice(&mut o.error, &[1])?,
                };
                route_topk::run(&plan, args, Scratch::none(), st)
            };
            call(&mut out, s)?;
            let (got_ids, got_w) = (s.clone_dtoh(&out.ids)?, s.clone_dtoh(&out.w)?);
            for (row, logit_row) in logits_h.chunks(e).enumerate() {
                let sc = scores(router.score, logit_row);
                let got = &got_ids[row * k..][..k];
                if !hash {
                    let ky = keys(&sc, biased.then_some(&bias_h[..]));
                    let tol = 16.0 * f32::EPSILON * ky.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                    if let Err(m) = check_selection(&ky, got, tol) {
                        panic!("{case}: token {row}: {m}");
                    }
                }
                for (&g, &o) in got_w[row * k..][..k].iter().zip(&reference::weights(&router, &sc, got)) {
                    assert!((g - o).abs() <= 1e-5 * o.abs() + 1e-30, "{case}: token {row}: weight {g} vs {o}");
                }
            }
            let times = time_graph(&dev, samples(), |st| call(&mut out, st))?;
            let extra = if hash {
                t * 4 + t * k * 4
            } else if biased {
                e * 4
            } else {
                0
            };
            let bytes = (t * e * 4 + t * k * 8 + extra) as f64;
            report.add(&case, &config, &times, bytes, 0.0);
            session.close();
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}
