//! GPU validation of `attention.rope` against the CPU oracle (libtest-mimic; listed as ignored
//! without a CUDA device).
//!
//! Every trial rotates the Q and K columns of one fused QKV buffer `[T, (H + 2·Hkv)·D]` (rows
//! padded by 8 elements) in place and compares **the whole buffer** with the oracle: table mode
//! bitwise, computed mode within 1 ULP of the dtype plus 2^-20 of the pair's magnitude (see
//! `compare`; reports how many elements differ at all); the V columns, the padding and the dims outside the rotary range must be untouched
//! (bitwise). Cases: Qwen3-8B (NeoX, θ 1e6, full rotary), Llama-3 (θ 5e5), DeepSeek-V4 (GPT-J
//! pairs, the last 64 of 512 dims, YaRN: θ 160000, factor 16, original 65536, β 32/1, positions
//! up to 2^20), partial NeoX rotary (R = D/2) with q only, bf16 and f16, T ∈ {1, 7, 64, 1000},
//! bad positions (masked, reported). Further trials: graph replay equals eager after the
//! positions change, `run` allocates nothing, bad inputs are typed errors that launch nothing.

use b12x_attention::paging::{ErrorWord, Faults};
use b12x_attention::rope::{self, reference, Args, CosSin, Query, RopeStyle, Yarn};
use b12x_core::cudarc::driver::CudaSlice;
use b12x_core::half::{bf16, f16};
use b12x_core::testing::{check_run_allocates_nothing, run_gpu_trials, uniform, FloatBuf, GpuTrial};
use b12x_core::{DType, Device, Error, PreparationSession, Scratch, TensorMut, TensorRef};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

type TrialResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

const PAD: usize = 8;

#[derive(Clone)]
struct Case {
    q: Query,
    t: usize,
    positions: Vec<i32>,
    /// `[T, stride]` values (rounded to the dtype).
    x: Vec<f32>,
}

impl Case {
    fn cols(&self) -> usize {
        (self.q.heads + 2 * self.q.kv_heads) * self.q.head_dim
    }
    fn stride(&self) -> usize {
        self.cols() + PAD
    }
}

fn round(dtype: DType, v: Vec<f32>) -> Vec<f32> {
    match dtype {
        DType::BF16 => v.iter().map(|&x| bf16::from_f32(x).to_f32()).collect(),
        _ => v.iter().map(|&x| f16::from_f32(x).to_f32()).collect(),
    }
}

fn make(q: Query, t: usize, seed: u64, positions: Option<Vec<i32>>) -> Case {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let positions = positions.unwrap_or_else(|| {
        let mut p: Vec<i32> = (0..t).map(|_| rng.random_range(0..q.max_position as i32)).collect();
        // The extremes of the range, and 0 (the identity).
        if t >= 3 {
            p[0] = 0;
            p[1] = q.max_position as i32 - 1;
        }
        p
    });
    let stride = (q.heads + 2 * q.kv_heads) * q.head_dim + PAD;
    let x = round(q.dtype, uniform(seed + 1, t * stride, -4.0, 4.0));
    Case { q, t, positions, x }
}

/// The expected buffer: the oracle on the Q and K columns, everything else as it was.
fn expected(c: &Case) -> (Vec<f32>, u32) {
    let q = &c.q;
    let (d, stride) = (q.head_dim, c.stride());
    let mut faults = 0;
    let mut out = c.x.clone();
    for (heads, col0) in [(q.heads, 0), (q.kv_heads, q.heads * d)] {
        if heads == 0 {
            continue;
        }
        let mut part: Vec<f32> = (0..c.t).flat_map(|t| c.x[t * stride + col0..][..heads * d].to_vec()).collect();
        faults |= reference::rotate(q, &c.positions, heads, &mut part);
        let part = round(q.dtype, part);
        for t in 0..c.t {
            out[t * stride + col0..][..heads * d].copy_from_slice(&part[t * heads * d..][..heads * d]);
        }
    }
    (out, faults)
}

struct Dev {
    buf: FloatBuf,
    pos: CudaSlice<i32>,
    table: Option<CudaSlice<f32>>,
    error: ErrorWord,
}

fn upload(dev: &Arc<Device>, c: &Case, plan: &rope::Plan) -> Result<Dev, String> {
    let s = dev.stream();
    let table = match c.q.cos_sin {
        CosSin::Table => Some(s.clone_htod(&plan.cos_sin_table()).map_err(err)?),
        CosSin::Computed => None,
    };
    Ok(Dev {
        buf: FloatBuf::upload(s, &c.x, c.q.dtype)?,
        pos: s.clone_htod(&c.positions).map_err(err)?,
        table,
        error: ErrorWord::new(s).map_err(err)?,
    })
}

fn args<'a>(c: &Case, d: &'a mut Dev) -> Result<Args<'a>, String> {
    let q = &c.q;
    let (h, hkv, dd) = (q.heads, q.kv_heads, q.head_dim);
    let whole = d.buf.view_mut(c.t, c.cols(), c.stride(), q.dtype);
    let mut parts = whole.split_last(&[h * dd, hkv * dd, hkv * dd]).map_err(err)?;
    parts.pop();
    let k = parts.pop().ok_or("k")?;
    let qv = parts.pop().ok_or("q")?.unflatten_last(&[h, dd]).map_err(err)?;
    let k = if hkv > 0 { Some(k.unflatten_last(&[hkv, dd]).map_err(err)?) } else { None };
    Ok(Args {
        q: qv,
        k,
        positions: TensorRef::from_slice(&d.pos, &[c.t]).map_err(err)?,
        cos_sin: match &d.table {
            Some(t) => Some(TensorRef::from_slice(t, &[q.max_position, q.rotary_dim]).map_err(err)?),
            None => None,
        },
        error: d.error.view().map_err(err)?,
    })
}

fn prepared(dev: &Arc<Device>, plan: &rope::Plan) -> Result<PreparationSession, String> {
    let mut s = PreparationSession::new(dev).map_err(err)?;
    s.prepare(&[plan]).map_err(err)?;
    Ok(s)
}

/// Compares the whole buffer: table mode bitwise; computed mode, on rotated elements, within
/// one ULP of the dtype plus 2^-20 of the pair's magnitude (|a'| + |b'|: the last f32 bit of
/// `sincosf` against the correctly rounded cos/sin, amplified where `a·c − b·s` cancels), and
/// bitwise everywhere else. Returns the count of differing elements.
fn compare(c: &Case, got_bits: &[u32], want: &[f32], exact: bool) -> Result<usize, String> {
    let bits = |v: f32| -> u32 {
        match c.q.dtype {
            DType::BF16 => u32::from(bf16::from_f32(v).to_bits()),
            _ => u32::from(f16::from_f32(v).to_bits()),
        }
    };
    let value = |b: u32| -> f32 {
        match c.q.dtype {
            DType::BF16 => bf16::from_bits(b as u16).to_f32(),
            _ => f16::from_bits(b as u16).to_f32(),
        }
    };
    let (d, r, off) = (c.q.head_dim, c.q.rotary_dim, c.q.rotary_offset);
    let mut differ = 0;
    for (i, (&g, &w)) in got_bits.iter().zip(want).enumerate() {
        let wb = bits(w);
        if g == wb {
            continue;
        }
        let col = i % c.stride();
        let hd = col % d;
        let rotated = col < (c.q.heads + c.q.kv_heads) * d && hd >= off && hd < off + r;
        let untouched = !rotated && c.x[i].to_bits() == w.to_bits();
        let close = rotated && !exact && {
            let j = hd - off;
            let partner = match c.q.style {
                RopeStyle::Neox => {
                    if j < r / 2 {
                        j + r / 2
                    } else {
                        j - r / 2
                    }
                }
                RopeStyle::Gptj => j ^ 1,
            };
            let wp = want[i - j + partner];
            let ulp = (value((wb & 0x7fff) + 1) - value(wb & 0x7fff)).abs();
            let tol = ulp + (w.abs() + wp.abs()) * 2f32.powi(-20);
            (value(g) - w).abs() <= tol
        };
        if !close {
            return Err(format!(
                "element {i} (row {}, col {col}): got {g:#06x} ({}), want {wb:#06x} ({w}){}",
                i / c.stride(),
                value(g),
                if untouched { " — an element outside the rotary range changed" } else { "" }
            ));
        }
        differ += 1;
    }
    Ok(differ)
}

fn check(dev: &Arc<Device>, c: &Case) -> TrialResult {
    let s = dev.stream();
    let plan = rope::plan(&c.q, dev).map_err(err)?;
    let session = prepared(dev, &plan)?;
    let mut d = upload(dev, c, &plan)?;
    rope::run(&plan, args(c, &mut d)?, Scratch::none(), s).map_err(err)?;
    let got = d.buf.bits(s)?;
    let faults = d.error.read(s).map_err(err)?;
    let (want, want_faults) = expected(c);
    if faults != Faults(want_faults) {
        return Err(format!("faults {faults} (want {})", Faults(want_faults)));
    }
    let differ = compare(c, &got, &want, c.q.cos_sin == CosSin::Table)?;
    if differ > 0 {
        eprintln!("  {differ} of {} elements differ from the oracle (computed cos/sin)", got.len());
    }
    session.close();
    Ok(())
}

fn qwen3(dtype: DType, cos_sin: CosSin) -> Query {
    Query {
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        rotary_dim: 128,
        rotary_offset: 0,
        style: RopeStyle::Neox,
        base: 1e6,
        yarn: None,
        dtype,
        max_tokens: 1024,
        max_position: 40960,
        cos_sin,
    }
}

fn v4(cos_sin: CosSin) -> Query {
    Query {
        heads: 16,
        kv_heads: 1,
        head_dim: 512,
        rotary_dim: 64,
        rotary_offset: 448,
        style: RopeStyle::Gptj,
        base: 160000.0,
        yarn: Some(Yarn::deepseek_v4()),
        dtype: DType::BF16,
        max_tokens: 1024,
        max_position: if cos_sin == CosSin::Table { 1 << 18 } else { 1 << 20 },
        cos_sin,
    }
}

fn trials() -> Vec<GpuTrial> {
    let mut out = Vec::new();
    for cos_sin in [CosSin::Computed, CosSin::Table] {
        let mode = if cos_sin == CosSin::Table { "table" } else { "computed" };
        for dtype in [DType::BF16, DType::F16] {
            for t in [1usize, 7, 64, 1000] {
                out.push(GpuTrial::new(format!("qwen3_8b::{mode}::{}::t{t}", dtype.name()), move |dev| {
                    check(dev, &make(qwen3(dtype, cos_sin), t, t as u64, None))
                }));
            }
        }
        out.push(GpuTrial::new(format!("llama3_theta_5e5_gptj::{mode}"), move |dev| {
            let q = Query { base: 5e5, style: RopeStyle::Gptj, ..qwen3(DType::BF16, cos_sin) };
            check(dev, &make(q, 64, 3, None))
        }));
        for t in [1usize, 64, 1000] {
            out.push(GpuTrial::new(format!("deepseek_v4_yarn_last_64_of_512::{mode}::t{t}"), move |dev| {
                check(dev, &make(v4(cos_sin), t, 100 + t as u64, None))
            }));
        }
        out.push(GpuTrial::new(format!("partial_neox_half_q_only::{mode}"), move |dev| {
            let q = Query { kv_heads: 0, rotary_dim: 64, ..qwen3(DType::F16, cos_sin) };
            check(dev, &make(q, 33, 5, None))
        }));
        out.push(GpuTrial::new(format!("hf_yarn_scaled_cos_sin::{mode}"), move |dev| {
            let y = Yarn {
                factor: 4.0,
                original_max_position: 32768,
                mscale: 1.0,
                mscale_all_dim: 0.0,
                ..Yarn::deepseek_v4()
            };
            let q = Query { yarn: Some(y), max_position: 131072, ..qwen3(DType::BF16, cos_sin) };
            check(dev, &make(q, 64, 6, None))
        }));
        out.push(GpuTrial::new(format!("bad_positions_masked_and_reported::{mode}"), move |dev| {
            let q = qwen3(DType::BF16, cos_sin);
            let pos = vec![5, -1, 40960, i32::MAX, i32::MIN, 40959];
            check(dev, &make(q, 6, 7, Some(pos)))
        }));
    }
    out.push(GpuTrial::new("graph_replay_after_positions_change", graph_replay));
    out.push(GpuTrial::new("run_allocates_nothing", allocates_nothing));
    out.push(GpuTrial::new("bad_inputs_launch_nothing", bad_inputs));
    out
}

/// Capture one call; restore the input and change the positions in place; replay: equals the
/// oracle and an eager run on the same values, bitwise.
fn graph_replay(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let first = make(qwen3(DType::BF16, CosSin::Table), 8, 21, None);
    let mut second = first.clone();
    second.positions = (0..8).map(|i| 1000 * i + 3).collect();
    let plan = rope::plan(&first.q, dev).map_err(err)?;
    let session = prepared(dev, &plan)?;
    let mut d = upload(dev, &first, &plan)?;
    let graph = {
        let a = args(&first, &mut d)?;
        session.capture(s, |st| rope::run(&plan, a, Scratch::none(), st)).map_err(err)?
    };
    // SAFETY: every buffer the graph uses lives in `d`, which outlives the graph.
    unsafe { graph.launch() }.map_err(err)?;
    compare(&first, &d.buf.bits(s)?, &expected(&first).0, true)?;
    // New values into the captured buffers (their addresses are in the graph).
    for _ in 0..2 {
        let fresh = FloatBuf::upload(s, &second.x, DType::BF16)?;
        copy(&fresh, &mut d.buf, s)?;
        s.memcpy_htod(&second.positions, &mut d.pos).map_err(err)?;
        unsafe { graph.launch() }.map_err(err)?;
        compare(&second, &d.buf.bits(s)?, &expected(&second).0, true)?;
    }
    let replayed = d.buf.bits(s)?;
    let fresh = FloatBuf::upload(s, &second.x, DType::BF16)?;
    copy(&fresh, &mut d.buf, s)?;
    rope::run(&plan, args(&second, &mut d)?, Scratch::none(), s).map_err(err)?;
    if d.buf.bits(s)? != replayed {
        return Err("eager and replayed buffers differ".into());
    }
    Ok(())
}

fn copy(src: &FloatBuf, dst: &mut FloatBuf, s: &Arc<b12x_core::cudarc::driver::CudaStream>) -> TrialResult {
    match (src, dst) {
        (FloatBuf::Bf16(a), FloatBuf::Bf16(b)) => s.memcpy_dtod(a, b).map_err(err),
        (FloatBuf::F16(a), FloatBuf::F16(b)) => s.memcpy_dtod(a, b).map_err(err),
        _ => Err("dtype mismatch".into()),
    }
}

fn allocates_nothing(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let c = make(qwen3(DType::BF16, CosSin::Computed), 64, 31, None);
    let plan = rope::plan(&c.q, dev).map_err(err)?;
    let _session = prepared(dev, &plan)?;
    let mut d = upload(dev, &c, &plan)?;
    check_run_allocates_nothing(dev, s, 20, || {
        let a = args(&c, &mut d).map_err(|e| Error::SessionState { state: "test", what: e })?;
        rope::run(&plan, a, Scratch::none(), s)
    })
}

/// Each bad input is a typed error and the buffer stays as it was (nothing launched).
fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let c = make(qwen3(DType::BF16, CosSin::Table), 5, 41, None);
    let plan = rope::plan(&c.q, dev).map_err(err)?;
    let session = prepared(dev, &plan)?;
    let mut d = upload(dev, &c, &plan)?;
    type Edit = fn(&mut Args<'_>) -> Result<(), String>;
    // Each edit and the error kind it must give (a check firing for another reason fails).
    let edits: &[(&str, &str, Edit)] = &[
        ("missing table", "Shape", |a| {
            a.cos_sin = None;
            Ok(())
        }),
        ("missing k", "Shape", |a| {
            a.k = None;
            Ok(())
        }),
        ("k overlaps q", "Aliasing", |a| {
            let q = &a.q;
            // SAFETY: a view inside the same buffer (its first 8 heads).
            a.k = Some(
                unsafe { TensorMut::from_raw(q.ptr(), &[5, 8, 128], &[q.strides()[0], 128, 1], DType::BF16) }
                    .map_err(err)?,
            );
            Ok(())
        }),
        ("q wrong dtype", "DType", |a| {
            let q = &a.q;
            a.q = unsafe { TensorMut::from_raw(q.ptr(), &[5, 32, 128], &[q.strides()[0], 128, 1], DType::F16) }
                .map_err(err)?;
            Ok(())
        }),
        ("misaligned q", "Misaligned", |a| {
            let q = &a.q;
            a.q = unsafe { TensorMut::from_raw(q.ptr() + 2, &[5, 32, 128], &[q.strides()[0], 128, 1], DType::BF16) }
                .map_err(err)?;
            Ok(())
        }),
        ("positions too short", "Shape", |a| {
            a.positions = unsafe { TensorRef::from_raw(a.positions.ptr(), &[4], &[1], DType::I32) }.map_err(err)?;
            Ok(())
        }),
        ("table wrong shape", "Shape", |a| {
            let p = a.cos_sin.map(|t| t.ptr()).unwrap_or(0);
            a.cos_sin = Some(unsafe { TensorRef::from_raw(p, &[100, 128], &[128, 1], DType::F32) }.map_err(err)?);
            Ok(())
        }),
    ];
    for (name, kind, edit) in edits {
        let mut a = args(&c, &mut d)?;
        edit(&mut a)?;
        let got = match rope::run(&plan, a, Scratch::none(), s) {
            Err(Error::Shape { .. }) => "Shape",
            Err(Error::DType { .. }) => "DType",
            Err(Error::Misaligned { .. }) => "Misaligned",
            Err(Error::Aliasing { .. }) => "Aliasing",
            other => return Err(format!("{name}: expected a typed input error, got {other:?}")),
        };
        if got != *kind {
            return Err(format!("{name}: expected {kind}, got {got}"));
        }
    }
    // T over capacity.
    let big = make(qwen3(DType::BF16, CosSin::Table), 1025, 42, None);
    let mut dbig = upload(dev, &big, &plan)?;
    match rope::run(&plan, args(&big, &mut dbig)?, Scratch::none(), s) {
        Err(Error::Capacity { .. }) => {}
        other => return Err(format!("T over capacity: expected Capacity, got {other:?}")),
    }
    let bits = d.buf.bits(s)?;
    let orig: Vec<u32> = c.x.iter().map(|&v| u32::from(bf16::from_f32(v).to_bits())).collect();
    if bits != orig || !d.error.read(s).map_err(err)?.is_clear() {
        return Err("a rejected call wrote the buffer or the error word".into());
    }
    // T = 0 launches nothing and is fine.
    let empty = Case { t: 0, positions: vec![0], x: vec![0.0; 8], ..c.clone() };
    let mut de = upload(dev, &empty, &plan)?;
    rope::run(&plan, args(&empty, &mut de)?, Scratch::none(), s).map_err(err)?;
    if !de.error.read(s).map_err(err)?.is_clear() {
        return Err("T = 0 reported a fault".into());
    }
    session.close();
    Ok(())
}

fn main() {
    run_gpu_trials(trials())
}
