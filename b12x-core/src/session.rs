//! `PreparationSession`: loads kernels, selects one config per bucket, fills plans.
//!
//! ```no_run
//! # use b12x_core::{Device, PreparationSession, OpPlan};
//! # fn demo(plans: &[&dyn OpPlan]) -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(plans)?;   // pin > cached > race > default, per bucket
//! session.freeze();          // later resolutions are errors
//! # Ok(()) }
//! ```
//!
//! States: `Open` → (`prepare`) `Ready` → (`freeze`) `Frozen` → (`close`) `Closed`.
//! While any session of a device is frozen, running an unprepared plan on that device is
//! [`Error::KernelResolutionFrozen`]; so is running one while its stream captures a graph, and
//! so is `prepare` in any other session of that device. Plans and sessions must share one
//! [`Device`] object (not just an ordinal). `release` and `close` drop only the selections this
//! session made, so another session's preparation of a shared plan survives them.

use crate::autotune::{self, RaceResult};
use crate::bench::EventTimer;
use crate::cache::{CacheEntry, SelectionCache};
use crate::plan::{prime, OpPlan, PlanSlot, Selected, SelectionSource};
use crate::{device, env, Device, Error, Result};
use cudarc::driver::sys::CUstreamCaptureMode;
use cudarc::driver::{CudaGraph, CudaStream};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    Open,
    Ready,
    Frozen,
    Closed,
}

impl SessionState {
    pub fn name(self) -> &'static str {
        match self {
            SessionState::Open => "open",
            SessionState::Ready => "ready",
            SessionState::Frozen => "frozen",
            SessionState::Closed => "closed",
        }
    }
    /// State after a successful `prepare`, or the error if preparing is not allowed.
    pub fn after_prepare(self) -> Result<Self> {
        match self {
            SessionState::Open | SessionState::Ready => Ok(SessionState::Ready),
            s => Err(Error::SessionState { state: s.name(), what: "cannot prepare plans".into() }),
        }
    }
    pub fn after_freeze(self) -> Result<Self> {
        match self {
            SessionState::Closed => Err(Error::SessionState { state: "closed", what: "cannot freeze".into() }),
            _ => Ok(SessionState::Frozen),
        }
    }
}

/// One bucket's selection, as reported by `prepare`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SelectionRecord {
    pub op: &'static str,
    pub query: String,
    pub bucket: String,
    pub config: String,
    pub source: SelectionSource,
    /// Race scores (µs) per candidate; empty unless raced.
    pub scores_us: Vec<(String, f64)>,
    pub millis: f64,
}

/// Chooses a bucket's config by precedence: a valid pin, a single candidate, a cached
/// selection, a race (when enabled), else the default (index 0). Pure, so it is unit-tested.
pub fn choose(
    candidates: &[String],
    pinned: Option<&str>,
    cached: Option<&str>,
    autotune: bool,
    race: impl FnOnce() -> Result<RaceResult>,
) -> Result<(usize, SelectionSource, Option<RaceResult>)> {
    let idx = |c: &str| candidates.iter().position(|x| x == c);
    if let Some(p) = pinned {
        return idx(p).map(|i| (i, SelectionSource::Pinned, None)).ok_or_else(|| Error::UnknownConfig {
            op: "pin",
            bucket: String::new(),
            config: p.to_string(),
        });
    }
    if candidates.len() == 1 {
        return Ok((0, SelectionSource::Single, None));
    }
    if let Some(i) = cached.and_then(idx) {
        return Ok((i, SelectionSource::Cached, None));
    }
    if autotune {
        let r = race()?;
        return Ok((r.winner, SelectionSource::Raced, Some(r)));
    }
    Ok((0, SelectionSource::Default, None))
}

/// See the module docs.
pub struct PreparationSession {
    device: Arc<Device>,
    state: SessionState,
    cache: SelectionCache,
    autotune: bool,
    pins: HashMap<String, String>,
    /// Every bucket selection this session stored: released on `release`/`close` only if the
    /// plan still holds it (another session may have re-prepared the plan since).
    prepared: Vec<(PlanSlot, usize, Arc<Selected>)>,
    records: Vec<SelectionRecord>,
    timer: Option<EventTimer>,
}

fn pin_key(op: &str, query: &str, bucket: &str) -> String {
    format!("{op}|{query}|{bucket}")
}

impl PreparationSession {
    /// A session on `device`, with the cache at `B12X_CACHE_DIR` and autotune per `B12X_AUTOTUNE`.
    pub fn new(device: &Arc<Device>) -> Result<Self> {
        Ok(Self {
            device: device.clone(),
            state: SessionState::Open,
            cache: SelectionCache::new(env::cache_dir()),
            autotune: env::autotune(),
            pins: HashMap::new(),
            prepared: Vec::new(),
            records: Vec::new(),
            timer: None,
        })
    }
    /// Uses another cache directory.
    pub fn with_cache_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.cache = SelectionCache::new(dir);
        self
    }
    /// Turns races on or off for this session (overrides `B12X_AUTOTUNE`).
    pub fn with_autotune(mut self, on: bool) -> Self {
        self.autotune = on;
        self
    }
    pub fn state(&self) -> SessionState {
        self.state
    }
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }
    /// Every selection made so far.
    pub fn records(&self) -> &[SelectionRecord] {
        &self.records
    }

    /// Pins `config` for `plan`'s bucket `bucket_label` (e.g. `"3-4"`); checked at `prepare`.
    pub fn pin(&mut self, plan: &dyn OpPlan, bucket_label: &str, config: &str) {
        self.pins.insert(pin_key(plan.op(), &plan.query_key(), bucket_label), config.to_string());
    }

    fn cache_key(&self, plan: &dyn OpPlan, bucket: &str) -> String {
        format!(
            "{}|v{}|{}|bucket={}|{}|{}",
            plan.op(),
            plan.contract_version(),
            plan.query_key(),
            bucket,
            self.device.identity(),
            plan.module().hash
        )
    }

    /// Prepares every bucket of every plan. Returns the records of this call.
    pub fn prepare(&mut self, plans: &[&dyn OpPlan]) -> Result<Vec<SelectionRecord>> {
        let next = self.state.after_prepare()?;
        // Another session froze the device: nothing new may resolve on it.
        if self.device.is_frozen() {
            let key = "prepare while another session on this device is frozen".to_string();
            return Err(Error::KernelResolutionFrozen { op: plans.first().map_or("session", |p| p.op()), key });
        }
        let mut out = Vec::new();
        for &plan in plans {
            // The same Device object, not just the same ordinal: freeze state and loaded modules
            // live on it.
            if !Arc::ptr_eq(plan.device(), &self.device) {
                return Err(Error::WrongDevice { expected: self.device.ordinal(), actual: plan.device().ordinal() });
            }
            for (b, bucket) in plan.buckets().iter().enumerate() {
                let start = Instant::now();
                let label = bucket.label();
                let cands = plan.candidates(b);
                if cands.is_empty() {
                    return Err(Error::Unsupported {
                        op: plan.op(),
                        device: self.device.name().to_string(),
                        reason: format!("no legal config for bucket {label}"),
                    });
                }
                let key = self.cache_key(plan, &label);
                let pinned = self.pins.get(&pin_key(plan.op(), &plan.query_key(), &label)).cloned();
                let cached = if pinned.is_none() { self.cache.get(&key).map(|e| e.config) } else { None };
                let autotune = self.autotune;
                let (idx, source, race) = {
                    let timer = &mut self.timer;
                    let device = &self.device;
                    choose(&cands, pinned.as_deref(), cached.as_deref(), autotune, || {
                        race(device, timer, plan, b, cands.len())
                    })
                    .map_err(|e| match e {
                        Error::UnknownConfig { config, .. } => {
                            Error::UnknownConfig { op: plan.op(), bucket: label.clone(), config }
                        }
                        e => e,
                    })?
                };
                let scores_us: Vec<(String, f64)> =
                    race.map(|r| cands.iter().cloned().zip(r.scores_us).collect()).unwrap_or_default();
                if source == SelectionSource::Raced {
                    let entry =
                        CacheEntry { key: key.clone(), config: cands[idx].clone(), scores_us: scores_us.clone() };
                    if let Err(e) = self.cache.put(&entry) {
                        eprintln!("b12x: warning: could not write selection cache: {e}");
                    }
                }
                let sel = prime(plan, b, idx, source)?;
                plan.slot().set(b, sel.clone());
                self.prepared.push((plan.slot().clone(), b, sel));
                let rec = SelectionRecord {
                    op: plan.op(),
                    query: plan.query_key(),
                    bucket: label,
                    config: cands[idx].clone(),
                    source,
                    scores_us,
                    millis: start.elapsed().as_secs_f64() * 1e3,
                };
                if env::print_compile_progress() {
                    eprintln!(
                        "b12x: {} [{}] bucket {} -> {} ({:?}, {:.1} ms)",
                        rec.op, rec.query, rec.bucket, rec.config, rec.source, rec.millis
                    );
                    if !rec.scores_us.is_empty() {
                        let mut by_time = rec.scores_us.clone();
                        by_time.sort_by(|a, b| a.1.total_cmp(&b.1));
                        let best: Vec<String> = by_time.iter().take(6).map(|(c, us)| format!("{c} {us:.2}")).collect();
                        eprintln!("b12x:   race ({} candidates, µs): {}", by_time.len(), best.join(", "));
                    }
                }
                out.push(rec);
            }
        }
        self.records.extend(out.iter().cloned());
        self.state = next;
        Ok(out)
    }

    /// From now on, no kernel may be resolved on this device (until this session closes).
    /// The race timer and its L2-flush buffer (max(256 MB, 2× L2) of device memory) are freed:
    /// a frozen session races nothing more, and a serving process keeps its session for good.
    pub fn freeze(&mut self) {
        if let Ok(next) = self.state.after_freeze() {
            if self.state != SessionState::Frozen {
                self.device.frozen.fetch_add(1, Ordering::AcqRel);
            }
            self.state = next;
            self.timer = None;
        }
    }

    /// Captures `f`'s work on `stream` into a CUDA graph. Unprepared plans fail inside `f` with
    /// [`Error::KernelResolutionFrozen`]. The graph borrows the session, so plans it replays
    /// cannot be released (nor the session closed) while it lives; the device buffers it
    /// replays are the caller's to keep alive (see [`CapturedGraph::launch`]).
    pub fn capture<'s>(
        &'s self,
        stream: &Arc<CudaStream>,
        f: impl FnOnce(&Arc<CudaStream>) -> Result<()>,
    ) -> Result<CapturedGraph<'s>> {
        if self.state == SessionState::Closed {
            return Err(Error::SessionState { state: "closed", what: "cannot capture".into() });
        }
        let (body, graph) = capture_on(stream, || f(stream))?;
        body?;
        let graph = graph?
            .ok_or_else(|| Error::SessionState { state: self.state.name(), what: "captured an empty graph".into() })?;
        Ok(CapturedGraph { graph, _session: std::marker::PhantomData })
    }

    /// Drops the prepared state this session gave `plan` (it will need preparing again).
    pub fn release(&mut self, plan: &dyn OpPlan) {
        self.prepared.retain(|(slot, b, sel)| {
            let mine = slot.same_as(plan.slot());
            if mine {
                slot.clear_if(*b, sel);
            }
            !mine
        });
    }

    /// Releases every plan this session prepared and ends the session.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        for (slot, b, sel) in self.prepared.drain(..) {
            slot.clear_if(b, &sel);
        }
        if self.state == SessionState::Frozen {
            self.device.frozen.fetch_sub(1, Ordering::AcqRel);
        }
        self.state = SessionState::Closed;
    }
}

impl Drop for PreparationSession {
    fn drop(&mut self) {
        if self.state == SessionState::Frozen {
            self.device.frozen.fetch_sub(1, Ordering::AcqRel);
            self.state = SessionState::Closed;
        }
    }
}

/// A graph captured through [`PreparationSession::capture`].
pub struct CapturedGraph<'s> {
    graph: CudaGraph,
    _session: std::marker::PhantomData<&'s PreparationSession>,
}

impl CapturedGraph<'_> {
    /// Enqueues one replay on the stream it was captured on.
    ///
    /// # Safety
    /// The graph holds the raw device addresses of every tensor and scratch buffer the captured
    /// calls used: all of them must still be allocated (and not in use by other work that would
    /// race with the replay) whenever a replay runs.
    pub unsafe fn launch(&self) -> Result<()> {
        Ok(self.graph.launch()?)
    }
    pub fn graph(&self) -> &CudaGraph {
        &self.graph
    }
}

fn race(
    device: &Arc<Device>,
    timer: &mut Option<EventTimer>,
    plan: &dyn OpPlan,
    bucket: usize,
    n: usize,
) -> Result<RaceResult> {
    if timer.is_none() {
        *timer = Some(EventTimer::new(device)?);
    }
    let timer = timer.as_mut().ok_or_else(|| Error::SessionState { state: "open", what: "no timer".into() })?;
    let stream = device.stream().clone();
    if device::is_capturing(&stream)? {
        return Err(Error::KernelResolutionFrozen { op: plan.op(), key: "autotune during capture".into() });
    }
    let mut case = plan.bench_case(bucket)?;
    let sels = (0..n).map(|i| prime(plan, bucket, i, SelectionSource::Raced)).collect::<Result<Vec<_>>>()?;
    // Each candidate is captured into a graph and the race replays it, as serving does: eager
    // launches add host-side and launch-path costs a replay does not have, and on the H200 they
    // ranked close bf16_gemv configs differently from graph replays (e.g. a stream-K config
    // 1.5 µs slower eagerly, 1.3 µs faster replayed, of 73 µs). A candidate whose launch
    // cannot be captured is raced eagerly.
    let graphs: Vec<Option<CudaGraph>> =
        sels.iter().map(|s| capture_race_graph(&stream, || case.launch(s, &stream))).collect();
    let cell = std::cell::RefCell::new(&mut case);
    let run = |i: usize| -> Result<()> {
        match &graphs[i] {
            Some(g) => Ok(g.launch()?),
            None => cell.borrow_mut().launch(&sels[i], &stream),
        }
    };
    autotune::race(n, run, |i| timer.time_us(&stream, || run(i)))
}

/// Captures `work` on `stream`: `work`'s result and the instantiated graph (or the capture's
/// error). The capture is ended even if `work` panics, so the stream is never left capturing.
type Captured<T> = (Result<T>, std::result::Result<Option<CudaGraph>, cudarc::driver::DriverError>);
fn capture_on<T>(stream: &Arc<CudaStream>, work: impl FnOnce() -> Result<T>) -> Result<Captured<T>> {
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    struct EndOnUnwind<'a>(&'a Arc<CudaStream>, bool);
    impl Drop for EndOnUnwind<'_> {
        fn drop(&mut self) {
            if !self.1 {
                let _ = self.0.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
            }
        }
    }
    let mut guard = EndOnUnwind(stream, false);
    let body = work();
    guard.1 = true;
    Ok((body, stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))))
}

/// `launch`'s work on `stream` as an instantiated graph, or `None` if it cannot be captured.
fn capture_race_graph(stream: &Arc<CudaStream>, launch: impl FnOnce() -> Result<()>) -> Option<CudaGraph> {
    match capture_on(stream, launch) {
        Ok((Ok(()), Ok(Some(g)))) => Some(g),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }
    fn no_race() -> Result<RaceResult> {
        panic!("race must not run")
    }
    fn fake_race(w: usize) -> impl FnOnce() -> Result<RaceResult> {
        move || Ok(RaceResult { winner: w, scores_us: vec![1.0; 3], rounds_run: vec![3; 3] })
    }

    #[test]
    fn precedence_pin_cached_race_default() {
        let cands = c(&["a", "b", "c"]);
        assert_eq!(choose(&cands, Some("c"), Some("b"), true, no_race).unwrap().0, 2);
        assert!(matches!(choose(&cands, Some("zz"), None, true, no_race), Err(Error::UnknownConfig { .. })));
        let (i, s, _) = choose(&cands, None, Some("b"), true, no_race).unwrap();
        assert_eq!((i, s), (1, SelectionSource::Cached));
        // A cached config that is no longer legal is ignored: race.
        let (i, s, _) = choose(&cands, None, Some("gone"), true, fake_race(2)).unwrap();
        assert_eq!((i, s), (2, SelectionSource::Raced));
        let (i, s, _) = choose(&cands, None, None, false, no_race).unwrap();
        assert_eq!((i, s), (0, SelectionSource::Default));
        let (i, s, _) = choose(&c(&["only"]), None, None, true, no_race).unwrap();
        assert_eq!((i, s), (0, SelectionSource::Single));
    }

    #[test]
    fn state_machine() {
        use SessionState::*;
        assert_eq!(Open.after_prepare().unwrap(), Ready);
        assert_eq!(Ready.after_prepare().unwrap(), Ready);
        assert!(matches!(Frozen.after_prepare(), Err(Error::SessionState { state: "frozen", .. })));
        assert!(Closed.after_prepare().is_err());
        assert_eq!(Open.after_freeze().unwrap(), Frozen);
        assert_eq!(Ready.after_freeze().unwrap(), Frozen);
        assert!(Closed.after_freeze().is_err());
    }
}
