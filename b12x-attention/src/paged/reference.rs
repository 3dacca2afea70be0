//! CPU oracle of `attention.paged`: the formulas of the module docs in f64, straight loops.
//!
//! Inputs are the values the GPU sees: `q` as its dtype rounds it, K/V as the cache's element
//! values (BF16/FP16 values, or E4M3 code values) with the per-request, per-KV-head scales
//! applied here (`k = code · k_scale[b, g]`). No rounding happens here; the GPU rounds `o` once
//! to Q's dtype and accumulates in f32, so comparisons use [`cosine_bound`] and
//! [`elementwise_bound`].

use crate::paging::{HostBatch, FAULT_PAGE_ID, FAULT_QUERY_LAYOUT};

/// The static geometry and math options of a call.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Softmax scale applied to `q · k`.
    pub scale: f32,
    /// Sliding window: a row at position t sees keys `t − window_left ..= t`; −1 = off.
    pub window_left: i32,
}

/// The cache values of one of K or V: `values [num_pages, P, Hkv, D]` (element values, not
/// scaled) and, for E4M3 caches, `scales [B, Hkv]`.
#[derive(Clone, Copy, Debug)]
pub struct HostKv<'a> {
    pub values: &'a [f32],
    pub scales: Option<&'a [f32]>,
}

impl HostKv<'_> {
    /// Element d of KV head `kv_head` at cache token `token` (= page · P + slot), request b.
    fn at(&self, g: &Geometry, token: usize, kv_head: usize, b: usize, d: usize) -> f64 {
        let i = (token * g.kv_heads + kv_head) * g.head_dim + d;
        let s = self.scales.map_or(1.0, |s| f64::from(s[b * g.kv_heads + kv_head]));
        f64::from(self.values[i]) * s
    }
}

/// What the op writes for every packed row and head.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    /// `[total_q, H, D]`.
    pub o: Vec<f64>,
    /// `[total_q, H]` (natural log; includes the sink; −inf for a row without keys or sink).
    pub lse: Vec<f64>,
    /// Rows (packed row, head) that belong to a valid request (the others are zero / −inf
    /// when masked, untouched when padding): `[total_q, H]`.
    pub written: Vec<bool>,
    /// Fault bits (`crate::paging`).
    pub faults: u32,
}

impl Output {
    /// Nothing written yet: `o = 0`, `lse = −inf`, no faults, for `rows` packed rows.
    pub fn new(rows: usize, heads: usize, head_dim: usize) -> Self {
        Output {
            o: vec![0.0; rows * heads * head_dim],
            lse: vec![f64::NEG_INFINITY; rows * heads],
            written: vec![false; rows * heads],
            faults: 0,
        }
    }
}

/// The visible key positions of a row at position `t` (context length `len`).
pub fn visible(t: usize, window_left: i32) -> std::ops::RangeInclusive<usize> {
    let lo = if window_left >= 0 { t.saturating_sub(window_left as usize) } else { 0 };
    lo..=t
}

/// Attention of every new token of `batch` against its paged context.
///
/// `q [total_q, H, D]`; `sinks [H]` when on. Rows of a request that fails the length checks,
/// and every row with a bad `cu_seqlens_q`, are written as `o = 0`, `lse = −inf`; keys on a page
/// whose id is out of range are invisible and raise [`FAULT_PAGE_ID`].
pub fn paged(
    batch: &HostBatch<'_>,
    g: &Geometry,
    q: &[f32],
    k: HostKv<'_>,
    v: HostKv<'_>,
    sinks: Option<&[f32]>,
) -> Output {
    let (h_n, d_n) = (g.heads, g.head_dim);
    let group = g.heads / g.kv_heads;
    let rows = batch.total_q;
    let mut out = Output::new(rows, h_n, d_n);
    if !batch.layout_ok() {
        out.faults = FAULT_QUERY_LAYOUT;
        out.written.fill(true);
        return out;
    }
    let p = batch.page_size;
    for b in 0..batch.batch() {
        let (lo, hi) = (batch.cu_seqlens_q[b] as usize, batch.cu_seqlens_q[b + 1] as usize);
        let req = match batch.request(b) {
            Ok(r) => r,
            Err(f) => {
                if hi > lo {
                    out.faults |= f;
                }
                out.written[lo * h_n..hi * h_n].fill(true);
                continue;
            }
        };
        for i in 0..req.q_len {
            let t = req.seq_len - req.q_len + i;
            let row = req.row0 + i;
            let keys = visible(t, g.window_left);
            let mut pages_ok = Vec::with_capacity(t + 1);
            for pos in keys.clone() {
                let page = batch.page(b, pos);
                if page.is_none() {
                    out.faults |= FAULT_PAGE_ID;
                }
                pages_ok.push(page);
            }
            for h in 0..h_n {
                let kh = h / group;
                let qv = &q[(row * h_n + h) * d_n..][..d_n];
                let logits: Vec<Option<f64>> = keys
                    .clone()
                    .zip(&pages_ok)
                    .map(|(pos, page)| {
                        page.map(|pg| {
                            let dot: f64 =
                                (0..d_n).map(|d| f64::from(qv[d]) * k.at(g, pg * p + pos % p, kh, b, d)).sum();
                            f64::from(g.scale) * dot
                        })
                    })
                    .collect();
                let sink = sinks.map(|s| f64::from(s[h]));
                let m = logits.iter().flatten().copied().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                let idx = row * h_n + h;
                out.written[idx] = true;
                if m == f64::NEG_INFINITY {
                    continue; // no key, no sink: o = 0, lse = −inf
                }
                let denom: f64 =
                    logits.iter().flatten().map(|s| (s - m).exp()).sum::<f64>() + sink.map_or(0.0, |s| (s - m).exp());
                let lse = m + denom.ln();
                out.lse[idx] = lse;
                let o = &mut out.o[idx * d_n..][..d_n];
                for ((pos, page), s) in keys.clone().zip(&pages_ok).zip(&logits) {
                    let (Some(pg), Some(s)) = (page, s) else { continue };
                    let w = (s - lse).exp();
                    for (d, od) in o.iter_mut().enumerate() {
                        *od += w * v.at(g, *pg * p + pos % p, kh, b, d);
                    }
                }
            }
        }
    }
    out
}

/// The cosine-difference bound of a row of `o` against the oracle (BF16/FP16 KV: the f32
/// accumulation and one rounding of o to bf16 give ~1e-6; 1e-5 is the metric).
pub fn cosine_bound(kv_e4m3: bool) -> f64 {
    // E4M3 K/V: the GPU sees the same code values as the oracle (no extra rounding of K/V),
    // but P is rounded to f16 before P·V (the E4M3 MMAs run in f16): same order of error.
    if kv_e4m3 {
        2e-5
    } else {
        1e-5
    }
}

/// Elementwise bound of o: `atol + rtol·|want|` with the output dtype's half-ULP relative error
/// plus the bf16 rounding of the probabilities P (8 bits) against a max |v|.
pub fn elementwise_bound(want: f64, max_abs_v: f64, bf16_out: bool) -> f64 {
    let rtol = if bf16_out { 1.0 / 128.0 } else { 1.0 / 1024.0 };
    rtol * want.abs() + max_abs_v / 256.0
}
