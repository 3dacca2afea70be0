//! Benchmark of `moe.fused_moe` — packed experts (`fused_moe/…` rows: the decode path for T ≤ 16,
//! the grouped path above) and, as the baseline, the simple path (`fused_moe_simple/…`, slow by
//! design; T = 1 only) — on the MoE issue's shapes: DeepSeek-V4-Flash TP2 (W4A8 MX, SiLU limit
//! 10), gpt-oss-120b (W4A16 MXFP4, SwiGLU-OAI 7) and Qwen3-30B-A3B (W4A16 NVFP4), T ∈ {1, 2, 8,
//! 64, 512, 4096}, each token on k distinct random experts; method of DESIGN.md §7 (graph
//! replay, L2 flushed, median). FLOPs: 2 · T · k · (FC1 rows · Hd + Hd · I), the expert GEMMs
//! only, for the large-T rows' TFLOP/s (issue 7's measure there: against the `mma.sync`
//! ceiling, ~630 TFLOP/s BF16 on the H200).
//!
//! Bytes (issue 7's measure): the weights of the **distinct** experts the routing touches (FC1
//! and FC2 codes and scales, NVFP4 encode scales; the packed layout's zero padding rows are not
//! counted), plus x read and y written. Each case is
//! followed by `read_probe/<case>`, the project's read kernel on as many bytes (the size-matched
//! ceiling). Before timing, token 0's output is checked against the CPU oracle (cosine
//! difference ≤ 2e-4). `B12X_BENCH_QUICK=1` keeps T ∈ {1, 8}.
//!
//! `fused_moe_separate/<case>` (T ≤ 16, the decode GEMV's row limit): the GEMMs the op replaces —
//! per touched expert, `gemm.blockscaled`'s decode GEMV for FC1 on its tokens' rows, then for FC2
//! (x quantized to MXFP8 in the call for W4A8; W4A16 otherwise, the NVFP4 recipe's activation
//! quantization left out), all back to back in one graph: routing, gathering, the activation and
//! the combine are not in it, so it is a lower bound for an unfused layer.
//! `fused_moe_tile_wg/<case>`, `fused_moe_tile_mma/<case>`, `fused_moe_gemv/<case>` (T > 16): the
//! grouped paths and tile kernels forced with `PlanOptions` — the tiled path from T = 17 with
//! SM90's wgmma tile (128-row slots, no tail slots) or the mma.sync tile (64-row slots, the kernel of every
//! other architecture, SM90's below `Query::wgmma_from`), the grouped GEMV up to the T·k its
//! route holds — each beside the default row where it differs from it and from the rows before.
//! `fused_moe_tile_wg64/<case>` (SM90, T > 16): the 64-row wgmma tile (`TileKernel::Wgmma64`, the
//! mma.sync tile's 64-row slots at wgmma's N = 64) forced at every tiled T;
//! `fused_moe_tile_wg32/<case>` the same at N = 32 (`TileKernel::Wgmma32`, 32-row slots).
//! `fused_moe_notail/<case>` (SM90, where the default has tail slots: T from `Query::wgmma_from`):
//! the default plan with `PlanOptions::no_tail_slots` (every expert's last rows in a 128-row
//! slot of the 128-row tile instead of a 64-row tail slot of the 64-row one).
//! `fused_moe_fused_act/<case>` (SM90, where `PlanOptions::fused_activation` takes hold: W4A16,
//! gated, the wgmma tiles — config `…_fact`): the default plan with FC1's epilogue applying the
//! activation (no activation kernel).
//! `B12X_MOE_WG_STAGES=2,3` (SM90) adds `fused_moe_tile_wg_s<n>/<case>` where the default takes
//! the wgmma tile: forced with an n-stage ring (2..4) instead of the default four.
//! `B12X_BENCH_FILTER` selects cases by substring (e.g. `/T4096`); `B12X_MOE_TOKENS=64,512`
//! replaces the token counts.
//!
//! Run: `cargo bench -p b12x-moe --bench fused_moe` (rows go to `bench-results/fused_moe.{json,md}`).

use b12x_core::bench::{add_read_probe, quick, samples, selected, time_graph, BenchReport};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{gpu, uniform};
use b12x_core::{DType, PreparationSession, Result, Scratch, TensorMut, TensorRef};
use b12x_gemm::blockscaled::gemv::{self as bsgemv, XFormat, XQuant};
use b12x_gemm::blockscaled::{pack, Weight};
use b12x_moe::fused_moe::reference::{self, ActScales, Experts};
use b12x_moe::fused_moe::{
    self, ActScaleArgs, Args, ExpertWeights, Fp4, PackedExperts, Path, PlanOptions, Query, Recipe, Routing, Shape,
    TileKernel, WeightArgs, WeightLayout, GROUPED_ABOVE,
};
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const TOKENS: [usize; 6] = [1, 2, 8, 64, 512, 4096];
const QUICK_TOKENS: [usize; 2] = [1, 8];
/// What a packed row runs: (T, path, tile kernel, tail kernel, activation fused into FC1).
type RowKey = (usize, Path, Option<TileKernel>, Option<TileKernel>, bool);
/// `B12X_MOE_WG_STAGES`'s ring depths and their rows.
const WG_STAGE_ROWS: [(usize, &str); 3] =
    [(2, "fused_moe_tile_wg_s2"), (3, "fused_moe_tile_wg_s3"), (4, "fused_moe_tile_wg_s4")];

/// Device copies of everything a call reads or writes.
struct Bufs {
    x: CudaSlice<bf16>,
    ids: CudaSlice<i32>,
    w: CudaSlice<f32>,
    w1: (CudaSlice<u8>, CudaSlice<u8>, CudaSlice<f32>),
    w2: (CudaSlice<u8>, CudaSlice<u8>, CudaSlice<f32>),
    a: (CudaSlice<f32>, CudaSlice<f32>),
    /// The decode path's layout of the same experts (None: the simple path's call).
    packed: Option<PackedExperts>,
    y: CudaSlice<bf16>,
    error: CudaSlice<i32>,
    scratch: CudaSlice<u8>,
}

fn call(plan: &fused_moe::Plan, sh: &Shape, b: &mut Bufs, st: &Arc<CudaStream>) -> Result<()> {
    let (e, hd, i, r1, blk) = (sh.experts, sh.hidden, sh.inter, sh.fc1_rows(), sh.recipe.weights().block());
    let t = b.ids.len() / sh.top_k;
    let nv = sh.recipe.weights() == Fp4::Nvfp4;
    let args = Args {
        x: TensorRef::from_slice(&b.x, &[t, hd])?,
        routing: Routing::TopK {
            ids: TensorRef::from_slice(&b.ids, &[t, sh.top_k])?,
            weights: TensorRef::from_slice(&b.w, &[t, sh.top_k])?,
        },
        experts: match (&b.packed, plan.query().layout) {
            (Some(p), WeightLayout::Packed) => ExpertWeights::Packed(p),
            _ => ExpertWeights::RowMajor(WeightArgs {
                w1_codes: TensorRef::from_slice(&b.w1.0, &[e, r1, hd / 2])?,
                w1_scales: TensorRef::from_slice(&b.w1.1, &[e, r1, hd / blk])?,
                w1_enc: nv.then(|| TensorRef::from_slice(&b.w1.2, &[e])).transpose()?,
                w2_codes: TensorRef::from_slice(&b.w2.0, &[e, hd, i / 2])?,
                w2_scales: TensorRef::from_slice(&b.w2.1, &[e, hd, i / blk])?,
                w2_enc: nv.then(|| TensorRef::from_slice(&b.w2.2, &[e])).transpose()?,
            }),
        },
        act_scales: (sh.recipe == Recipe::Nvfp4)
            .then(|| -> Result<_> {
                Ok(ActScaleArgs {
                    fc1: TensorRef::from_slice(&b.a.0, &[e])?,
                    fc2: TensorRef::from_slice(&b.a.1, &[e])?,
                })
            })
            .transpose()?,
        y: TensorMut::from_slice(&mut b.y, &[t, hd])?,
        error: TensorMut::from_slice(&mut b.error, &[1])?,
    };
    fused_moe::run(plan, args, Scratch::from_slice(&mut b.scratch), st)
}

/// Times the separate GEMMs of one routing (module docs): one graph of 2 × (touched experts)
/// decode GEMV calls.
fn separate_gemms(
    dev: &Arc<b12x_core::Device>,
    sh: &Shape,
    experts: &Experts,
    ids: &[i32],
) -> Result<(Vec<f64>, String)> {
    let s = dev.stream();
    let (hd, i, r1) = (sh.hidden, sh.inter, sh.fc1_rows());
    let mut touched: Vec<i32> = ids.to_vec();
    touched.sort_unstable();
    touched.dedup();
    let rows = |e: i32| ids.iter().filter(|&&x| x == e).count();
    let m_hi = touched.iter().map(|&e| rows(e)).max().unwrap_or(1);
    let weight = |m: &reference::ExpertMatrix| -> Result<pack::PackedWeight> {
        let w = match m {
            reference::ExpertMatrix::Nvfp4(q) => Weight::Nvfp4(q.clone()),
            reference::ExpertMatrix::Mxfp4(q) => Weight::Mx(q.clone()),
        };
        pack::pack_weight(&w, s)
    };
    let format = match sh.recipe.weights() {
        Fp4::Nvfp4 => pack::WeightFormat::Nvfp4,
        Fp4::Mxfp4 => pack::WeightFormat::Mxfp4,
    };
    let x_quant = (sh.recipe == Recipe::W4a8Mx).then_some(XQuant::Mxfp8);
    let query = |n: usize, k: usize| bsgemv::Query {
        n,
        k,
        weight: format,
        x_format: XFormat::Bf16,
        out_dtype: DType::BF16,
        bias: None,
        max_rows: m_hi,
        x_quant,
    };
    let (q1, q2) = (query(r1, hd), query(hd, i));
    let (p1, p2) = (bsgemv::plan(&q1, dev)?, bsgemv::plan(&q2, dev)?);
    let mut session = PreparationSession::new(dev)?;
    let config = session.prepare(&[&p1, &p2])?.iter().map(|x| x.config.clone()).collect::<Vec<_>>().join("+");
    let mut calls = Vec::new();
    for &e in &touched {
        let m = rows(e);
        let w1 = weight(&experts.fc1[e as usize])?;
        let w2 = weight(&experts.fc2[e as usize])?;
        let x1 = s.alloc_zeros::<bf16>(m * hd)?;
        let y1 = s.alloc_zeros::<bf16>(m * r1)?;
        let x2 = s.alloc_zeros::<bf16>(m * i)?;
        let y2 = s.alloc_zeros::<bf16>(m * hd)?;
        calls.push((m, w1, w2, x1, y1, x2, y2));
    }
    let mut s1 = s.alloc_zeros::<u8>(p1.scratch_layout().total_bytes().max(1))?;
    let mut s2 = s.alloc_zeros::<u8>(p2.scratch_layout().total_bytes().max(1))?;
    let times = time_graph(dev, samples(), |st| {
        for (m, w1, w2, x1, y1, x2, y2) in calls.iter_mut() {
            let a1 = bsgemv::Args {
                x: TensorRef::from_slice(x1, &[*m, hd])?,
                x_scales: None,
                x_global: None,
                w: w1,
                bias: None,
                y: TensorMut::from_slice(y1, &[*m, r1])?,
                alpha: 1.0,
            };
            bsgemv::run(&p1, a1, Scratch::from_slice(&mut s1), st)?;
            let a2 = bsgemv::Args {
                x: TensorRef::from_slice(x2, &[*m, i])?,
                x_scales: None,
                x_global: None,
                w: w2,
                bias: None,
                y: TensorMut::from_slice(y2, &[*m, hd])?,
                alpha: 1.0,
            };
            bsgemv::run(&p2, a2, Scratch::from_slice(&mut s2), st)?;
        }
        Ok(())
    })?;
    session.close();
    Ok((times, config))
}

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("fused_moe bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let shapes = [
        ("deepseek_v4_flash_tp2", Shape::deepseek_v4_flash_tp2()),
        ("gpt_oss_120b", Shape::gpt_oss_120b()),
        ("qwen3_30b_a3b", Shape::qwen3_30b_a3b()),
    ];
    let mut report = BenchReport::new("fused_moe", &dev)?;
    for (name, sh) in shapes {
        let tokens: Vec<usize> = match std::env::var("B12X_MOE_TOKENS") {
            Ok(v) => v.split(',').filter_map(|t| t.trim().parse().ok()).collect(),
            Err(_) => TOKENS.into_iter().filter(|t| !quick() || QUICK_TOKENS.contains(t)).collect(),
        };
        // (any row of the shape: the packed rows' prefixes, `fused_moe_simple` and the separate
        // GEMMs at T = 1)
        const ROWS: [&str; 10] = [
            "fused_moe",
            "fused_moe_notail",
            "fused_moe_fused_act",
            "fused_moe_tile_wg",
            "fused_moe_tile_wg64",
            "fused_moe_tile_wg32",
            "fused_moe_tile_mma",
            "fused_moe_gemv",
            "fused_moe_simple",
            "fused_moe_separate",
        ];
        let row_selected = |t: &usize| {
            ROWS.iter().chain(WG_STAGE_ROWS.iter().map(|(_, r)| r)).any(|r| selected(&format!("{r}/{name}/T{t}")))
        };
        if !tokens.iter().any(|t| row_selected(t) || selected(&format!("{name}/T1"))) {
            continue;
        }
        let s = dev.stream();
        let experts = Experts::random(&sh, 7);
        let act = ActScales::random(sh.experts, 8);
        let (st1, st2) = experts.stacked();
        let (per1, per2) = (st1.expert_bytes, st2.expert_bytes);
        let w1 = (s.clone_htod(&st1.codes)?, s.clone_htod(&st1.scales)?, s.clone_htod(&st1.enc)?);
        let w2 = (s.clone_htod(&st2.codes)?, s.clone_htod(&st2.scales)?, s.clone_htod(&st2.enc)?);
        drop((st1, st2));
        let a = (s.clone_htod(&act.fc1)?, s.clone_htod(&act.fc2)?);
        let packed = PackedExperts::new(&sh, &experts, s)?;
        let mut w1 = Some(w1);
        let mut w2 = Some(w2);
        let mut a = Some(a);
        let mut packed = Some(packed);
        // Above GROUPED_ABOVE: the plan's default, then each tile kernel and the grouped GEMV
        // forced (a row repeating an earlier one is skipped below).
        // (the 128-row wgmma tile alone: `fused_moe_tile_wg` rows as before tail slots)
        let tile = PlanOptions {
            gemv_up_to: Some(GROUPED_ABOVE),
            wgmma_from: Some(0),
            no_tail_slots: true,
            ..Default::default()
        };
        let gemv = PlanOptions { gemv_up_to: Some(usize::MAX), ..Default::default() };
        let mma = PlanOptions { tile: TileKernel::mma(dev.smem_optin()), ..tile };
        let sm90 = dev.arch() == b12x_core::Arch::Sm90;
        let wg64 = PlanOptions { tile: Some(TileKernel::Wgmma64 { stages: 4 }), ..tile };
        let wg32 = PlanOptions { tile: Some(TileKernel::Wgmma32 { stages: 4 }), ..tile };
        let notail = PlanOptions { no_tail_slots: true, ..Default::default() };
        let fused = PlanOptions { fused_activation: true, ..Default::default() };
        let stages = std::env::var("B12X_MOE_WG_STAGES").unwrap_or_default();
        let wanted: Vec<usize> = stages.split(',').filter_map(|n| n.trim().parse().ok()).collect();
        let wg_stages: Vec<(&'static str, PlanOptions)> = WG_STAGE_ROWS
            .iter()
            .filter(|(n, _)| dev.arch() == b12x_core::Arch::Sm90 && wanted.contains(n))
            .map(|&(n, name)| {
                let wg = TileKernel::Wgmma(bsgemv::WgConfig { w8: false, wn: 8, stages: n, tail: false });
                (name, PlanOptions { tile: Some(wg), ..tile })
            })
            .collect();
        let runs = tokens.iter().flat_map(|&t| {
            let mut r = vec![(t, WeightLayout::Packed, None)];
            if t > GROUPED_ABOVE && sm90 {
                r.push((t, WeightLayout::Packed, Some(("fused_moe_notail", notail))));
                r.push((t, WeightLayout::Packed, Some(("fused_moe_fused_act", fused))));
            }
            if t > GROUPED_ABOVE {
                r.push((t, WeightLayout::Packed, Some(("fused_moe_tile_wg", tile))));
                r.extend(wg_stages.iter().map(|&(n, o)| (t, WeightLayout::Packed, Some((n, o)))));
                if sm90 {
                    r.push((t, WeightLayout::Packed, Some(("fused_moe_tile_wg64", wg64))));
                    r.push((t, WeightLayout::Packed, Some(("fused_moe_tile_wg32", wg32))));
                }
                r.push((t, WeightLayout::Packed, Some(("fused_moe_tile_mma", mma))));
                r.push((t, WeightLayout::Packed, Some(("fused_moe_gemv", gemv))));
            }
            r
        });
        // (T, path, tile kernel) of the rows measured so far: a forced row that repeats one is
        // skipped.
        let mut seen: Vec<RowKey> = Vec::new();
        let runs: Vec<_> = runs.chain([(1, WeightLayout::RowMajor, None)]).collect();
        for (t, layout, forced) in runs {
            let path = match (layout, forced) {
                (WeightLayout::Packed, Some((prefix, _))) => prefix,
                (WeightLayout::Packed, None) => "fused_moe",
                _ => "fused_moe_simple",
            };
            let options = forced.map(|f| f.1).unwrap_or_default();
            let case = format!("{path}/{name}/T{t}");
            if !selected(&case) {
                continue;
            }
            let (e, k, hd) = (sh.experts, sh.top_k, sh.hidden);
            let x_h: Vec<bf16> = uniform(t as u64, t * hd, -2.0, 2.0).into_iter().map(bf16::from_f32).collect();
            // The same routing for every row of (shape, T).
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9 ^ ((t as u64) << 8));
            let mut ids_h = Vec::with_capacity(t * k);
            for _ in 0..t {
                let mut pick: Vec<i32> = (0..e as i32).collect();
                for j in 0..k {
                    let r = rng.random_range(j..e);
                    pick.swap(j, r);
                }
                ids_h.extend(&pick[..k]);
            }
            let w_h: Vec<f32> = (0..t * k).map(|_| rng.random_range(0.05f32..1.0)).collect();
            let q = Query { shape: sh, max_tokens: t, layout, router: None };
            let plan = fused_moe::plan_with(&q, &dev, options)?;
            let want = match path {
                "fused_moe_gemv" => Path::GroupedGemv,
                // (the default's path without tail slots: a row only where the default has them)
                "fused_moe_notail" => {
                    let default = fused_moe::plan(&q, &dev)?;
                    if default.tail_kernel(t).is_none() {
                        continue;
                    }
                    default.path(t)
                }
                // (the default with FC1's fused activation: a row only where it takes hold)
                "fused_moe_fused_act" => {
                    if !plan.fused_activation(t) {
                        continue;
                    }
                    plan.path(t)
                }
                _ => Path::GroupedTile,
            };
            // A forced row only where it took hold and differs from the rows before (the grouped
            // GEMV is capped where the route's shared memory ends; off SM90 the wgmma row is the
            // mma.sync one).
            // The deeper rings only where the default takes the wgmma tile.
            if path.starts_with("fused_moe_tile_wg_s")
                && !matches!(fused_moe::plan(&q, &dev)?.tile_kernel(t), Some(TileKernel::Wgmma(_)))
            {
                continue;
            }
            let key = (t, plan.path(t), plan.tile_kernel(t), plan.tail_kernel(t), plan.fused_activation(t));
            if layout == WeightLayout::Packed {
                if forced.is_some() && (plan.path(t) != want || seen.contains(&key)) {
                    continue;
                }
                seen.push(key);
            }
            let mut session = PreparationSession::new(&dev)?;
            let config = session.prepare(&[&plan])?.last().map(|x| x.config.clone()).unwrap_or_default();
            let mut b = Bufs {
                x: s.clone_htod(&x_h)?,
                ids: s.clone_htod(&ids_h)?,
                w: s.clone_htod(&w_h)?,
                w1: w1.take().expect("weights"),
                w2: w2.take().expect("weights"),
                a: a.take().expect("scales"),
                packed: packed.take(),
                y: s.alloc_zeros(t * hd)?,
                error: s.alloc_zeros(1)?,
                scratch: s.alloc_zeros(plan.scratch_layout().total_bytes().max(1))?,
            };
            call(&plan, &sh, &mut b, s)?;
            let got = s.clone_dtoh(&b.y)?;
            let want =
                reference::fused_moe(&sh, &experts, &x_h[..hd], &ids_h[..k], &w_h[..k], Some(&act)).expect("oracle");
            let (g, o): (Vec<f64>, Vec<f64>) =
                (got[..hd].iter().map(|v| v.to_f64()).collect(), want.y.iter().map(|v| v.to_f64()).collect());
            let cos = b12x_core::testing::cosine_diff(&g, &o);
            assert!(cos <= 2e-4, "{case}: token 0 is off the oracle (1 − cos {cos:.3e})");
            let mut touched: Vec<i32> = ids_h.clone();
            touched.sort_unstable();
            touched.dedup();
            let bytes = touched.len() * (per1 + per2) + 2 * t * hd * 2;
            let flops = 2.0 * (t * k) as f64 * (sh.fc1_rows() * hd + hd * sh.inter) as f64;
            let times = time_graph(&dev, samples(), |st| call(&plan, &sh, &mut b, st))?;
            report.add(&case, &config, &times, bytes as f64, flops);
            add_read_probe(&mut report, &dev, &format!("read_probe/{case}"), bytes)?;
            if layout == WeightLayout::Packed && forced.is_none() && t <= bsgemv::MAX_ROWS {
                let (times, config) = separate_gemms(&dev, &sh, &experts, &ids_h)?;
                report.add(&format!("fused_moe_separate/{name}/T{t}"), &config, &times, bytes as f64, 0.0);
            }
            session.close();
            (w1, w2, a, packed) = (Some(b.w1), Some(b.w2), Some(b.a), b.packed);
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}
