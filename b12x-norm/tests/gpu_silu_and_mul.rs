//! GPU validation of `activation.silu_and_mul` (libtest-mimic; every trial is listed as ignored
//! when no CUDA device is present).
//!
//! Each trial is one shape × dtype × limit and runs *every* legal config, pinned one at a time
//! (`testing::session_pinned` on the call's bucket), with every output poisoned before the launch:
//!
//! - `y` (bf16/f16): within [`reference::ULP_BOUND`] = 1 ULP of the CPU oracle (the kernel's `expf`
//!   is within 2 f32 ulp of the oracle's exp, far below half an output ULP: the two round to the
//!   same or to adjacent values), NaN positions equal; how many elements equal the oracle exactly
//!   is printed. Every config's `y` is bitwise equal to the first's (the op has no reduction).
//!   `y`'s row padding stays poisoned.
//! - Quantized outputs (MXFP8, block FP8 1×128 with f32 and UE8M0 scales, NVFP4 given): codes and
//!   scales bitwise equal to b12x-quant's CPU codec applied to the GPU's own rounded `y` — the
//!   "activation, then quantizer" composition — for every config (block FP8 only where I is a
//!   multiple of 128, the quantized outputs only where I is a multiple of 32 / 16).
//!
//! Shapes: T ∈ {1, 7, 64, 1000} × I ∈ {8, 1024, 2880 (gpt-oss), 12288 (Qwen3-8B), 18432}, x
//! uniform in ±20 so the limits (L = 10 and 7) bite; T = 7 has strided rows (x: 2I + 8, y: I + 8).
//! Further trials: NaN / ±Inf / exp-overflow inputs, graph replay equals eager bitwise (plain and
//! NVFP4), `run` allocates nothing, T = 0 launches nothing, bad inputs are typed errors that launch
//! nothing, a frozen session or a capture rejects an unprepared plan, a PDL launch gives the plain
//! launch's bits. `B12X_TEST_PROFILE=reduced` drops T = 1000 and I = 18432 (sanitizer runs).

use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::{bf16, f16};
use b12x_core::testing::{
    alloc_poisoned, cast, check_graph_replay_equals_eager, check_run_allocates_nothing, check_ulp, poison,
    reduced_profile, run_gpu_trials, session_pinned, uniform, GpuTrial, HostFloat,
};
use b12x_core::{Device, Element, Error, OpPlan, PreparationSession, Scratch, TensorMut, TensorRef};
use b12x_norm::silu_and_mul::{self, reference, Args, QuantOut, Query};
use b12x_quant::block::{quantize_block_fp8, quantize_mx, quantize_nvfp4, Fp8ScaleKind, Fp8Scales, MxOptions};
use b12x_quant::mx::MxFormat;
use std::sync::Arc;

type TrialResult = Result<(), String>;

const QUANT_OUTS: [QuantOut; 4] =
    [QuantOut::Mxfp8, QuantOut::Fp8Block128F32, QuantOut::Fp8Block128Ue8m0, QuantOut::Nvfp4];
/// The NVFP4 encode scale (any finite positive value): |y| ≤ 400 here, so block scales land in
/// UE4M3's normal range.
const ENC: f32 = 52.5;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[derive(Clone, Copy, Debug)]
enum Fill {
    /// Seeded uniform in [-20, 20).
    Uniform,
    /// Uniform, then row 0 gets NaN / ±Inf gates and ups, huge negative gates (exp overflow) and
    /// a zero up next to an infinite gate.
    NonFinite,
}

#[derive(Clone, Copy, Debug)]
struct Shape {
    t: usize,
    i: usize,
    /// Extra elements at the end of each row of x and of y.
    pad: usize,
    fill: Fill,
}

fn fill_x<E: HostFloat>(s: Shape, seed: u64) -> Vec<E> {
    let sx = 2 * s.i + s.pad;
    let mut v = uniform(seed, s.t * sx, -20.0, 20.0);
    if let Fill::NonFinite = s.fill {
        let (i, inf, nan) = (s.i, f32::INFINITY, f32::NAN);
        for (j, g, u) in [
            (0, nan, 1.0),
            (1, 1.0, nan),
            (2, inf, 2.0),
            (3, -inf, 2.0),
            (4, inf, 0.0),
            (5, 3.0, inf),
            (6, 3.0, -inf),
            (7, -100.0, 2.0),
            (40, -90.0, -3.0),
            (41, inf, inf),
        ] {
            v[j] = g;
            v[i + j] = u;
        }
    }
    cast(&v)
}

/// A `[rows, cols]` view with row stride `stride` of a device buffer.
fn view<E: Element>(s: &CudaSlice<E>, rows: usize, cols: usize, stride: usize) -> TensorRef<'_> {
    let base = TensorRef::from_slice(s, &[s.len()]).expect("1-D view");
    // SAFETY: every caller allocates at least rows * stride elements.
    unsafe { TensorRef::from_raw(base.ptr(), &[rows, cols], &[stride as isize, 1], E::DTYPE) }.expect("view")
}
fn view_mut<E: Element>(s: &mut CudaSlice<E>, rows: usize, cols: usize, stride: usize) -> TensorMut<'_> {
    let len = s.len();
    let base = TensorMut::from_slice(s, &[len]).expect("1-D view");
    // SAFETY: as above; `base` is the only view of `s`, and it is consumed here.
    unsafe { TensorMut::from_raw(base.ptr(), &[rows, cols], &[stride as isize, 1], E::DTYPE) }.expect("view")
}
/// `[rows, cols]` scales of `out`'s scale dtype over a byte buffer.
fn scales_view(s: &mut CudaSlice<u8>, out: QuantOut, rows: usize, cols: usize) -> TensorMut<'_> {
    let len = s.len();
    let base = TensorMut::from_slice(s, &[len]).expect("1-D view");
    // SAFETY: the buffer holds rows * cols scales of the output's scale dtype.
    unsafe { TensorMut::from_raw(base.ptr(), &[rows, cols], &[cols as isize, 1], out.scale_dtype()) }.expect("view")
}

/// Prepares `plan` with `config` pinned in the bucket of `t`.
fn pinned(dev: &Arc<Device>, plan: &dyn OpPlan, t: usize, config: &str) -> Result<PreparationSession, String> {
    let b = plan.buckets().iter().find(|b| b.lo <= t && t <= b.hi).ok_or("no bucket")?;
    session_pinned(dev, plan, &b.label(), config)
}

/// The quantized outputs of the CPU codec on `y` (contiguous `[t, i]`): codes and scale bytes.
fn codec(y: &[f32], t: usize, i: usize, out: QuantOut) -> (Vec<u8>, Vec<u8>) {
    match out {
        QuantOut::Mxfp8 => {
            let m = quantize_mx(y, t, i, MxFormat::Fp8.element(), MxOptions::default()).expect("shape");
            (m.codes, m.scales)
        }
        QuantOut::Nvfp4 => {
            let n = quantize_nvfp4(y, t, i, Some(ENC)).expect("shape");
            (n.codes, n.scales)
        }
        QuantOut::Fp8Block128F32 | QuantOut::Fp8Block128Ue8m0 => {
            let kind = if out == QuantOut::Fp8Block128F32 { Fp8ScaleKind::F32 } else { Fp8ScaleKind::Ue8m0 };
            let b = quantize_block_fp8(y, t, i, (1, 128), kind).expect("shape");
            let scales = match b.scales {
                Fp8Scales::F32(v) => v.iter().flat_map(|f| f.to_le_bytes()).collect(),
                Fp8Scales::Ue8m0(v) => v,
            };
            (b.codes, scales)
        }
    }
}

fn check_shape<E: Element + HostFloat>(dev: &Arc<Device>, s: Shape, limit: Option<f32>) -> TrialResult {
    let (t, i) = (s.t, s.i);
    let (sx, sy) = (2 * i + s.pad, i + s.pad);
    let stream: &Arc<CudaStream> = dev.stream();
    let x_h: Vec<E> = fill_x(s, (t * 31 + i) as u64);
    let x_dense: Vec<E> = (0..t).flat_map(|r| x_h[r * sx..r * sx + 2 * i].iter().copied()).collect();
    let want = reference::silu_and_mul(&x_dense, i, limit);
    let x = stream.clone_htod(&x_h).map_err(err)?;
    let enc = stream.clone_htod(&[ENC]).map_err(err)?;
    // Capacity above T: the plan's buckets must not depend on the call.
    let q = Query { intermediate: i, dtype: E::DTYPE, max_tokens: 2 * t, limit, out: None };
    let plan = silu_and_mul::plan(&q, dev).map_err(err)?;
    let mut first: Option<Vec<E>> = None;
    for config in plan.candidates(0) {
        let session = pinned(dev, &plan, t, &config)?;
        let mut y = alloc_poisoned::<E>(stream, t * sy).map_err(err)?;
        let args = Args {
            x: view(&x, t, 2 * i, sx),
            y: Some(view_mut(&mut y, t, i, sy)),
            codes: None,
            scales: None,
            enc: None,
        };
        silu_and_mul::run(&plan, args, Scratch::none(), stream).map_err(err)?;
        let y_all = stream.clone_dtoh(&y).map_err(err)?;
        session.close();
        let got: Vec<E> = (0..t).flat_map(|r| y_all[r * sy..r * sy + i].iter().copied()).collect();
        let name = format!("y [{config}]");
        check_ulp(&name, &got, &want, &[t, i], reference::ULP_BOUND)?;
        let all_ones = (1u64 << (8 * size_of::<E>())) - 1;
        for r in 0..t {
            if y_all[r * sy + i..(r + 1) * sy].iter().any(|v| v.bits() != all_ones) {
                return Err(format!("{name}: padding of row {r} was written"));
            }
        }
        match &first {
            None => {
                let exact = got.iter().zip(&want).filter(|(a, b)| a.bits() == b.bits()).count();
                eprintln!("  y T={t} I={i} {:?} limit={limit:?}: {exact} of {} equal to the oracle", E::DTYPE, t * i);
                first = Some(got);
            }
            Some(f) => {
                if let Some(k) = got.iter().zip(f).position(|(a, b)| a.bits() != b.bits()) {
                    return Err(format!("{name}: element {k} differs from config {}", plan.candidates(0)[0]));
                }
            }
        }
    }
    let y_f32: Vec<f32> = first.ok_or("no config")?.iter().map(|v| v.to_f64() as f32).collect();
    for out in QUANT_OUTS.into_iter().filter(|o| i % o.block() == 0) {
        let (want_codes, want_scales) = codec(&y_f32, t, i, out);
        let q = Query { out: Some(out), ..q.clone() };
        let plan = silu_and_mul::plan(&q, dev).map_err(err)?;
        let (qb, groups) = (out.code_bytes(i), i / out.block());
        for config in plan.candidates(0) {
            let session = pinned(dev, &plan, t, &config)?;
            let mut codes = alloc_poisoned::<u8>(stream, t * qb).map_err(err)?;
            let mut scales = alloc_poisoned::<u8>(stream, t * groups * out.scale_dtype().size_bytes()).map_err(err)?;
            let args = Args {
                x: view(&x, t, 2 * i, sx),
                y: None,
                codes: Some(view_mut(&mut codes, t, qb, qb)),
                scales: Some(scales_view(&mut scales, out, t, groups)),
                enc: (out == QuantOut::Nvfp4).then(|| TensorRef::from_slice(&enc, &[1])).transpose().map_err(err)?,
            };
            silu_and_mul::run(&plan, args, Scratch::none(), stream).map_err(err)?;
            let (c, sc) = (stream.clone_dtoh(&codes).map_err(err)?, stream.clone_dtoh(&scales).map_err(err)?);
            session.close();
            if let Some(k) = c.iter().zip(&want_codes).position(|(a, b)| a != b) {
                return Err(format!("{out:?} [{config}]: code byte {k} differs from y + the CPU codec"));
            }
            if let Some(k) = sc.iter().zip(&want_scales).position(|(a, b)| a != b) {
                return Err(format!("{out:?} [{config}]: scale byte {k} differs from y + the CPU codec"));
            }
        }
    }
    Ok(())
}

/// Output buffers of the graph / allocation trials.
struct Outs {
    y: CudaSlice<bf16>,
    codes: CudaSlice<u8>,
    scales: CudaSlice<u8>,
}

/// Eager runs and replays of one captured call: bitwise equal (plain and NVFP4 outputs).
fn graph_equals_eager(dev: &Arc<Device>, out: Option<QuantOut>) -> TrialResult {
    let (t, i) = (37, 12288);
    let stream = dev.stream();
    let x = stream.clone_htod(&cast::<bf16>(&uniform(11, t * 2 * i, -20.0, 20.0))).map_err(err)?;
    let enc = stream.clone_htod(&[ENC]).map_err(err)?;
    let q = Query { intermediate: i, dtype: bf16::DTYPE, max_tokens: 64, limit: Some(10.0), out };
    let plan = silu_and_mul::plan(&q, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    let mut o = Outs {
        y: alloc_poisoned(stream, t * i).map_err(err)?,
        codes: alloc_poisoned(stream, t * i).map_err(err)?,
        scales: alloc_poisoned(stream, t * i).map_err(err)?,
    };
    check_graph_replay_equals_eager(
        &session,
        stream,
        &mut o,
        |o, s| {
            let args = match out {
                None => Args {
                    x: view(&x, t, 2 * i, 2 * i),
                    y: Some(view_mut(&mut o.y, t, i, i)),
                    codes: None,
                    scales: None,
                    enc: None,
                },
                Some(qo) => Args {
                    x: view(&x, t, 2 * i, 2 * i),
                    y: None,
                    codes: Some(view_mut(&mut o.codes, t, qo.code_bytes(i), qo.code_bytes(i))),
                    scales: Some(scales_view(&mut o.scales, qo, t, i / qo.block())),
                    enc: (qo == QuantOut::Nvfp4).then(|| TensorRef::from_slice(&enc, &[1])).transpose()?,
                },
            };
            silu_and_mul::run(&plan, args, Scratch::none(), s)
        },
        |o, s| {
            poison(s, &mut o.y).map_err(err)?;
            poison(s, &mut o.codes).map_err(err)?;
            poison(s, &mut o.scales).map_err(err)
        },
        |o, s| {
            let y = s.clone_dtoh(&o.y).map_err(err)?.into_iter().map(|v| u32::from(v.to_bits()));
            let c = s.clone_dtoh(&o.codes).map_err(err)?.into_iter().map(u32::from);
            let sc = s.clone_dtoh(&o.scales).map_err(err)?.into_iter().map(u32::from);
            Ok(y.chain(c).chain(sc).collect())
        },
    )
}

/// 100 prepared runs (after a warm-up) change the device's free memory by nothing.
fn run_allocates_nothing(dev: &Arc<Device>) -> TrialResult {
    let (t, i) = (64, 12288);
    let stream = dev.stream();
    let x = stream.clone_htod(&cast::<bf16>(&uniform(31, t * 2 * i, -20.0, 20.0))).map_err(err)?;
    let mut y = alloc_poisoned::<bf16>(stream, t * i).map_err(err)?;
    let q = Query { intermediate: i, dtype: bf16::DTYPE, max_tokens: t, limit: None, out: None };
    let plan = silu_and_mul::plan(&q, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    check_run_allocates_nothing(dev, stream, 100, || {
        let args = Args {
            x: view(&x, t, 2 * i, 2 * i),
            y: Some(view_mut(&mut y, t, i, i)),
            codes: None,
            scales: None,
            enc: None,
        };
        silu_and_mul::run(&plan, args, Scratch::none(), stream)
    })
}

/// A frozen session and a graph capture reject an unprepared plan and launch nothing; without
/// either, an unprepared plan prepares its default config and computes the right answer; the
/// same plan launched with PDL (`Plan::with_pdl`) gives the same bits.
fn unprepared_and_pdl_plans(dev: &Arc<Device>) -> TrialResult {
    let (t, i) = (5, 2880);
    let stream = dev.stream();
    let x_h = cast::<bf16>(&uniform(51, t * 2 * i, -20.0, 20.0));
    let x = stream.clone_htod(&x_h).map_err(err)?;
    let mut y = alloc_poisoned::<bf16>(stream, t * i).map_err(err)?;
    let q = Query { intermediate: i, dtype: bf16::DTYPE, max_tokens: t, limit: Some(7.0), out: None };
    let plan = silu_and_mul::plan(&q, dev).map_err(err)?;
    let call = |plan: &silu_and_mul::Plan, y: &mut CudaSlice<bf16>, s: &Arc<CudaStream>| {
        let args =
            Args { x: view(&x, t, 2 * i, 2 * i), y: Some(view_mut(y, t, i, i)), codes: None, scales: None, enc: None };
        silu_and_mul::run(plan, args, Scratch::none(), s)
    };
    let mut frozen = PreparationSession::new(dev).map_err(err)?;
    frozen.freeze();
    match call(&plan, &mut y, stream) {
        Err(Error::KernelResolutionFrozen { op: "activation.silu_and_mul", .. }) => {}
        other => return Err(format!("frozen: expected KernelResolutionFrozen, got {other:?}")),
    }
    frozen.close();
    let open = PreparationSession::new(dev).map_err(err)?;
    match open.capture(stream, |s| call(&plan, &mut y, s)) {
        Err(Error::KernelResolutionFrozen { .. }) => {}
        Err(e) => return Err(format!("capture: expected KernelResolutionFrozen, got {e}")),
        Ok(_) => return Err("capture: expected KernelResolutionFrozen, got a graph".into()),
    }
    stream.synchronize().map_err(err)?;
    if stream.clone_dtoh(&y).map_err(err)?.iter().any(|v| v.to_bits() != 0xffff) {
        return Err("a rejected call wrote y".into());
    }
    call(&plan, &mut y, stream).map_err(err)?;
    let got = stream.clone_dtoh(&y).map_err(err)?;
    check_ulp("y (unprepared)", &got, &reference::silu_and_mul(&x_h, i, Some(7.0)), &[t, i], reference::ULP_BOUND)?;
    let pdl = plan.clone().with_pdl(true);
    if !pdl.pdl() || plan.pdl() {
        return Err("with_pdl did not set the flag on the copy only".into());
    }
    let mut y_pdl = alloc_poisoned::<bf16>(stream, t * i).map_err(err)?;
    call(&pdl, &mut y_pdl, stream).map_err(err)?;
    if stream.clone_dtoh(&y_pdl).map_err(err)?.iter().map(|v| v.to_bits()).ne(got.iter().map(|v| v.to_bits())) {
        return Err("the PDL launch differs from the plain one".into());
    }
    Ok(())
}

/// T = 0 returns Ok and writes nothing; bad inputs return typed errors and launch nothing.
fn empty_and_bad_inputs_launch_nothing(dev: &Arc<Device>) -> TrialResult {
    let (t, i) = (4, 1024);
    let stream = dev.stream();
    // Room for a padded row stride of 2I + 8.
    let x = stream.clone_htod(&cast::<bf16>(&uniform(41, t * (2 * i + 8), -2.0, 2.0))).map_err(err)?;
    let mut y = alloc_poisoned::<bf16>(stream, t * i).map_err(err)?;
    let q = Query { intermediate: i, dtype: bf16::DTYPE, max_tokens: t - 1, limit: Some(7.0), out: None };
    let plan = silu_and_mul::plan(&q, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    let empty =
        Args { x: view(&x, 0, 2 * i, 2 * i), y: Some(view_mut(&mut y, 0, i, i)), codes: None, scales: None, enc: None };
    silu_and_mul::run(&plan, empty, Scratch::none(), stream).map_err(|e| format!("T = 0: {e}"))?;
    let x_ptr = view(&x, 1, 2 * i, 2 * i).ptr();
    let raw = |ptr: u64, rows: usize, stride: usize, dtype| {
        // SAFETY: every view stays inside `x`; none reaches a launch (all are rejected).
        unsafe { TensorRef::from_raw(ptr, &[rows, 2 * i], &[stride as isize, 1], dtype) }.map_err(err)
    };
    type IsExpected = fn(&Error) -> bool;
    let cases: [(&str, TensorRef<'_>, usize, IsExpected); 4] = [
        ("above capacity", raw(x_ptr, t, 2 * i, bf16::DTYPE)?, t, |e| matches!(e, Error::Capacity { .. })),
        ("misaligned pointer", raw(x_ptr + 2, 2, 2 * i, bf16::DTYPE)?, 2, |e| {
            matches!(e, Error::Misaligned { tensor: "x", .. })
        }),
        ("odd row stride", raw(x_ptr, 2, 2 * i + 1, bf16::DTYPE)?, 2, |e| {
            matches!(e, Error::Misaligned { tensor: "x", .. })
        }),
        ("wrong dtype", raw(x_ptr, 2, 2 * i, f16::DTYPE)?, 2, |e| matches!(e, Error::DType { tensor: "x", .. })),
    ];
    for (name, xv, rows, is_expected) in cases {
        let args = Args { x: xv, y: Some(view_mut(&mut y, rows, i, i)), codes: None, scales: None, enc: None };
        match silu_and_mul::run(&plan, args, Scratch::none(), stream) {
            Err(e) if is_expected(&e) => {}
            other => return Err(format!("{name}: unexpected {other:?}")),
        }
    }
    session.close();
    stream.synchronize().map_err(err)?;
    if stream.clone_dtoh(&y).map_err(err)?.iter().any(|v| v.to_bits() != 0xffff) {
        return Err("an empty or rejected call wrote y".into());
    }
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    let reduced = reduced_profile();
    for t in [1usize, 7, 64, 1000] {
        for i in [8usize, 1024, 2880, 12288, 18432] {
            if reduced && (t == 1000 || i == 18432) {
                continue;
            }
            // T = 7: strided rows of x and y.
            let s = Shape { t, i, pad: if t == 7 { 8 } else { 0 }, fill: Fill::Uniform };
            for limit in [None, Some(10.0f32), Some(7.0)] {
                let l = limit.map_or("nolimit".to_string(), |l| format!("limit{l}"));
                trials.push(GpuTrial::new(format!("t{t}_i{i}::{l}::bf16"), move |d| check_shape::<bf16>(d, s, limit)));
                if limit != Some(10.0) {
                    trials
                        .push(GpuTrial::new(format!("t{t}_i{i}::{l}::f16"), move |d| check_shape::<f16>(d, s, limit)));
                }
            }
        }
    }
    let nf = Shape { t: 7, i: 1024, pad: 8, fill: Fill::NonFinite };
    for limit in [None, Some(7.0f32)] {
        let l = limit.map_or("nolimit".to_string(), |l| format!("limit{l}"));
        trials.push(GpuTrial::new(format!("non_finite::{l}::bf16"), move |d| check_shape::<bf16>(d, nf, limit)));
        trials.push(GpuTrial::new(format!("non_finite::{l}::f16"), move |d| check_shape::<f16>(d, nf, limit)));
    }
    trials.push(GpuTrial::new("graph_replay_equals_eager::plain", |d| graph_equals_eager(d, None)));
    trials.push(GpuTrial::new("graph_replay_equals_eager::nvfp4", |d| graph_equals_eager(d, Some(QuantOut::Nvfp4))));
    trials.push(GpuTrial::new("graph_replay_equals_eager::fp8b128f32", |d| {
        graph_equals_eager(d, Some(QuantOut::Fp8Block128F32))
    }));
    trials.push(GpuTrial::new("run_allocates_nothing", run_allocates_nothing));
    trials.push(GpuTrial::new("unprepared_and_pdl_plans", unprepared_and_pdl_plans));
    trials.push(GpuTrial::new("empty_and_bad_inputs_launch_nothing", empty_and_bad_inputs_launch_nothing));
    run_gpu_trials(trials)
}
