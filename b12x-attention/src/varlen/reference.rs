//! CPU oracle of `attention.varlen`: the formulas of the module docs in f64, straight loops.
//!
//! Inputs are the values the GPU sees (`q`, `k`, `v` as their dtype rounds them); nothing is
//! rounded here. The GPU accumulates in f32, rounds the probabilities to the input dtype for
//! P·V and rounds `o` once, so comparisons use [`crate::paged::reference::cosine_bound`] and
//! [`crate::paged::reference::elementwise_bound`] (the same kernel arithmetic).

use crate::paging::{packing_ok, FAULT_QUERY_LAYOUT};

/// The static geometry and math options of a call.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Softmax scale applied to `q · k`.
    pub scale: f32,
    /// Bottom-right aligned causal mask.
    pub causal: bool,
    /// A row at position t sees keys `p ≥ t − window_left`; −1 = off.
    pub window_left: i32,
}

/// The packing of one call: `cu_seqlens_q [B+1]`, `cu_seqlens_k [B+1]` and the rows of the
/// packed tensors.
#[derive(Clone, Copy, Debug)]
pub struct HostPacking<'a> {
    pub cu_seqlens_q: &'a [i32],
    pub cu_seqlens_k: &'a [i32],
    pub total_q: usize,
    pub total_k: usize,
}

impl HostPacking<'_> {
    /// B.
    pub fn batch(&self) -> usize {
        self.cu_seqlens_q.len().saturating_sub(1)
    }
    /// Whether both arrays pack their rows validly: `0 ≤ cu[0] ≤ … ≤ cu[B] ≤ total` (else the
    /// whole batch is masked with [`FAULT_QUERY_LAYOUT`]).
    pub fn layout_ok(&self) -> bool {
        packing_ok(self.cu_seqlens_q, self.batch(), self.total_q)
            && packing_ok(self.cu_seqlens_k, self.batch(), self.total_k)
    }
}

/// What the op writes for every packed row and head (the same record as `attention.paged`'s oracle).
pub use crate::paged::reference::Output;

/// The keys `[lo, hi)` visible to query row i of a sequence with `q_len` queries and `k_len`
/// keys (position `t = k_len − q_len + i`, which may be negative: then a causal row sees nothing).
pub fn visible(i: usize, q_len: usize, k_len: usize, causal: bool, window_left: i32) -> std::ops::Range<usize> {
    let t = k_len as i64 - q_len as i64 + i as i64;
    let hi = if causal { (t + 1).clamp(0, k_len as i64) } else { k_len as i64 };
    let lo = if window_left >= 0 { (t - i64::from(window_left)).clamp(0, k_len as i64) } else { 0 };
    lo as usize..(hi.max(lo)) as usize
}

/// Attention of every query row of every packed sequence.
///
/// `q [total_q, H, D]`, `k`, `v [total_k, Hkv, D]` (row-major, contiguous), `sinks [H]` when on.
/// With a bad packing every row is written as `o = 0`, `lse = −inf`.
pub fn varlen(pack: &HostPacking<'_>, g: &Geometry, q: &[f32], k: &[f32], v: &[f32], sinks: Option<&[f32]>) -> Output {
    let (h_n, hkv, d_n) = (g.heads, g.kv_heads, g.head_dim);
    let group = h_n / hkv;
    let rows = pack.total_q;
    let mut out = Output::new(rows, h_n, d_n);
    if !pack.layout_ok() {
        out.faults = FAULT_QUERY_LAYOUT;
        out.written.fill(true);
        return out;
    }
    for b in 0..pack.batch() {
        let (q0, q1) = (pack.cu_seqlens_q[b] as usize, pack.cu_seqlens_q[b + 1] as usize);
        let (k0, k1) = (pack.cu_seqlens_k[b] as usize, pack.cu_seqlens_k[b + 1] as usize);
        let (q_len, k_len) = (q1 - q0, k1 - k0);
        for i in 0..q_len {
            let keys = visible(i, q_len, k_len, g.causal, g.window_left);
            let row = q0 + i;
            for h in 0..h_n {
                let kh = h / group;
                let idx = row * h_n + h;
                out.written[idx] = true;
                let qv = &q[idx * d_n..][..d_n];
                let logits: Vec<f64> = keys
                    .clone()
                    .map(|j| {
                        let kv = &k[((k0 + j) * hkv + kh) * d_n..][..d_n];
                        f64::from(g.scale) * qv.iter().zip(kv).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum::<f64>()
                    })
                    .collect();
                let sink = sinks.map(|s| f64::from(s[h]));
                let m = logits.iter().copied().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                if m == f64::NEG_INFINITY {
                    continue; // no key, no sink: o = 0, lse = −inf
                }
                let denom: f64 =
                    logits.iter().map(|s| (s - m).exp()).sum::<f64>() + sink.map_or(0.0, |s| (s - m).exp());
                let lse = m + denom.ln();
                out.lse[idx] = lse;
                let o = &mut out.o[idx * d_n..][..d_n];
                for (j, s) in keys.clone().zip(&logits) {
                    let w = (s - lse).exp();
                    let vv = &v[((k0 + j) * hkv + kh) * d_n..][..d_n];
                    for (od, &x) in o.iter_mut().zip(vv) {
                        *od += w * f64::from(x);
                    }
                }
            }
        }
    }
    out
}
