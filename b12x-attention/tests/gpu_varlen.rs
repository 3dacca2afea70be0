//! GPU validation of `attention.varlen` against the f64 oracle (libtest-mimic; every trial is
//! listed as ignored when no CUDA device is present).
//!
//! Each trial packs a list of sequences `(q_len, k_len)` into `q [total_q, H, D]` and
//! `k`, `v [total_k, Hkv, D]` (seeded values uniform in [−1, 1], rounded to the dtype; row-stride
//! padding filled with NaN bits, which poison any output that reads them), runs the op with `o`
//! (0xffff) and `lse` (NaN) poisoned, and checks the rows: cosine difference of `o` ≤
//! `paged::reference::cosine_bound(false)`, each element within
//! `paged::reference::elementwise_bound`, `lse` within 2e-5 absolute (−inf exactly), rows that
//! see no key exactly 0, rows past `cu_seqlens_q[B]` and row-stride padding untouched, the error
//! word equal to the oracle's faults, and a second run bit-identical.
//!
//! Large cases (≳ 2e8 multiply-adds) compute the oracle row by row on every core
//! ([`Case::expected`]); past 1e10 they check every 7th row of each sequence (and its last),
//! and every other written row must at least be finite.
//!
//! Cases: Llama-3-8B, Qwen3-30B-A3B, gpt-oss-120b (sinks, window 127 and none), D = 256 (GQA
//! and MQA, causal and not), non-causal windows, group sizes 1, 5 and 16, BF16 and FP16;
//! sequence sets: one of 1000, mixed lengths around the tile edges, chunked prefill
//! (`q_len < k_len`), `q_len > k_len` (leading rows without keys), empty sequences with padding
//! rows, B = 127, 4096+3 tokens; strided rows; bad packings (every row 0 / −inf,
//! `FAULT_QUERY_LAYOUT`); `max_seqlen_q` hints below the longest sequence and absent; a sharp
//! softmax (scale 1). Every config of `Query::configs()` is pinned and checked causal and
//! non-causal. Further trials: a graph replayed after the packing changes equals the oracle and
//! eager bit for bit, the session's race picks a legal config, `run` allocates nothing, a frozen
//! session rejects an unprepared plan, bad inputs are typed errors that launch nothing, an empty
//! batch launches nothing. `B12X_TEST_PROFILE=reduced` drops the long and large cases
//! (sanitizer runs).

mod common;

use b12x_attention::paged::reference::{cosine_bound, elementwise_bound};
use b12x_attention::paging::{ErrorWord, Faults, FAULT_QUERY_LAYOUT};
use b12x_attention::varlen::reference::{self, visible, Geometry, HostPacking};
use b12x_attention::varlen::{self, Args, Plan, Query, HEAD_DIMS};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::{bf16, f16};
use b12x_core::testing::{
    check_run_allocates_nothing, cosine_diff, reduced_profile, run_gpu_trials, uniform, GpuTrial,
};
use b12x_core::{DType, Device, Error, OpPlan, PreparationSession, SelectionSource, TensorMut, TensorRef};
use common::{err, prepared, round, TrialResult};
use std::sync::Arc;

#[derive(Clone, Copy, Debug)]
struct Geo {
    h: usize,
    hkv: usize,
    d: usize,
    dtype: DType,
    causal: bool,
    window: i32,
    sinks: bool,
}

fn geo(h: usize, hkv: usize, d: usize) -> Geo {
    Geo { h, hkv, d, dtype: DType::BF16, causal: true, window: -1, sinks: false }
}

fn sinks(g: Geo, window: i32) -> Geo {
    Geo { sinks: true, window, ..g }
}

fn noncausal(g: Geo) -> Geo {
    Geo { causal: false, ..g }
}

/// One sequence: `(q_len, k_len)`.
type Seq = (usize, usize);

/// The packing of a call and the rows of its tensors.
#[derive(Clone, Debug)]
struct Packing {
    cu_q: Vec<i32>,
    cu_k: Vec<i32>,
    total_q: usize,
    total_k: usize,
}

/// `seqs` packed back to back, then `pad_q` / `pad_k` rows that belong to no sequence.
fn packing(seqs: &[Seq], pad_q: usize, pad_k: usize) -> Packing {
    let (mut cu_q, mut cu_k) = (vec![0i32], vec![0i32]);
    for &(q, k) in seqs {
        cu_q.push(cu_q[cu_q.len() - 1] + q as i32);
        cu_k.push(cu_k[cu_k.len() - 1] + k as i32);
    }
    let total_q = cu_q[seqs.len()] as usize + pad_q;
    let total_k = cu_k[seqs.len()] as usize + pad_k;
    Packing { cu_q, cu_k, total_q, total_k }
}

impl Packing {
    fn batch(&self) -> usize {
        self.cu_q.len() - 1
    }
    fn host(&self) -> HostPacking<'_> {
        HostPacking { cu_seqlens_q: &self.cu_q, cu_seqlens_k: &self.cu_k, total_q: self.total_q, total_k: self.total_k }
    }
    fn longest_q(&self) -> usize {
        self.cu_q.windows(2).map(|w| (w[1] - w[0]).max(0) as usize).max().unwrap_or(0)
    }
}

struct Case {
    g: Geo,
    pk: Packing,
    scale: f32,
    /// Row strides (elements) of q, o and of k, v (≥ H·D, resp. Hkv·D).
    q_stride: usize,
    o_stride: usize,
    kv_stride: usize,
    /// The plan's `max_seqlen_q` and the call's hint.
    plan_seqlen: usize,
    hint: Option<usize>,
    /// `[total_q, H, D]`, `[total_k, Hkv, D]` (contiguous; the oracle's layout).
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    sinks: Vec<f32>,
}

/// A case over `pk` with tight strides, the longest sequence as plan capacity and hint.
fn case_of(g: Geo, pk: Packing, seed: u64) -> Case {
    let q = round(g.dtype, uniform(seed, pk.total_q * g.h * g.d, -1.0, 1.0));
    let k = round(g.dtype, uniform(seed + 1, pk.total_k * g.hkv * g.d, -1.0, 1.0));
    let v = round(g.dtype, uniform(seed + 2, pk.total_k * g.hkv * g.d, -1.0, 1.0));
    let sinks = uniform(seed + 3, g.h, -1.0, 3.0);
    let longest = pk.longest_q().max(1);
    Case {
        g,
        scale: 1.0 / (g.d as f32).sqrt(),
        q_stride: g.h * g.d,
        o_stride: g.h * g.d,
        kv_stride: g.hkv * g.d,
        plan_seqlen: longest,
        hint: Some(longest),
        pk,
        q,
        k,
        v,
        sinks,
    }
}

fn case(g: Geo, seqs: &[Seq], seed: u64) -> Case {
    case_of(g, packing(seqs, 0, 0), seed)
}

struct Dev {
    q: CudaSlice<u8>,
    k: CudaSlice<u8>,
    v: CudaSlice<u8>,
    sinks: CudaSlice<f32>,
    cu_q: CudaSlice<i32>,
    cu_k: CudaSlice<i32>,
    o: CudaSlice<u8>,
    lse: CudaSlice<f32>,
    error: ErrorWord,
}

/// The poison of o (bf16/f16 NaN bits), also the fill of the inputs' row padding.
const O_POISON: u16 = 0xffff;
/// Multiply-adds above which the oracle runs row by row on every core.
const PARALLEL_MACS: f64 = 2e8;
/// Multiply-adds above which only every [`SAMPLE`]-th row of a sequence is checked.
const FULL_CHECK_MACS: f64 = 1e10;
const SAMPLE: usize = 7;

/// What the oracle says about every packed row.
struct Expected {
    /// `[total_q, H, D]` and `[total_q, H]`, meaningful on checked rows.
    o: Vec<f64>,
    lse: Vec<f64>,
    /// `[total_q]`: rows the op writes (the rest must stay poisoned).
    written: Vec<bool>,
    /// `[total_q]`: rows compared with the oracle (the other written rows must be finite).
    checked: Vec<bool>,
    /// `[total_q]`: written rows without visible keys (or masked): o must be exactly 0.
    no_keys: Vec<bool>,
    faults: u32,
}

impl Case {
    fn query(&self) -> Query {
        Query {
            heads: self.g.h,
            kv_heads: self.g.hkv,
            head_dim: self.g.d,
            dtype: self.g.dtype,
            scale: self.scale,
            causal: self.g.causal,
            window_left: self.g.window,
            sinks: self.g.sinks,
            max_batch: self.pk.batch().max(1),
            max_tokens_q: self.pk.total_q.max(1),
            max_tokens_k: self.pk.total_k.max(1),
            max_seqlen_q: self.plan_seqlen.clamp(1, self.pk.total_q.max(1)),
        }
    }
    fn geometry(&self) -> Geometry {
        Geometry {
            heads: self.g.h,
            kv_heads: self.g.hkv,
            head_dim: self.g.d,
            scale: self.scale,
            causal: self.g.causal,
            window_left: self.g.window,
        }
    }
    fn sinks(&self) -> Option<&[f32]> {
        self.g.sinks.then_some(&self.sinks[..])
    }
    fn bf16(&self) -> bool {
        self.g.dtype == DType::BF16
    }
    /// `rows` rows of `width` values, each followed by `stride − width` elements of NaN bits.
    fn bytes(&self, x: &[f32], rows: usize, width: usize, stride: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity((rows * stride).max(1) * 2);
        for r in 0..rows {
            for &val in &x[r * width..][..width] {
                let bits = if self.bf16() { bf16::from_f32(val).to_bits() } else { f16::from_f32(val).to_bits() };
                out.extend_from_slice(&bits.to_le_bytes());
            }
            for _ in width..stride {
                out.extend_from_slice(&O_POISON.to_le_bytes());
            }
        }
        if out.is_empty() {
            out.extend_from_slice(&O_POISON.to_le_bytes());
        }
        out
    }
    fn o_bytes(&self) -> usize {
        (self.pk.total_q * self.o_stride).max(1) * 2
    }
    fn lse_len(&self) -> usize {
        (self.pk.total_q * self.g.h).max(1)
    }
    fn upload(&self, s: &Arc<CudaStream>) -> Result<Dev, String> {
        let (hd, kvd) = (self.g.h * self.g.d, self.g.hkv * self.g.d);
        Ok(Dev {
            q: s.clone_htod(&self.bytes(&self.q, self.pk.total_q, hd, self.q_stride)).map_err(err)?,
            k: s.clone_htod(&self.bytes(&self.k, self.pk.total_k, kvd, self.kv_stride)).map_err(err)?,
            v: s.clone_htod(&self.bytes(&self.v, self.pk.total_k, kvd, self.kv_stride)).map_err(err)?,
            sinks: s.clone_htod(&self.sinks).map_err(err)?,
            cu_q: s.clone_htod(&self.pk.cu_q).map_err(err)?,
            cu_k: s.clone_htod(&self.pk.cu_k).map_err(err)?,
            o: s.clone_htod(&vec![0xffu8; self.o_bytes()]).map_err(err)?,
            lse: s.clone_htod(&vec![f32::NAN; self.lse_len()]).map_err(err)?,
            error: ErrorWord::new(s).map_err(err)?,
        })
    }
    /// Poisons o and lse again and clears the error word.
    fn poison(&self, d: &mut Dev, s: &Arc<CudaStream>) -> TrialResult {
        s.memcpy_htod(&vec![0xffu8; self.o_bytes()], &mut d.o).map_err(err)?;
        s.memcpy_htod(&vec![f32::NAN; self.lse_len()], &mut d.lse).map_err(err)?;
        d.error.clear(s).map_err(err)
    }
    /// The call's arguments (borrowing `d`).
    fn args<'a>(&self, d: &'a mut Dev) -> Result<Args<'a>, String> {
        let (tq, tk, h, hkv, dd, dt) = (self.pk.total_q, self.pk.total_k, self.g.h, self.g.hkv, self.g.d, self.g.dtype);
        let b = self.pk.batch();
        let raw = |s: &CudaSlice<u8>| TensorRef::from_slice(s, &[s.len()]).map(|t| t.ptr()).map_err(err);
        let (qp, kp, vp) = (raw(&d.q)?, raw(&d.k)?, raw(&d.v)?);
        let o_len = d.o.len();
        let op = TensorMut::from_slice(&mut d.o, &[o_len]).map_err(err)?.ptr();
        let rows = |stride: usize| [stride as isize, dd as isize, 1];
        // SAFETY: every view lies inside its buffer (rows × stride elements, as uploaded).
        unsafe {
            Ok(Args {
                q: TensorRef::from_raw(qp, &[tq, h, dd], &rows(self.q_stride), dt).map_err(err)?,
                k: TensorRef::from_raw(kp, &[tk, hkv, dd], &rows(self.kv_stride), dt).map_err(err)?,
                v: TensorRef::from_raw(vp, &[tk, hkv, dd], &rows(self.kv_stride), dt).map_err(err)?,
                sinks: if self.g.sinks { Some(TensorRef::from_slice(&d.sinks, &[h]).map_err(err)?) } else { None },
                cu_seqlens_q: TensorRef::from_slice(&d.cu_q, &[b + 1]).map_err(err)?,
                cu_seqlens_k: TensorRef::from_slice(&d.cu_k, &[b + 1]).map_err(err)?,
                max_seqlen_q: self.hint,
                o: TensorMut::from_raw(op, &[tq, h, dd], &rows(self.o_stride), dt).map_err(err)?,
                lse: Some(
                    TensorMut::from_raw(
                        TensorMut::from_slice(&mut d.lse, &[self.lse_len()]).map_err(err)?.ptr(),
                        &[tq, h],
                        &[h as isize, 1],
                        DType::F32,
                    )
                    .map_err(err)?,
                ),
                error: d.error.view().map_err(err)?,
            })
        }
    }

    /// `(packed row, sequence, row in sequence)` of every row of a valid packing.
    fn rows(&self) -> Vec<(usize, usize, usize)> {
        let pk = &self.pk;
        let mut out = Vec::new();
        for b in 0..pk.batch() {
            let q0 = pk.cu_q[b] as usize;
            for i in 0..(pk.cu_q[b + 1] - pk.cu_q[b]) as usize {
                out.push((q0 + i, b, i));
            }
        }
        out
    }
    fn seq(&self, b: usize) -> (usize, usize, usize, usize) {
        let pk = &self.pk;
        let (q0, k0) = (pk.cu_q[b] as usize, pk.cu_k[b] as usize);
        (q0, k0, (pk.cu_q[b + 1] - pk.cu_q[b]) as usize, (pk.cu_k[b + 1] - pk.cu_k[b]) as usize)
    }
    fn keys(&self, b: usize, i: usize) -> std::ops::Range<usize> {
        let (_, _, q_len, k_len) = self.seq(b);
        visible(i, q_len, k_len, self.g.causal, self.g.window)
    }
    /// Multiply-adds of the oracle (Q·K and P·V) over every row.
    fn macs(&self) -> f64 {
        let keys: usize = self.rows().iter().map(|&(_, b, i)| self.keys(b, i).len()).sum();
        2.0 * keys as f64 * (self.g.h * self.g.d) as f64
    }

    /// The oracle on one row (sequence b, row i): `reference::varlen` on a one-query packing
    /// holding exactly the row's visible keys, non-causal without window (so it sees them all).
    fn one_row(&self, b: usize, i: usize) -> reference::Output {
        let (q0, k0, _, _) = self.seq(b);
        let keys = self.keys(b, i);
        let (hd, kvd) = (self.g.h * self.g.d, self.g.hkv * self.g.d);
        let n = keys.len();
        let cu_k = [0, n as i32];
        let pack = HostPacking { cu_seqlens_q: &[0, 1], cu_seqlens_k: &cu_k, total_q: 1, total_k: n };
        let g = Geometry { causal: false, window_left: -1, ..self.geometry() };
        let span = (k0 + keys.start) * kvd..(k0 + keys.end) * kvd;
        let q = &self.q[(q0 + i) * hd..][..hd];
        reference::varlen(&pack, &g, q, &self.k[span.clone()], &self.v[span], self.sinks())
    }

    fn expected(&self) -> Expected {
        let (tq, h, dd) = (self.pk.total_q, self.g.h, self.g.d);
        let host = self.pk.host();
        let macs = if host.layout_ok() { self.macs() } else { 0.0 };
        if macs <= PARALLEL_MACS {
            let out = reference::varlen(&host, &self.geometry(), &self.q, &self.k, &self.v, self.sinks());
            let written: Vec<bool> = (0..tq).map(|r| out.written[r * h]).collect();
            let mut no_keys = vec![true; tq];
            if out.faults == 0 {
                for (r, b, i) in self.rows() {
                    no_keys[r] = self.keys(b, i).is_empty();
                }
            }
            return Expected { o: out.o, lse: out.lse, checked: written.clone(), written, no_keys, faults: out.faults };
        }
        let mut exp = Expected {
            o: vec![0.0; tq * h * dd],
            lse: vec![f64::NEG_INFINITY; tq * h],
            written: vec![false; tq],
            checked: vec![false; tq],
            no_keys: vec![false; tq],
            faults: 0,
        };
        let sample = if macs <= FULL_CHECK_MACS { 1 } else { SAMPLE };
        let mut todo = Vec::new();
        for (r, b, i) in self.rows() {
            exp.written[r] = true;
            exp.no_keys[r] = self.keys(b, i).is_empty();
            let (_, _, q_len, _) = self.seq(b);
            if i % sample == 0 || i + 1 == q_len {
                todo.push((r, b, i));
            }
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 64);
        let chunk = todo.len().div_ceil(threads).max(1);
        let done: Vec<(usize, reference::Output)> = std::thread::scope(|sc| {
            let handles: Vec<_> = todo
                .chunks(chunk)
                .map(|part| sc.spawn(move || part.iter().map(|&(r, b, i)| (r, self.one_row(b, i))).collect::<Vec<_>>()))
                .collect();
            handles.into_iter().flat_map(|t| t.join().expect("oracle thread panicked")).collect()
        });
        for (r, out) in done {
            exp.checked[r] = true;
            exp.o[r * h * dd..][..h * dd].copy_from_slice(&out.o);
            exp.lse[r * h..][..h].copy_from_slice(&out.lse);
        }
        exp
    }
}

/// (o bits `[total_q, o_stride]`, lse, error bits).
type Got = (Vec<u16>, Vec<f32>, u32);

fn results(d: &Dev, s: &Arc<CudaStream>) -> Result<Got, String> {
    let bytes = s.clone_dtoh(&d.o).map_err(err)?;
    let bits = bytes.chunks_exact(2).map(|w| u16::from_le_bytes([w[0], w[1]])).collect();
    let lse = s.clone_dtoh(&d.lse).map_err(err)?;
    Ok((bits, lse, d.error.read(s).map_err(err)?.0))
}

fn compare(c: &Case, got: &Got, want: &Expected) -> TrialResult {
    let (h, dd, hd) = (c.g.h, c.g.d, c.g.h * c.g.d);
    let value = |b: u16| if c.bf16() { bf16::from_bits(b).to_f64() } else { f16::from_bits(b).to_f64() };
    let max_v = c.v.iter().fold(0.0f64, |m, &x| m.max(f64::from(x).abs()));
    let (mut g_all, mut w_all) = (Vec::new(), Vec::new());
    for row in 0..c.pk.total_q {
        let bits = &got.0[row * c.o_stride..][..c.o_stride];
        if bits[hd..].iter().any(|&b| b != O_POISON) {
            return Err(format!("row {row}: o's row-stride padding was written"));
        }
        for head in 0..h {
            let idx = row * h + head;
            let gb = &bits[head * dd..][..dd];
            let gl = got.1[idx];
            if !want.written[row] {
                if gb.iter().any(|&b| b != O_POISON) || !gl.is_nan() {
                    return Err(format!("padding row {row} head {head} was written"));
                }
                continue;
            }
            let go: Vec<f64> = gb.iter().map(|&b| value(b)).collect();
            if want.no_keys[row] && go.iter().any(|&x| x != 0.0) {
                return Err(format!("row {row} head {head} sees no key but o = {:?}…", &go[..4.min(dd)]));
            }
            if !want.checked[row] {
                if go.iter().any(|x| !x.is_finite()) || gl.is_nan() {
                    return Err(format!("row {row} head {head} (not sampled) is not finite"));
                }
                continue;
            }
            let wo = &want.o[idx * dd..][..dd];
            for e in 0..dd {
                let bound = elementwise_bound(wo[e], max_v, c.bf16());
                // NaN fails too (a poisoned or NaN element).
                let within = (go[e] - wo[e]).abs() <= bound;
                if !within {
                    return Err(format!("o[{row}, {head}, {e}] = {}, want {} (bound {bound:.3e})", go[e], wo[e]));
                }
            }
            let (gl, wl) = (f64::from(gl), want.lse[idx]);
            let lse_ok = if wl == f64::NEG_INFINITY { gl == wl } else { (gl - wl).abs() <= 2e-5 };
            if !lse_ok {
                return Err(format!("lse[{row}, {head}] = {gl}, want {wl}"));
            }
            g_all.extend_from_slice(&go);
            w_all.extend_from_slice(wo);
        }
    }
    let cos = cosine_diff(&g_all, &w_all);
    if cos > cosine_bound(false) {
        return Err(format!("cosine difference {cos:.3e} > {:.1e}", cosine_bound(false)));
    }
    if got.2 != want.faults {
        return Err(format!(
            "error word {} (0x{:x}), want {} (0x{:x})",
            Faults(got.2),
            got.2,
            Faults(want.faults),
            want.faults
        ));
    }
    Ok(())
}

/// A session that prepared `plan` without a race: `pin` when given (checked to be what the
/// session selected), else a cached selection or the default. The per-config trials cover
/// every config; `race_picks_a_legal_config` covers the race.
fn session(dev: &Arc<Device>, plan: &Plan, pin: Option<&str>) -> Result<PreparationSession, String> {
    let mut s = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    if let Some(config) = pin {
        s.pin(plan, &plan.buckets()[0].label(), config);
    }
    let records = s.prepare(&[plan]).map_err(err)?;
    if let Some(config) = pin {
        let r = records.first().ok_or("prepare returned no record")?;
        if r.config != config || r.source != SelectionSource::Pinned {
            return Err(format!("pinned {config}, the session selected {} ({:?})", r.config, r.source));
        }
    }
    Ok(s)
}

fn check(dev: &Arc<Device>, c: &Case) -> TrialResult {
    check_pinned(dev, c, None)
}

fn check_pinned(dev: &Arc<Device>, c: &Case, pin: Option<&str>) -> TrialResult {
    let s = dev.stream();
    let plan = varlen::plan(&c.query(), dev).map_err(err)?;
    let session = session(dev, &plan, pin)?;
    let mut d = c.upload(s)?;
    let want = c.expected();
    varlen::run(&plan, c.args(&mut d)?, s).map_err(err)?;
    let first = results(&d, s)?;
    compare(c, &first, &want)?;
    // A second run (o not re-poisoned) gives the same bits.
    d.error.clear(s).map_err(err)?;
    varlen::run(&plan, c.args(&mut d)?, s).map_err(err)?;
    let again = results(&d, s)?;
    if again.0 != first.0 || bits(&again.1) != bits(&first.1) || again.2 != first.2 {
        return Err("a second run gave other bits".into());
    }
    session.close();
    Ok(())
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// The sequence sets every geometry runs.
const MIXED: &[Seq] = &[(1, 1), (17, 17), (128, 128), (129, 129), (300, 300)];
const CHUNKED_PREFILL: &[Seq] = &[(100, 900), (64, 1000)];
/// Causal: the first q_len − k_len rows of each sequence see no key.
const Q_LONGER_THAN_K: &[Seq] = &[(50, 20), (7, 3), (65, 64)];
const EMPTY_SEQS: &[Seq] = &[(0, 0), (33, 33), (0, 5), (5, 0), (70, 70), (1, 0)];

/// 127 short sequences: q_len around the tile edges, k_len equal, longer or shorter.
fn b127() -> Vec<Seq> {
    let q_lens = [1, 3, 16, 17, 33, 0, 64, 65, 2];
    (0..127)
        .map(|i| {
            let q = q_lens[i % q_lens.len()];
            let k = match i % 5 {
                0 | 4 => q,
                1 => q + 7,
                2 => q + 130,
                _ => q / 2,
            };
            (q, k)
        })
        .collect()
}

fn trials() -> Vec<GpuTrial> {
    const BF: DType = DType::BF16;
    const FP: DType = DType::F16;
    let reduced = reduced_profile();
    // (name, geometry, dtypes, big: also the 1000-token and B = 127 sets)
    let models: Vec<(&str, Geo, &[DType], bool)> = vec![
        ("llama3_8b", geo(32, 8, 128), &[BF, FP], true),
        ("qwen3_30b_a3b", geo(32, 4, 128), &[BF], true),
        ("gpt_oss_120b_sinks_window127", sinks(geo(64, 8, 64), 127), &[BF, FP], true),
        ("gpt_oss_120b_sinks_full", sinks(geo(64, 8, 64), -1), &[BF], false),
        ("d256", geo(16, 8, 256), &[BF, FP], false),
        ("d256_noncausal", noncausal(geo(16, 8, 256)), &[BF], false),
        ("d256_mqa", geo(8, 1, 256), &[BF], false),
        ("d256_mqa_noncausal", noncausal(geo(8, 1, 256)), &[BF, FP], false),
        ("noncausal_d128", noncausal(geo(32, 8, 128)), &[BF], false),
        ("noncausal_window64_d128", Geo { window: 64, ..noncausal(geo(32, 8, 128)) }, &[BF], false),
        ("noncausal_window33_sinks_d64", noncausal(sinks(geo(64, 8, 64), 33)), &[BF], false),
        ("group1_d64", geo(8, 8, 64), &[BF, FP], false),
        ("group5", geo(40, 8, 128), &[BF], false),
        ("group16", geo(32, 2, 128), &[BF], false),
    ];
    let mut out = Vec::new();
    for (mi, (name, g0, dtypes, big)) in models.into_iter().enumerate() {
        for &dtype in dtypes {
            let g = Geo { dtype, ..g0 };
            let tag = format!("{name}::{}", dtype.name());
            let seed = 100 + 10 * mi as u64;
            let mut sets: Vec<(&str, Vec<Seq>, usize)> = vec![
                ("mixed", MIXED.to_vec(), 0),
                ("chunked_prefill", CHUNKED_PREFILL.to_vec(), 0),
                ("q_longer_than_k", Q_LONGER_THAN_K.to_vec(), 0),
                ("empty_seqs_padding_rows", EMPTY_SEQS.to_vec(), 3),
            ];
            if big && !reduced {
                sets.push(("single_1000", vec![(1000, 1000)], 0));
                sets.push(("b127", b127(), 2));
            }
            for (set, seqs, pad) in sets {
                out.push(GpuTrial::new(format!("{tag}::{set}"), move |dev| {
                    check(dev, &case_of(g, packing(&seqs, pad, pad), seed))
                }));
            }
        }
    }
    let llama = geo(32, 8, 128);
    let gpt_oss = sinks(geo(64, 8, 64), 127);
    if !reduced {
        // 4096 + 3 tokens: sampled rows (every 7th) for the full heads; the window keeps
        // gpt-oss's oracle small enough to check every row.
        for (name, g) in [
            ("llama3_8b::long_4099", llama),
            ("llama3_8b::long_4099_noncausal", noncausal(llama)),
            ("gpt_oss_120b_sinks_window127::long_4099", gpt_oss),
        ] {
            out.push(GpuTrial::new(name, move |dev| check(dev, &case(g, &[(4099, 4099)], 7))));
        }
        out.push(GpuTrial::new("llama3_8b::long_chunked_1000_of_5000", move |dev| {
            check(dev, &case(llama, &[(1000, 5000), (3, 3)], 8))
        }));
    }
    // Strided rows of q and o (and of k, v), each stride a multiple of 16 bytes.
    for (name, g) in [("llama3_8b", llama), ("gpt_oss_120b_sinks_window127", gpt_oss), ("d256", geo(16, 8, 256))] {
        out.push(GpuTrial::new(format!("{name}::strided_rows"), move |dev| {
            let mut c = case_of(g, packing(MIXED, 2, 1), 21);
            c.q_stride = g.h * g.d + 64;
            c.o_stride = g.h * g.d + 136;
            c.kv_stride = g.hkv * g.d + 8;
            check(dev, &c)
        }));
    }
    // Sharp softmax (scale 1: logits of several units), exercising the running-max rescale.
    for (name, g) in [("llama3_8b", llama), ("gpt_oss_120b_sinks_window127", gpt_oss)] {
        out.push(GpuTrial::new(format!("{name}::sharp_softmax_scale1"), move |dev| {
            let mut c = case(g, MIXED, 22);
            c.scale = 1.0;
            check(dev, &c)
        }));
    }
    // Bad packings: every row (padding included) 0 / −inf and FAULT_QUERY_LAYOUT.
    type Mutate = fn(&mut Packing);
    let faults: &[(&str, Mutate)] = &[
        ("decreasing_cu_seqlens_k", |p| p.cu_k[2] = p.cu_k[1] - 1),
        ("decreasing_cu_seqlens_q", |p| p.cu_q[2] = p.cu_q[1] - 1),
        ("cu_seqlens_q_past_total_q", |p| p.cu_q[3] = p.total_q as i32 + 1),
        ("cu_seqlens_k_past_total_k", |p| p.cu_k[3] = p.total_k as i32 + 1),
        ("negative_cu_seqlens_q0", |p| p.cu_q[0] = -1),
        ("negative_cu_seqlens_k0", |p| p.cu_k[0] = -4),
    ];
    for &(name, mutate) in faults {
        for (gname, g) in [("llama3_8b", llama), ("gpt_oss_120b_sinks_window127", gpt_oss)] {
            out.push(GpuTrial::new(format!("bad_packing::{name}::{gname}"), move |dev| {
                let mut pk = packing(&[(40, 40), (17, 30), (5, 5)], 2, 1);
                mutate(&mut pk);
                let c = case_of(g, pk, 23);
                if c.expected().faults != FAULT_QUERY_LAYOUT {
                    return Err("the mutation does not break the packing".into());
                }
                check(dev, &c)
            }));
        }
    }
    // max_seqlen_q hints: below the longest sequence, absent, and a plan sized for less.
    out.push(GpuTrial::new("llama3_8b::hint_below_longest", move |dev| {
        let mut c = case(llama, &[(300, 300), (17, 17), (129, 500)], 24);
        c.hint = Some(17);
        check(dev, &c)
    }));
    out.push(GpuTrial::new("gpt_oss_120b_sinks_window127::hint_one_for_700", move |dev| {
        let mut c = case(gpt_oss, &[(700, 700)], 25);
        c.hint = Some(1);
        check(dev, &c)
    }));
    out.push(GpuTrial::new("llama3_8b::hint_none_plan_capacity", move |dev| {
        let mut c = case_of(llama, packing(MIXED, 4, 0), 26);
        c.plan_seqlen = c.pk.total_q;
        c.hint = None;
        check(dev, &c)
    }));
    out.push(GpuTrial::new("llama3_8b::hint_none_plan_seqlen_16", move |dev| {
        let mut c = case(llama, MIXED, 27);
        c.plan_seqlen = 16;
        c.hint = None;
        check(dev, &c)
    }));
    // Every config of every head dim, pinned, causal and not.
    for d in HEAD_DIMS {
        let g = match d {
            64 => sinks(geo(64, 8, 64), -1),
            128 => llama,
            _ => geo(16, 8, 256),
        };
        let q = Query { head_dim: d, ..case(g, &[(1, 1)], 0).query() };
        for config in q.configs().iter().map(|c| c.name) {
            for (mask, g) in [("causal", g), ("noncausal", noncausal(g))] {
                out.push(GpuTrial::new(format!("config::d{d}_{config}::{mask}"), move |dev| {
                    let seqs = [(1, 1), (17, 17), (129, 129), (300, 300), (100, 900), (50, 20), (0, 5), (5, 0)];
                    check_pinned(dev, &case_of(g, packing(&seqs, 1, 0), 28), Some(config))
                }));
            }
        }
    }
    out.push(GpuTrial::new("empty_batch_launches_nothing", empty_batch));
    out.push(GpuTrial::new("no_query_rows_written", move |dev| {
        // B = 2 with no query rows and 2 padding rows: a launch that writes nothing.
        check(dev, &case_of(llama, packing(&[(0, 0), (0, 4)], 2, 0), 29))
    }));
    out.push(GpuTrial::new("race_picks_a_legal_config", race));
    out.push(GpuTrial::new("graph_replay_after_packing_changes", graph_replay));
    out.push(GpuTrial::new("run_allocates_nothing", allocates_nothing));
    out.push(GpuTrial::new("unprepared_plan_frozen", unprepared));
    out.push(GpuTrial::new("bad_inputs_launch_nothing", bad_inputs));
    out
}

/// B = 0 (cu_seqlens of one entry) and total_q = 0: `run` returns Ok and launches nothing.
fn empty_batch(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    for (seqs, pad) in [(&[][..], 3), (&[(0, 0), (0, 3)][..], 0)] {
        let c = case_of(geo(32, 8, 128), packing(seqs, pad, 2), 30);
        let plan = varlen::plan(&c.query(), dev).map_err(err)?;
        let session = session(dev, &plan, None)?;
        let mut d = c.upload(s)?;
        varlen::run(&plan, c.args(&mut d)?, s).map_err(err)?;
        let got = results(&d, s)?;
        if got.0.iter().any(|&b| b != O_POISON) || got.1.iter().any(|x| !x.is_nan()) || got.2 != 0 {
            return Err(format!("{seqs:?}: an empty call wrote something"));
        }
        session.close();
    }
    Ok(())
}

/// The session's race (autotune per `B12X_AUTOTUNE`) selects one of the configs, which passes.
fn race(dev: &Arc<Device>) -> TrialResult {
    let c = case(geo(32, 8, 128), MIXED, 31);
    let plan = varlen::plan(&c.query(), dev).map_err(err)?;
    let session = prepared(dev, &plan)?;
    let rec = session.records().first().ok_or("no selection record")?.clone();
    if !c.query().configs().iter().any(|cfg| cfg.name == rec.config) {
        return Err(format!("selected {} which is not a config", rec.config));
    }
    session.close();
    check_pinned(dev, &c, Some(&rec.config))
}

/// Capture one call, change the packing in place (same B and tensor rows, a sequence longer
/// than the captured hint), replay: equals the oracle on the new packing, and eager bit for bit.
fn graph_replay(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    for g in [geo(32, 8, 128), sinks(geo(64, 8, 64), 127)] {
        let first = case(g, &[(300, 300), (17, 17), (100, 900)], 32);
        // 407 query rows of 417 and 1150 key rows of 1217; the longest query sequence (350)
        // is past the captured hint (300).
        let mut second = case_of(g, packing(&[(17, 500), (350, 350), (40, 300)], 10, 67), 32);
        second.hint = first.hint;
        second.plan_seqlen = first.plan_seqlen;
        if (second.pk.total_q, second.pk.total_k) != (first.pk.total_q, first.pk.total_k) {
            return Err("the two packings must have the same rows".into());
        }
        let plan = varlen::plan(&first.query(), dev).map_err(err)?;
        let session = session(dev, &plan, None)?;
        let mut d = first.upload(s)?;
        let graph = {
            let args = first.args(&mut d)?;
            session.capture(s, |st| varlen::run(&plan, args, st)).map_err(err)?
        };
        // SAFETY: every buffer the graph uses lives in `d`, which outlives the graph.
        unsafe { graph.launch() }.map_err(err)?;
        compare(&first, &results(&d, s)?, &first.expected()).map_err(|e| format!("first packing: {e}"))?;
        s.memcpy_htod(&second.pk.cu_q, &mut d.cu_q).map_err(err)?;
        s.memcpy_htod(&second.pk.cu_k, &mut d.cu_k).map_err(err)?;
        let want = second.expected();
        for replay in 0..2 {
            second.poison(&mut d, s)?;
            unsafe { graph.launch() }.map_err(err)?;
            compare(&second, &results(&d, s)?, &want).map_err(|e| format!("replay {replay}: {e}"))?;
        }
        let replayed = results(&d, s)?;
        second.poison(&mut d, s)?;
        varlen::run(&plan, second.args(&mut d)?, s).map_err(err)?;
        let eager = results(&d, s)?;
        if eager.0 != replayed.0 || bits(&eager.1) != bits(&replayed.1) {
            return Err("eager and replayed outputs differ".into());
        }
        drop(graph);
        session.close();
    }
    Ok(())
}

fn allocates_nothing(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let c = case(sinks(geo(32, 8, 128), 64), MIXED, 33);
    let plan = varlen::plan(&c.query(), dev).map_err(err)?;
    let _session = session(dev, &plan, None)?;
    let mut d = c.upload(s)?;
    check_run_allocates_nothing(dev, s, 20, || {
        let args = c.args(&mut d).map_err(|e| Error::SessionState { state: "test", what: e })?;
        varlen::run(&plan, args, s)
    })
}

fn unprepared(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let c = case(geo(8, 8, 64), &[(3, 3)], 34);
    let plan = varlen::plan(&c.query(), dev).map_err(err)?;
    let other = varlen::plan(&Query { max_tokens_q: 999, ..c.query() }, dev).map_err(err)?;
    let mut session = session(dev, &other, None)?;
    session.freeze();
    let mut d = c.upload(s)?;
    let r = varlen::run(&plan, c.args(&mut d)?, s);
    session.close();
    match r {
        Err(Error::KernelResolutionFrozen { .. }) => Ok(()),
        other => Err(format!("expected KernelResolutionFrozen, got {other:?}")),
    }
}

/// Each bad input is a typed error, and o, lse and the error word stay as they were.
fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    // H 32, Hkv 8, D 128, sinks: total_q = 57, total_k = 70, B = 2.
    let c = case(sinks(geo(32, 8, 128), -1), &[(40, 40), (17, 30)], 35);
    let q0 = c.query();
    let plan = varlen::plan(&q0, dev).map_err(err)?;
    let session = session(dev, &plan, None)?;
    let mut d = c.upload(s)?;
    type Edit = fn(&mut Args<'_>) -> Result<(), String>;
    // SAFETY (every edit): views of the same buffers, no larger than the originals except
    // where the op must reject them before launching.
    let edits: &[(&str, Edit)] = &[
        ("q wrong dtype", |a| {
            a.q =
                unsafe { TensorRef::from_raw(a.q.ptr(), &[57, 32, 128], &[4096, 128, 1], DType::F16) }.map_err(err)?;
            Ok(())
        }),
        ("o wrong dtype", |a| {
            let p = a.o.ptr();
            a.o = unsafe { TensorMut::from_raw(p, &[57, 32, 128], &[4096, 128, 1], DType::F16) }.map_err(err)?;
            Ok(())
        }),
        ("q wrong head_dim", |a| {
            a.q = unsafe { TensorRef::from_raw(a.q.ptr(), &[57, 32, 64], &[2048, 64, 1], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("q wrong heads", |a| {
            a.q =
                unsafe { TensorRef::from_raw(a.q.ptr(), &[57, 16, 128], &[2048, 128, 1], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("o rows differ from q", |a| {
            let p = a.o.ptr();
            a.o = unsafe { TensorMut::from_raw(p, &[56, 32, 128], &[4096, 128, 1], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("k wrong kv_heads", |a| {
            a.k = unsafe { TensorRef::from_raw(a.k.ptr(), &[70, 4, 128], &[512, 128, 1], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("v rows differ from k", |a| {
            a.v =
                unsafe { TensorRef::from_raw(a.v.ptr(), &[69, 8, 128], &[1024, 128, 1], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("v wrong dtype", |a| {
            a.v = unsafe { TensorRef::from_raw(a.v.ptr(), &[70, 8, 128], &[1024, 128, 1], DType::F16) }.map_err(err)?;
            Ok(())
        }),
        ("q heads not contiguous", |a| {
            a.q =
                unsafe { TensorRef::from_raw(a.q.ptr(), &[57, 32, 128], &[4096, 1, 32], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("k rows overlap", |a| {
            a.k = unsafe { TensorRef::from_raw(a.k.ptr(), &[70, 8, 128], &[512, 128, 1], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("misaligned q", |a| {
            a.q = unsafe { TensorRef::from_raw(a.q.ptr() + 2, &[57, 32, 128], &[4096, 128, 1], DType::BF16) }
                .map_err(err)?;
            Ok(())
        }),
        ("misaligned v", |a| {
            a.v = unsafe { TensorRef::from_raw(a.v.ptr() + 8, &[70, 8, 128], &[1024, 128, 1], DType::BF16) }
                .map_err(err)?;
            Ok(())
        }),
        ("o overlaps q", |a| {
            let p = a.q.ptr();
            a.o = unsafe { TensorMut::from_raw(p, &[57, 32, 128], &[4096, 128, 1], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("o overlaps k", |a| {
            let p = a.k.ptr();
            a.o = unsafe { TensorMut::from_raw(p, &[57, 32, 128], &[4096, 128, 1], DType::BF16) }.map_err(err)?;
            Ok(())
        }),
        ("lse overlaps o", |a| {
            let p = a.o.ptr();
            a.lse = Some(unsafe { TensorMut::from_raw(p, &[57, 32], &[32, 1], DType::F32) }.map_err(err)?);
            Ok(())
        }),
        ("lse wrong shape", |a| {
            let p = a.lse.as_ref().map_or(0, |l| l.ptr());
            a.lse = Some(unsafe { TensorMut::from_raw(p, &[57, 16], &[16, 1], DType::F32) }.map_err(err)?);
            Ok(())
        }),
        ("missing sinks", |a| {
            a.sinks = None;
            Ok(())
        }),
        ("sinks wrong shape", |a| {
            let p = a.sinks.map_or(0, |t| t.ptr());
            a.sinks = Some(unsafe { TensorRef::from_raw(p, &[16], &[1], DType::F32) }.map_err(err)?);
            Ok(())
        }),
        ("cu_seqlens_k shorter than cu_seqlens_q", |a| {
            let p = a.cu_seqlens_k.ptr();
            a.cu_seqlens_k = unsafe { TensorRef::from_raw(p, &[2], &[1], DType::I32) }.map_err(err)?;
            Ok(())
        }),
        ("cu_seqlens_q wrong dtype", |a| {
            let p = a.cu_seqlens_q.ptr();
            a.cu_seqlens_q = unsafe { TensorRef::from_raw(p, &[3], &[1], DType::F32) }.map_err(err)?;
            Ok(())
        }),
        ("error wrong dtype", |a| {
            let p = a.error.ptr();
            a.error = unsafe { TensorMut::from_raw(p, &[1], &[1], DType::F32) }.map_err(err)?;
            Ok(())
        }),
        ("hint zero", |a| {
            a.max_seqlen_q = Some(0);
            Ok(())
        }),
        ("hint past max_tokens_q", |a| {
            a.max_seqlen_q = Some(58);
            Ok(())
        }),
    ];
    let typed = |r: &b12x_core::Result<()>| {
        matches!(
            r,
            Err(Error::Shape { .. }
                | Error::DType { .. }
                | Error::Stride { .. }
                | Error::Misaligned { .. }
                | Error::Aliasing { .. }
                | Error::Capacity { .. })
        )
    };
    for (name, edit) in edits {
        let mut args = c.args(&mut d)?;
        edit(&mut args)?;
        let r = varlen::run(&plan, args, s);
        if !typed(&r) {
            return Err(format!("{name}: expected a typed input error, got {r:?}"));
        }
    }
    // The same arguments against plans they do not fit (never prepared: the checks come first).
    let misfits: &[(&str, Query)] = &[
        ("B > max_batch", Query { max_batch: 1, ..q0.clone() }),
        ("total_q > max_tokens_q", Query { max_tokens_q: 56, max_seqlen_q: 40, ..q0.clone() }),
        ("total_k > max_tokens_k", Query { max_tokens_k: 69, ..q0.clone() }),
        ("sinks given, the plan has none", Query { sinks: false, ..q0.clone() }),
        ("plan head_dim 64", Query { head_dim: 64, ..q0.clone() }),
        ("plan kv_heads 4", Query { kv_heads: 4, ..q0.clone() }),
        ("plan f16", Query { dtype: DType::F16, ..q0.clone() }),
    ];
    for (name, q) in misfits {
        let other = varlen::plan(q, dev).map_err(err)?;
        let r = varlen::run(&other, c.args(&mut d)?, s);
        if !typed(&r) {
            return Err(format!("{name}: expected a typed input error, got {r:?}"));
        }
    }
    let got = results(&d, s)?;
    if got.0.iter().any(|&b| b != O_POISON) || got.1.iter().any(|x| !x.is_nan()) || got.2 != 0 {
        return Err("a rejected call wrote o, lse or the error word".into());
    }
    session.close();
    Ok(())
}

fn main() {
    run_gpu_trials(trials())
}
