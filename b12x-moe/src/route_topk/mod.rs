//! `moe.route_topk`: a token's router logits → its k experts and their weights.
//!
//! ```text
//! s[t, e]   = score(z[t, e])                      computed in f64, rounded once to f32
//! key[t, e] = s[t, e] + bias[e]                   one f32 add (bias: selection only)
//! ids[t, :] = the k experts of largest key, in decreasing key order; ties → the lower id
//!             (hash routing instead: ids[t, :] = tid2eid[token_id[t], :], in table order)
//! w[t, i]   = s[t, ids[t, i]]                     (the score, never the biased key)
//! renormalize: w[t, i] = f32(w[t, i] / Σ_j w[t, j])   (sum and division in f64)
//! w[t, i]   = w[t, i] · route_scale               one f32 multiply
//! ```
//!
//! - Scores ([`ScoreFn`]): `Softmax` over the row of E logits (Qwen3-MoE; with `renormalize`
//!   it is also gpt-oss's softmax over the k selected logits, the same numbers), `Sigmoid`
//!   (DeepSeek-V3), `SqrtSoftplus` = `sqrt(softplus(z))` with PyTorch's softplus (`z` itself
//!   above 20) (DeepSeek-V4).
//! - Expert ids are global (`[0, E)`). Untrusted inputs are masked, never clamped: a hash table
//!   entry outside `[0, E)` leaves its slot masked (id −1, weight 0, excluded from the
//!   renormalizing sum) and sets [`FAULT_EXPERT_ID`]; a token id outside the table's rows masks
//!   the token's k slots and sets [`FAULT_TOKEN_ID`]. A row whose slots are all masked keeps
//!   weights 0.
//! - Non-finite logits: a NaN logit makes its score NaN (under `Softmax`, the whole row's), and
//!   NaN keys rank below every number, so they are picked only when fewer than k keys are
//!   numbers; ±∞ follow IEEE arithmetic (softmax of a row holding +∞ is NaN, as in PyTorch).
//! - The reference rounds each score once from f64; a kernel computing `expf` / `log1pf` in f32
//!   lands within a few f32 ulps, so its selection may differ from the oracle's only among
//!   experts whose keys are that close to the k-th: [`reference::check_selection`] accepts
//!   exactly those differences.
//!
//! Status: CPU oracle only (the kernel, its plan and GPU suite are issue 7's next steps).

pub mod reference;

use b12x_core::{Error, Result};

/// The op id.
pub const OP: &str = "moe.route_topk";
/// Fault bit: a hash-table entry outside `[0, E)` (its slot masked).
pub const FAULT_EXPERT_ID: u32 = 1;
/// Fault bit: a token id outside the hash table's rows (the token's slots masked).
pub const FAULT_TOKEN_ID: u32 = 2;
/// The most experts a router may have.
pub const MAX_EXPERTS: usize = 4096;
/// The most experts a token may pick.
pub const MAX_TOP_K: usize = 32;

/// The router's score function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoreFn {
    /// `exp(z_e − max z) / Σ_j exp(z_j − max z)` over the token's E logits.
    Softmax,
    /// `1 / (1 + exp(−z))`.
    Sigmoid,
    /// `sqrt(softplus(z))`, `softplus(z) = ln(1 + exp(z))`, or `z` when `z > 20` (PyTorch's
    /// threshold).
    SqrtSoftplus,
}

/// How tokens pick their experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Top-k of the scores, or of `scores + bias` with a per-expert f32 bias that affects the
    /// selection only (DeepSeek's correction bias).
    TopK { bias: bool },
    /// `ids = tid2eid[token_id]` from an i32 table `[vocab, k]` (DeepSeek-V4's first layers);
    /// the weights still come from the scores.
    Hash { vocab: usize },
}

/// A router's static problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Query {
    /// E: the router's experts (global ids `[0, E)`).
    pub experts: usize,
    /// k: experts per token.
    pub top_k: usize,
    pub score: ScoreFn,
    pub selection: Selection,
    /// Divide the k weights by their sum.
    pub renormalize: bool,
    /// Multiplies every weight (after renormalization); finite and > 0.
    pub route_scale: f32,
}

impl Query {
    /// DeepSeek-V4: sqrtsoftplus scores, top-k of `scores + bias` (or hash routing on the first
    /// layers: `hash_vocab`), renormalized, route scale 2.5.
    pub fn deepseek_v4(experts: usize, top_k: usize, hash_vocab: Option<usize>) -> Query {
        let selection = match hash_vocab {
            Some(vocab) => Selection::Hash { vocab },
            None => Selection::TopK { bias: true },
        };
        Query { experts, top_k, score: ScoreFn::SqrtSoftplus, selection, renormalize: true, route_scale: 2.5 }
    }
    /// Qwen3-MoE: softmax over E, top-k, renormalized (`norm_topk_prob`).
    pub fn qwen3_moe(experts: usize, top_k: usize) -> Query {
        Query {
            experts,
            top_k,
            score: ScoreFn::Softmax,
            selection: Selection::TopK { bias: false },
            renormalize: true,
            route_scale: 1.0,
        }
    }
    /// gpt-oss: top-k of the logits, softmax over the k selected — the same ids and weights as
    /// softmax over E, top-k, renormalized.
    pub fn gpt_oss(experts: usize, top_k: usize) -> Query {
        Query::qwen3_moe(experts, top_k)
    }

    /// Checks the fields; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if self.experts == 0 || self.experts > MAX_EXPERTS {
            return bad("experts", format!("must be in [1, {MAX_EXPERTS}], got {}", self.experts));
        }
        if self.top_k == 0 || self.top_k > MAX_TOP_K.min(self.experts) {
            return bad(
                "top_k",
                format!("must be in [1, min({MAX_TOP_K}, experts = {})], got {}", self.experts, self.top_k),
            );
        }
        if !(self.route_scale.is_finite() && self.route_scale > 0.0) {
            return bad("route_scale", format!("must be finite and > 0, got {}", self.route_scale));
        }
        if let Selection::Hash { vocab: 0 } = self.selection {
            return bad("selection", "a hash table needs at least one row (vocab > 0)".into());
        }
        Ok(())
    }
}
