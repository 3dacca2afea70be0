//! Benchmark of the dense decoder layer's decode step (Qwen3-8B shape, `b12x_layers::dense`),
//! with the method of DESIGN.md §7 (graph replays, L2 flushed before each sample, medians).
//!
//! For each weight format (BF16, block FP8 W8A16, NVFP4 W4A16) and batch (B = 1 and 8 at 4k
//! context, B = 64 at 2k; every request at that length, pages scattered):
//! - `decoder_layer/{fmt}/B{b}_ctx{c}/step`: the whole step captured as **one** graph. Bytes =
//!   what the step must read: every weight once (codes + scales) and the batch's K and V; its
//!   `% ceiling` is the "% of the read ceiling" (target ≥ 80% for BF16 at B = 1).
//! - `…/op/{name}`: each of the nine ops captured alone (bytes: its weight for the linears, the KV
//!   for attention, else 0), and `…/sum_of_ops`: the sum of their medians (what the step would
//!   cost without overlap between the ops' tails and heads).
//! - `…/step_x4` (B = 1): four layers' steps in one graph (each its own weights, KV cache and
//!   batch), time per layer: a decode graph's steady state, the graph's start paid once.
//! - `…/linears_only`, `…/linears_attention`: the four linears (and the attention) alone in one
//!   graph, in step order — the step minus these is what its four small ops cost inside it.
//! - `…/without/{norms,rope}`: the step without its two add+rmsnorm launches (or without
//!   rope_kv_append) in one graph — wrong results, a bound on what folding them into their
//!   neighbours could save.
//! - `…/prefix/{k}_{op}`: the step's first k ops in one graph; consecutive rows differ by what
//!   op k adds inside the step.
//! - `…/read_probe`: the read kernel on the step's byte count (the size-matched ceiling).
//! - Before the rows, one line per op bucket on stdout: the config the session chose.
//! - `decoder_layer/{fmt}_pdl/…`, `…_s8/…`, `…_pdl_s{8,16}/…`, `…_r6/…`: `LayerOptions { pdl:
//!   true }` (every kernel of the step launched with PDL; the block-scaled GEMVs have no PDL
//!   launch), `attention_splits: Some(8 | 16)`, `attention_stages: Some(6)` (the deep decode
//!   rings); the op rows time each op alone, where PDL has no predecessor to overlap.
//! - `…_fs/…`, `…_pdl_fs/…` (B ≤ 8): `LayerOptions { fuse_silu: true }` — the down projection
//!   reads `[gate | up]` and forms the activation itself: eight ops, no `silu_and_mul` row.
//! - `…_w8/…`, `…_pdl_w8/…`, `…_pdl_s16_w8/…`: `attention_warps: Some(paged::WIDE_WARPS)` — the
//!   attention's 8-warp decode tiles (3-stage rings, one CTA per SM; since session 40 the
//!   default at these contexts, so `_pdl` and `_pdl_w8` run the same kernels).
//! - `…_gs/…`, `…_pdl_gs/…`, `…_pdl_w8_gs/…`: `gate_up_silu: true` — the gate/up projection
//!   stores `silu(g) · u` (interleaved weight rows): eight ops, no `silu_and_mul` row.
//! - `…_pdl_gs_w{l,n,p}/…`, `…_pdl_s16_gs_wl/…`: `warm_kv` — `rope_kv_append`'s warm part (one
//!   CTA per SM) reads the cached K and V through L2 beside the QKV projection: loads with an
//!   evict-last policy (`wl`), plain loads (`wn`), evict-last L2 prefetches (`wp`).
//! - `…_pdl_gs_er/…`, `…_pdl_s16_gs_er/…`: `early_release` — the norms and `rope_kv_append`
//!   release the next kernel at entry, before their waits.
//! - `…_pdl_gs_wo{,20,40,50,30c66}/…`, `…_wo/…`: `warm_o_proj` — `gemm.l2_warm` reads the last
//!   30% (20%, 40%, 50%) of the O projection's weight rows through L2 on a second stream beside
//!   the attention, one CTA per SM (66 CTAs); `B12X_LAYER_WO=percent:ctas[,…]` adds
//!   `…_pdl_gs_wo{percent}c{ctas}/…` rows (ctas 0: one per SM). In these variants the
//!   `op/attention`, `linears_attention` and `prefix/4…` rows include the warm (it is forked
//!   at the attention), so `sum_of_ops` does too.
//! - `…_pdl_gs_f1/…`, `…_pdl_gs_fn/…`: `fold_norms` (`First`, `Both`); `…_ra/…`:
//!   `fuse_rope_attention`; `…_pdl_gs_f1_ra/…`, `…_pdl_gs_f1_wo/…`, `…_pdl_gs_f1_ra_wo/…`: their
//!   combinations with `warm_o_proj` (30%, one CTA per SM); `…_pdl_gs_rq/…`, `…_pdl_gs_f1_rq/…`:
//!   `rope_in_qkv` (rope and the KV append in the QKV projection's epilogue), alone and with
//!   `FoldNorms::First`; `…_pdl_gs_n2/…`, `…_pdl_gs_rq_n2/…`, `…_pdl_gs_f1_rq_n2/…`:
//!   `norm2_in_o_proj` (norm 2 split between the O projection's epilogue and the gate/up
//!   projection's scale), alone, with `rope_in_qkv`, and with both that and `FoldNorms::First`
//!   (no norm launch at all); `…_pdl_gs_s1_rq_n2/…`, `…_pdl_gs_s1_rq/…`: `FoldNorms::FirstScale`
//!   (norm 1 as the QKV projection's rrms scale) with `rope_in_qkv` and `norm2_in_o_proj` (no
//!   norm launch: five ops), and with `rope_in_qkv` alone.
//!
//! Run: `cargo bench -p b12x-layers --bench decoder_layer` (rows go to
//! `bench-results/decoder_layer.{json,md}`); `B12X_BENCH_QUICK=1` runs B = 1 only.

use b12x_attention::paged;
use b12x_attention::rope_kv_append::{WarmCache, WarmRead};
use b12x_core::bench::{add_read_probe, samples, selected, time_graph, BenchReport};
use b12x_core::testing::gpu;
use b12x_core::{PreparationSession, Result};
use b12x_gemm::bf16_gemv;
use b12x_layers::dense::{
    Batch, Capacity, Config, FoldNorms, HostWeights, Layer, LayerOptions, Op, WarmWeight, WeightFormat,
};

/// Layers per graph of the steady-state row (`…/step_x4`).
const LAYERS: usize = 4;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("decoder_layer bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let mut report = BenchReport::new("decoder_layer", &dev)?;
    report.note(
        "Qwen3-8B dense layer decode step (hidden 4096, H 32, Hkv 8, D 128, I 12288), BF16 activations and KV, P = 16. \
         step: the nine ops in one graph; bytes = all weights once + the batch's K and V. op/*: each op alone in a graph; \
         sum_of_ops: the sum of those medians. read_probe: the read kernel on the step's bytes.",
    );
    let cfg = Config::qwen3_8b();
    let cases: &[(usize, usize)] =
        if b12x_core::bench::quick() { &[(1, 4096)] } else { &[(1, 4096), (8, 4096), (64, 2048)] };
    for format in WeightFormat::ALL {
        let weights = HostWeights::random(&cfg, format, 7)?;
        let dw = weights.upload(dev.stream())?;
        // The other layers' weights of the steady-state row (made at the first B = 1 case), per
        // weight layout (gate/up interleaved, QKV in rope order, gate/up folded with norm 2).
        let mut more_by_layout: std::collections::HashMap<(bool, bool, bool, bool), Vec<_>> = Default::default();
        let opts = |pdl: bool, splits: Option<usize>, stages: Option<usize>| LayerOptions {
            pdl,
            attention_splits: splits,
            attention_stages: stages,
            attention_warps: None,
            fuse_silu: false,
            gate_up_silu: false,
            warm_kv: None,
            early_release: false,
            warm_o_proj: None,
            fold_norms: FoldNorms::None,
            fuse_rope_attention: false,
            rope_in_qkv: false,
            norm2_in_o_proj: false,
        };
        let fold = |o: LayerOptions| LayerOptions { fold_norms: FoldNorms::Both, ..o };
        let fold1 = |o: LayerOptions| LayerOptions { fold_norms: FoldNorms::First, ..o };
        let scale1 = |o: LayerOptions| LayerOptions { fold_norms: FoldNorms::FirstScale, ..o };
        let gs = |o: LayerOptions| LayerOptions { gate_up_silu: true, ..o };
        let ra = |o: LayerOptions| LayerOptions { fuse_rope_attention: true, ..o };
        let rq = |o: LayerOptions| LayerOptions { rope_in_qkv: true, ..o };
        let n2 = |o: LayerOptions| LayerOptions { norm2_in_o_proj: true, ..o };
        let er = |o: LayerOptions| LayerOptions { early_release: true, ..o };
        let wo = |percent: u8, ctas: u32, o: LayerOptions| LayerOptions {
            warm_o_proj: Some(WarmWeight { percent, ctas }),
            ..o
        };
        let sms = dev.sm_count();
        let warm =
            |read: WarmRead, o: LayerOptions| LayerOptions { warm_kv: Some(WarmCache { blocks: sms, read }), ..o };
        let wide = |o: LayerOptions| LayerOptions { attention_warps: Some(paged::WIDE_WARPS), ..o };
        let fused = |o: LayerOptions| LayerOptions { fuse_silu: true, ..o };
        let deep = Some(paged::DEEP_STAGES);
        let variants: Vec<(&str, LayerOptions)> = if format == WeightFormat::Bf16 {
            vec![
                ("", opts(false, None, None)),
                ("_s8", opts(false, Some(8), None)),
                ("_pdl", opts(true, None, None)),
                ("_fs", fused(opts(false, None, None))),
                ("_pdl_fs", fused(opts(true, None, None))),
                ("_pdl_s8", opts(true, Some(8), None)),
                ("_pdl_r6", opts(true, None, deep)),
                ("_pdl_s8_r6", opts(true, Some(8), deep)),
                ("_pdl_s16", opts(true, Some(16), None)),
                ("_pdl_s16_r6", opts(true, Some(16), deep)),
                ("_w8", wide(opts(false, None, None))),
                ("_pdl_w8", wide(opts(true, None, None))),
                ("_pdl_s16_w8", wide(opts(true, Some(16), None))),
                ("_gs", gs(opts(false, None, None))),
                ("_pdl_gs", gs(opts(true, None, None))),
                ("_pdl_gs_er", er(gs(opts(true, None, None)))),
                ("_pdl_gs_fn", fold(gs(opts(true, None, None)))),
                ("_pdl_fn", fold(opts(true, None, None))),
                ("_pdl_gs_f1", fold1(gs(opts(true, None, None)))),
                ("_pdl_gs_ra", ra(gs(opts(true, None, None)))),
                ("_pdl_gs_f1_ra", ra(fold1(gs(opts(true, None, None))))),
                ("_pdl_gs_f1_wo", wo(30, 0, fold1(gs(opts(true, None, None))))),
                ("_pdl_gs_rq", rq(gs(opts(true, None, None)))),
                ("_pdl_gs_f1_rq", rq(fold1(gs(opts(true, None, None))))),
                ("_pdl_gs_n2", n2(gs(opts(true, None, None)))),
                ("_pdl_gs_rq_n2", n2(rq(gs(opts(true, None, None))))),
                ("_pdl_gs_f1_rq_n2", n2(rq(fold1(gs(opts(true, None, None)))))),
                ("_pdl_gs_s1_rq_n2", n2(rq(scale1(gs(opts(true, None, None)))))),
                ("_pdl_gs_s1_rq", rq(scale1(gs(opts(true, None, None))))),
                ("_pdl_gs_f1_ra_wo", wo(30, 0, ra(fold1(gs(opts(true, None, None)))))),
                ("_ra", ra(opts(false, None, None))),
                ("_pdl_gs_wo", wo(30, 0, gs(opts(true, None, None)))),
                ("_pdl_gs_wo20", wo(20, 0, gs(opts(true, None, None)))),
                ("_pdl_gs_wo40", wo(40, 0, gs(opts(true, None, None)))),
                ("_pdl_gs_wo50", wo(50, 0, gs(opts(true, None, None)))),
                ("_pdl_gs_wo30c66", wo(30, 66, gs(opts(true, None, None)))),
                ("_wo", wo(30, 0, opts(false, None, None))),
                ("_pdl_s16_gs_er", er(gs(opts(true, Some(16), None)))),
                ("_pdl_w8_gs", gs(wide(opts(true, None, None)))),
                ("_pdl_gs_wl", warm(WarmRead::LoadEvictLast, gs(opts(true, None, None)))),
                ("_pdl_gs_wn", warm(WarmRead::Load, gs(opts(true, None, None)))),
                ("_pdl_gs_wp", warm(WarmRead::PrefetchEvictLast, gs(opts(true, None, None)))),
                ("_pdl_s16_gs_wl", warm(WarmRead::LoadEvictLast, gs(opts(true, Some(16), None)))),
            ]
        } else {
            vec![("", opts(false, None, None)), ("_pdl_s8", opts(true, Some(8), None))]
        };
        let mut variants: Vec<(String, LayerOptions)> = variants.into_iter().map(|(t, o)| (t.to_string(), o)).collect();
        // `B12X_LAYER_WO=percent:ctas[,…]` (BF16): more `warm_o_proj` points, `_pdl_gs_wo{p}c{c}`.
        if format == WeightFormat::Bf16 {
            for point in std::env::var("B12X_LAYER_WO").unwrap_or_default().split(',') {
                let mut f = point.split(':').map(|v| v.parse::<u32>().ok());
                if let (Some(Some(p)), Some(Some(c))) = (f.next(), f.next()) {
                    let p = p.clamp(1, 100) as u8;
                    variants.push((format!("_pdl_gs_wo{p}c{c}"), wo(p, c, gs(opts(true, None, None)))));
                }
            }
        }
        for (&(b, ctx), (tag, options)) in cases.iter().flat_map(|c| variants.iter().map(move |v| (c, v))) {
            let options = *options;
            let prefix = format!("decoder_layer/{}{tag}/B{b}_ctx{ctx}", format.name());
            // The fused down GEMV and the folded norms serve at most 8 rows: B = 64 has no `_fs`
            // or `_fn` rows.
            let fused_x = options.fuse_silu || options.fold_norms != FoldNorms::None || options.norm2_in_o_proj;
            if !selected(&prefix) || (fused_x && b > 8 * bf16_gemv::SILU_NT as usize) {
                continue;
            }
            let p = cfg.page_size;
            let max_pages = ctx.div_ceil(p);
            let num_pages = b * max_pages + 8;
            let cap = Capacity { max_batch: b, max_pages, num_pages };
            let layer = Layer::with_options(&cfg, format, cap, options, &dev)?;
            // Layers with another weight layout (gate/up interleaved, QKV rows in rope order, gate/up
            // folded with norm 2, QKV folded with norm 1) read their own upload.
            let layout = (
                options.gate_up_silu,
                options.rope_in_qkv,
                options.norm2_in_o_proj,
                options.fold_norms == FoldNorms::FirstScale,
            );
            // Experiment: `B12X_LAYER_SPACER_MB=n` allocates n MB before this variant's own upload
            // (kept until the variant ends), so its weights land at other device addresses.
            let spacer_mb: usize = std::env::var("B12X_LAYER_SPACER_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
            let _spacer = if spacer_mb > 0 { Some(dev.stream().alloc_zeros::<u8>(spacer_mb << 20)?) } else { None };
            let dw_own = if layout != (false, false, false, false) {
                Some(layer.upload_weights(&weights, dev.stream())?)
            } else {
                None
            };
            let dw = dw_own.as_ref().unwrap_or(&dw);
            let mut session = PreparationSession::new(&dev)?;
            session.prepare(&layer.plans())?;
            session.freeze();
            // The configs the session chose (one line per op bucket): which kernel each op ran.
            for r in session.records() {
                println!("{prefix}: {} [{}] bucket {} -> {} ({:?})", r.op, r.query, r.bucket, r.config, r.source);
            }
            let mut st = layer.state(dev.stream(), b)?;
            let mut batch = Batch::new(&vec![ctx - 1; b], p, max_pages, num_pages, 11)?;
            batch.advance()?;
            st.upload_batch(&batch, dev.stream())?;
            let x: Vec<f32> = (0..b * cfg.hidden).map(|i| ((i * 7919 % 2001) as f32 - 1000.0) / 1000.0).collect();
            st.upload_inputs(&x, &x, dev.stream())?;
            let weight_bytes: usize =
                cfg.linear_shapes().iter().map(|&(n, k)| format.weight_bytes(n, k)).sum::<usize>() + 2 * cfg.hidden * 2;
            let kv = batch.kv_bytes(&cfg);
            let bytes = weight_bytes + kv;
            let ops = layer.ops();
            let t = time_graph(&dev, samples(), |s| layer.step(dw, &mut st, s))?;
            report.add(&format!("{prefix}/step"), &format!("one graph, {} ops", ops.len()), &t, bytes as f64, 0.0);
            // The step without its small ops: the four linears (+ the attention) back to back in
            // one graph — what the small ops and their launches cost inside the step.
            let linears = [Op::QkvProj, Op::OProj, Op::GateUpProj, Op::DownProj];
            let t = time_graph(&dev, samples(), |s| layer.run_ops(&linears, dw, &mut st, s))?;
            report.add(&format!("{prefix}/linears_only"), "one graph, the 4 linears", &t, weight_bytes as f64, 0.0);
            let big = [Op::QkvProj, Op::Attention, Op::OProj, Op::GateUpProj, Op::DownProj];
            let t = time_graph(&dev, samples(), |s| layer.run_ops(&big, dw, &mut st, s))?;
            report.add(
                &format!("{prefix}/linears_attention"),
                "one graph, 4 linears + attention",
                &t,
                bytes as f64,
                0.0,
            );
            // Bounds for folding small ops into their neighbours (wrong results, timing only): the
            // step without one kind of small op — `without/norms` (both add+rmsnorm launches),
            // `without/rope` (rope_kv_append).
            for (name, skip) in [("norms", [Op::AddNorm1, Op::AddNorm2]), ("rope", [Op::RopeKvAppend; 2])] {
                let kept: Vec<Op> = ops.iter().copied().filter(|op| !skip.contains(op)).collect();
                let t = time_graph(&dev, samples(), |s| layer.run_ops(&kept, dw, &mut st, s))?;
                report.add(&format!("{prefix}/without/{name}"), "one graph, the step minus those ops", &t, 0.0, 0.0);
            }
            // The step's first k ops in one graph, k = 1..9 (8 fused): row k minus row k − 1 is
            // what op k adds inside the step (its launch, its work and its overlap with its
            // neighbours).
            for k in 1..=ops.len() {
                let first = &ops[..k];
                let t = time_graph(&dev, samples(), |s| layer.run_ops(first, dw, &mut st, s))?;
                let name = format!("{prefix}/prefix/{k}_{}", ops[k - 1].name());
                report.add(&name, "one graph, the step's first k ops", &t, 0.0, 0.0);
            }
            let mut sum = 0.0;
            for &op in &ops {
                let t = time_graph(&dev, samples(), |s| layer.run_ops(&[op], dw, &mut st, s))?;
                let op_bytes = match op {
                    Op::QkvProj => format.weight_bytes(cfg.linear_shapes()[0].0, cfg.linear_shapes()[0].1),
                    Op::OProj => format.weight_bytes(cfg.linear_shapes()[1].0, cfg.linear_shapes()[1].1),
                    Op::GateUpProj => format.weight_bytes(cfg.linear_shapes()[2].0, cfg.linear_shapes()[2].1),
                    Op::DownProj => format.weight_bytes(cfg.linear_shapes()[3].0, cfg.linear_shapes()[3].1),
                    Op::Attention => kv,
                    _ => 0,
                };
                let row =
                    report.add(&format!("{prefix}/op/{}", op.name()), "alone in a graph", &t, op_bytes as f64, 0.0);
                sum += row.time_us;
            }
            report.add(&format!("{prefix}/sum_of_ops"), "sum of the op medians", &[sum], bytes as f64, 0.0);
            // A decode graph's steady state (B = 1): four layers' steps back to back in one graph,
            // each with its own weights, KV cache and batch (as consecutive layers), time / 4 —
            // the graph's start is paid once and each layer's first kernel overlaps the previous
            // layer's last (with PDL).
            if b == 1 {
                let more = more_by_layout.entry(layout).or_default();
                while more.len() < LAYERS - 1 {
                    let host = HostWeights::random(&cfg, format, 8 + more.len() as u64)?;
                    more.push(layer.upload_weights(&host, dev.stream())?);
                }
                let more = &*more;
                let mut layers = Vec::new();
                for i in 0..LAYERS {
                    let mut st = layer.state(dev.stream(), b)?;
                    let mut batch = Batch::new(&vec![ctx - 1; b], p, max_pages, num_pages, 11 + i as u64)?;
                    batch.advance()?;
                    st.upload_batch(&batch, dev.stream())?;
                    st.upload_inputs(&x, &x, dev.stream())?;
                    layers.push(st);
                }
                let t = time_graph(&dev, samples(), |s| {
                    layers
                        .iter_mut()
                        .enumerate()
                        .try_for_each(|(i, st)| layer.step(if i == 0 { dw } else { &more[i - 1] }, st, s))
                })?;
                let per_layer: Vec<f64> = t.iter().map(|v| v / LAYERS as f64).collect();
                report.add(
                    &format!("{prefix}/step_x{LAYERS}"),
                    "one graph, 4 layers' steps, time / 4",
                    &per_layer,
                    bytes as f64,
                    0.0,
                );
            }
            add_read_probe(&mut report, &dev, &format!("{prefix}/read_probe"), bytes)?;
            // Experiment (B = 1, stdout only): `B12X_LAYER_SWEEP=i,j` times the whole step with
            // every candidate config of plan i of `Layer::plans()` pinned in turn (the other
            // plans keep the session's choices): which config each linear would want inside the
            // step rather than alone.
            // One frozen session per device at a time: the sweep's sessions come after this one.
            let records = session.records().to_vec();
            session.close();
            if b == 1 {
                for i in std::env::var("B12X_LAYER_SWEEP")
                    .unwrap_or_default()
                    .split(',')
                    .filter_map(|v| v.parse::<usize>().ok())
                {
                    let plans: Vec<&dyn b12x_core::OpPlan> = layer.plans();
                    let Some(&target) = plans.get(i) else { continue };
                    let mut times: Vec<(f64, String)> = Vec::new();
                    for id in target.candidates(0) {
                        let mut sweep = PreparationSession::new(&dev)?.with_autotune(false);
                        sweep.pin(target, &target.buckets()[0].label(), &id);
                        for other in plans.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, p)| p) {
                            if let Some(r) = records.iter().find(|r| r.op == other.op() && r.query == other.query_key())
                            {
                                sweep.pin(*other, &r.bucket, &r.config);
                            }
                        }
                        sweep.prepare(&plans)?;
                        sweep.freeze();
                        let mut t = time_graph(&dev, 20, |s| layer.step(dw, &mut st, s))?;
                        t.sort_by(f64::total_cmp);
                        times.push((t[t.len() / 2], id));
                        sweep.close();
                    }
                    times.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let chosen = records.iter().find(|r| r.op == target.op() && r.query == target.query_key());
                    let chosen = chosen.map_or("?", |r| r.config.as_str());
                    let at = times.iter().find(|t| t.1 == chosen).map_or(f64::NAN, |t| t.0);
                    println!(
                        "{prefix}: sweep of plan {i} ({}), {} configs; session's {chosen}: {at:.2} us",
                        target.op(),
                        times.len()
                    );
                    for (t, id) in times.iter().take(8) {
                        println!("{prefix}:   {t:.2} us  {id}");
                    }
                }
            }
            drop(st);
        }
    }
    println!("wrote {}", report.write()?.display());
    Ok(())
}
