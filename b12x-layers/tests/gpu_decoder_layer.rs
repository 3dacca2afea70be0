//! GPU test of the dense decoder layer (`b12x_layers::dense::decode_run`, the example's code):
//! Qwen3-8B's shape, B ∈ {1, 8, 64} with contexts spread up to 8k (request 0 crosses a page
//! boundary during the run, so a page is allocated), every weight format, 4 steps. Each
//! step: the captured graph's replay equals the eager step bitwise; `y` and `residual` within
//! [`cosine_bound`] of the CPU reference layer; after the run no fault bit is set, free device
//! memory is unchanged since before the first step (no allocation after freeze), and no kernel
//! was resolved after `freeze()` (every plan's selections are the ones `freeze()` saw, the device
//! frozen throughout; a resolution would also have been `KernelResolutionFrozen`).
//! The layer also runs with `LayerOptions { pdl: true }` (BF16), with 8 attention splits (every
//! format), with `fuse_silu` (BF16, B ≤ 8, plain and PDL; and its typed errors) and with the
//! attention's 8-warp decode tiles (BF16, B ≤ 8, plain and PDL), and with `gate_up_silu` (BF16,
//! every B, plain and PDL; and its typed errors), and with `warm_o_proj` (BF16: PDL + gate/up
//! epilogue at every B, plain at B = 1; and its typed errors), and with `fold_norms` (BF16,
//! B ≤ 8: `Both` and `First` with PDL + gate/up epilogue, `Both` plain at B = 1; and its typed
//! errors), and with `fuse_rope_attention` (BF16 PDL + gate/up epilogue at every B, with
//! `FoldNorms::First` at B ≤ 8, NVFP4 plain at B = 1; and its typed errors), and with
//! `rope_in_qkv` and `norm2_in_o_proj` (BF16, B ≤ 8, PDL + gate/up epilogue, with and without
//! `FoldNorms::First` or `FoldNorms::FirstScale`; plain at B = 1; and their typed errors), and
//! `FoldNorms::FirstScale` alone at B = 1 and 8; `LayerOptions::fast_decode` at every format and
//! batch.
//! `B12X_TEST_PROFILE=reduced` runs B ∈ {1, 8} with 2 steps (sanitizer runs).

use b12x_attention::rope_kv_append;
use b12x_core::testing::{reduced_profile, run_gpu_trials, GpuTrial};
use b12x_core::Error;
use b12x_layers::dense::{
    cosine_bound, decode_run, Capacity, Config, FoldNorms, HostWeights, Layer, LayerOptions, Op, WarmWeight,
    WeightFormat,
};

fn check(
    dev: &std::sync::Arc<b12x_core::Device>,
    format: WeightFormat,
    options: LayerOptions,
    b: usize,
) -> Result<(), String> {
    let steps = if reduced_profile() { 2 } else { 4 };
    let contexts: Vec<usize> = (0..b).map(|i| if i == 0 { 8176 - steps / 2 } else { 1 + (i * 2741) % 8000 }).collect();
    let r =
        decode_run(dev, &Config::qwen3_8b(), format, options, &contexts, steps, true, 7).map_err(|e| e.to_string())?;
    eprintln!("  {} B={b}: 1-cos y {:?} residual {:?}", format.name(), r.y_cosine_diff, r.residual_cosine_diff);
    if r.replay_equals_eager.iter().any(|&ok| !ok) {
        return Err(format!("graph replay differs from eager: {:?}", r.replay_equals_eager));
    }
    let bound = cosine_bound(format);
    for (i, (&y, &res)) in r.y_cosine_diff.iter().zip(&r.residual_cosine_diff).enumerate() {
        if !(y <= bound && res <= bound) {
            return Err(format!("step {i}: 1 - cos(y) = {y:e}, 1 - cos(residual) = {res:e}, bound {bound:e}"));
        }
    }
    if r.y_cosine_diff.len() != steps {
        return Err("the reference did not run".into());
    }
    if r.faults != 0 {
        return Err(format!("fault bits {:#x}", r.faults));
    }
    if r.mem_free_before_after.0 != r.mem_free_before_after.1 {
        return Err(format!("free device memory changed: {:?}", r.mem_free_before_after));
    }
    if r.resolutions_after_freeze != 0 || !r.frozen_throughout {
        return Err(format!(
            "{} kernel resolutions after freeze (frozen throughout: {})",
            r.resolutions_after_freeze, r.frozen_throughout
        ));
    }
    if r.new_pages == 0 {
        return Err("no page was allocated during the run".into());
    }
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    let batches: &[usize] = if reduced_profile() { &[1, 8] } else { &[1, 8, 64] };
    for format in WeightFormat::ALL {
        for &b in batches {
            trials.push(GpuTrial::new(format!("qwen3_8b::{}::b{b}", format.name()), move |dev| {
                check(dev, format, LayerOptions::default(), b)
            }));
        }
    }
    // The PDL launches (bf16_gemv, paged) give the same results.
    for &b in batches {
        trials.push(GpuTrial::new(format!("qwen3_8b::bf16_pdl::b{b}"), move |dev| {
            check(dev, WeightFormat::Bf16, LayerOptions { pdl: true, ..Default::default() }, b)
        }));
        for format in WeightFormat::ALL {
            trials.push(GpuTrial::new(format!("qwen3_8b::{}_pdl_s8::b{b}", format.name()), move |dev| {
                check(dev, format, LayerOptions { pdl: true, attention_splits: Some(8), ..Default::default() }, b)
            }));
        }
    }
    // silu_and_mul folded into the down projection (BF16, B <= 8), plain and with PDL.
    for &b in batches.iter().filter(|&&b| b <= 8) {
        for pdl in [false, true] {
            let name = format!("qwen3_8b::bf16_fused_silu{}::b{b}", if pdl { "_pdl" } else { "" });
            trials.push(GpuTrial::new(name, move |dev| {
                check(dev, WeightFormat::Bf16, LayerOptions { pdl, fuse_silu: true, ..Default::default() }, b)
            }));
        }
    }
    // The attention's 8-warp decode tiles (B <= 8 takes 8-row tiles), with and without PDL.
    for &b in batches.iter().filter(|&&b| b <= 8) {
        for pdl in [false, true] {
            let name = format!("qwen3_8b::bf16_attention_w8{}::b{b}", if pdl { "_pdl" } else { "" });
            trials.push(GpuTrial::new(name, move |dev| {
                let options = LayerOptions {
                    pdl,
                    attention_warps: Some(b12x_attention::paged::WIDE_WARPS),
                    ..Default::default()
                };
                check(dev, WeightFormat::Bf16, options, b)
            }));
        }
    }
    trials.push(GpuTrial::new("qwen3_8b::fused_silu_errors", fused_silu_errors));
    // silu_and_mul folded into the gate/up projection's epilogue (BF16, every B), plain and PDL.
    for &b in batches {
        for pdl in [false, true] {
            let name = format!("qwen3_8b::bf16_gate_up_silu{}::b{b}", if pdl { "_pdl" } else { "" });
            trials.push(GpuTrial::new(name, move |dev| {
                check(dev, WeightFormat::Bf16, LayerOptions { pdl, gate_up_silu: true, ..Default::default() }, b)
            }));
        }
    }
    // The small ops release the next kernel at entry (PDL, gate/up epilogue: the bench's step).
    for &b in batches {
        trials.push(GpuTrial::new(format!("qwen3_8b::bf16_gate_up_silu_pdl_early_release::b{b}"), move |dev| {
            let options = LayerOptions { pdl: true, gate_up_silu: true, early_release: true, ..Default::default() };
            check(dev, WeightFormat::Bf16, options, b)
        }));
    }
    trials.push(GpuTrial::new("qwen3_8b::gate_up_silu_errors", gate_up_silu_errors));
    // rope_kv_append's warm part (the cached keys read through L2 beside the QKV projection):
    // the step's output must not change.
    for &b in batches.iter().filter(|&&b| b <= 8) {
        for pdl in [false, true] {
            let name = format!("qwen3_8b::bf16_warm_kv{}::b{b}", if pdl { "_pdl" } else { "" });
            trials.push(GpuTrial::new(name, move |dev| {
                let warm =
                    rope_kv_append::WarmCache { blocks: dev.sm_count(), read: rope_kv_append::WarmRead::default() };
                let options = LayerOptions { pdl, gate_up_silu: true, warm_kv: Some(warm), ..Default::default() };
                check(dev, WeightFormat::Bf16, options, b)
            }));
        }
    }
    // The O projection's last rows read through L2 on a second stream beside the attention
    // (gemm.l2_warm, fork/join inside the captured step): the step's output must not change.
    for &b in batches {
        trials.push(GpuTrial::new(format!("qwen3_8b::bf16_gate_up_silu_pdl_warm_o::b{b}"), move |dev| {
            let options = LayerOptions {
                pdl: true,
                gate_up_silu: true,
                warm_o_proj: Some(WarmWeight::DEFAULT),
                ..Default::default()
            };
            check(dev, WeightFormat::Bf16, options, b)
        }));
    }
    trials.push(GpuTrial::new("qwen3_8b::bf16_warm_o::b1", move |dev| {
        let options = LayerOptions { warm_o_proj: Some(WarmWeight { percent: 100, ctas: 16 }), ..Default::default() };
        check(dev, WeightFormat::Bf16, options, 1)
    }));
    trials.push(GpuTrial::new("qwen3_8b::warm_o_errors", warm_o_errors));
    // Both add+RMSNorms folded into the QKV and gate/up projections' x loads (B ≤ 8): PDL with
    // the gate/up epilogue at every such B, plain at B = 1.
    for &b in batches.iter().filter(|&&b| b <= 8) {
        trials.push(GpuTrial::new(format!("qwen3_8b::bf16_gate_up_silu_pdl_fold_norms::b{b}"), move |dev| {
            let options =
                LayerOptions { pdl: true, gate_up_silu: true, fold_norms: FoldNorms::Both, ..Default::default() };
            check(dev, WeightFormat::Bf16, options, b)
        }));
        trials.push(GpuTrial::new(format!("qwen3_8b::bf16_gate_up_silu_pdl_fold_norms_first::b{b}"), move |dev| {
            let options =
                LayerOptions { pdl: true, gate_up_silu: true, fold_norms: FoldNorms::First, ..Default::default() };
            check(dev, WeightFormat::Bf16, options, b)
        }));
    }
    trials.push(GpuTrial::new("qwen3_8b::bf16_fold_norms::b1", move |dev| {
        check(dev, WeightFormat::Bf16, LayerOptions { fold_norms: FoldNorms::Both, ..Default::default() }, 1)
    }));
    trials.push(GpuTrial::new("qwen3_8b::fold_norms_errors", fold_norms_errors));
    // Rope, the KV append and the attention in one launch (attention.rope_paged): PDL + gate/up
    // epilogue at every B, plain at B = 1, with norm 1 folded too at B ≤ 8.
    for &b in batches {
        trials.push(GpuTrial::new(format!("qwen3_8b::bf16_gate_up_silu_pdl_rope_attention::b{b}"), move |dev| {
            let options =
                LayerOptions { pdl: true, gate_up_silu: true, fuse_rope_attention: true, ..Default::default() };
            check(dev, WeightFormat::Bf16, options, b)
        }));
        if b <= 8 {
            trials.push(GpuTrial::new(
                format!("qwen3_8b::bf16_gate_up_silu_pdl_first_rope_attention::b{b}"),
                move |dev| {
                    let options = LayerOptions {
                        pdl: true,
                        gate_up_silu: true,
                        fold_norms: FoldNorms::First,
                        fuse_rope_attention: true,
                        ..Default::default()
                    };
                    check(dev, WeightFormat::Bf16, options, b)
                },
            ));
        }
    }
    trials.push(GpuTrial::new("qwen3_8b::nvfp4_rope_attention::b1", move |dev| {
        check(dev, WeightFormat::Nvfp4, LayerOptions { fuse_rope_attention: true, ..Default::default() }, 1)
    }));
    trials.push(GpuTrial::new("qwen3_8b::rope_attention_errors", rope_attention_errors));
    // Rope and the KV append in the QKV projection's epilogue (B ≤ 8): PDL + gate/up epilogue,
    // alone and with norm 1 folded, plain at B = 1.
    for &b in batches.iter().filter(|&&b| b <= 8) {
        trials.push(GpuTrial::new(format!("qwen3_8b::bf16_gate_up_silu_pdl_rope_qkv::b{b}"), move |dev| {
            let options = LayerOptions { pdl: true, gate_up_silu: true, rope_in_qkv: true, ..Default::default() };
            check(dev, WeightFormat::Bf16, options, b)
        }));
        trials.push(GpuTrial::new(format!("qwen3_8b::bf16_gate_up_silu_pdl_first_rope_qkv::b{b}"), move |dev| {
            let options = LayerOptions {
                pdl: true,
                gate_up_silu: true,
                fold_norms: FoldNorms::First,
                rope_in_qkv: true,
                ..Default::default()
            };
            check(dev, WeightFormat::Bf16, options, b)
        }));
    }
    trials.push(GpuTrial::new("qwen3_8b::bf16_rope_qkv::b1", move |dev| {
        check(dev, WeightFormat::Bf16, LayerOptions { rope_in_qkv: true, ..Default::default() }, 1)
    }));
    trials.push(GpuTrial::new("qwen3_8b::rope_qkv_errors", rope_qkv_errors));
    // Norm 2 split between the O projection's epilogue and the gate/up projection (B ≤ 8): PDL +
    // gate/up epilogue + rope in the QKV projection, with norm 1 launched or folded (then the
    // step launches no norm); plain at B = 1 (the gate/up GEMV without its epilogue).
    for &b in batches.iter().filter(|&&b| b <= 8) {
        for (tag, fold_norms) in
            [("", FoldNorms::None), ("_first", FoldNorms::First), ("_first_scale", FoldNorms::FirstScale)]
        {
            trials.push(GpuTrial::new(
                format!("qwen3_8b::bf16_gate_up_silu_pdl{tag}_rope_qkv_norm2::b{b}"),
                move |dev| {
                    let options = LayerOptions {
                        pdl: true,
                        gate_up_silu: true,
                        fold_norms,
                        rope_in_qkv: true,
                        norm2_in_o_proj: true,
                        ..Default::default()
                    };
                    check(dev, WeightFormat::Bf16, options, b)
                },
            ));
        }
    }
    trials.push(GpuTrial::new("qwen3_8b::bf16_norm2::b1", move |dev| {
        check(dev, WeightFormat::Bf16, LayerOptions { norm2_in_o_proj: true, ..Default::default() }, 1)
    }));
    // Norm 1 as a scale in the QKV projection alone (norm 2 launches; plain QKV store), B = 1, 8.
    for b in [1, 8] {
        trials.push(GpuTrial::new(format!("qwen3_8b::bf16_first_scale::b{b}"), move |dev| {
            check(dev, WeightFormat::Bf16, LayerOptions { fold_norms: FoldNorms::FirstScale, ..Default::default() }, b)
        }));
    }
    trials.push(GpuTrial::new("qwen3_8b::norm2_errors", norm2_errors));
    // `LayerOptions::fast_decode` as an engine would take it: every format and batch.
    for format in WeightFormat::ALL {
        for &b in batches {
            trials.push(GpuTrial::new(format!("qwen3_8b::{}_fast_decode::b{b}", format.name()), move |dev| {
                check(dev, format, LayerOptions::fast_decode(format, b), b)
            }));
        }
    }
    run_gpu_trials(trials)
}

/// `norm2_in_o_proj` where it cannot split is a typed error at planning (block-scaled weights,
/// more than 8 rows, with `FoldNorms::Both`); a splitting layer has no norm-2 op (and refuses to
/// launch one alone), plans `norm.rmsnorm` only for norm 1, and refuses weights whose gate/up
/// projection is not folded with norm 2's weight (and a plain layer refuses folded ones).
fn norm2_errors(dev: &std::sync::Arc<b12x_core::Device>) -> Result<(), String> {
    let cfg = Config::qwen3_8b();
    let cap = |b| Capacity { max_batch: b, max_pages: 4, num_pages: 4 * b + 8 };
    let n2 = LayerOptions { norm2_in_o_proj: true, ..Default::default() };
    let bad = [
        (WeightFormat::Nvfp4, 1, n2),
        (WeightFormat::BlockFp8, 1, n2),
        (WeightFormat::Bf16, 9, n2),
        (WeightFormat::Bf16, 1, LayerOptions { fold_norms: FoldNorms::Both, ..n2 }),
    ];
    for (format, b, options) in bad {
        match Layer::with_options(&cfg, format, cap(b), options, dev) {
            Err(Error::InvalidQuery { field: "norm2_in_o_proj", .. }) => {}
            other => {
                return Err(format!(
                    "{} B={b} {options:?}: expected InvalidQuery(norm2_in_o_proj), got {:?}",
                    format.name(),
                    other.err()
                ))
            }
        }
    }
    let e = |e: Error| e.to_string();
    for (fold_norms, norm_plans) in [(FoldNorms::None, 1), (FoldNorms::First, 0), (FoldNorms::FirstScale, 0)] {
        let layer =
            Layer::with_options(&cfg, WeightFormat::Bf16, cap(1), LayerOptions { fold_norms, ..n2 }, dev).map_err(e)?;
        let ops = layer.ops();
        if ops.contains(&Op::AddNorm2) || ops.contains(&Op::AddNorm1) != (fold_norms == FoldNorms::None) {
            return Err(format!("norm2_in_o_proj layer ({fold_norms:?}): ops {ops:?}"));
        }
        let norms = layer.plans().iter().filter(|p| p.op() == "norm.rmsnorm").count();
        if norms != norm_plans {
            return Err(format!("norm2_in_o_proj layer ({fold_norms:?}) plans {norms} norm.rmsnorm"));
        }
    }
    let layer = Layer::with_options(&cfg, WeightFormat::Bf16, cap(1), n2, dev).map_err(e)?;
    let weights = HostWeights::random(&cfg, WeightFormat::Bf16, 3).map_err(e)?;
    let folded = layer.upload_weights(&weights, dev.stream()).map_err(e)?;
    let plain = weights.upload(dev.stream()).map_err(e)?;
    let mut st = layer.state(dev.stream(), 1).map_err(e)?;
    match layer.run_op(Op::AddNorm2, &folded, &mut st, dev.stream()) {
        Err(Error::InvalidQuery { field: "op", .. }) => {}
        other => {
            return Err(format!("add_rmsnorm_2 on a norm2_in_o_proj layer: expected InvalidQuery(op), got {other:?}"))
        }
    }
    match layer.run_op(Op::GateUpProj, &plain, &mut st, dev.stream()) {
        Err(Error::InvalidQuery { field: "weights", .. }) => {}
        other => return Err(format!("unfolded gate/up weights: expected InvalidQuery(weights), got {other:?}")),
    }
    let plain_layer = Layer::with_options(&cfg, WeightFormat::Bf16, cap(1), LayerOptions::default(), dev).map_err(e)?;
    let mut st = plain_layer.state(dev.stream(), 1).map_err(e)?;
    match plain_layer.run_op(Op::GateUpProj, &folded, &mut st, dev.stream()) {
        Err(Error::InvalidQuery { field: "weights", .. }) => {}
        other => {
            return Err(format!(
                "folded gate/up weights on a plain layer: expected InvalidQuery(weights), got {other:?}"
            ))
        }
    }
    // FoldNorms::FirstScale takes only QKV weights folded with norm 1's weight, and only it does.
    let scale = LayerOptions { fold_norms: FoldNorms::FirstScale, ..Default::default() };
    let scale_layer = Layer::with_options(&cfg, WeightFormat::Bf16, cap(1), scale, dev).map_err(e)?;
    let scaled = scale_layer.upload_weights(&weights, dev.stream()).map_err(e)?;
    if !scaled.qkv_norm_folded || scaled.gate_up_norm_folded {
        return Err("FirstScale weights: expected the QKV weight folded, gate/up not".into());
    }
    let mut st = scale_layer.state(dev.stream(), 1).map_err(e)?;
    match scale_layer.run_op(Op::QkvProj, &plain, &mut st, dev.stream()) {
        Err(Error::InvalidQuery { field: "weights", .. }) => {}
        other => {
            return Err(format!(
                "unfolded QKV weights on a FirstScale layer: expected InvalidQuery(weights), got {other:?}"
            ))
        }
    }
    let mut st = plain_layer.state(dev.stream(), 1).map_err(e)?;
    match plain_layer.run_op(Op::QkvProj, &scaled, &mut st, dev.stream()) {
        Err(Error::InvalidQuery { field: "weights", .. }) => Ok(()),
        other => Err(format!("folded QKV weights on a plain layer: expected InvalidQuery(weights), got {other:?}")),
    }
}

/// `rope_in_qkv` where it cannot fold is a typed error at planning (block-scaled weights,
/// more than 8 rows, with fuse_rope_attention or warm_kv); a folding layer plans no
/// `attention.rope_kv_append`, runs no rope_kv_append op and refuses to launch one alone.
fn rope_qkv_errors(dev: &std::sync::Arc<b12x_core::Device>) -> Result<(), String> {
    let cfg = Config::qwen3_8b();
    let cap = |b| Capacity { max_batch: b, max_pages: 4, num_pages: 4 * b + 8 };
    let rq = LayerOptions { rope_in_qkv: true, ..Default::default() };
    let warm = rope_kv_append::WarmCache { blocks: 4, read: rope_kv_append::WarmRead::Load };
    let bad = [
        (WeightFormat::Nvfp4, 1, rq),
        (WeightFormat::Bf16, 9, rq),
        (WeightFormat::Bf16, 1, LayerOptions { fuse_rope_attention: true, ..rq }),
        (WeightFormat::Bf16, 1, LayerOptions { warm_kv: Some(warm), ..rq }),
    ];
    for (format, b, options) in bad {
        match Layer::with_options(&cfg, format, cap(b), options, dev) {
            Err(Error::InvalidQuery { field: "rope_in_qkv", .. }) => {}
            other => {
                return Err(format!(
                    "{} B={b}: expected InvalidQuery(rope_in_qkv), got {:?}",
                    format.name(),
                    other.err()
                ))
            }
        }
    }
    let layer = Layer::with_options(&cfg, WeightFormat::Bf16, cap(1), rq, dev).map_err(|e| e.to_string())?;
    let ops = layer.ops();
    if ops.contains(&Op::RopeKvAppend) || !ops.contains(&Op::QkvProj) {
        return Err(format!("rope_in_qkv layer: ops {ops:?}"));
    }
    let names: Vec<&str> = layer.plans().iter().map(|p| p.op()).collect();
    if names.contains(&"attention.rope_kv_append") || !names.contains(&"attention.paged") {
        return Err(format!("rope_in_qkv layer plans {names:?}"));
    }
    let weights = HostWeights::random(&cfg, WeightFormat::Bf16, 3).map_err(|e| e.to_string())?;
    let dw = layer.upload_weights(&weights, dev.stream()).map_err(|e| e.to_string())?;
    let mut st = layer.state(dev.stream(), 1).map_err(|e| e.to_string())?;
    match layer.run_op(Op::RopeKvAppend, &dw, &mut st, dev.stream()) {
        Err(Error::InvalidQuery { field: "op", .. }) => Ok(()),
        other => Err(format!("rope_kv_append on a rope_in_qkv layer: expected InvalidQuery(op), got {other:?}")),
    }
}

/// `fold_norms` where it cannot fold is a typed error at planning; a folding layer runs no
/// add+RMSNorm op, plans none, and refuses to launch one alone.
fn fold_norms_errors(dev: &std::sync::Arc<b12x_core::Device>) -> Result<(), String> {
    let cfg = Config::qwen3_8b();
    let fold = LayerOptions { fold_norms: FoldNorms::Both, ..Default::default() };
    let cap = |b| Capacity { max_batch: b, max_pages: 4, num_pages: 4 * b + 8 };
    for (format, b) in [(WeightFormat::BlockFp8, 1), (WeightFormat::Nvfp4, 1), (WeightFormat::Bf16, 9)] {
        match Layer::with_options(&cfg, format, cap(b), fold, dev) {
            Err(Error::InvalidQuery { field: "fold_norms", .. }) => {}
            other => {
                return Err(format!(
                    "{} B = {b}: expected InvalidQuery(fold_norms), got {:?}",
                    format.name(),
                    other.err()
                ))
            }
        }
    }
    let layer = Layer::with_options(&cfg, WeightFormat::Bf16, cap(1), fold, dev).map_err(|e| e.to_string())?;
    let ops = layer.ops();
    if ops.len() != 7 || ops.contains(&Op::AddNorm1) || ops.contains(&Op::AddNorm2) {
        return Err(format!("folding layer: ops {ops:?}"));
    }
    if layer.plans().iter().any(|p| p.op() == "norm.rmsnorm") {
        return Err("a folding layer plans norm.rmsnorm".into());
    }
    let weights = HostWeights::random(&cfg, WeightFormat::Bf16, 3).map_err(|e| e.to_string())?;
    let dw = weights.upload(dev.stream()).map_err(|e| e.to_string())?;
    let mut st = layer.state(dev.stream(), 1).map_err(|e| e.to_string())?;
    for op in [Op::AddNorm1, Op::AddNorm2] {
        match layer.run_op(op, &dw, &mut st, dev.stream()) {
            Err(Error::InvalidQuery { field: "op", .. }) => {}
            other => return Err(format!("{op:?} on a folding layer: expected InvalidQuery(op), got {other:?}")),
        }
    }
    // FoldNorms::First: norm 2 still launches, norm 1 alone is refused.
    let first = LayerOptions { fold_norms: FoldNorms::First, ..Default::default() };
    let layer = Layer::with_options(&cfg, WeightFormat::Bf16, cap(1), first, dev).map_err(|e| e.to_string())?;
    let ops = layer.ops();
    if ops.len() != 8 || ops.contains(&Op::AddNorm1) || !ops.contains(&Op::AddNorm2) {
        return Err(format!("FoldNorms::First layer: ops {ops:?}"));
    }
    let mut st = layer.state(dev.stream(), 1).map_err(|e| e.to_string())?;
    match layer.run_op(Op::AddNorm1, &dw, &mut st, dev.stream()) {
        Err(Error::InvalidQuery { field: "op", .. }) => {}
        other => {
            return Err(format!("add_rmsnorm_1 on a FoldNorms::First layer: expected InvalidQuery(op), got {other:?}"))
        }
    }
    layer.run_op(Op::AddNorm2, &dw, &mut st, dev.stream()).map_err(|e| e.to_string())?;
    dev.stream().synchronize().map_err(|e| e.to_string())?;
    Ok(())
}

/// `fuse_rope_attention` with `warm_kv` is a typed error at planning; a fusing layer plans
/// `attention.rope_paged` and no `attention.rope_kv_append` or `attention.paged`, runs no
/// rope_kv_append op, and refuses to launch one alone.
fn rope_attention_errors(dev: &std::sync::Arc<b12x_core::Device>) -> Result<(), String> {
    let cfg = Config::qwen3_8b();
    let cap = Capacity { max_batch: 1, max_pages: 4, num_pages: 12 };
    let fused = LayerOptions { fuse_rope_attention: true, ..Default::default() };
    let warm = rope_kv_append::WarmCache { blocks: 4, read: rope_kv_append::WarmRead::Load };
    match Layer::with_options(&cfg, WeightFormat::Bf16, cap, LayerOptions { warm_kv: Some(warm), ..fused }, dev) {
        Err(Error::InvalidQuery { field: "fuse_rope_attention", .. }) => {}
        other => {
            return Err(format!("with warm_kv: expected InvalidQuery(fuse_rope_attention), got {:?}", other.err()))
        }
    }
    let layer = Layer::with_options(&cfg, WeightFormat::Bf16, cap, fused, dev).map_err(|e| e.to_string())?;
    let ops = layer.ops();
    if ops.len() != 8 || ops.contains(&Op::RopeKvAppend) {
        return Err(format!("fusing layer: ops {ops:?}"));
    }
    let names: Vec<&str> = layer.plans().iter().map(|p| p.op()).collect();
    if !names.contains(&"attention.rope_paged")
        || names.contains(&"attention.rope_kv_append")
        || names.contains(&"attention.paged")
    {
        return Err(format!("fusing layer plans {names:?}"));
    }
    let weights = HostWeights::random(&cfg, WeightFormat::Bf16, 3).map_err(|e| e.to_string())?;
    let dw = weights.upload(dev.stream()).map_err(|e| e.to_string())?;
    let mut st = layer.state(dev.stream(), 1).map_err(|e| e.to_string())?;
    match layer.run_op(Op::RopeKvAppend, &dw, &mut st, dev.stream()) {
        Err(Error::InvalidQuery { field: "op", .. }) => Ok(()),
        other => Err(format!("rope_kv_append on a fusing layer: expected InvalidQuery(op), got {other:?}")),
    }
}

/// `warm_o_proj` where it cannot warm is a typed error at planning; a warming layer prepares
/// `gemm.l2_warm` with its other plans.
fn warm_o_errors(dev: &std::sync::Arc<b12x_core::Device>) -> Result<(), String> {
    let cfg = Config::qwen3_8b();
    let cap = Capacity { max_batch: 1, max_pages: 4, num_pages: 12 };
    let with = |percent| LayerOptions { warm_o_proj: Some(WarmWeight { percent, ctas: 0 }), ..Default::default() };
    for format in [WeightFormat::BlockFp8, WeightFormat::Nvfp4] {
        match Layer::with_options(&cfg, format, cap, with(30), dev) {
            Err(Error::InvalidQuery { field: "warm_o_proj", .. }) => {}
            other => {
                return Err(format!("{}: expected InvalidQuery(warm_o_proj), got {:?}", format.name(), other.err()))
            }
        }
    }
    for percent in [0, 101] {
        match Layer::with_options(&cfg, WeightFormat::Bf16, cap, with(percent), dev) {
            Err(Error::InvalidQuery { field: "warm_o_proj", .. }) => {}
            other => {
                return Err(format!("percent {percent}: expected InvalidQuery(warm_o_proj), got {:?}", other.err()))
            }
        }
    }
    let layer = Layer::with_options(&cfg, WeightFormat::Bf16, cap, with(30), dev).map_err(|e| e.to_string())?;
    if !layer.plans().iter().any(|p| p.op() == "gemm.l2_warm") {
        return Err("a warm_o_proj layer has no gemm.l2_warm plan".into());
    }
    Ok(())
}

/// `fuse_silu` where it cannot fuse is a typed error at planning; a fused layer runs eight ops
/// and refuses to launch `silu_and_mul` alone.
fn fused_silu_errors(dev: &std::sync::Arc<b12x_core::Device>) -> Result<(), String> {
    let cfg = Config::qwen3_8b();
    let fused = LayerOptions { fuse_silu: true, ..Default::default() };
    let cap = |b| Capacity { max_batch: b, max_pages: 4, num_pages: 4 * b + 8 };
    for format in [WeightFormat::BlockFp8, WeightFormat::Nvfp4] {
        match Layer::with_options(&cfg, format, cap(1), fused, dev) {
            Err(Error::InvalidQuery { field: "fuse_silu", .. }) => {}
            other => return Err(format!("{}: expected InvalidQuery(fuse_silu), got {:?}", format.name(), other.err())),
        }
    }
    match Layer::with_options(&cfg, WeightFormat::Bf16, cap(9), fused, dev) {
        Err(Error::InvalidQuery { field: "x_act", .. }) => {}
        other => return Err(format!("B = 9: expected InvalidQuery(x_act), got {:?}", other.err())),
    }
    let layer = Layer::with_options(&cfg, WeightFormat::Bf16, cap(1), fused, dev).map_err(|e| e.to_string())?;
    if layer.ops().len() != 8 || layer.ops().contains(&Op::SiluAndMul) || layer.plans().len() != 7 {
        return Err(format!("fused layer: ops {:?}, {} plans", layer.ops(), layer.plans().len()));
    }
    let unfused = Layer::with_options(&cfg, WeightFormat::Bf16, cap(1), LayerOptions::default(), dev)
        .map_err(|e| e.to_string())?;
    if unfused.ops() != Op::ALL || unfused.plans().len() != 8 {
        return Err(format!("unfused layer: ops {:?}, {} plans", unfused.ops(), unfused.plans().len()));
    }
    let weights = HostWeights::random(&cfg, WeightFormat::Bf16, 3).map_err(|e| e.to_string())?;
    let dw = weights.upload(dev.stream()).map_err(|e| e.to_string())?;
    let mut st = layer.state(dev.stream(), 1).map_err(|e| e.to_string())?;
    match layer.run_op(Op::SiluAndMul, &dw, &mut st, dev.stream()) {
        Err(Error::InvalidQuery { field: "op", .. }) => Ok(()),
        other => Err(format!("silu_and_mul on a fused layer: expected InvalidQuery(op), got {other:?}")),
    }
}

/// `gate_up_silu` where it cannot fuse is a typed error at planning; the layer runs eight ops,
/// refuses to launch `silu_and_mul` alone, and refuses gate/up weights in the plain layout.
fn gate_up_silu_errors(dev: &std::sync::Arc<b12x_core::Device>) -> Result<(), String> {
    let cfg = Config::qwen3_8b();
    let gs = LayerOptions { gate_up_silu: true, ..Default::default() };
    let cap = |b| Capacity { max_batch: b, max_pages: 4, num_pages: 4 * b + 8 };
    for format in [WeightFormat::BlockFp8, WeightFormat::Nvfp4] {
        match Layer::with_options(&cfg, format, cap(1), gs, dev) {
            Err(Error::InvalidQuery { field: "gate_up_silu", .. }) => {}
            other => {
                return Err(format!("{}: expected InvalidQuery(gate_up_silu), got {:?}", format.name(), other.err()))
            }
        }
    }
    match Layer::with_options(&cfg, WeightFormat::Bf16, cap(1), LayerOptions { fuse_silu: true, ..gs }, dev) {
        Err(Error::InvalidQuery { field: "gate_up_silu", .. }) => {}
        other => return Err(format!("with fuse_silu: expected InvalidQuery(gate_up_silu), got {:?}", other.err())),
    }
    let layer = Layer::with_options(&cfg, WeightFormat::Bf16, cap(1), gs, dev).map_err(|e| e.to_string())?;
    if layer.ops().len() != 8 || layer.ops().contains(&Op::SiluAndMul) || layer.plans().len() != 7 {
        return Err(format!("gate_up_silu layer: ops {:?}, {} plans", layer.ops(), layer.plans().len()));
    }
    let mut session = b12x_core::PreparationSession::new(dev).map_err(|e| e.to_string())?;
    session.prepare(&layer.plans()).map_err(|e| e.to_string())?;
    let weights = HostWeights::random(&cfg, WeightFormat::Bf16, 3).map_err(|e| e.to_string())?;
    let plain = weights.upload(dev.stream()).map_err(|e| e.to_string())?;
    let mut st = layer.state(dev.stream(), 1).map_err(|e| e.to_string())?;
    match layer.run_op(Op::SiluAndMul, &plain, &mut st, dev.stream()) {
        Err(Error::InvalidQuery { field: "op", .. }) => {}
        other => return Err(format!("silu_and_mul on a gate_up_silu layer: expected InvalidQuery(op), got {other:?}")),
    }
    match layer.run_op(Op::GateUpProj, &plain, &mut st, dev.stream()) {
        Err(Error::InvalidQuery { field: "weights", .. }) => {}
        other => return Err(format!("plain gate/up weights: expected InvalidQuery(weights), got {other:?}")),
    }
    let interleaved = layer.upload_weights(&weights, dev.stream()).map_err(|e| e.to_string())?;
    layer.run_op(Op::GateUpProj, &interleaved, &mut st, dev.stream()).map_err(|e| e.to_string())?;
    dev.stream().synchronize().map_err(|e| e.to_string())?;
    session.close();
    Ok(())
}
