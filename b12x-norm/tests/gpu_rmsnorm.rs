//! GPU validation of `norm.rmsnorm` against the CPU oracle (libtest-mimic; every trial is listed
//! as ignored when no CUDA device is present).
//!
//! Each shape × dtype × form trial runs *every* legal config (pinned one at a time), with `y`
//! poisoned before the launch and row padding checked untouched after it. `y` must be within
//! `reference::ulp_bound` ULPs of the oracle (NaN positions equal), the written-back residual
//! bitwise equal. Further trials: graph replay equals eager bitwise, a frozen session (or a
//! capture) rejects an unprepared plan, `run` allocates nothing, bad inputs are typed errors
//! that launch nothing. `B12X_TEST_PROFILE=reduced` keeps the small shapes (sanitizer runs).

use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::{bf16, f16};
use b12x_core::testing::{
    alloc_poisoned, arange, cast, check_bitwise, check_bitwise_nan_eq, check_run_allocates_nothing, check_ulp,
    reduced_profile, run_gpu_trials, shapes, uniform, GpuTrial, HostFloat,
};
use b12x_core::{Device, Element, Error, PreparationSession, Scratch, TensorMut, TensorRef};
use b12x_norm::rmsnorm::{self, reference, Args, Plan, Query};
use std::sync::Arc;

type TrialResult = Result<(), String>;

#[derive(Clone, Copy, Debug)]
enum Fill {
    /// Seeded uniform values in [-2, 2).
    Uniform,
    /// `arange` wrapped at a prime, offset to mix signs: exposes layout bugs.
    Arange,
    /// Uniform, then row 0 gets a NaN, row 1 an +inf, row 2 is all zeros.
    NonFinite,
}

#[derive(Clone, Copy, Debug)]
struct Shape {
    name: &'static str,
    t: usize,
    d: usize,
    /// Extra elements at the end of each row of x, residual and y (row stride = D + pad).
    pad: [usize; 3],
    fill: Fill,
    /// Skipped in the reduced (sanitizer) profile.
    large: bool,
}

const fn shape(name: &'static str, t: usize, d: usize) -> Shape {
    Shape { name, t, d, pad: [0; 3], fill: Fill::Uniform, large: false }
}

const SHAPES: &[Shape] = &[
    shape("llama3_8b_decode", 1, shapes::LLAMA3_8B.hidden),
    shape("llama3_8b_prefill", 300, shapes::LLAMA3_8B.hidden),
    shape("qwen3_30b_a3b_prefill", 129, shapes::QWEN3_30B_A3B.hidden),
    shape("gpt_oss_120b_decode", 8, shapes::GPT_OSS_120B.hidden),
    shape("deepseek_v4_flash_decode", 8, shapes::DEEPSEEK_V4_FLASH.hidden),
    shape("deepseek_v4_prefill", 200, shapes::DEEPSEEK_V4.hidden),
    Shape { large: true, ..shape("deepseek_v4_prefill_4096", 4096, shapes::DEEPSEEK_V4.hidden) },
    shape("d16384", 33, 16384),
    Shape { fill: Fill::Arange, ..shape("awkward_d8", 5, 8) },
    Shape { fill: Fill::Arange, ..shape("awkward_d72", 3, 72) },
    Shape { fill: Fill::Arange, ..shape("awkward_d4104", 17, 4104) },
    Shape { pad: [8, 24, 16], fill: Fill::Arange, ..shape("padded_rows", 9, 4096) },
    Shape { fill: Fill::NonFinite, ..shape("non_finite_rows", 6, 2048) },
];

const EPS: f32 = 1e-5;

fn fill<E: HostFloat>(f: Fill, seed: u64, rows: usize, stride: usize) -> Vec<E> {
    let n = rows * stride;
    let mut v = match f {
        Fill::Uniform | Fill::NonFinite => uniform(seed, n, -2.0, 2.0),
        Fill::Arange => arange(n, 97, 0.03 * (seed as f32 + 1.0)).iter().map(|v| v - 1.4).collect(),
    };
    if let Fill::NonFinite = f {
        v[3] = f32::NAN;
        v[stride + 5] = f32::INFINITY;
        v[2 * stride..3 * stride].fill(0.0);
    }
    cast(&v)
}

/// The `[rows, d]` part of a `[rows, stride]` buffer, contiguous.
fn gather<E: Copy>(v: &[E], rows: usize, d: usize, stride: usize) -> Vec<E> {
    (0..rows).flat_map(|t| v[t * stride..t * stride + d].iter().copied()).collect()
}

/// A `[rows, d]` view with row stride `stride` of a device buffer.
fn view<'a, E: Element>(s: &'a CudaSlice<E>, rows: usize, d: usize, stride: usize) -> TensorRef<'a> {
    let base = TensorRef::from_slice(s, &[s.len()]).expect("1-D view");
    // SAFETY: rows * stride elements fit in `s` (every caller allocates exactly that).
    unsafe { TensorRef::from_raw(base.ptr(), &[rows, d], &[stride as isize, 1], E::DTYPE) }.expect("view")
}
fn view_mut<'a, E: Element>(s: &'a mut CudaSlice<E>, rows: usize, d: usize, stride: usize) -> TensorMut<'a> {
    let len = s.len();
    let base = TensorMut::from_slice(s, &[len]).expect("1-D view");
    // SAFETY: as above; `base` is the only view of `s`, and it is consumed here.
    unsafe { TensorMut::from_raw(base.ptr(), &[rows, d], &[stride as isize, 1], E::DTYPE) }.expect("view")
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Prepares `plan` with `config` pinned in every bucket.
fn session_pinned(dev: &Arc<Device>, plan: &Plan, config: &str) -> Result<PreparationSession, String> {
    let mut s = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    for b in b12x_core::OpPlan::buckets(plan) {
        s.pin(plan, &b.label(), config);
    }
    s.prepare(&[plan]).map_err(err)?;
    Ok(s)
}

fn check_shape<E: Element + HostFloat>(dev: &Arc<Device>, s: Shape, residual: bool) -> TrialResult {
    let (t, d) = (s.t, s.d);
    let [sx, sr, sy] = s.pad.map(|p| d + p);
    let stream: &Arc<CudaStream> = dev.stream();
    let x_h: Vec<E> = fill(s.fill, 1, t, sx);
    let r_h: Vec<E> = fill(s.fill, 2, t, sr);
    let w_h: Vec<E> = cast(&uniform(3, d, 0.5, 1.5));
    let mut want_r = gather(&r_h, t, d, sr);
    let want_y = match residual {
        true => reference::rmsnorm_add(&gather(&x_h, t, d, sx), &mut want_r, &w_h, EPS),
        false => reference::rmsnorm(&gather(&x_h, t, d, sx), &w_h, EPS),
    };
    let x = stream.clone_htod(&x_h).map_err(err)?;
    let w = stream.clone_htod(&w_h).map_err(err)?;
    // Capacity above T: the plan's buckets must not depend on the call.
    let q = Query { cols: d, dtype: E::DTYPE, max_tokens: 2 * t, eps: EPS, residual };
    let plan = rmsnorm::plan(&q, dev).map_err(err)?;
    for config in plan.configs() {
        let id = config.id();
        let session = session_pinned(dev, &plan, &id)?;
        let mut y = alloc_poisoned::<E>(stream, t * sy).map_err(err)?;
        let mut r = stream.clone_htod(&r_h).map_err(err)?;
        let args = Args {
            x: view(&x, t, d, sx),
            residual: residual.then(|| view_mut(&mut r, t, d, sr)),
            w: TensorRef::from_slice(&w, &[d]).map_err(err)?,
            y: view_mut(&mut y, t, d, sy),
        };
        rmsnorm::run(&plan, args, Scratch::none(), stream).map_err(err)?;
        stream.synchronize().map_err(err)?;
        let y_all = stream.clone_dtoh(&y).map_err(err)?;
        let r_all = stream.clone_dtoh(&r).map_err(err)?;
        let name = |what: &str| format!("{what} [{id}]");
        check_ulp(&name("y"), &gather(&y_all, t, d, sy), &want_y, &[t, d], reference::ulp_bound::<E>())?;
        if residual {
            // x + residual is computed: NaN payloads are the hardware's (see check_bitwise_nan_eq).
            check_bitwise_nan_eq(&name("residual"), &gather(&r_all, t, d, sr), &want_r, &[t, d])?;
        }
        // Row padding: y's stays poisoned (all-ones bits), residual's keeps its input.
        for row in 0..t {
            if y_all[row * sy + d..(row + 1) * sy].iter().any(|v| v.bits() != (1u64 << (8 * size_of::<E>())) - 1) {
                return Err(name(&format!("y padding of row {row} was written")));
            }
            if r_all[row * sr + d..(row + 1) * sr].iter().zip(&r_h[row * sr + d..]).any(|(a, b)| a.bits() != b.bits()) {
                return Err(name(&format!("residual padding of row {row} was written")));
            }
        }
        session.close();
    }
    Ok(())
}

/// Eager run, then the same call captured into a graph and replayed twice: bitwise equal.
///
/// `pdl_early`: the captured calls launch with PDL and release the next kernel at entry
/// (`Plan::with_early_release`), two calls in a chain (the second normalizes the first's `y`
/// in place), against the same two calls launched plainly, eagerly.
fn graph_equals_eager(dev: &Arc<Device>, residual: bool, pdl_early: bool) -> TrialResult {
    let (t, d) = (37, shapes::LLAMA3_8B.hidden);
    let stream = dev.stream();
    let x = stream.clone_htod(&cast::<bf16>(&uniform(11, t * d, -2.0, 2.0))).map_err(err)?;
    let w = stream.clone_htod(&cast::<bf16>(&uniform(12, d, 0.5, 1.5))).map_err(err)?;
    let r_h = cast::<bf16>(&uniform(13, t * d, -2.0, 2.0));
    let q = Query { cols: d, dtype: bf16::DTYPE, max_tokens: 64, eps: EPS, residual };
    let plain = rmsnorm::plan(&q, dev).map_err(err)?;
    let early = plain.clone().with_pdl(true).with_early_release(true);
    if !early.early_release() || plain.early_release() {
        return Err("with_early_release did not set the flag on the copy only".into());
    }
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plain, &early]).map_err(err)?;
    let mut y = alloc_poisoned::<bf16>(stream, t * d).map_err(err)?;
    let mut r = stream.clone_htod(&r_h).map_err(err)?;
    let call = |plan: &rmsnorm::Plan, y: &mut CudaSlice<bf16>, r: &mut CudaSlice<bf16>, s: &Arc<CudaStream>| {
        let args = Args {
            x: view(&x, t, d, d),
            residual: residual.then(|| view_mut(r, t, d, d)),
            w: TensorRef::from_slice(&w, &[d])?,
            y: view_mut(y, t, d, d),
        };
        rmsnorm::run(plan, args, Scratch::none(), s)?;
        if pdl_early {
            // The second call of the chain reads the first one's y (x aliases y, in place); the
            // residual form adds it to the residual once more. It must see the first call's
            // writes: its own wait waits for that grid, released early or not.
            let yv = view_mut(y, t, d, d);
            // SAFETY: `y` is a whole [t, d] buffer; x aliases y, which the op allows.
            let xv = unsafe { TensorRef::from_raw(yv.ptr(), &[t, d], &[d as isize, 1], bf16::DTYPE)? };
            let args = Args {
                x: xv,
                residual: residual.then(|| view_mut(r, t, d, d)),
                w: TensorRef::from_slice(&w, &[d])?,
                y: yv,
            };
            rmsnorm::run(plan, args, Scratch::none(), s)?;
        }
        Ok(())
    };
    call(&plain, &mut y, &mut r, stream).map_err(err)?;
    let (y_eager, r_eager) = (stream.clone_dtoh(&y).map_err(err)?, stream.clone_dtoh(&r).map_err(err)?);
    let graphed = if pdl_early { &early } else { &plain };
    let graph = session.capture(stream, |s| call(graphed, &mut y, &mut r, s)).map_err(err)?;
    for replay in 0..2 {
        reset(stream, &mut y, &mut r, &r_h)?;
        // SAFETY: x, w, y and r outlive the graph.
        unsafe { graph.launch() }.map_err(err)?;
        stream.synchronize().map_err(err)?;
        let name = |what: &str| format!("{what} replay {replay}");
        check_bitwise(&name("y"), &stream.clone_dtoh(&y).map_err(err)?, &y_eager, &[t, d])?;
        check_bitwise(&name("residual"), &stream.clone_dtoh(&r).map_err(err)?, &r_eager, &[t, d])?;
    }
    Ok(())
}

/// Poisons `y` and restores the residual input before a replay.
fn reset(stream: &Arc<CudaStream>, y: &mut CudaSlice<bf16>, r: &mut CudaSlice<bf16>, r_h: &[bf16]) -> TrialResult {
    b12x_core::testing::poison(stream, y).map_err(err)?;
    stream.memcpy_htod(r_h, r).map_err(err)
}

/// Frozen session and graph capture reject an unprepared plan and launch nothing; without either,
/// an unprepared plan prepares its default config and computes the right answer.
fn unprepared_plans(dev: &Arc<Device>) -> TrialResult {
    let (t, d) = (4, 2048);
    let stream = dev.stream();
    let x_h = cast::<f16>(&uniform(21, t * d, -2.0, 2.0));
    let w_h = cast::<f16>(&uniform(22, d, 0.5, 1.5));
    let (x, w) = (stream.clone_htod(&x_h).map_err(err)?, stream.clone_htod(&w_h).map_err(err)?);
    let mut y = alloc_poisoned::<f16>(stream, t * d).map_err(err)?;
    let q = Query { cols: d, dtype: f16::DTYPE, max_tokens: t, eps: EPS, residual: false };
    let plan = rmsnorm::plan(&q, dev).map_err(err)?;
    let call = |y: &mut CudaSlice<f16>, s: &Arc<CudaStream>| {
        let w = TensorRef::from_slice(&w, &[d])?;
        let args = Args { x: view(&x, t, d, d), residual: None, w, y: view_mut(y, t, d, d) };
        rmsnorm::run(&plan, args, Scratch::none(), s)
    };
    let mut frozen = PreparationSession::new(dev).map_err(err)?;
    frozen.freeze();
    match call(&mut y, stream) {
        Err(Error::KernelResolutionFrozen { op: "norm.rmsnorm", .. }) => {}
        other => return Err(format!("frozen: expected KernelResolutionFrozen, got {other:?}")),
    }
    frozen.close();
    let open = PreparationSession::new(dev).map_err(err)?;
    match open.capture(stream, |s| call(&mut y, s)) {
        Err(Error::KernelResolutionFrozen { .. }) => {}
        Err(e) => return Err(format!("capture: expected KernelResolutionFrozen, got {e}")),
        Ok(_) => return Err("capture: expected KernelResolutionFrozen, got a graph".into()),
    }
    stream.synchronize().map_err(err)?;
    if stream.clone_dtoh(&y).map_err(err)?.iter().any(|v| v.to_bits() != 0xffff) {
        return Err("a rejected call wrote y".into());
    }
    call(&mut y, stream).map_err(err)?;
    let got = stream.clone_dtoh(&y).map_err(err)?;
    check_ulp("y (unprepared)", &got, &reference::rmsnorm(&x_h, &w_h, EPS), &[t, d], 1)?;
    Ok(())
}

/// 100 prepared runs (after a warm-up) change the device's free memory by nothing.
fn run_allocates_nothing(dev: &Arc<Device>) -> TrialResult {
    let (t, d) = (64, shapes::DEEPSEEK_V4.hidden);
    let stream = dev.stream();
    let x = stream.clone_htod(&cast::<bf16>(&uniform(31, t * d, -2.0, 2.0))).map_err(err)?;
    let w = stream.clone_htod(&cast::<bf16>(&uniform(32, d, 0.5, 1.5))).map_err(err)?;
    let mut r = stream.clone_htod(&cast::<bf16>(&uniform(33, t * d, -2.0, 2.0))).map_err(err)?;
    let mut y = alloc_poisoned::<bf16>(stream, t * d).map_err(err)?;
    let q = Query { cols: d, dtype: bf16::DTYPE, max_tokens: t, eps: EPS, residual: true };
    let plan = rmsnorm::plan(&q, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    check_run_allocates_nothing(dev, stream, 100, || {
        let args = Args {
            x: view(&x, t, d, d),
            residual: Some(view_mut(&mut r, t, d, d)),
            w: TensorRef::from_slice(&w, &[d])?,
            y: view_mut(&mut y, t, d, d),
        };
        rmsnorm::run(&plan, args, Scratch::none(), stream)
    })
}

/// Recognizes the error a bad input must produce.
type IsExpected = fn(&Error) -> bool;

/// Bad inputs on real buffers: typed errors, and `y` stays poisoned (nothing launched).
fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let (t, d) = (4, 4096);
    let stream = dev.stream();
    // Room for a padded row stride of D + 8.
    let x = stream.clone_htod(&cast::<bf16>(&uniform(41, t * (d + 8), -2.0, 2.0))).map_err(err)?;
    let w = stream.clone_htod(&cast::<bf16>(&uniform(42, d, 0.5, 1.5))).map_err(err)?;
    let mut y = alloc_poisoned::<bf16>(stream, t * (d + 8)).map_err(err)?;
    let q = Query { cols: d, dtype: bf16::DTYPE, max_tokens: t - 1, eps: EPS, residual: false };
    let plan = rmsnorm::plan(&q, dev).map_err(err)?;
    let x_ptr = view(&x, t, d, d).ptr();
    let raw = |ptr: u64, rows: usize, stride: usize, dtype| {
        // SAFETY: every view stays inside `x`; none of them reaches a launch (all are rejected).
        unsafe { TensorRef::from_raw(ptr, &[rows, d], &[stride as isize, 1], dtype) }
    };
    let cases: [(&str, TensorRef<'_>, usize, IsExpected); 4] = [
        ("above capacity", raw(x_ptr, t, d, bf16::DTYPE).map_err(err)?, t, |e| matches!(e, Error::Capacity { .. })),
        ("misaligned pointer", raw(x_ptr + 2, 2, d, bf16::DTYPE).map_err(err)?, 2, |e| {
            matches!(e, Error::Misaligned { tensor: "x", .. })
        }),
        ("odd row stride", raw(x_ptr, 2, d + 1, bf16::DTYPE).map_err(err)?, 2, |e| {
            matches!(e, Error::Misaligned { tensor: "x", .. })
        }),
        ("wrong dtype", raw(x_ptr, 2, d, f16::DTYPE).map_err(err)?, 2, |e| {
            matches!(e, Error::DType { tensor: "x", .. })
        }),
    ];
    for (name, x_view, rows, is_expected) in cases {
        let args = Args {
            x: x_view,
            residual: None,
            w: TensorRef::from_slice(&w, &[d]).map_err(err)?,
            y: view_mut(&mut y, rows, d, d),
        };
        match rmsnorm::run(&plan, args, Scratch::none(), stream) {
            Err(e) if is_expected(&e) => {}
            other => return Err(format!("{name}: unexpected {other:?}")),
        }
    }
    let args = Args {
        x: view(&x, 2, d, d),
        residual: None,
        w: TensorRef::from_slice(&w, &[d]).map_err(err)?,
        y: view_mut(&mut y, 3, d, d),
    };
    if !matches!(rmsnorm::run(&plan, args, Scratch::none(), stream), Err(Error::Shape { tensor: "y", .. })) {
        return Err("y with 3 rows for x with 2: expected Shape error".into());
    }
    stream.synchronize().map_err(err)?;
    if stream.clone_dtoh(&y).map_err(err)?.iter().any(|v| v.to_bits() != 0xffff) {
        return Err("a rejected call wrote y".into());
    }
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    for &s in SHAPES.iter().filter(|s| !(s.large && reduced_profile())) {
        for residual in [false, true] {
            let form = if residual { "add" } else { "plain" };
            trials
                .push(GpuTrial::new(format!("{}::{form}::bf16", s.name), move |d| check_shape::<bf16>(d, s, residual)));
            trials.push(GpuTrial::new(format!("{}::{form}::f16", s.name), move |d| check_shape::<f16>(d, s, residual)));
            trials.push(GpuTrial::new(format!("{}::{form}::f32", s.name), move |d| check_shape::<f32>(d, s, residual)));
        }
    }
    trials.push(GpuTrial::new("graph_replay_equals_eager::plain", |d| graph_equals_eager(d, false, false)));
    trials.push(GpuTrial::new("graph_replay_equals_eager::add", |d| graph_equals_eager(d, true, false)));
    trials
        .push(GpuTrial::new("graph_replay_equals_eager::add_pdl_early_release", |d| graph_equals_eager(d, true, true)));
    trials.push(GpuTrial::new("unprepared_plans", unprepared_plans));
    trials.push(GpuTrial::new("run_allocates_nothing", run_allocates_nothing));
    trials.push(GpuTrial::new("bad_inputs_launch_nothing", bad_inputs));
    run_gpu_trials(trials)
}
