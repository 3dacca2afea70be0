//! GPU validation of `attention.paged` against the f64 oracle (libtest-mimic; every trial is
//! listed as ignored when no CUDA device is present).
//!
//! Each trial builds a batch with scattered, non-contiguous page tables, random q and caches
//! (E4M3 caches from random codes, with per-request, per-KV-head scales), runs the op with `o`
//! and `lse` poisoned, and checks every written row: cosine difference of all of `o` ≤
//! `reference::cosine_bound`, each element within `reference::elementwise_bound`, `lse` within
//! 2e-5 (−inf exactly), padding rows untouched, the error word equal to the oracle's faults.
//! Cases: Llama-3-8B, Qwen3-30B-A3B, gpt-oss-120b (sinks, window 127), D = 256, D = 96, group
//! sizes 1, 5 and 16; BF16, FP16 and E4M3 caches; decode at B = 1 and 127, lengths 1, P−1, P,
//! P+1, 32k+3, empty requests, extend / verify, pages shared between requests, out-of-range
//! page ids, bad lengths and a bad `cu_seqlens_q`, NaN in the stale slots past each length, split
//! caps 1, 7 and 64 (and the typed error outside them), the 3-stage ring variants, 8-row tiles
//! holding several new tokens, the cluster and the scratch merges of split partials at caps 2–8
//! (each against the oracle, and the same bits as each other). Further trials: a graph replayed after the
//! lengths and page tables change equals eager and the oracle, `run` allocates nothing, a frozen
//! session rejects an unprepared plan, bad inputs are typed errors that launch nothing.
//! `B12X_TEST_PROFILE=reduced` drops the long contexts and large batches (sanitizer runs).

mod common;

use b12x_attention::paged::{self, reference, Args, Plan, PlanOptions, Query};
use b12x_attention::paging::{ErrorWord, Faults};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::{bf16, f16};
use b12x_core::testing::{
    check_run_allocates_nothing, cosine_diff, reduced_profile, run_gpu_trials, uniform, GpuTrial,
};
use b12x_core::{DType, Device, Error, Scratch, TensorMut, TensorRef};
use b12x_quant::codec::{e4m3_decode, e4m3_encode};
use common::{err, host, make_batch, prepared, round, Batch, Req, TrialResult, FAULTS};
use std::sync::Arc;

#[derive(Clone, Copy, Debug)]
struct Geo {
    h: usize,
    hkv: usize,
    d: usize,
    p: usize,
    q_dtype: DType,
    kv_dtype: DType,
    window: i32,
    sinks: bool,
}

struct Case {
    g: Geo,
    batch: Batch,
    max_q_len: usize,
    q: Vec<f32>,
    /// Element values (not scaled) of the caches.
    k: Vec<f32>,
    v: Vec<f32>,
    k_scale: Vec<f32>,
    v_scale: Vec<f32>,
    sinks: Vec<f32>,
}

fn case(g: Geo, batch: Batch, seed: u64) -> Case {
    let max_q_len = batch.cu.windows(2).map(|w| (w[1] - w[0]).max(1) as usize).max().unwrap_or(1);
    let q = round(g.q_dtype, uniform(seed, batch.rows * g.h * g.d, -1.0, 1.0));
    let n = batch.num_pages * g.p * g.hkv * g.d;
    let b = batch.lens.len();
    let (k, v, k_scale, v_scale) = if g.kv_dtype == DType::E4M3 {
        // Codes of values in ±40 (scaled by 0.02..0.05: keys of magnitude ≤ 2).
        let codes = |s| uniform(s, n, -40.0, 40.0).iter().map(|&x| e4m3_decode(e4m3_encode(x))).collect::<Vec<_>>();
        (
            codes(seed + 1),
            codes(seed + 2),
            uniform(seed + 3, b * g.hkv, 0.02, 0.05),
            uniform(seed + 4, b * g.hkv, 0.02, 0.05),
        )
    } else {
        (
            round(g.q_dtype, uniform(seed + 1, n, -1.0, 1.0)),
            round(g.q_dtype, uniform(seed + 2, n, -1.0, 1.0)),
            vec![],
            vec![],
        )
    };
    let sinks = uniform(seed + 5, g.h, -1.0, 3.0);
    Case { g, batch, max_q_len, q, k, v, k_scale, v_scale, sinks }
}

struct Dev {
    q: CudaSlice<u8>,
    k: CudaSlice<u8>,
    v: CudaSlice<u8>,
    scales: CudaSlice<f32>,
    sinks: CudaSlice<f32>,
    pt: CudaSlice<i32>,
    lens: CudaSlice<i32>,
    cu: CudaSlice<i32>,
    o: CudaSlice<u8>,
    lse: CudaSlice<f32>,
    error: ErrorWord,
    scratch: CudaSlice<u8>,
}

/// The poison of o (bf16/f16 NaN bits) and lse.
const O_POISON: u16 = 0xffff;

impl Case {
    fn query(&self) -> Query {
        Query {
            heads: self.g.h,
            kv_heads: self.g.hkv,
            head_dim: self.g.d,
            page_size: self.g.p,
            q_dtype: self.g.q_dtype,
            kv_dtype: self.g.kv_dtype,
            scale: 1.0 / (self.g.d as f32).sqrt(),
            window_left: self.g.window,
            sinks: self.g.sinks,
            max_batch: self.batch.lens.len().max(1),
            max_tokens: self.batch.rows.max(1),
            max_q_len: self.max_q_len,
            max_pages: self.batch.max_pages,
            num_pages: self.batch.num_pages,
        }
    }
    fn e4m3(&self) -> bool {
        self.g.kv_dtype == DType::E4M3
    }
    fn bytes(&self, x: &[f32], dtype: DType) -> Vec<u8> {
        match dtype {
            DType::BF16 => x.iter().flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes()).collect(),
            DType::F16 => x.iter().flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes()).collect(),
            _ => x.iter().map(|&v| e4m3_encode(v)).collect(),
        }
    }
    fn upload(&self, s: &Arc<CudaStream>, plan: &Plan) -> Result<Dev, String> {
        let mut scales = self.k_scale.clone();
        scales.extend(&self.v_scale);
        scales.push(0.0);
        let out_elems = self.batch.rows * self.g.h * self.g.d;
        Ok(Dev {
            q: s.clone_htod(&self.bytes(&self.q, self.g.q_dtype)).map_err(err)?,
            k: s.clone_htod(&self.bytes(&self.k, self.g.kv_dtype)).map_err(err)?,
            v: s.clone_htod(&self.bytes(&self.v, self.g.kv_dtype)).map_err(err)?,
            scales: s.clone_htod(&scales).map_err(err)?,
            sinks: s.clone_htod(&self.sinks).map_err(err)?,
            pt: s.clone_htod(&self.batch.pt).map_err(err)?,
            lens: s.clone_htod(&self.batch.lens).map_err(err)?,
            cu: s.clone_htod(&self.batch.cu).map_err(err)?,
            o: s.clone_htod(&O_POISON.to_le_bytes().repeat(out_elems.max(1))).map_err(err)?,
            lse: s.clone_htod(&vec![f32::NAN; (self.batch.rows * self.g.h).max(1)]).map_err(err)?,
            error: ErrorWord::new(s).map_err(err)?,
            // Poisoned once, never between runs (tagged arrival counters).
            scratch: s.clone_htod(&vec![0xffu8; plan.scratch_layout().total_bytes().max(1)]).map_err(err)?,
        })
    }
    /// The call's arguments and its scratch (borrowed from `d` together).
    fn args<'a>(&self, d: &'a mut Dev) -> Result<(Args<'a>, Scratch<'a>), String> {
        let (b, rows, h, hkv, dd, p) =
            (self.batch.lens.len(), self.batch.rows, self.g.h, self.g.hkv, self.g.d, self.g.p);
        let raw = |s: &CudaSlice<u8>| TensorRef::from_slice(s, &[s.len()]).map(|t| t.ptr()).map_err(err);
        let cache_shape = [self.batch.num_pages, p, hkv, dd];
        let cs = b12x_core::contiguous_strides(&cache_shape);
        let (qp, kp, vp) = (raw(&d.q)?, raw(&d.k)?, raw(&d.v)?);
        let sp = TensorRef::from_slice(&d.scales, &[d.scales.len()]).map_err(err)?.ptr();
        let o_len = d.o.len();
        let op = TensorMut::from_slice(&mut d.o, &[o_len]).map_err(err)?.ptr();
        // SAFETY: every view lies inside its buffer (shapes as allocated in `upload`).
        unsafe {
            let qs = [(h * dd) as isize, dd as isize, 1];
            let scale = |off: usize| TensorRef::from_raw(sp + off as u64, &[b, hkv], &[hkv as isize, 1], DType::F32);
            let args = Args {
                q: TensorRef::from_raw(qp, &[rows, h, dd], &qs, self.g.q_dtype).map_err(err)?,
                k_cache: TensorRef::from_raw(kp, &cache_shape, &cs, self.g.kv_dtype).map_err(err)?,
                v_cache: TensorRef::from_raw(vp, &cache_shape, &cs, self.g.kv_dtype).map_err(err)?,
                k_scale: if self.e4m3() { Some(scale(0).map_err(err)?) } else { None },
                v_scale: if self.e4m3() { Some(scale(b * hkv * 4).map_err(err)?) } else { None },
                sinks: if self.g.sinks { Some(TensorRef::from_slice(&d.sinks, &[h]).map_err(err)?) } else { None },
                page_table: TensorRef::from_slice(&d.pt, &[b, self.batch.max_pages]).map_err(err)?,
                seq_lens: TensorRef::from_slice(&d.lens, &[b]).map_err(err)?,
                cu_seqlens_q: TensorRef::from_slice(&d.cu, &[b + 1]).map_err(err)?,
                o: TensorMut::from_raw(op, &[rows, h, dd], &qs, self.g.q_dtype).map_err(err)?,
                lse: Some(TensorMut::from_slice(&mut d.lse, &[rows, h]).map_err(err)?),
                error: d.error.view().map_err(err)?,
            };
            Ok((args, Scratch::from_slice(&mut d.scratch)))
        }
    }
    fn expected(&self) -> reference::Output {
        let geo = reference::Geometry {
            heads: self.g.h,
            kv_heads: self.g.hkv,
            head_dim: self.g.d,
            scale: 1.0 / (self.g.d as f32).sqrt(),
            window_left: self.g.window,
        };
        let (ks, vs) = if self.e4m3() { (Some(&self.k_scale[..]), Some(&self.v_scale[..])) } else { (None, None) };
        reference::paged(
            &host(&self.batch, self.g.p),
            &geo,
            &self.q,
            reference::HostKv { values: &self.k, scales: ks },
            reference::HostKv { values: &self.v, scales: vs },
            self.g.sinks.then_some(&self.sinks[..]),
        )
    }
}

/// (o values with NaN for the poison, lse, error bits).
type Got = (Vec<f64>, Vec<f32>, Vec<u16>, u32);

fn results(c: &Case, d: &Dev, s: &Arc<CudaStream>) -> Result<Got, String> {
    let bytes = s.clone_dtoh(&d.o).map_err(err)?;
    let bits: Vec<u16> = bytes.chunks_exact(2).map(|w| u16::from_le_bytes([w[0], w[1]])).collect();
    let o = bits
        .iter()
        .map(|&b| if c.g.q_dtype == DType::BF16 { bf16::from_bits(b).to_f64() } else { f16::from_bits(b).to_f64() })
        .collect();
    let lse = s.clone_dtoh(&d.lse).map_err(err)?;
    Ok((o, lse, bits, d.error.read(s).map_err(err)?.0))
}

fn compare(c: &Case, got: &Got, want: &reference::Output) -> TrialResult {
    let (h, dd) = (c.g.h, c.g.d);
    let max_v = c.v.iter().fold(0.0f64, |m, &x| m.max(f64::from(x).abs()))
        * c.v_scale.iter().fold(1.0f64, |m, &x| if c.e4m3() { m.max(f64::from(x)) } else { m });
    let (mut g_all, mut w_all) = (Vec::new(), Vec::new());
    for (idx, &written) in want.written.iter().enumerate() {
        let (row, head) = (idx / h, idx % h);
        let go = &got.0[idx * dd..][..dd];
        if !written {
            if got.2[idx * dd..][..dd].iter().any(|&b| b != O_POISON) || !got.1[idx].is_nan() {
                return Err(format!("padding row {row} head {head} was written"));
            }
            continue;
        }
        let wo = &want.o[idx * dd..][..dd];
        for e in 0..dd {
            let bound = reference::elementwise_bound(wo[e], max_v, c.g.q_dtype == DType::BF16);
            // NaN fails too (a poisoned or NaN element).
            let within = (go[e] - wo[e]).abs() <= bound;
            if !within {
                return Err(format!("o[{row}, {head}, {e}] = {}, want {} (bound {bound:.3e})", go[e], wo[e]));
            }
        }
        let (gl, wl) = (f64::from(got.1[idx]), want.lse[idx]);
        let lse_ok = if wl == f64::NEG_INFINITY { gl == wl } else { (gl - wl).abs() <= 2e-5 * wl.abs().max(1.0) };
        if !lse_ok {
            return Err(format!("lse[{row}, {head}] = {gl}, want {wl}"));
        }
        g_all.extend_from_slice(go);
        w_all.extend_from_slice(wo);
    }
    let cos = cosine_diff(&g_all, &w_all);
    if cos > reference::cosine_bound(c.e4m3()) {
        return Err(format!("cosine difference {cos:.3e} > {:.1e}", reference::cosine_bound(c.e4m3())));
    }
    if got.3 != want.faults {
        return Err(format!(
            "error word {} (0x{:x}), want {} (0x{:x})",
            Faults(got.3),
            got.3,
            Faults(want.faults),
            want.faults
        ));
    }
    Ok(())
}

fn check(dev: &Arc<Device>, c: &Case) -> TrialResult {
    check_plan(dev, c, &paged::plan(&c.query(), dev).map_err(err)?)
}

fn check_plan(dev: &Arc<Device>, c: &Case, plan: &Plan) -> TrialResult {
    check_plan_got(dev, c, plan).map(|_| ())
}

/// [`check_plan`], returning the first run's results.
fn check_plan_got(dev: &Arc<Device>, c: &Case, plan: &Plan) -> Result<Got, String> {
    let s = dev.stream();
    let session = prepared(dev, plan)?;
    let mut d = c.upload(s, plan)?;
    let want = c.expected();
    {
        let (a, sc) = c.args(&mut d)?;
        paged::run(plan, a, sc, s)
    }
    .map_err(err)?;
    compare(c, &results(c, &d, s)?, &want)?;
    // A second run on the same scratch (tagged counters left by the first) gives the same bits.
    let first = results(c, &d, s)?;
    d.error.clear(s).map_err(err)?;
    {
        let (a, sc) = c.args(&mut d)?;
        paged::run(plan, a, sc, s)
    }
    .map_err(err)?;
    let again = results(c, &d, s)?;
    if again.2 != first.2 {
        return Err("a second run on the same scratch gave other bits".into());
    }
    session.close();
    Ok(first)
}

fn geo(h: usize, hkv: usize, d: usize, p: usize) -> Geo {
    Geo { h, hkv, d, p, q_dtype: DType::BF16, kv_dtype: DType::BF16, window: -1, sinks: false }
}

/// Decode of B requests with lengths cycling through the page-boundary cases (and empties).
fn decode_reqs(b: usize, p: i32, long: bool) -> Vec<Req> {
    let lens = [1, p - 1, p, p + 1, 0, 3 * p + 5, 1000];
    let mut v: Vec<Req> = (0..b).map(|i| (lens[i % lens.len()], i32::from(lens[i % lens.len()] > 0))).collect();
    if long {
        v[0] = (32 * 1024 + 3, 1);
    }
    v
}

fn trials() -> Vec<GpuTrial> {
    let reduced = reduced_profile();
    let big = if reduced { 13 } else { 127 };
    let models: [(&str, Geo); 8] = [
        ("llama3_8b", geo(32, 8, 128, 16)),
        ("qwen3_30b_a3b", geo(32, 4, 128, 32)),
        ("gpt_oss_120b_sinks_window127", Geo { sinks: true, window: 127, ..geo(64, 8, 64, 16) }),
        ("gpt_oss_120b_sinks_full", Geo { sinks: true, ..geo(64, 8, 64, 64) }),
        ("d256", geo(16, 4, 256, 16)),
        ("d96_group5", geo(40, 8, 96, 32)),
        ("group16", geo(32, 2, 128, 16)),
        ("group1_d64", geo(8, 8, 64, 64)),
    ];
    let mut out = Vec::new();
    for (mi, &(name, g0)) in models.iter().enumerate() {
        let kinds: &[(DType, DType)] = if g0.d == 256 || mi == 0 {
            &[(DType::BF16, DType::BF16), (DType::F16, DType::F16), (DType::BF16, DType::E4M3)]
        } else {
            &[(DType::BF16, DType::BF16), (DType::BF16, DType::E4M3)]
        };
        for &(qd, kvd) in kinds {
            let g = Geo { q_dtype: qd, kv_dtype: kvd, ..g0 };
            let tag = format!("{name}::{}_{}", qd.name(), kvd.name());
            let seed = 100 + mi as u64;
            let p = g.p as i32;
            out.push(GpuTrial::new(format!("{tag}::decode_b{big}"), move |dev| {
                check(dev, &case(g, make_batch(&decode_reqs(big, p, !reduced && mi < 2), g.p, seed, 0), seed))
            }));
            out.push(GpuTrial::new(format!("{tag}::decode_b1_len1"), move |dev| {
                check(dev, &case(g, make_batch(&[(1, 1)], g.p, seed, 0), seed))
            }));
            // Extend / verify: several new tokens, an empty request, a request whose new
            // tokens are its whole context, padding rows after cu[B].
            let reqs = [(2 * p + 3, 5), (0, 0), (p, p), (300, 17), (7, 1)];
            out.push(GpuTrial::new(format!("{tag}::extend_padded"), move |dev| {
                check(dev, &case(g, make_batch(&reqs, g.p, seed, 2), seed))
            }));
        }
    }
    let g = geo(32, 8, 128, 16);
    if !reduced {
        // One request of 32k+3 keys: the plan's most splits (49 on 132 SMs), all merged.
        for (name, g) in [("bf16", g), ("e4m3_sinks", Geo { kv_dtype: DType::E4M3, sinks: true, ..g })] {
            out.push(GpuTrial::new(format!("llama3_8b::decode_b1_ctx32k_max_splits::{name}"), move |dev| {
                check(dev, &case(g, make_batch(&[(32 * 1024 + 3, 1)], 16, 6, 0), 6))
            }));
        }
    }
    // Split caps from one CTA per request to the most (64 splits of 256 keys and fewer): the
    // in-kernel merge of every count, and the typed error outside [1, MAX_SPLITS].
    out.push(GpuTrial::new("llama3_8b::split_caps", move |dev| {
        let c = case(g, make_batch(&[(5000, 1), (300, 1), (0, 0), (2049, 1)], 16, 12, 0), 12);
        for cap in [1, 7, paged::MAX_SPLITS] {
            let plan = paged::plan_with(&c.query(), dev, PlanOptions { max_splits: Some(cap), ..Default::default() })
                .map_err(err)?;
            check_plan(dev, &c, &plan).map_err(|e| format!("split cap {cap}: {e}"))?;
        }
        for cap in [0, paged::MAX_SPLITS + 1] {
            match paged::plan_with(&c.query(), dev, PlanOptions { max_splits: Some(cap), ..Default::default() }) {
                Err(Error::InvalidQuery { field: "max_splits", .. }) => {}
                other => return Err(format!("split cap {cap}: expected InvalidQuery, got {:?}", other.err())),
            }
        }
        Ok(())
    }));
    // The two merges of split partials — through distributed shared memory in a cluster of the
    // splits, and through the scratch by the last split to arrive — at every cap the cluster
    // merge takes: each against the oracle, and the same bits of o and lse (same sums in the
    // same order). Decode with mixed lengths (short requests leave splits idle, an empty one),
    // 8-row tiles with E4M3 and sinks, 16-row tiles of extend / verify, D = 256 (2 warps) and
    // D = 64 with a window; padding rows after cu[B] where the last field says.
    // 16-row tiles with E4M3 (group 16: the permuted-d partial layout), 3-stage 16-row rings
    // with FP16 at D = 96 (extend), last field: ring depth (None: the plan's).
    for (name, gm, reqs, pad, stages) in [
        ("llama3_8b_decode", g, vec![(5000, 1), (300, 1), (0, 0), (2049, 1), (17, 1)], 0, None),
        (
            "llama3_8b_e4m3_sinks",
            Geo { kv_dtype: DType::E4M3, sinks: true, ..g },
            vec![(4000, 1), (33, 1), (1, 1)],
            0,
            None,
        ),
        ("llama3_8b_extend", g, vec![(3000, 5), (0, 0), (16, 16), (2500, 17)], 2, None),
        ("d256", geo(16, 4, 256, 16), vec![(3001, 1), (700, 3), (2, 1)], 1, None),
        (
            "gpt_oss_window127_sinks",
            Geo { sinks: true, window: 127, ..geo(64, 8, 64, 16) },
            vec![(3000, 1), (90, 1)],
            0,
            None,
        ),
        ("group16_e4m3", Geo { kv_dtype: DType::E4M3, ..geo(32, 2, 128, 16) }, vec![(3500, 1), (40, 1)], 0, None),
        (
            "d96_f16_extend_stages3",
            Geo { q_dtype: DType::F16, kv_dtype: DType::F16, ..geo(40, 8, 96, 32) },
            vec![(3100, 4), (70, 2)],
            1,
            Some(3),
        ),
    ] {
        out.push(GpuTrial::new(format!("merge_paths::{name}"), move |dev| {
            let c = case(gm, make_batch(&reqs, gm.p, 31, pad), 31);
            for cap in 2..=paged::MAX_CLUSTER_SPLITS {
                let with = |cluster| {
                    let options = PlanOptions {
                        max_splits: Some(cap),
                        cluster_merge: Some(cluster),
                        stages,
                        pdl: false,
                        warps: None,
                    };
                    paged::plan_with(&c.query(), dev, options).map_err(err)
                };
                let (cl, sc) = (with(true)?, with(false)?);
                if !cl.cluster_merge() || sc.cluster_merge() || sc.scratch_layout().total_bytes() == 0 {
                    return Err(format!("cap {cap}: plans do not take the asked merges"));
                }
                if cl.scratch_layout().total_bytes() != 0 {
                    return Err(format!("cap {cap}: the cluster merge plan asks for scratch"));
                }
                let a = check_plan_got(dev, &c, &cl).map_err(|e| format!("cap {cap}, cluster merge: {e}"))?;
                let b = check_plan_got(dev, &c, &sc).map_err(|e| format!("cap {cap}, scratch merge: {e}"))?;
                let lse_bits = |g: &Got| g.1.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                if a.2 != b.2 || lse_bits(&a) != lse_bits(&b) {
                    return Err(format!("cap {cap}: the cluster and scratch merges differ"));
                }
            }
            Ok(())
        }));
    }
    // The cluster merge outside what it takes is a typed error.
    out.push(GpuTrial::new("merge_paths::cluster_merge_errors", move |dev| {
        let c = case(g, make_batch(&[(3000, 1), (20, 1)], 16, 32, 0), 32);
        for cap in [1, paged::MAX_CLUSTER_SPLITS + 1, paged::MAX_SPLITS] {
            let options = PlanOptions { max_splits: Some(cap), cluster_merge: Some(true), ..Default::default() };
            match paged::plan_with(&c.query(), dev, options) {
                Err(Error::InvalidQuery { field: "cluster_merge", .. }) => {}
                other => return Err(format!("cap {cap}: expected InvalidQuery, got {:?}", other.err())),
            }
        }
        Ok(())
    }));
    // The 3-stage ring variants (D <= 128): decode with page-boundary lengths and extend /
    // verify, every cache dtype, and a window with sinks at D = 64.
    for (name, g3) in [
        ("llama3_8b", g),
        ("llama3_8b_f16", Geo { q_dtype: DType::F16, kv_dtype: DType::F16, ..g }),
        ("llama3_8b_e4m3", Geo { kv_dtype: DType::E4M3, ..g }),
        (
            "gpt_oss_120b_sinks_window127_e4m3",
            Geo { sinks: true, window: 127, kv_dtype: DType::E4M3, ..geo(64, 8, 64, 16) },
        ),
        ("d96_group5", geo(40, 8, 96, 32)),
    ] {
        out.push(GpuTrial::new(format!("stages3::{name}"), move |dev| {
            let three =
                |c: &Case| paged::plan_with(&c.query(), dev, PlanOptions { stages: Some(3), ..Default::default() });
            let p = g3.p as i32;
            let c = case(g3, make_batch(&decode_reqs(big, p, false), g3.p, 21, 0), 21);
            check_plan(dev, &c, &three(&c).map_err(err)?).map_err(|e| format!("decode: {e}"))?;
            let c = case(g3, make_batch(&[(2 * p + 3, 5), (0, 0), (p, p), (300, 17), (7, 1)], g3.p, 22, 2), 22);
            check_plan(dev, &c, &three(&c).map_err(err)?).map_err(|e| format!("extend: {e}"))
        }));
    }
    // The 6-stage decode rings (bf16/f16, D <= 128): page-boundary and short lengths, each
    // split cap merged in a cluster (2, 8) and through scratch (1, 8, 16), with and without PDL.
    for (name, g6) in [
        ("llama3_8b", g),
        ("llama3_8b_f16", Geo { q_dtype: DType::F16, kv_dtype: DType::F16, ..g }),
        ("d64_group8", geo(64, 8, 64, 16)),
        ("d96_group5", geo(40, 8, 96, 32)),
    ] {
        out.push(GpuTrial::new(format!("stages6::{name}"), move |dev| {
            let p = g6.p as i32;
            let c = case(g6, make_batch(&decode_reqs(big, p, false), g6.p, 24, 0), 24);
            if !c.query().stage_options().contains(&paged::DEEP_STAGES) {
                return Err("the case has no 6-stage variant".into());
            }
            for (cap, cluster, pdl) in
                [(8, true, false), (2, true, true), (1, false, false), (8, false, true), (16, false, false)]
            {
                let options = PlanOptions {
                    max_splits: Some(cap),
                    cluster_merge: Some(cluster),
                    stages: Some(paged::DEEP_STAGES),
                    pdl,
                    warps: None,
                };
                let plan = paged::plan_with(&c.query(), dev, options).map_err(err)?;
                check_plan(dev, &c, &plan).map_err(|e| format!("cap {cap} cluster {cluster} pdl {pdl}: {e}"))?;
            }
            Ok(())
        }));
    }
    // The 8-warp decode tiles (3-stage rings, D <= 128, every cache dtype): page-boundary and
    // short lengths, each split cap merged in a cluster (2, 8) and through scratch (1, 8, 16),
    // with and without PDL; a 2-token verify and a window with sinks.
    for (name, gw) in [
        ("llama3_8b", g),
        ("llama3_8b_f16", Geo { q_dtype: DType::F16, kv_dtype: DType::F16, ..g }),
        ("llama3_8b_e4m3", Geo { kv_dtype: DType::E4M3, ..g }),
        ("d64_group8_sinks_window127", Geo { sinks: true, window: 127, ..geo(64, 8, 64, 16) }),
        ("d96_group5", geo(40, 8, 96, 32)),
    ] {
        out.push(GpuTrial::new(format!("wide_w8::{name}"), move |dev| {
            let p = gw.p as i32;
            let c = case(gw, make_batch(&decode_reqs(big, p, false), gw.p, 25, 0), 25);
            if !c.query().warp_options(3).contains(&paged::WIDE_WARPS) {
                return Err("the case has no 8-warp variant".into());
            }
            for (cap, cluster, pdl) in
                [(8, true, false), (2, true, true), (1, false, false), (8, false, true), (16, false, false)]
            {
                let options = PlanOptions {
                    max_splits: Some(cap),
                    cluster_merge: Some(cluster),
                    pdl,
                    warps: Some(paged::WIDE_WARPS),
                    ..Default::default()
                };
                let plan = paged::plan_with(&c.query(), dev, options).map_err(err)?;
                if (plan.stages(), plan.warps()) != (3, paged::WIDE_WARPS) {
                    return Err(format!("planned {} stages, {} warps", plan.stages(), plan.warps()));
                }
                check_plan(dev, &c, &plan).map_err(|e| format!("cap {cap} cluster {cluster} pdl {pdl}: {e}"))?;
            }
            // B = 1 with a long context (the case the variants are for), default split cap.
            let c = case(gw, make_batch(&[(8 * 1024 + 5, 1)], gw.p, 29, 0), 29);
            for pdl in [false, true] {
                let options = PlanOptions { pdl, warps: Some(paged::WIDE_WARPS), ..Default::default() };
                check_plan(dev, &c, &paged::plan_with(&c.query(), dev, options).map_err(err)?)
                    .map_err(|e| format!("B = 1 x 8k pdl {pdl}: {e}"))?;
            }
            if gw.hkv * 2 <= gw.h && gw.h / gw.hkv <= 4 {
                // Two new tokens per request of group <= 4 still fit 8-row tiles.
                let reqs = [(2 * p + 3, 2), (0, 0), (p, 2), (300, 2), (1, 1), (2, 2)];
                let c = case(gw, make_batch(&reqs, gw.p, 26, 1), 26);
                let options = PlanOptions { warps: Some(paged::WIDE_WARPS), ..Default::default() };
                check_plan(dev, &c, &paged::plan_with(&c.query(), dev, options).map_err(err)?)
                    .map_err(|e| format!("verify: {e}"))?;
            }
            Ok(())
        }));
    }
    // The wide variants outside what they take are typed errors: 2- or 6-stage rings, 16-row
    // tiles (a 4-token verify of group 4).
    out.push(GpuTrial::new("wide_w8::errors", move |dev| {
        let c = case(g, make_batch(&[(300, 1), (20, 1)], 16, 27, 0), 27);
        for stages in [2, paged::DEEP_STAGES] {
            let options = PlanOptions { stages: Some(stages), warps: Some(paged::WIDE_WARPS), ..Default::default() };
            match paged::plan_with(&c.query(), dev, options) {
                Err(Error::InvalidQuery { field: "warps", .. }) => {}
                other => return Err(format!("{stages} stages: expected InvalidQuery, got {:?}", other.err())),
            }
        }
        let c = case(g, make_batch(&[(300, 4), (20, 4)], 16, 28, 0), 28);
        if c.query().eight_row_tiles() {
            return Err("a 4-token verify of group 4 should take 16-row tiles".into());
        }
        match paged::plan_with(&c.query(), dev, PlanOptions { warps: Some(paged::WIDE_WARPS), ..Default::default() }) {
            Err(Error::InvalidQuery { field: "warps", .. }) => Ok(()),
            other => Err(format!("16-row tiles: expected InvalidQuery, got {:?}", other.err())),
        }
    }));
    // 8-row tiles holding several new tokens (a 2-token verify with group 4, causal among the
    // tokens; a 1-token window with sinks at group 8): every cache dtype, 2 and 3 stages.
    for (name, g8, reqs) in [
        ("verify2_group4", g, vec![(2 * 16 + 3, 2), (0, 0), (16, 2), (300, 2), (1, 1), (2, 2)]),
        (
            "verify2_group4_e4m3",
            Geo { kv_dtype: DType::E4M3, ..g },
            vec![(2 * 16 + 3, 2), (0, 0), (17, 2), (300, 2), (1, 1)],
        ),
        ("verify2_group4_f16", Geo { q_dtype: DType::F16, kv_dtype: DType::F16, ..g }, vec![(40, 2), (33, 1)]),
        (
            "window_sinks_group8",
            Geo { sinks: true, window: 127, ..geo(64, 8, 64, 16) },
            vec![(500, 1), (128, 1), (129, 1), (3, 1)],
        ),
    ] {
        out.push(GpuTrial::new(format!("eight_row_tiles::{name}"), move |dev| {
            let c = case(g8, make_batch(&reqs, g8.p, 23, 1), 23);
            if !c.query().eight_row_tiles() {
                return Err("the case does not take the 8-row tiles".into());
            }
            for &stages in c.query().stage_options() {
                let plan =
                    paged::plan_with(&c.query(), dev, PlanOptions { stages: Some(stages), ..Default::default() })
                        .map_err(err)?;
                check_plan(dev, &c, &plan).map_err(|e| format!("{stages} stages: {e}"))?;
            }
            Ok(())
        }));
    }
    // Slots past a request's length in its last page hold NaN in K and V (stale or never
    // written): masked keys must not reach o.
    for kv in [DType::BF16, DType::E4M3] {
        let g = Geo { kv_dtype: kv, ..g };
        out.push(GpuTrial::new(format!("llama3_8b::stale_nan_slots::{}", kv.name()), move |dev| {
            let mut c = case(g, make_batch(&[(40, 1), (17, 2), (5, 1), (1000, 1), (33, 1)], 16, 13, 0), 13);
            let (p, row) = (g.p, g.hkv * g.d);
            for (i, &len) in c.batch.lens.iter().enumerate() {
                let len = len as usize;
                if len == 0 || len % p == 0 {
                    continue;
                }
                let page = c.batch.pt[i * c.batch.max_pages + (len - 1) / p] as usize;
                for slot in len % p..p {
                    let at = (page * p + slot) * row;
                    c.k[at..at + row].fill(f32::NAN);
                    c.v[at..at + row].fill(f32::NAN);
                }
            }
            check(dev, &c)
        }));
    }
    out.push(GpuTrial::new("llama3_8b::shared_prefix_pages", move |dev| {
        let mut b = make_batch(&[(100, 1), (100, 1), (70, 3)], 16, 5, 0);
        // Requests 1 and 2 reuse request 0's first four pages (a shared prefix).
        for j in 0..4 {
            b.pt[b.max_pages + j] = b.pt[j];
            b.pt[2 * b.max_pages + j] = b.pt[j];
        }
        check(dev, &case(g, b, 5))
    }));
    for (name, mutate) in FAULTS {
        for kv in [DType::BF16, DType::E4M3] {
            let g = Geo { kv_dtype: kv, ..g };
            out.push(GpuTrial::new(format!("untrusted_indices::{name}::{}", kv.name()), move |dev| {
                let mut b = make_batch(&[(40, 3), (17, 2), (5, 1)], 16, 9, 1);
                mutate(&mut b);
                check(dev, &case(g, b, 9))
            }));
        }
    }
    out.push(GpuTrial::new("pdl_after_kv_append", pdl_after_kv_append));
    out.push(GpuTrial::new("graph_replay_after_lengths_and_pages_change", graph_replay));
    out.push(GpuTrial::new("run_allocates_nothing", allocates_nothing));
    out.push(GpuTrial::new("unprepared_plan_frozen", unprepared));
    out.push(GpuTrial::new("bad_inputs_launch_nothing", bad_inputs));
    out
}

/// Capture one decode call, change lengths and page tables in place, replay: equals eager on
/// the new values and the oracle.
fn graph_replay(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let g = Geo { kv_dtype: DType::E4M3, sinks: true, ..geo(32, 8, 128, 16) };
    let first = case(g, make_batch(&[(900, 1), (17, 1), (5, 1), (2000, 1)], 16, 11, 0), 11);
    let mut second = case(g, make_batch(&[(900, 1), (17, 1), (5, 1), (2000, 1)], 16, 12, 0), 11);
    second.batch.lens = vec![3, 1999, 16, 700];
    let plan = paged::plan(&first.query(), dev).map_err(err)?;
    let session = prepared(dev, &plan)?;
    let mut d = first.upload(s, &plan)?;
    let graph = {
        let (args, scratch) = first.args(&mut d)?;
        session.capture(s, |st| paged::run(&plan, args, scratch, st)).map_err(err)?
    };
    // SAFETY: every buffer the graph uses lives in `d`, which outlives the graph.
    unsafe { graph.launch() }.map_err(err)?;
    compare(&first, &results(&first, &d, s)?, &first.expected())?;
    s.memcpy_htod(&second.batch.lens, &mut d.lens).map_err(err)?;
    s.memcpy_htod(&second.batch.pt, &mut d.pt).map_err(err)?;
    let want = second.expected();
    for replay in 0..2 {
        unsafe { graph.launch() }.map_err(err)?;
        compare(&second, &results(&second, &d, s)?, &want).map_err(|e| format!("replay {replay}: {e}"))?;
    }
    let replayed = results(&second, &d, s)?;
    {
        let (a, sc) = second.args(&mut d)?;
        paged::run(&plan, a, sc, s)
    }
    .map_err(err)?;
    if results(&second, &d, s)?.2 != replayed.2 {
        return Err("eager and replayed outputs differ".into());
    }
    Ok(())
}

fn allocates_nothing(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let c = case(geo(32, 8, 128, 16), make_batch(&decode_reqs(16, 16, false), 16, 13, 0), 13);
    let plan = paged::plan(&c.query(), dev).map_err(err)?;
    let _session = prepared(dev, &plan)?;
    let mut d = c.upload(s, &plan)?;
    let mut scratch = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes().max(1)).map_err(err)?;
    check_run_allocates_nothing(dev, s, 20, || {
        let (args, _) = c.args(&mut d).map_err(|e| Error::SessionState { state: "test", what: e })?;
        paged::run(&plan, args, Scratch::from_slice(&mut scratch), s)
    })
}

fn unprepared(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let c = case(geo(8, 8, 64, 16), make_batch(&[(3, 1)], 16, 14, 0), 14);
    let plan = paged::plan(&c.query(), dev).map_err(err)?;
    let other = paged::plan(&Query { max_tokens: 999, ..c.query() }, dev).map_err(err)?;
    let mut session = prepared(dev, &other)?;
    session.freeze();
    let mut d = c.upload(s, &plan)?;
    let r = {
        let (a, sc) = c.args(&mut d)?;
        paged::run(&plan, a, sc, s)
    };
    session.close();
    match r {
        Err(Error::KernelResolutionFrozen { .. }) => Ok(()),
        other => Err(format!("expected KernelResolutionFrozen, got {other:?}")),
    }
}

/// Each bad input is a typed error and o stays poisoned (nothing launched).
fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let c = case(
        Geo { kv_dtype: DType::E4M3, sinks: true, ..geo(32, 8, 128, 16) },
        make_batch(&[(40, 1), (17, 1)], 16, 15, 0),
        15,
    );
    let plan = paged::plan(&c.query(), dev).map_err(err)?;
    let session = prepared(dev, &plan)?;
    let mut d = c.upload(s, &plan)?;
    type Edit = fn(&mut Args<'_>) -> Result<(), String>;
    let edits: &[(&str, Edit)] = &[
        ("missing v_scale", |a| {
            a.v_scale = None;
            Ok(())
        }),
        ("missing sinks", |a| {
            a.sinks = None;
            Ok(())
        }),
        ("q wrong heads", |a| {
            // SAFETY: a smaller view of the same buffer.
            a.q =
                unsafe { TensorRef::from_raw(a.q.ptr(), &[2, 16, 128], &[2048, 128, 1], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("o wrong dtype", |a| {
            let p = a.o.ptr();
            a.o = unsafe { TensorMut::from_raw(p, &[2, 32, 128], &[4096, 128, 1], DType::F16) }.map_err(err)?;
            Ok(())
        }),
        ("misaligned q", |a| {
            a.q = unsafe { TensorRef::from_raw(a.q.ptr() + 2, &[2, 32, 128], &[4096, 128, 1], DType::BF16) }
                .map_err(err)?;
            Ok(())
        }),
        ("o overlaps q", |a| {
            let p = a.q.ptr();
            a.o = unsafe { TensorMut::from_raw(p, &[2, 32, 128], &[4096, 128, 1], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("lse overlaps sinks", |a| {
            let p = a.sinks.as_ref().map(|t| t.ptr()).ok_or("the case has sinks")?;
            // SAFETY: never dereferenced: `run` must refuse it (it starts at the sinks).
            a.lse = Some(unsafe { TensorMut::from_raw(p, &[2, 32], &[32, 1], DType::F32) }.map_err(err)?);
            Ok(())
        }),
        ("error overlaps k_scale", |a| {
            let p = a.k_scale.as_ref().map(|t| t.ptr()).ok_or("the case has scales")?;
            // SAFETY: the first element of the scale buffer.
            a.error = unsafe { TensorMut::from_raw(p, &[1], &[1], DType::I32) }.map_err(err)?;
            Ok(())
        }),
        ("cache wrong page size", |a| {
            let p = a.k_cache.ptr();
            a.k_cache = unsafe { TensorRef::from_raw(p, &[1, 32, 8, 128], &[32768, 1024, 128, 1], DType::E4M3) }
                .map_err(err)?;
            Ok(())
        }),
    ];
    for (name, edit) in edits {
        let (mut args, scratch) = c.args(&mut d)?;
        edit(&mut args)?;
        match paged::run(&plan, args, scratch, s) {
            Err(Error::Shape { .. } | Error::DType { .. } | Error::Misaligned { .. } | Error::Aliasing { .. }) => {}
            other => return Err(format!("{name}: expected a typed input error, got {other:?}")),
        }
    }
    // Scratch too small.
    let mut tiny = s.alloc_zeros::<u8>(1).map_err(err)?;
    if plan.scratch_layout().total_bytes() > 1 {
        match paged::run(&plan, c.args(&mut d)?.0, Scratch::from_slice(&mut tiny), s) {
            Err(Error::ScratchTooSmall { .. }) => {}
            other => return Err(format!("tiny scratch: expected ScratchTooSmall, got {other:?}")),
        }
    }
    let got = results(&c, &d, s)?;
    if got.2.iter().any(|&b| b != O_POISON) || got.3 != 0 {
        return Err("a rejected call wrote o or the error word".into());
    }
    session.close();
    Ok(())
}

fn main() {
    run_gpu_trials(trials())
}

/// `PlanOptions::pdl`: `attention.kv_append` writes the new tokens' K and V (their cache slots
/// hold NaN before it), then the decode, launched with PDL, reads them: the kernel may read the
/// lengths, page ids and the older blocks while kv_append runs, but the new tokens' block only
/// after `griddepcontrol.wait`. Eager (three times, each after re-poisoning the slots) and in a
/// replayed graph of the pair; each against the oracle. 8-row (decode, group 4) and 16-row
/// (group 16) tiles; short requests, whose first block already holds the new token, too.
fn pdl_after_kv_append(dev: &Arc<Device>) -> TrialResult {
    use b12x_attention::kv_append;
    let s = dev.stream();
    for g in [geo(32, 8, 128, 16), geo(32, 2, 128, 16)] {
        let reqs: Vec<Req> = vec![(2049, 1), (40, 1), (17, 1), (3000, 1), (1, 1), (300, 1)];
        let c = case(g, make_batch(&reqs, g.p, 43, 0), 47);
        let plan = paged::plan_with(&c.query(), dev, PlanOptions { pdl: true, ..Default::default() }).map_err(err)?;
        if !plan.pdl() {
            return Err("the plan does not take PDL".into());
        }
        let session = prepared(dev, &plan)?;
        let want = c.expected();
        let (b, hkv, dd, p) = (c.batch.lens.len(), g.hkv, g.d, g.p);
        // The new token of request i sits at position len - 1: its cache element offsets.
        let slot_base = |i: usize| {
            let t = c.batch.lens[i] as usize - 1;
            let page = c.batch.pt[i * c.batch.max_pages + t / p] as usize;
            (page * p + t % p) * hkv * dd
        };
        let (mut k_new, mut v_new, mut k_poison, mut v_poison) = (Vec::new(), Vec::new(), c.k.clone(), c.v.clone());
        for i in 0..b {
            let base = slot_base(i);
            k_new.extend_from_slice(&c.k[base..base + hkv * dd]);
            v_new.extend_from_slice(&c.v[base..base + hkv * dd]);
            k_poison[base..base + hkv * dd].fill(f32::NAN);
            v_poison[base..base + hkv * dd].fill(f32::NAN);
        }
        let mut d = c.upload(s, &plan)?;
        let (kp_h, vp_h) = (c.bytes(&k_poison, g.kv_dtype), c.bytes(&v_poison, g.kv_dtype));
        let kn = s.clone_htod(&c.bytes(&k_new, g.kv_dtype)).map_err(err)?;
        let vn = s.clone_htod(&c.bytes(&v_new, g.kv_dtype)).map_err(err)?;
        let aq = kv_append::Query {
            kv_heads: hkv,
            head_dim: dd,
            page_size: p,
            dtype: g.kv_dtype,
            cache_dtype: g.kv_dtype,
            max_batch: b,
            max_tokens: b,
            max_pages: c.batch.max_pages,
            num_pages: c.batch.num_pages,
        };
        let append = kv_append::plan(&aq, dev).map_err(err)?;
        let append_session = prepared(dev, &append)?;
        let mut append_error = ErrorWord::new(s).map_err(err)?;
        let cache_shape = [c.batch.num_pages, p, hkv, dd];
        let cs = b12x_core::contiguous_strides(&cache_shape);
        let raw = |x: &CudaSlice<u8>| TensorRef::from_slice(x, &[x.len()]).map(|t| t.ptr()).map_err(err);
        let (knp, vnp, kcp, vcp) = (raw(&kn)?, raw(&vn)?, raw(&d.k)?, raw(&d.v)?);
        let (ptp, lp, cup) = (
            TensorRef::from_slice(&d.pt, &[d.pt.len()]).map_err(err)?.ptr(),
            TensorRef::from_slice(&d.lens, &[b]).map_err(err)?.ptr(),
            TensorRef::from_slice(&d.cu, &[b + 1]).map_err(err)?.ptr(),
        );
        let rows = [(hkv * dd) as isize, dd as isize, 1];
        let mut pair = |st: &Arc<CudaStream>, d: &mut Dev| -> Result<(), String> {
            // SAFETY: views inside the buffers allocated above (the caches as in `upload`).
            let a = unsafe {
                kv_append::Args {
                    k: TensorRef::from_raw(knp, &[b, hkv, dd], &rows, g.kv_dtype).map_err(err)?,
                    v: TensorRef::from_raw(vnp, &[b, hkv, dd], &rows, g.kv_dtype).map_err(err)?,
                    k_cache: TensorMut::from_raw(kcp, &cache_shape, &cs, g.kv_dtype).map_err(err)?,
                    v_cache: TensorMut::from_raw(vcp, &cache_shape, &cs, g.kv_dtype).map_err(err)?,
                    k_scale: None,
                    v_scale: None,
                    page_table: TensorRef::from_raw(
                        ptp,
                        &[b, c.batch.max_pages],
                        &[c.batch.max_pages as isize, 1],
                        DType::I32,
                    )
                    .map_err(err)?,
                    seq_lens: TensorRef::from_raw(lp, &[b], &[1], DType::I32).map_err(err)?,
                    cu_seqlens_q: TensorRef::from_raw(cup, &[b + 1], &[1], DType::I32).map_err(err)?,
                    error: append_error.view().map_err(err)?,
                }
            };
            kv_append::run(&append, a, Scratch::none(), st).map_err(err)?;
            let (args, sc) = c.args(d)?;
            paged::run(&plan, args, sc, st).map_err(err)
        };
        for round in 0..3 {
            s.memcpy_htod(&kp_h, &mut d.k).map_err(err)?;
            s.memcpy_htod(&vp_h, &mut d.v).map_err(err)?;
            pair(s, &mut d)?;
            compare(&c, &results(&c, &d, s)?, &want).map_err(|e| format!("{}, eager round {round}: {e}", g.hkv))?;
        }
        // A replayed graph of the pair (re-poisoned before each replay).
        let graph = session
            .capture(s, |st| pair(st, &mut d).map_err(|what| Error::SessionState { state: "test", what }))
            .map_err(err)?;
        for round in 0..2 {
            s.memcpy_htod(&kp_h, &mut d.k).map_err(err)?;
            s.memcpy_htod(&vp_h, &mut d.v).map_err(err)?;
            // SAFETY: every buffer the graph uses (d, kn, vn, append_error) outlives it.
            unsafe { graph.launch() }.map_err(err)?;
            compare(&c, &results(&c, &d, s)?, &want).map_err(|e| format!("{}, replay {round}: {e}", g.hkv))?;
        }
        append_session.close();
        session.close();
    }
    Ok(())
}
