//! CPU oracle of `moe.route_topk`: straight loops, the executable spec (the math and rounding
//! points are in the [module docs](super)).

use super::{Router, ScoreFn, Selection, FAULT_EXPERT_ID, FAULT_TOKEN_ID};
use std::cmp::Ordering;

/// One call's result: `ids [T, k]` (−1 in masked slots), `weights [T, k]` (0 there) and the
/// fault bits.
#[derive(Clone, Debug, PartialEq)]
pub struct Routed {
    pub ids: Vec<i32>,
    pub weights: Vec<f32>,
    pub faults: u32,
}

/// The scores of one token's logits `[E]`, each computed in f64 and rounded once to f32.
pub fn scores(score: ScoreFn, logits: &[f32]) -> Vec<f32> {
    match score {
        ScoreFn::Softmax => {
            if logits.iter().any(|z| z.is_nan()) {
                return vec![f32::NAN; logits.len()];
            }
            let m = logits.iter().fold(f64::NEG_INFINITY, |m, &z| m.max(f64::from(z)));
            let e: Vec<f64> = logits.iter().map(|&z| (f64::from(z) - m).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.iter().map(|&v| (v / sum) as f32).collect()
        }
        ScoreFn::Sigmoid => logits.iter().map(|&z| (1.0 / (1.0 + (-f64::from(z)).exp())) as f32).collect(),
        ScoreFn::SqrtSoftplus => logits
            .iter()
            .map(|&z| {
                let z = f64::from(z);
                let sp = if z > 20.0 { z } else { z.exp().ln_1p() };
                sp.sqrt() as f32
            })
            .collect(),
    }
}

/// The selection keys of one token: `s + bias` (one f32 add), or `s` without a bias.
pub fn keys(s: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
    match bias {
        Some(b) => s.iter().zip(b).map(|(&s, &b)| s + b).collect(),
        None => s.to_vec(),
    }
}

/// The selection order: larger keys first, NaN after every number, ties to the lower id.
fn rank(keys: &[f32], a: usize, b: usize) -> Ordering {
    match (keys[a].is_nan(), keys[b].is_nan()) {
        (false, false) => keys[b].partial_cmp(&keys[a]).unwrap_or(Ordering::Equal).then(a.cmp(&b)),
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (true, true) => a.cmp(&b),
    }
}

/// The k experts of largest key, in decreasing key order (ties: lower id first).
pub fn top_k(keys: &[f32], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| rank(keys, a, b));
    order.truncate(k);
    order
}

/// The weights of slots `ids` (−1: masked) from the token's scores: the scores, renormalized
/// over the unmasked slots (f64 sum and division, one rounding) when `q.renormalize`, times
/// the route scale (one f32 multiply); masked slots get 0.
pub fn weights(q: &Router, s: &[f32], ids: &[i32]) -> Vec<f32> {
    let raw: Vec<f32> = ids.iter().map(|&e| if e >= 0 { s[e as usize] } else { 0.0 }).collect();
    let sum: f64 = ids.iter().zip(&raw).filter(|(&e, _)| e >= 0).map(|(_, &w)| f64::from(w)).sum();
    raw.iter()
        .zip(ids)
        .map(|(&w, &e)| {
            if e < 0 {
                return 0.0;
            }
            let w = if q.renormalize && sum != 0.0 { (f64::from(w) / sum) as f32 } else { w };
            w * q.route_scale
        })
        .collect()
}

/// Top-k routing of `logits [T, E]` (`Selection::TopK`; `bias [E]` when it has one).
///
/// # Panics
/// If the slices do not match `q` (this is a test oracle, not a user entry point).
pub fn route(q: &Router, logits: &[f32], bias: Option<&[f32]>) -> Routed {
    let e = q.experts;
    assert!(matches!(q.selection, Selection::TopK { .. }) && logits.len() % e == 0);
    assert!(bias.is_none_or(|b| b.len() == e));
    let t = logits.len() / e;
    let (mut ids, mut weights_out) = (Vec::with_capacity(t * q.top_k), Vec::with_capacity(t * q.top_k));
    for row in logits.chunks(e) {
        let s = scores(q.score, row);
        let chosen: Vec<i32> = top_k(&keys(&s, bias), q.top_k).into_iter().map(|i| i as i32).collect();
        weights_out.extend(weights(q, &s, &chosen));
        ids.extend(chosen);
    }
    Routed { ids, weights: weights_out, faults: 0 }
}

/// Hash routing (`Selection::Hash`): token t's experts are `tid2eid[token_ids[t], :]`
/// (`tid2eid [vocab, k]`), its weights come from `logits [T, E]`. Bad table entries and token
/// ids are masked and reported (module docs).
///
/// # Panics
/// If the slices do not match `q`.
pub fn route_hash(q: &Router, logits: &[f32], token_ids: &[i32], tid2eid: &[i32]) -> Routed {
    let Selection::Hash { vocab } = q.selection else { panic!("route_hash needs Selection::Hash") };
    let (e, k) = (q.experts, q.top_k);
    assert!(logits.len() == token_ids.len() * e && tid2eid.len() == vocab * k);
    let mut out = Routed { ids: Vec::new(), weights: Vec::new(), faults: 0 };
    for (row, &tok) in logits.chunks(e).zip(token_ids) {
        let chosen: Vec<i32> = if tok < 0 || tok as usize >= vocab {
            out.faults |= FAULT_TOKEN_ID;
            vec![-1; k]
        } else {
            tid2eid[tok as usize * k..][..k]
                .iter()
                .map(|&id| {
                    if id < 0 || id as usize >= e {
                        out.faults |= FAULT_EXPERT_ID;
                        -1
                    } else {
                        id
                    }
                })
                .collect()
        };
        out.weights.extend(weights(q, &scores(q.score, row), &chosen));
        out.ids.extend(chosen);
    }
    out
}

/// Whether a kernel's selection `got [k]` for one token is acceptable against the oracle's
/// keys `[E]`: k distinct experts, slot i holding an expert whose key lies within `tol`
/// (absolute) of the key of the oracle's slot-i expert. So only near-ties may trade places —
/// within the top k, or across the k-th key (a kernel computing scores with f32 `expf` differs
/// from the once-rounded oracle by a few ulps; a test picks `tol` as that many ulps of the keys'
/// size); with `tol` = 0 the selection must be the oracle's up to experts with equal keys.
/// NaN keys match only NaN keys. Returns the first violation.
pub fn check_selection(keys: &[f32], got: &[i32], tol: f32) -> Result<(), String> {
    let want = top_k(keys, got.len());
    let mut seen = vec![false; keys.len()];
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        if g < 0 || g as usize >= keys.len() {
            return Err(format!("slot {i}: id {g} is not an expert"));
        }
        let g = g as usize;
        if std::mem::replace(&mut seen[g], true) {
            return Err(format!("slot {i}: expert {g} picked twice"));
        }
        let (kg, kw) = (keys[g], keys[w]);
        // Equal keys always match (two infinities differ by NaN, not by 0).
        let close =
            if kg.is_nan() || kw.is_nan() { kg.is_nan() && kw.is_nan() } else { kg == kw || (kg - kw).abs() <= tol };
        if !close {
            return Err(format!("slot {i}: expert {g} (key {kg}), the oracle has {w} (key {kw})"));
        }
    }
    Ok(())
}
