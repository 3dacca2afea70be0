//! GPU tests of the b12x-core lifecycle, driven through `norm.rmsnorm` (the simplest op):
//! selection precedence (pin > cached > race > default), the on-disk cache across sessions
//! (also with a corrupt file), release, freeze, and capture. Ignored without a CUDA device.

use b12x_core::testing::{run_gpu_trials, GpuTrial};
use b12x_core::{DType, Device, Error, OpPlan, PreparationSession, Scratch, SelectionSource, TensorMut, TensorRef};
use b12x_norm::rmsnorm::{self, Args, Plan, Query};
use std::path::PathBuf;
use std::sync::Arc;

type TrialResult = Result<(), String>;

fn fresh_cache(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("b12x-session-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn plan(dev: &Arc<Device>, cols: usize) -> Result<Plan, String> {
    let q = Query { cols, dtype: DType::BF16, max_tokens: 4096, eps: 1e-6, residual: false };
    rmsnorm::plan(&q, dev).map_err(|e| e.to_string())
}

fn sources(recs: &[b12x_core::SelectionRecord]) -> Vec<SelectionSource> {
    recs.iter().map(|r| r.source).collect()
}

/// A freshly raced selection is cached; a new session (same cache dir) reuses it without a race.
fn cache_reuse(dev: &Arc<Device>) -> TrialResult {
    let dir = fresh_cache("reuse");
    let p = plan(dev, 4096)?;
    assert!(p.candidates(0).len() > 1, "D=4096 must have several configs for this test");
    let mut s1 = PreparationSession::new(dev).map_err(|e| e.to_string())?.with_cache_dir(&dir).with_autotune(true);
    let r1 = s1.prepare(&[&p]).map_err(|e| e.to_string())?;
    if sources(&r1).iter().any(|s| *s != SelectionSource::Raced) {
        return Err(format!("first prepare should race every bucket: {r1:?}"));
    }
    if r1.iter().any(|r| r.scores_us.is_empty()) {
        return Err("raced records carry scores".into());
    }
    s1.close();
    if p.slot().is_prepared() {
        return Err("close() must release the plans it prepared".into());
    }
    let mut s2 = PreparationSession::new(dev).map_err(|e| e.to_string())?.with_cache_dir(&dir).with_autotune(true);
    let r2 = s2.prepare(&[&p]).map_err(|e| e.to_string())?;
    if sources(&r2).iter().any(|s| *s != SelectionSource::Cached) {
        return Err(format!("second prepare should hit the cache: {r2:?}"));
    }
    for (a, b) in r1.iter().zip(&r2) {
        if a.config != b.config {
            return Err(format!("cached config {} != raced {}", b.config, a.config));
        }
    }
    // Corrupt every cache file: the next session warns, races again and rewrites them.
    for e in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
        std::fs::write(e.map_err(|e| e.to_string())?.path(), b"{ corrupt").map_err(|e| e.to_string())?;
    }
    let p2 = plan(dev, 4096)?;
    let mut s3 = PreparationSession::new(dev).map_err(|e| e.to_string())?.with_cache_dir(&dir).with_autotune(true);
    let r3 = s3.prepare(&[&p2]).map_err(|e| e.to_string())?;
    if sources(&r3).iter().any(|s| *s != SelectionSource::Raced) {
        return Err(format!("corrupt cache must be ignored: {r3:?}"));
    }
    let p3 = plan(dev, 4096)?;
    let r4 = PreparationSession::new(dev)
        .map_err(|e| e.to_string())?
        .with_cache_dir(&dir)
        .prepare(&[&p3])
        .map_err(|e| e.to_string())?;
    if sources(&r4).iter().any(|s| *s != SelectionSource::Cached) {
        return Err(format!("rewritten cache must be reused: {r4:?}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Pins win over the cache; an illegal pin is a typed error; autotune off gives the default.
fn precedence(dev: &Arc<Device>) -> TrialResult {
    let dir = fresh_cache("prec");
    let p = plan(dev, 4096)?;
    let cands = p.candidates(0);
    let last = cands.last().cloned().unwrap_or_default();
    let mut s = PreparationSession::new(dev).map_err(|e| e.to_string())?.with_cache_dir(&dir).with_autotune(false);
    s.pin(&p, &p.buckets()[0].label(), &last);
    let r = s.prepare(&[&p]).map_err(|e| e.to_string())?;
    if r[0].source != SelectionSource::Pinned || r[0].config != last {
        return Err(format!("pin ignored: {:?}", r[0]));
    }
    if r[1..].iter().any(|r| r.source != SelectionSource::Default || r.config != cands[0]) {
        return Err(format!("autotune off must give the default: {r:?}"));
    }
    let q = plan(dev, 4096)?;
    let mut bad = PreparationSession::new(dev).map_err(|e| e.to_string())?.with_cache_dir(&dir);
    bad.pin(&q, &q.buckets()[0].label(), "v999");
    match bad.prepare(&[&q]) {
        Err(Error::UnknownConfig { config, .. }) if config == "v999" => {}
        other => return Err(format!("illegal pin must be UnknownConfig, got {other:?}")),
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// release() drops prepared state; a frozen session then rejects the unprepared run, and
/// closing the frozen session lifts the freeze. A frozen session cannot prepare.
fn release_and_freeze(dev: &Arc<Device>) -> TrialResult {
    let dir = fresh_cache("freeze");
    let p = plan(dev, 1024)?;
    let stream = dev.stream().clone();
    let x = stream.alloc_zeros::<b12x_core::half::bf16>(1024).map_err(|e| e.to_string())?;
    let w = stream.alloc_zeros::<b12x_core::half::bf16>(1024).map_err(|e| e.to_string())?;
    let mut y = stream.alloc_zeros::<b12x_core::half::bf16>(1024).map_err(|e| e.to_string())?;
    let mut go = |p: &Plan| -> b12x_core::Result<()> {
        let args = Args {
            x: TensorRef::from_slice(&x, &[1, 1024])?,
            residual: None,
            w: TensorRef::from_slice(&w, &[1024])?,
            y: TensorMut::from_slice(&mut y, &[1, 1024])?,
        };
        rmsnorm::run(p, args, Scratch::none(), &stream)
    };
    let mut s = PreparationSession::new(dev).map_err(|e| e.to_string())?.with_cache_dir(&dir);
    s.prepare(&[&p]).map_err(|e| e.to_string())?;
    s.freeze();
    go(&p).map_err(|e| format!("prepared plan must run while frozen: {e}"))?;
    match s.prepare(&[&p]) {
        Err(Error::SessionState { state: "frozen", .. }) => {}
        other => return Err(format!("frozen session must refuse prepare, got {other:?}")),
    }
    s.release(&p);
    match go(&p) {
        Err(Error::KernelResolutionFrozen { .. }) => {}
        other => return Err(format!("released plan under freeze must fail, got {other:?}")),
    }
    s.close();
    go(&p).map_err(|e| format!("after close, unprepared use warns and runs: {e}"))?;
    stream.synchronize().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn main() {
    run_gpu_trials(vec![
        GpuTrial::new("session::cache_reuse_and_corruption", cache_reuse),
        GpuTrial::new("session::pin_cache_default_precedence", precedence),
        GpuTrial::new("session::release_freeze_close", release_and_freeze),
    ]);
}
