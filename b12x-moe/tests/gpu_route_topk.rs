//! GPU validation of `moe.route_topk` (libtest-mimic; listed as ignored without a CUDA device)
//! against its CPU oracle (`route_topk::reference`).
//!
//! Comparison rule (a decision, see the op's docs): the kernel's scores use f32 `expf` /
//! `log1pf` / `sqrtf` and an f32 sum, the oracle's are f64 rounded once, so
//! - the selection of every token must pass `reference::check_selection` with `tol` = 16 f32
//!   ulps of the row's largest |key| (only near-ties may trade places);
//! - each weight must be within 1e-5 relative (+1e-30 absolute) of the oracle's weight **for
//!   the kernel's own ids** (`reference::weights`), NaN where the oracle has NaN;
//! - hash routing's ids and the error word must be exact.
//!
//! Cases: the four model routers (DeepSeek-V4 sqrtsoftplus with bias, its hash layers,
//! Qwen3-MoE softmax, gpt-oss) and a sigmoid router without renormalization, at T ∈ {1, 5, 64,
//! 4096} on seeded random logits (and bias); equal logits (ties to the lower id, weights exactly
//! 1/k); non-finite logits (NaN rows, a NaN expert, ±∞); hash tables with entries outside
//! `[0, E)` and token ids outside the table; graph replay with new logits equals eager; `run`
//! allocates nothing.

use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::testing::{check_run_allocates_nothing, reduced_profile, run_gpu_trials, uniform, GpuTrial};
use b12x_core::{Device, PreparationSession, Scratch, TensorMut, TensorRef};
use b12x_moe::route_topk::reference::{self, check_selection, keys, scores};
use b12x_moe::route_topk::{self, Args, Query, Router, ScoreFn, Selection, FAULT_EXPERT_ID, FAULT_TOKEN_ID};
use std::sync::Arc;

type TrialResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// One call's host inputs.
struct Case {
    router: Router,
    logits: Vec<f32>,
    bias: Vec<f32>,
    token_ids: Vec<i32>,
    tid2eid: Vec<i32>,
}

impl Case {
    fn tokens(&self) -> usize {
        self.logits.len() / self.router.experts
    }
    fn random(router: Router, t: usize, seed: u64) -> Case {
        let e = router.experts;
        let logits = uniform(seed, t * e, -6.0, 6.0);
        let bias = uniform(seed + 1, e, -0.3, 0.3);
        let (token_ids, tid2eid) = match router.selection {
            Selection::Hash { vocab } => {
                let ids = uniform(seed + 2, t, 0.0, vocab as f32).iter().map(|&v| v as i32).collect();
                let table = uniform(seed + 3, vocab * router.top_k, 0.0, e as f32).iter().map(|&v| v as i32).collect();
                (ids, table)
            }
            Selection::TopK { .. } => (Vec::new(), Vec::new()),
        };
        Case { router, logits, bias, token_ids, tid2eid }
    }
}

/// Device buffers of one call.
struct Dev {
    logits: CudaSlice<f32>,
    bias: CudaSlice<f32>,
    token_ids: CudaSlice<i32>,
    tid2eid: CudaSlice<i32>,
    ids: CudaSlice<i32>,
    weights: CudaSlice<f32>,
    error: CudaSlice<i32>,
}

fn upload(c: &Case, s: &Arc<CudaStream>) -> Result<Dev, String> {
    let n = c.tokens() * c.router.top_k;
    let nonempty = |v: &[i32]| if v.is_empty() { vec![0] } else { v.to_vec() };
    Ok(Dev {
        logits: s.clone_htod(&c.logits).map_err(err)?,
        bias: s.clone_htod(&c.bias).map_err(err)?,
        token_ids: s.clone_htod(&nonempty(&c.token_ids)).map_err(err)?,
        tid2eid: s.clone_htod(&nonempty(&c.tid2eid)).map_err(err)?,
        ids: s.clone_htod(&vec![-7i32; n.max(1)]).map_err(err)?,
        weights: s.clone_htod(&vec![f32::NAN; n.max(1)]).map_err(err)?,
        error: s.alloc_zeros(1).map_err(err)?,
    })
}

fn args<'a>(c: &Case, d: &'a mut Dev) -> Result<Args<'a>, String> {
    let (t, e, k) = (c.tokens(), c.router.experts, c.router.top_k);
    let hash = matches!(c.router.selection, Selection::Hash { .. });
    let biased = matches!(c.router.selection, Selection::TopK { bias: true });
    Ok(Args {
        logits: TensorRef::from_slice(&d.logits, &[t, e]).map_err(err)?,
        bias: biased.then(|| TensorRef::from_slice(&d.bias, &[e])).transpose().map_err(err)?,
        token_ids: hash.then(|| TensorRef::from_slice(&d.token_ids, &[t])).transpose().map_err(err)?,
        tid2eid: hash.then(|| TensorRef::from_slice(&d.tid2eid, &[c.tid2eid.len() / k, k])).transpose().map_err(err)?,
        ids: TensorMut::from_slice(&mut d.ids, &[t, k]).map_err(err)?,
        weights: TensorMut::from_slice(&mut d.weights, &[t, k]).map_err(err)?,
        error: TensorMut::from_slice(&mut d.error, &[1]).map_err(err)?,
    })
}

fn prepared(
    dev: &Arc<Device>,
    router: Router,
    max_tokens: usize,
) -> Result<(route_topk::Plan, PreparationSession), String> {
    let plan = route_topk::plan(&Query { router, max_tokens }, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&plan]).map_err(err)?;
    Ok((plan, session))
}

/// The kernel's ids, weights and error word for `c`.
fn run(dev: &Arc<Device>, c: &Case) -> Result<(Vec<i32>, Vec<f32>, u32), String> {
    let s = dev.stream();
    let (plan, _session) = prepared(dev, c.router, c.tokens().max(1))?;
    let mut d = upload(c, s)?;
    route_topk::run(&plan, args(c, &mut d)?, Scratch::none(), s).map_err(err)?;
    let n = c.tokens() * c.router.top_k;
    let ids = s.clone_dtoh(&d.ids).map_err(err)?[..n].to_vec();
    let w = s.clone_dtoh(&d.weights).map_err(err)?[..n].to_vec();
    Ok((ids, w, s.clone_dtoh(&d.error).map_err(err)?[0] as u32))
}

/// The comparison rule of the module docs.
fn compare(c: &Case, ids: &[i32], w: &[f32], error: u32) -> TrialResult {
    let r = &c.router;
    let (e, k) = (r.experts, r.top_k);
    let hash = matches!(r.selection, Selection::Hash { .. });
    let want = if hash {
        reference::route_hash(r, &c.logits, &c.token_ids, &c.tid2eid)
    } else {
        reference::route(r, &c.logits, matches!(r.selection, Selection::TopK { bias: true }).then_some(&c.bias[..]))
    };
    if error != want.faults {
        return Err(format!("error word {error:#x}, the oracle has {:#x}", want.faults));
    }
    for (t, row) in c.logits.chunks(e).enumerate() {
        let got = &ids[t * k..][..k];
        let s = scores(r.score, row);
        if hash {
            if got != &want.ids[t * k..][..k] {
                return Err(format!("token {t}: ids {got:?}, the oracle has {:?}", &want.ids[t * k..][..k]));
            }
        } else {
            let keys = keys(&s, matches!(r.selection, Selection::TopK { bias: true }).then_some(&c.bias[..]));
            let scale = keys.iter().filter(|v| v.is_finite()).fold(0.0f32, |m, v| m.max(v.abs()));
            check_selection(&keys, got, 16.0 * f32::EPSILON * scale).map_err(|m| format!("token {t}: {m}"))?;
        }
        let ww = reference::weights(r, &s, got);
        for (j, (&g, &o)) in w[t * k..][..k].iter().zip(&ww).enumerate() {
            let ok = if o.is_nan() { g.is_nan() } else { (g - o).abs() <= 1e-5 * o.abs() + 1e-30 };
            if !ok {
                return Err(format!("token {t} slot {j} (expert {}): weight {g}, the oracle {o}", got[j]));
            }
        }
    }
    Ok(())
}

fn check(dev: &Arc<Device>, c: &Case) -> TrialResult {
    let (ids, w, error) = run(dev, c)?;
    compare(c, &ids, &w, error)
}

fn routers() -> Vec<(&'static str, Router)> {
    vec![
        ("deepseek_v4_flash", Router::deepseek_v4(256, 6, None)),
        ("deepseek_v41_flash", Router::deepseek_v4(384, 6, None)),
        ("deepseek_v4_hash", Router::deepseek_v4(256, 6, Some(1000))),
        ("qwen3_30b_a3b", Router::qwen3_moe(128, 8)),
        ("gpt_oss_120b", Router::gpt_oss(128, 4)),
        (
            "sigmoid_unnormalized_e4096_k32",
            Router {
                experts: 4096,
                top_k: 32,
                score: ScoreFn::Sigmoid,
                selection: Selection::TopK { bias: true },
                renormalize: false,
                route_scale: 1.0,
            },
        ),
    ]
}

fn trials() -> Vec<GpuTrial> {
    let mut out = Vec::new();
    let tokens: &[usize] = if reduced_profile() { &[1, 5, 64] } else { &[1, 5, 64, 4096] };
    for (name, router) in routers() {
        for &t in tokens {
            out.push(GpuTrial::new(format!("{name}::t{t}"), move |dev| check(dev, &Case::random(router, t, t as u64))));
        }
    }
    // Equal logits: ids 0..k (ties to the lower id), each weight route_scale / k (exactly for
    // softmax, whose scores 1/E and their sums are exact; within 4 ulps for sqrtsoftplus, whose
    // f32 running sum of k equal scores rounds).
    out.push(GpuTrial::new("equal_logits_tie_to_lower_ids", |dev| {
        for router in [Router::qwen3_moe(128, 8), Router::gpt_oss(128, 4), Router::deepseek_v4(256, 8, None)] {
            let mut c = Case::random(router, 3, 1);
            c.logits.iter_mut().for_each(|v| *v = 0.25);
            c.bias.iter_mut().for_each(|v| *v = 0.0);
            let (ids, w, error) = run(dev, &c)?;
            let k = router.top_k;
            let want_ids: Vec<i32> = (0..3).flat_map(|_| 0..k as i32).collect();
            let want_w = router.route_scale / k as f32;
            let tol = if router.score == ScoreFn::Softmax { 0.0 } else { 4.0 * f32::EPSILON * want_w };
            if ids != want_ids || error != 0 || w.iter().any(|&v| (v - want_w).abs() > tol) {
                return Err(format!("{router:?}: ids {ids:?}, weights {w:?}, error {error}"));
            }
        }
        Ok(())
    }));
    // Non-finite logits follow the oracle: a NaN softmax row, a NaN sigmoid expert ranked last,
    // infinities.
    out.push(GpuTrial::new("non_finite_logits", |dev| {
        let routers = [
            Router::qwen3_moe(64, 4),
            Router { score: ScoreFn::Sigmoid, ..Router::deepseek_v4(64, 4, None) },
            Router::deepseek_v4(64, 4, None),
        ];
        for router in routers {
            let mut c = Case::random(router, 4, 9);
            c.logits[3] = f32::NAN;
            c.logits[64 + 10] = f32::INFINITY;
            c.logits[128 + 5] = f32::NEG_INFINITY;
            c.logits[192..256].iter_mut().for_each(|v| *v = f32::NAN);
            check(dev, &c).map_err(|m| format!("{:?}: {m}", router.score))?;
        }
        Ok(())
    }));
    // Hash routing with bad entries: masked slots, both fault bits, renormalization over the rest.
    out.push(GpuTrial::new("hash_bad_entries_masked", |dev| {
        let router = Router::deepseek_v4(256, 6, Some(50));
        let mut c = Case::random(router, 64, 21);
        c.tid2eid[7] = 256;
        c.tid2eid[13] = -1;
        c.tid2eid[6 * 3..6 * 4].iter_mut().for_each(|v| *v = 1000);
        c.token_ids[0] = 7 / 6;
        c.token_ids[1] = 3;
        c.token_ids[2] = 50;
        c.token_ids[3] = -5;
        let (ids, w, error) = run(dev, &c)?;
        if error != FAULT_EXPERT_ID | FAULT_TOKEN_ID {
            return Err(format!("error word {error:#x}"));
        }
        compare(&c, &ids, &w, error)
    }));
    out.push(GpuTrial::new("graph_replay_with_new_logits_equals_eager", graph_replay));
    out.push(GpuTrial::new("run_allocates_nothing", |dev| {
        let c = Case::random(Router::deepseek_v4(256, 6, None), 8, 4);
        let (plan, _session) = prepared(dev, c.router, 8)?;
        let s = dev.stream();
        let mut d = upload(&c, s)?;
        check_run_allocates_nothing(dev, s, 20, || {
            let a = args(&c, &mut d).map_err(|e| b12x_core::Error::SessionState { state: "test", what: e })?;
            route_topk::run(&plan, a, Scratch::none(), s)
        })
    }));
    out
}

/// Captured on one set of logits, replayed after new logits (and bias) are uploaded into the
/// same buffers: equal to an eager call on the new ones.
fn graph_replay(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let router = Router::deepseek_v4(256, 6, None);
    let (c0, c1) = (Case::random(router, 16, 30), Case::random(router, 16, 31));
    let (plan, session) = prepared(dev, router, 16)?;
    let mut d = upload(&c0, s)?;
    let exec = session
        .capture(s, |st| {
            let a = args(&c0, &mut d).map_err(|e| b12x_core::Error::SessionState { state: "test", what: e })?;
            route_topk::run(&plan, a, Scratch::none(), st)
        })
        .map_err(err)?;
    s.memcpy_htod(&c1.logits, &mut d.logits).map_err(err)?;
    s.memcpy_htod(&c1.bias, &mut d.bias).map_err(err)?;
    // SAFETY: the graph's buffers live in `d`, alive here.
    unsafe { exec.launch() }.map_err(err)?;
    let ids = s.clone_dtoh(&d.ids).map_err(err)?;
    let w = s.clone_dtoh(&d.weights).map_err(err)?;
    let (eager_ids, eager_w, _) = run(dev, &c1)?;
    if ids != eager_ids || w.iter().zip(&eager_w).any(|(a, b)| a.to_bits() != b.to_bits()) {
        return Err("the replay on new logits differs from an eager call on them".into());
    }
    compare(&c1, &ids, &w, 0)
}

fn main() {
    run_gpu_trials(trials())
}
