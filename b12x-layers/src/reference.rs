//! The decoder layer on the CPU, composed from the ops' oracles: `norm.rmsnorm`'s fused
//! add-and-normalize, `attention.rope`'s rotation, `attention.paged`'s attention (one request at a
//! time over its own pages), `activation.silu_and_mul`, and the GEMMs as the gemv oracles define
//! them (`y = x · Wᵀ` over the weight's exact values — the dequantized ones for block FP8 and
//! NVFP4 — summed in f64). Every op's output is rounded to bf16, as on the GPU; requests run in
//! parallel on all cores.
//!
//! The GPU layer's `y` and `residual` are compared with this layer's by the cosine difference
//! `1 − cos(gpu, cpu)` over the whole `[B, hidden]` tensor per step ([`cosine_diff`]).

use crate::dense::{Config, HostWeights};
use crate::par_map;
use b12x_attention::paged::reference::{paged, Geometry, HostKv};
use b12x_attention::paging::HostBatch;
use b12x_attention::rope;
use b12x_core::half::bf16;
use b12x_core::DType;
use b12x_norm::rmsnorm::reference::rmsnorm_add;
use b12x_norm::silu_and_mul::reference::silu_and_mul;

fn bf(v: f64) -> f32 {
    bf16::from_f64(v).to_f32()
}

fn to_bf16(v: &[f32]) -> Vec<bf16> {
    v.iter().map(|&x| bf16::from_f32(x)).collect()
}

/// `[rows, n]` = `x [rows, k] · W [n, k]ᵀ`, f64 sums, rounded to bf16.
pub fn linear(x: &[f32], rows: usize, w: &[f32], n: usize, k: usize) -> Vec<f32> {
    let cols = par_map(n, |j| {
        let wr = &w[j * k..][..k];
        (0..rows)
            .map(|r| bf(x[r * k..][..k].iter().zip(wr).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum()))
            .collect::<Vec<f32>>()
    });
    let mut y = vec![0f32; rows * n];
    for (j, c) in cols.iter().enumerate() {
        for r in 0..rows {
            y[r * n + j] = c[r];
        }
    }
    y
}

/// `1 − cos(a, b)` in f64 (0 for identical directions; 1 − 0 when either is all zero).
pub fn cosine_diff(a: &[f32], b: &[f32]) -> f64 {
    let (mut ab, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return 1.0;
    }
    1.0 - ab / (aa.sqrt() * bb.sqrt())
}

/// One request's cache on the host: `[tokens, Hkv, D]` bf16 values of K and V.
#[derive(Clone, Debug, Default)]
pub struct RequestKv {
    pub k: Vec<f32>,
    pub v: Vec<f32>,
}

/// The reference layer.
pub struct Layer<'a> {
    pub cfg: Config,
    pub w: &'a HostWeights,
    /// One per request.
    pub kv: Vec<RequestKv>,
}

impl<'a> Layer<'a> {
    pub fn new(cfg: &Config, w: &'a HostWeights, kv: Vec<RequestKv>) -> Self {
        Layer { cfg: *cfg, w, kv }
    }

    /// The rope query the GPU layer plans (positions up to `max_position`).
    fn rope_query(&self, heads: usize, max_position: usize) -> rope::Query {
        let c = &self.cfg;
        rope::Query {
            heads,
            kv_heads: 0,
            head_dim: c.head_dim,
            rotary_dim: c.head_dim,
            rotary_offset: 0,
            style: rope::RopeStyle::Neox,
            base: c.rope_theta,
            yarn: None,
            dtype: DType::BF16,
            max_tokens: 1,
            max_position,
            cos_sin: rope::CosSin::Computed,
        }
    }

    /// One decode step: `x`, `residual` `[B, hidden]` bf16 values; `residual` is updated; returns
    /// `y [B, hidden]`. Each request's cache grows by one token (its new K and V).
    pub fn step(&mut self, x: &[f32], residual: &mut [f32]) -> Vec<f32> {
        let c = self.cfg;
        let b = self.kv.len();
        let (hd, h, hkv, d) = (c.hidden, c.heads, c.kv_heads, c.head_dim);
        let lin = &self.w.linears;
        // 1. residual ← x + residual, h = rmsnorm(residual) · ln1.
        let mut res = to_bf16(residual);
        let hn = rmsnorm_add(&to_bf16(x), &mut res, &to_bf16(&self.w.ln1), c.eps);
        let hn: Vec<f32> = hn.iter().map(|v| v.to_f32()).collect();
        // 2. qkv.
        let qkv = linear(&hn, b, &lin[0].values, lin[0].n, lin[0].k);
        let cols = c.qkv_cols();
        // 3. rope on q and k at position L_b (the new token's), rounded to bf16.
        let positions: Vec<i32> = self.kv.iter().map(|r| (r.k.len() / (hkv * d)) as i32).collect();
        let max_position = positions.iter().map(|&p| p as usize + 1).max().unwrap_or(1);
        let mut q: Vec<f32> = (0..b).flat_map(|r| qkv[r * cols..][..h * d].to_vec()).collect();
        let mut k: Vec<f32> = (0..b).flat_map(|r| qkv[r * cols + h * d..][..hkv * d].to_vec()).collect();
        let v: Vec<f32> = (0..b).flat_map(|r| qkv[r * cols + (h + hkv) * d..][..hkv * d].to_vec()).collect();
        rope::reference::rotate(&self.rope_query(h, max_position), &positions, h, &mut q);
        rope::reference::rotate(&self.rope_query(hkv, max_position), &positions, hkv, &mut k);
        let q: Vec<f32> = q.iter().map(|&x| bf(f64::from(x))).collect();
        let k: Vec<f32> = k.iter().map(|&x| bf(f64::from(x))).collect();
        // 4. append; 5. attention per request (its cache as pages 0, 1, … of its own).
        for (r, kv) in self.kv.iter_mut().enumerate() {
            kv.k.extend_from_slice(&k[r * hkv * d..][..hkv * d]);
            kv.v.extend_from_slice(&v[r * hkv * d..][..hkv * d]);
        }
        let p = c.page_size;
        let geo = Geometry { heads: h, kv_heads: hkv, head_dim: d, scale: c.softmax_scale(), window_left: -1 };
        let o: Vec<f32> = par_map(b, |r| {
            let kv = &self.kv[r];
            let len = kv.k.len() / (hkv * d);
            let pages = len.div_ceil(p);
            let pad = |x: &[f32]| {
                let mut y = x.to_vec();
                y.resize(pages * p * hkv * d, 0.0);
                y
            };
            let (kc, vc) = (pad(&kv.k), pad(&kv.v));
            let table: Vec<i32> = (0..pages as i32).collect();
            let lens = [len as i32];
            let batch = HostBatch {
                page_table: &table,
                max_pages: pages,
                seq_lens: &lens,
                cu_seqlens_q: &[0, 1],
                total_q: 1,
                page_size: p,
                num_pages: pages,
            };
            let out = paged(
                &batch,
                &geo,
                &q[r * h * d..][..h * d],
                HostKv { values: &kc, scales: None },
                HostKv { values: &vc, scales: None },
                None,
            );
            out.o.iter().map(|&x| bf(x)).collect::<Vec<f32>>()
        })
        .into_iter()
        .flatten()
        .collect();
        // 6. o_proj; 7. residual ← proj + residual, h = rmsnorm(residual) · ln2.
        let proj = linear(&o, b, &lin[1].values, lin[1].n, lin[1].k);
        let hn2 = rmsnorm_add(&to_bf16(&proj), &mut res, &to_bf16(&self.w.ln2), c.eps);
        let hn2: Vec<f32> = hn2.iter().map(|v| v.to_f32()).collect();
        for (dst, r) in residual.iter_mut().zip(&res) {
            *dst = r.to_f32();
        }
        // 8. gate_up; 9. silu_and_mul; 10. down.
        let gu = linear(&hn2, b, &lin[2].values, lin[2].n, lin[2].k);
        let act: Vec<f32> = silu_and_mul(&to_bf16(&gu), c.intermediate, None).iter().map(|v| v.to_f32()).collect();
        let _ = hd;
        linear(&act, b, &lin[3].values, lin[3].n, lin[3].k)
    }
}
