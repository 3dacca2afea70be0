//! The example's and the GPU test's scenario, and the reference bound.

use super::{Batch, Capacity, Config, HostWeights, Layer, LayerOptions, WeightFormat};
use b12x_core::half::bf16;
use b12x_core::{Device, OpPlan, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// What [`decode_run`] measured.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Per step: `1 − cos` of the GPU's `y` and `residual` against the reference layer's.
    pub y_cosine_diff: Vec<f64>,
    pub residual_cosine_diff: Vec<f64>,
    /// Per step: the graph replay's `y` and `residual` equal the eager step's bitwise.
    pub replay_equals_eager: Vec<bool>,
    /// Free device memory before the first eager step and after the last one (equal: no
    /// allocation after freeze).
    pub mem_free_before_after: (usize, usize),
    /// The error word after the run (0: no fault).
    pub faults: u32,
    /// Pages allocated during the run (contexts crossing a page boundary).
    pub new_pages: usize,
    /// (plan, bucket) selections that were missing at `freeze()` or differ after the run from
    /// the ones `freeze()` saw: kernel resolutions after freeze (0; with the device frozen any
    /// resolution is also an `Error::KernelResolutionFrozen`).
    pub resolutions_after_freeze: usize,
    /// The device stayed frozen from `freeze()` to the last step.
    pub frozen_throughout: bool,
}

/// Every bucket's prepared selection of every plan (`None` where unprepared).
fn selections(plans: &[&dyn OpPlan]) -> Vec<Option<Arc<b12x_core::Selected>>> {
    plans.iter().flat_map(|p| (0..p.buckets().len()).map(|b| p.slot().get(b))).collect()
}

/// The example's and the GPU test's scenario: weights of `format`, B = `contexts.len()` requests
/// with those cached contexts (random K/V), every plan prepared by one session and frozen, the
/// step captured as one graph on one state and run eagerly on another; then `steps` steps, each
/// with a new token per request (a new page where one fills), fresh random inputs, the graph
/// replayed, the eager step run, and the reference layer stepped. `reference: false` skips the
/// CPU layer (its cosine rows stay empty).
#[allow(clippy::too_many_arguments)]
pub fn decode_run(
    dev: &Arc<Device>,
    cfg: &Config,
    format: WeightFormat,
    options: LayerOptions,
    contexts: &[usize],
    steps: usize,
    reference: bool,
    seed: u64,
) -> Result<RunReport> {
    let stream = dev.stream();
    let b = contexts.len();
    let p = cfg.page_size;
    let max_ctx = contexts.iter().copied().max().unwrap_or(0) + steps;
    let max_pages = max_ctx.div_ceil(p);
    let num_pages = contexts.iter().map(|&c| (c + steps).div_ceil(p)).sum::<usize>() + 8;
    let cap = Capacity { max_batch: b, max_pages, num_pages };
    let weights = HostWeights::random(cfg, format, seed)?;
    let layer = Layer::with_options(cfg, format, cap, options, dev)?;
    let dw = layer.upload_weights(&weights, stream)?;
    let mut session = b12x_core::PreparationSession::new(dev)?;
    session.prepare(&layer.plans())?;
    session.freeze();
    let at_freeze = selections(&layer.plans());
    let mut frozen = dev.is_frozen();

    // Cached contexts: random K/V in [-1, 1] (bf16), the same in both device states and the
    // reference.
    let mut batch = Batch::new(contexts, p, max_pages, num_pages, seed ^ 0x5eed)?;
    let row = cfg.kv_heads * cfg.head_dim;
    let mut kc = vec![bf16::ZERO; num_pages * p * row];
    let mut vc = kc.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xcace);
    let mut kv = Vec::new();
    for (r, &c) in contexts.iter().enumerate() {
        let k: Vec<f32> = (0..c * row).map(|_| bf16::from_f32(rng.random_range(-1.0..1.0)).to_f32()).collect();
        let v: Vec<f32> = (0..c * row).map(|_| bf16::from_f32(rng.random_range(-1.0..1.0)).to_f32()).collect();
        for t in 0..c {
            let slot = (batch.pages[r][t / p] as usize * p + t % p) * row;
            for e in 0..row {
                kc[slot + e] = bf16::from_f32(k[t * row + e]);
                vc[slot + e] = bf16::from_f32(v[t * row + e]);
            }
        }
        kv.push(crate::reference::RequestKv { k, v });
    }
    let mut eager = layer.state(stream, b)?;
    let mut replay = layer.state(stream, b)?;
    eager.upload_cache(&kc, &vc, stream)?;
    replay.upload_cache(&kc, &vc, stream)?;
    drop((kc, vc));
    let mut cpu = crate::reference::Layer::new(cfg, &weights, if reference { kv } else { Vec::new() });

    let graph = session.capture(stream, |s| layer.step(&dw, &mut replay, s))?;
    let mut report = RunReport::default();
    let pages_before: usize = batch.pages.iter().map(Vec::len).sum();
    stream.synchronize()?;
    let free_before = dev.mem_free()?;
    let mut inputs = ChaCha8Rng::seed_from_u64(seed ^ 0x1197);
    for _ in 0..steps {
        batch.advance()?;
        let n = b * cfg.hidden;
        let x: Vec<f32> = (0..n).map(|_| bf16::from_f32(inputs.random_range(-1.0..1.0)).to_f32()).collect();
        let mut res: Vec<f32> = (0..n).map(|_| bf16::from_f32(inputs.random_range(-2.0..2.0)).to_f32()).collect();
        for st in [&mut eager, &mut replay] {
            st.upload_batch(&batch, stream)?;
            st.upload_inputs(&x, &res, stream)?;
        }
        layer.step(&dw, &mut eager, stream)?;
        frozen &= dev.is_frozen();
        // SAFETY: the graph replays `replay`'s buffers and the weights, alive until the end.
        unsafe { graph.launch() }?;
        let (ye, re) = eager.outputs(stream)?;
        let (yr, rr) = replay.outputs(stream)?;
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        report.replay_equals_eager.push(same(&ye, &yr) && same(&re, &rr));
        if reference {
            let y = cpu.step(&x, &mut res);
            report.y_cosine_diff.push(crate::reference::cosine_diff(&ye, &y));
            report.residual_cosine_diff.push(crate::reference::cosine_diff(&re, &res));
        }
    }
    stream.synchronize()?;
    report.mem_free_before_after = (free_before, dev.mem_free()?);
    report.faults = eager.error.read(stream)?.0 | replay.error.read(stream)?.0;
    report.new_pages = batch.pages.iter().map(Vec::len).sum::<usize>() - pages_before;
    let after = selections(&layer.plans());
    report.resolutions_after_freeze = at_freeze
        .iter()
        .zip(&after)
        .filter(|(a, b)| match (a, b) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
            _ => true,
        })
        .count();
    report.frozen_throughout = frozen && dev.is_frozen();
    drop(graph);
    session.close();
    Ok(report)
}

/// Cosine-difference bound of the GPU layer against the reference, per weight format. The
/// reference computes with the same weight values (dequantized for block FP8 / NVFP4) and the
/// same bf16 rounding points, so what remains is summation order and 1-ULP differences of single
/// roundings, alike for every format.
pub fn cosine_bound(format: WeightFormat) -> f64 {
    match format {
        WeightFormat::Bf16 | WeightFormat::BlockFp8 | WeightFormat::Nvfp4 => 1e-4,
    }
}
