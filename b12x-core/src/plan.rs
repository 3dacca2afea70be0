//! The plan contract every op implements, and the prepared state a session fills in.
//!
//! An op's `plan(&query, &device)` validates the query and returns a value implementing
//! [`OpPlan`]: its buckets (fixed ranges of the live count, derived from capacity), the legal
//! configs of each bucket (default first), the kernel symbols a config launches and a
//! [`BenchCase`] factory for the autotune race. A [`crate::PreparationSession`] picks one
//! config per bucket and stores it in the plan's [`PlanSlot`]; `run` reads it with [`resolve`].

use crate::{device, DType, Device, Error, Kernel, KernelModule, Result, SCRATCH_ALIGN};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// A fixed range `lo..=hi` of a live count (e.g. GEMM rows M) that shares one tuned config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub lo: usize,
    pub hi: usize,
}

impl Bucket {
    pub fn label(&self) -> String {
        if self.lo == self.hi {
            format!("{}", self.lo)
        } else {
            format!("{}-{}", self.lo, self.hi)
        }
    }
}

/// Splits `1..=capacity` at the standard edges 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, ...
/// (DESIGN.md §3): `{1}, {2}, {3-4}, {5-8}, {9-16}, ...`, the last bucket ending at `capacity`.
/// Depends on capacity only, never on a particular call.
pub fn pow2_buckets(capacity: usize) -> Vec<Bucket> {
    let mut out = Vec::new();
    let mut lo = 1usize;
    let mut hi = 1usize;
    while lo <= capacity {
        out.push(Bucket { lo, hi: hi.min(capacity) });
        lo = hi + 1;
        hi *= 2;
    }
    out
}

/// Splits `1..=capacity` after each of the increasing `edges` (`[128, 2048]`: `1..=128`,
/// `129..=2048`, `2049..=capacity`), stopping at `capacity`. For ops whose configs change only at a
/// few row counts (norm.rmsnorm, activation.silu_and_mul).
pub fn edge_buckets(edges: &[usize], capacity: usize) -> Vec<Bucket> {
    let mut out = Vec::new();
    let mut lo = 1;
    for hi in edges.iter().copied().chain([usize::MAX]) {
        if lo > capacity {
            break;
        }
        out.push(Bucket { lo, hi: hi.min(capacity) });
        lo = hi.saturating_add(1);
    }
    out
}

/// Index of the bucket holding `live`, or `None` when `live` is outside every bucket.
pub fn bucket_of(buckets: &[Bucket], live: usize) -> Option<usize> {
    buckets.iter().position(|b| (b.lo..=b.hi).contains(&live))
}

/// How a bucket's config was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum SelectionSource {
    /// Pinned by the caller (`PreparationSession::pin`).
    Pinned,
    /// The only legal config.
    Single,
    /// Read from the on-disk selection cache.
    Cached,
    /// Won the autotune race this session.
    Raced,
    /// Autotune off (`B12X_AUTOTUNE=0`): the plan's default.
    Default,
    /// Used without preparation: the default, prepared on first run.
    Unprepared,
}

/// The prepared state of one bucket: its config and resolved kernels.
#[derive(Debug)]
pub struct Selected {
    /// Index into `OpPlan::candidates(bucket)`.
    pub config_index: usize,
    pub config: String,
    /// One kernel per symbol of `OpPlan::symbols(bucket, config)`, in that order.
    pub kernels: Vec<Kernel>,
    pub source: SelectionSource,
}

/// Shared prepared state of a plan: one slot per bucket. A session keeps a handle to release it.
#[derive(Debug, Default)]
pub struct PlanSlotInner {
    buckets: RwLock<Vec<Option<Arc<Selected>>>>,
    warned: AtomicBool,
}

/// Where a plan keeps its prepared state. Embed one in every plan struct.
#[derive(Debug, Default, Clone)]
pub struct PlanSlot(pub(crate) Arc<PlanSlotInner>);

impl PlanSlot {
    pub fn get(&self, bucket: usize) -> Option<Arc<Selected>> {
        let g = self.0.buckets.read().unwrap_or_else(|p| p.into_inner());
        g.get(bucket).cloned().flatten()
    }
    pub(crate) fn set(&self, bucket: usize, s: Arc<Selected>) {
        let mut g = self.0.buckets.write().unwrap_or_else(|p| p.into_inner());
        if g.len() <= bucket {
            g.resize(bucket + 1, None);
        }
        g[bucket] = Some(s);
    }
    /// Stores `s` unless the bucket is already prepared; returns what the bucket holds after.
    pub(crate) fn set_if_empty(&self, bucket: usize, s: Arc<Selected>) -> Arc<Selected> {
        let mut g = self.0.buckets.write().unwrap_or_else(|p| p.into_inner());
        if g.len() <= bucket {
            g.resize(bucket + 1, None);
        }
        g[bucket].get_or_insert(s).clone()
    }
    /// Clears `bucket` only if it still holds `s` (another session may have re-prepared it).
    pub(crate) fn clear_if(&self, bucket: usize, s: &Arc<Selected>) {
        let mut g = self.0.buckets.write().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = g.get_mut(bucket) {
            if slot.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, s)) {
                *slot = None;
            }
        }
    }
    /// True when both handles share one prepared state (clones of one plan).
    pub fn same_as(&self, other: &PlanSlot) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// Drops every prepared bucket.
    pub fn clear(&self) {
        self.0.buckets.write().unwrap_or_else(|p| p.into_inner()).clear();
    }
    pub fn is_prepared(&self) -> bool {
        let g = self.0.buckets.read().unwrap_or_else(|p| p.into_inner());
        !g.is_empty() && g.iter().all(Option::is_some)
    }
}

/// Inputs the autotune race times one config on: made by the plan for one bucket, at the
/// bucket's largest live count, with the plan's real geometry.
pub trait BenchCase {
    /// Enqueues one run of `selected`'s config on `stream` (no sync).
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()>;
}

/// What every op's plan exposes to the session. Object safe: sessions prepare `&[&dyn OpPlan]`.
pub trait OpPlan: Send + Sync {
    /// `<group>.<op>`, e.g. `norm.rmsnorm`.
    fn op(&self) -> &'static str;
    /// Bumped when the meaning of a config or a kernel's contract changes (invalidates caches).
    fn contract_version(&self) -> u32 {
        1
    }
    /// Stable text of the static query (geometry, dtypes, flags, capacity).
    fn query_key(&self) -> String;
    fn device(&self) -> &Arc<Device>;
    fn module(&self) -> &'static KernelModule;
    /// The plan's buckets (at least one), derived from capacity.
    fn buckets(&self) -> &[Bucket];
    /// Legal config ids of a bucket for this device, default first. Never empty for a valid plan.
    fn candidates(&self, bucket: usize) -> Vec<String>;
    /// Kernel symbols a config launches (resolved into `Selected::kernels` in this order).
    fn symbols(&self, bucket: usize, config_index: usize) -> Vec<String>;
    /// Dynamic shared memory the config's kernels need (set as their opt-in limit).
    fn dynamic_smem(&self, _bucket: usize, _config_index: usize) -> u32 {
        0
    }
    fn slot(&self) -> &PlanSlot;
    /// Allocates inputs for racing configs of `bucket`.
    fn bench_case(&self, bucket: usize) -> Result<Box<dyn BenchCase + '_>>;
}

/// Resolves config `config_index` of `bucket`: loads the module (once per device) and the symbols.
pub fn prime(plan: &dyn OpPlan, bucket: usize, config_index: usize, source: SelectionSource) -> Result<Arc<Selected>> {
    let cands = plan.candidates(bucket);
    let config = cands.get(config_index).cloned().ok_or_else(|| Error::UnknownConfig {
        op: plan.op(),
        bucket: plan.buckets().get(bucket).map(Bucket::label).unwrap_or_default(),
        config: format!("#{config_index}"),
    })?;
    let dev = plan.device();
    let smem = plan.dynamic_smem(bucket, config_index);
    let mut kernels = Vec::new();
    for sym in plan.symbols(bucket, config_index) {
        let k = dev.kernel(plan.module(), &sym)?;
        if smem > 0 {
            k.allow_max_dynamic_smem(dev.smem_optin())?;
        }
        kernels.push(k);
    }
    Ok(Arc::new(Selected { config_index, config, kernels, source }))
}

/// What `run` calls to get its prepared bucket. Fast path: a read lock and an `Arc` clone.
///
/// Unprepared plans are the one exception to "run only launches": the default config is
/// prepared now and a one-line warning is logged. Once any session on the device is frozen,
/// or while `stream` is capturing a graph, that is [`Error::KernelResolutionFrozen`] instead.
pub fn resolve(plan: &dyn OpPlan, bucket: usize, stream: &CudaStream) -> Result<Arc<Selected>> {
    if let Some(s) = plan.slot().get(bucket) {
        return Ok(s);
    }
    let key =
        || format!("{} bucket {}", plan.query_key(), plan.buckets().get(bucket).map(Bucket::label).unwrap_or_default());
    if plan.device().is_frozen() || device::is_capturing(stream)? {
        return Err(Error::KernelResolutionFrozen { op: plan.op(), key: key() });
    }
    if !plan.slot().0.warned.swap(true, Ordering::Relaxed) {
        eprintln!(
            "b12x: warning: `{}` ({}) ran unprepared; preparing its default config now (prepare plans with a PreparationSession)",
            plan.op(),
            key()
        );
    }
    let s = prime(plan, bucket, 0, SelectionSource::Unprepared)?;
    // A session may have prepared (or frozen) the plan while we were loading: never overwrite
    // its selection with the untuned default, and never resolve after a freeze.
    if plan.device().is_frozen() {
        return plan.slot().get(bucket).ok_or_else(|| Error::KernelResolutionFrozen { op: plan.op(), key: key() });
    }
    Ok(plan.slot().set_if_empty(bucket, s))
}

/// What prepared-only entry points (the fixed linears) call instead of [`resolve`]: the bucket's
/// prepared selection, or [`Error::NotPrepared`] — never the unprepared fallback that loads the
/// default config on first use.
pub fn resolve_prepared(plan: &dyn OpPlan, bucket: usize) -> Result<Arc<Selected>> {
    plan.slot().get(bucket).ok_or_else(|| Error::NotPrepared {
        op: plan.op(),
        key: format!(
            "{} bucket {}",
            plan.query_key(),
            plan.buckets().get(bucket).map(Bucket::label).unwrap_or_default()
        ),
    })
}

/// One zeroed device buffer carved into regions, for an op's [`BenchCase`]: region `i` (of
/// `sizes[i]` bytes) starts at `ptrs[i]`, every region [`SCRATCH_ALIGN`]-aligned, so any of them
/// can also serve as scratch. Ops whose path length depends on the values (quantizers skip
/// all-zero blocks) fill their inputs with [`RaceBuffer::fill_inputs`] first.
pub struct RaceBuffer {
    pub ptrs: Vec<u64>,
    pub sizes: Vec<usize>,
    /// Owns the memory; keep it alive as long as the pointers are used.
    pub buffer: CudaSlice<u8>,
}

impl RaceBuffer {
    /// Allocates and zeroes the regions on `device`'s stream (prepare time, never in `run`).
    pub fn new(device: &Device, sizes: &[usize]) -> Result<Self> {
        let stream = device.stream();
        let total: usize = sizes.iter().map(|s| s.next_multiple_of(SCRATCH_ALIGN)).sum::<usize>() + SCRATCH_ALIGN;
        let mut buffer = stream.alloc_zeros::<u8>(total)?;
        let mut at = buffer.device_ptr_mut(stream).0.next_multiple_of(SCRATCH_ALIGN as u64);
        let ptrs = sizes
            .iter()
            .map(|s| {
                let p = at;
                at += s.next_multiple_of(SCRATCH_ALIGN) as u64;
                p
            })
            .collect();
        Ok(RaceBuffer { ptrs, sizes: sizes.to_vec(), buffer })
    }

    /// Fills region `region` with a repeating pair of moderate, unequal, non-zero values of
    /// `dtype` (bf16/f16: 1.5 and -1.125; f32: 1.5), so a race times the arithmetic real data
    /// takes rather than a zero shortcut. Trailing bytes past a multiple of 4 stay zero.
    pub fn fill_inputs(&self, device: &Device, region: usize, dtype: DType) -> Result<()> {
        let pattern = match dtype {
            DType::BF16 => 0xBF90_3FC0,
            DType::F16 => 0xBC80_3E00,
            _ => 1.5f32.to_bits(),
        };
        crate::memset_u32(device.stream(), self.ptrs[region], pattern, self.sizes[region] / 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(config: &str) -> Arc<Selected> {
        Arc::new(Selected { config_index: 0, config: config.into(), kernels: vec![], source: SelectionSource::Raced })
    }

    #[test]
    fn slots_keep_the_first_selection_and_release_only_their_own() {
        let slot = PlanSlot::default();
        let tuned = sel("tuned");
        slot.set(1, tuned.clone());
        // A late unprepared default never replaces a session's selection.
        assert!(Arc::ptr_eq(&slot.set_if_empty(1, sel("default")), &tuned));
        assert_eq!(slot.set_if_empty(0, sel("default")).config, "default");
        assert!(slot.is_prepared());
        // A session releases only what it stored.
        slot.clear_if(1, &sel("other"));
        assert_eq!(slot.get(1).map(|s| s.config.clone()).as_deref(), Some("tuned"));
        slot.clear_if(1, &tuned);
        assert!(slot.get(1).is_none());
        assert!(!slot.is_prepared());
        assert!(slot.same_as(&slot.clone()) && !slot.same_as(&PlanSlot::default()));
    }

    #[test]
    fn buckets_come_from_capacity() {
        let labels: Vec<String> = pow2_buckets(64).iter().map(Bucket::label).collect();
        assert_eq!(labels, ["1", "2", "3-4", "5-8", "9-16", "17-32", "33-64"]);
        let labels: Vec<String> = pow2_buckets(6).iter().map(Bucket::label).collect();
        assert_eq!(labels, ["1", "2", "3-4", "5-6"]);
        assert_eq!(pow2_buckets(1).len(), 1);
        let b = pow2_buckets(64);
        assert_eq!(bucket_of(&b, 1), Some(0));
        assert_eq!(bucket_of(&b, 5), Some(3));
        assert_eq!(bucket_of(&b, 64), Some(6));
        assert_eq!(bucket_of(&b, 65), None);
        assert_eq!(bucket_of(&b, 0), None);
    }
}
