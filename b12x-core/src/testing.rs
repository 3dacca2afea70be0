//! Shared test helpers: GPU discovery, poisoned allocations, seeded fills, comparisons that
//! report coordinates, model shape tables and (feature `testing`) the GPU trial harness.

use crate::{Device, Element, Result};
use cudarc::driver::{result, CudaSlice, CudaStream, DevicePtrMut};
use rand::{Rng, SeedableRng};
use std::sync::{Arc, OnceLock};

/// Device 0, or `None` when no CUDA driver/device is present (GPU tests are then ignored).
pub fn gpu() -> Option<Arc<Device>> {
    static DEV: OnceLock<Option<Arc<Device>>> = OnceLock::new();
    DEV.get_or_init(|| if crate::cuda_available() { Device::new(0).ok() } else { None }).clone()
}

/// `B12X_TEST_PROFILE=reduced` selects the reduced-shape profile (used under compute-sanitizer).
pub fn reduced_profile() -> bool {
    std::env::var("B12X_TEST_PROFILE").is_ok_and(|v| v == "reduced")
}

/// Fills `s` with 0xFF bytes: NaN for bf16/f16/f32, -1 for integers.
pub fn poison<T>(stream: &CudaStream, s: &mut CudaSlice<T>) -> Result<()> {
    let bytes = std::mem::size_of_val(&0u8) * s.num_bytes();
    let (p, _g) = s.device_ptr_mut(stream);
    unsafe { result::memset_d8_async(p, 0xff, bytes, stream.cu_stream()) }?;
    Ok(())
}

/// A poisoned device allocation of `n` elements.
pub fn alloc_poisoned<T: Element>(stream: &Arc<CudaStream>, n: usize) -> Result<CudaSlice<T>> {
    let mut s = unsafe { stream.alloc::<T>(n.max(1)) }?;
    poison(stream, &mut s)?;
    Ok(s)
}

/// A poisoned device buffer for `bytes` of a plan's scratch, with room to align its start
/// ([`aligned_scratch`]).
pub fn alloc_scratch(stream: &Arc<CudaStream>, bytes: usize) -> Result<CudaSlice<u8>> {
    alloc_poisoned::<u8>(stream, bytes + crate::SCRATCH_ALIGN)
}

/// The first `bytes` of `buf` after its first `SCRATCH_ALIGN` boundary (allocations are only
/// 256-byte aligned; scratch regions must be `SCRATCH_ALIGN`-aligned). `buf` comes from
/// [`alloc_scratch`] with at least `bytes`.
pub fn aligned_scratch(buf: &mut CudaSlice<u8>, bytes: usize) -> crate::Scratch<'_> {
    let ptr = crate::TensorRef::from_slice(buf, &[buf.len()]).map(|v| v.ptr()).unwrap_or(0);
    assert!(buf.len() >= bytes + crate::SCRATCH_ALIGN, "scratch buffer of {} bytes for {bytes}", buf.len());
    // SAFETY: [aligned, aligned + bytes) lies inside `buf` (SCRATCH_ALIGN spare bytes, asserted
    // above), which the returned value borrows mutably.
    unsafe { crate::Scratch::from_raw(ptr.next_multiple_of(crate::SCRATCH_ALIGN as u64), bytes) }
}

/// A session that prepares with `config` pinned in bucket `label` of `plan` (the other buckets
/// take their default), without the autotune race.
pub fn session_pinned(
    dev: &Arc<Device>,
    plan: &dyn crate::OpPlan,
    label: &str,
    config: &str,
) -> Result<crate::PreparationSession, String> {
    let mut s = crate::PreparationSession::new(dev).map_err(|e| e.to_string())?.with_autotune(false);
    s.pin(plan, label, config);
    s.prepare(&[plan]).map_err(|e| e.to_string())?;
    Ok(s)
}

/// Two outputs' bit patterns are equal; the error names the first differing element.
pub fn same_bits(name: &str, got: &[u32], want: &[u32]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{name}: {} elements, {} expected", got.len(), want.len()));
    }
    match got.iter().zip(want).position(|(a, b)| a != b) {
        Some(i) => Err(format!("{name}: element {i} differs ({:#x} vs {:#x})", got[i], want[i])),
        None => Ok(()),
    }
}

/// Runs `run` on `state` eagerly three times and as one CUDA graph captured in `session` and
/// replayed three times, poisoning the output (`poison`) before every run but the first; every
/// run's output bits (`bits`) must equal the first eager run's.
pub fn check_graph_replay_equals_eager<T>(
    session: &crate::PreparationSession,
    stream: &Arc<CudaStream>,
    state: &mut T,
    run: impl Fn(&mut T, &Arc<CudaStream>) -> Result<()>,
    poison: impl Fn(&mut T, &Arc<CudaStream>) -> Result<(), String>,
    bits: impl Fn(&T, &Arc<CudaStream>) -> Result<Vec<u32>, String>,
) -> Result<(), String> {
    let err = |e: crate::Error| e.to_string();
    run(state, stream).map_err(err)?;
    let eager = bits(state, stream)?;
    for again in 0..2 {
        poison(state, stream)?;
        run(state, stream).map_err(err)?;
        same_bits(&format!("eager run {again}"), &bits(state, stream)?, &eager)?;
    }
    let graph = session.capture(stream, |s| run(state, s)).map_err(err)?;
    for replay in 0..3 {
        poison(state, stream)?;
        // SAFETY: the graph uses only what `run` reaches through `state` or its captures, all
        // borrowed for longer than this function, which drops the graph before returning.
        unsafe { graph.launch() }.map_err(err)?;
        stream.synchronize().map_err(|e| e.to_string())?;
        same_bits(&format!("replay {replay}"), &bits(state, stream)?, &eager)?;
    }
    Ok(())
}

/// Checks that `run` allocates no device memory: one warm-up call (with CUDA lazy loading the
/// driver may page in a kernel's code on its first launch, a one-time driver cost rather than an
/// allocation by `run`), then `calls` more; the device's free memory must not change.
/// Limits: an allocation freed again inside `run` (stream-ordered pools) and host-side syncs
/// are not visible to this check; `run` code paths are kept free of both by review.
pub fn check_run_allocates_nothing(
    dev: &Device,
    stream: &CudaStream,
    calls: usize,
    mut run: impl FnMut() -> Result<()>,
) -> Result<(), String> {
    let err = |e: crate::Error| e.to_string();
    run().map_err(err)?;
    stream.synchronize().map_err(|e| e.to_string())?;
    let before = dev.mem_free().map_err(err)?;
    for _ in 0..calls {
        run().map_err(err)?;
    }
    stream.synchronize().map_err(|e| e.to_string())?;
    let after = dev.mem_free().map_err(err)?;
    if before != after {
        return Err(format!("free device memory changed from {before} to {after} bytes over {calls} runs"));
    }
    Ok(())
}

/// `n` values uniform in `[lo, hi)` from a fixed seed.
pub fn uniform(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// A device buffer of `n` seeded bf16 values of unit variance (uniform in ±√3, like
/// `torch.randn` in its first two moments), as raw bytes: the benches' inputs, which must be
/// neither zeros nor constants (kernels may take faster paths on them than real data does).
pub fn random_bf16_bytes(stream: &Arc<CudaStream>, seed: u64, n: usize) -> Result<CudaSlice<u8>> {
    let host: Vec<u8> = uniform(seed, n, -1.732, 1.732)
        .into_iter()
        .flat_map(|x| half::bf16::from_f32(x).to_bits().to_le_bytes())
        .collect();
    Ok(stream.clone_htod(&host)?)
}

/// `0, 1, 2, ...` scaled by `scale` and wrapped at `modulo` (structured fill: exposes layout bugs).
pub fn arange(n: usize, modulo: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|i| (i % modulo.max(1)) as f32 * scale).collect()
}

/// Host element types tests compare in f64.
pub trait HostFloat: Copy + 'static {
    fn to_f64(self) -> f64;
    fn from_f32(v: f32) -> Self;
    fn bits(self) -> u64;
}
impl HostFloat for half::bf16 {
    fn to_f64(self) -> f64 {
        self.to_f32() as f64
    }
    fn from_f32(v: f32) -> Self {
        half::bf16::from_f32(v)
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}
impl HostFloat for half::f16 {
    fn to_f64(self) -> f64 {
        self.to_f32() as f64
    }
    fn from_f32(v: f32) -> Self {
        half::f16::from_f32(v)
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}
impl HostFloat for f32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f32(v: f32) -> Self {
        v
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}

/// `silu(min(g, L)) · clamp(u, -L, L)` in f32, before any rounding: the host oracle of
/// `silu_mul_vec` (`include/b12x/activation.cuh`), shared by `activation.silu_and_mul`'s oracle
/// (b12x-norm) and `gemm.bf16_gemv`'s fused SwiGLU x load (b12x-gemm). The clamps are
/// comparisons (a NaN passes through, as torch.clamp); `exp` is f64 rounded once to f32, where
/// the kernels' `expf` is within 2 f32 ulp; the add, division and multiply are f32, as in the
/// kernels. Rounded to bf16/f16, the result is within 1 ULP of the kernels' (equal unless the f32
/// value sits next to a rounding boundary).
pub fn silu_mul(g: f32, u: f32, limit: Option<f32>) -> f32 {
    let (a, b) = match limit {
        // Comparisons, not f32::min/max (which drop a NaN): NaN passes through, as torch.clamp.
        Some(l) => {
            let a = if g > l { l } else { g };
            let b = if u > l {
                l
            } else if u < -l {
                -l
            } else {
                u
            };
            (a, b)
        }
        None => (g, u),
    };
    let e = (-f64::from(a)).exp() as f32;
    (a / (1.0 + e)) * b
}

/// Converts f32 values to `T` (round to nearest even).
pub fn cast<T: HostFloat>(v: &[f32]) -> Vec<T> {
    v.iter().map(|&x| T::from_f32(x)).collect()
}

/// Multi-index of flat index `i` in a row-major `shape`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        idx[d] = i % n;
        i /= n;
    }
    idx
}

/// Bitwise equality; the error names the first differing coordinate and the count.
pub fn check_bitwise<T: HostFloat>(name: &str, got: &[T], want: &[T], shape: &[usize]) -> Result<(), String> {
    bitwise(name, got, want, shape, false)
}

/// Bitwise equality except that any NaN equals any NaN: arithmetic on NaN gives an
/// implementation-defined payload (CUDA returns the canonical all-ones NaN, the CPU propagates
/// the input's quiet NaN), so computed values compare NaN *positions*, data movement all bits.
pub fn check_bitwise_nan_eq<T: HostFloat>(name: &str, got: &[T], want: &[T], shape: &[usize]) -> Result<(), String> {
    bitwise(name, got, want, shape, true)
}

fn bitwise<T: HostFloat>(name: &str, got: &[T], want: &[T], shape: &[usize], nan_eq: bool) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{name}: length {} != {}", got.len(), want.len()));
    }
    let same = |a: T, b: T| a.bits() == b.bits() || (nan_eq && a.to_f64().is_nan() && b.to_f64().is_nan());
    let bad: Vec<usize> = (0..got.len()).filter(|&i| !same(got[i], want[i])).collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{name}: {} of {} elements differ bitwise; first at {:?}: got {} (0x{:x}), want {} (0x{:x})",
            bad.len(),
            got.len(),
            unravel(i, shape),
            got[i].to_f64(),
            got[i].bits(),
            want[i].to_f64(),
            want[i].bits()
        )),
    }
}

/// Distance in units in the last place between two values of `T` (NaN vs NaN = 0; NaN vs
/// number = u64::MAX). Counts across zero (+0 and -0 are 0 apart).
pub fn ulp_distance<T: HostFloat>(a: T, b: T, total_bits: u32) -> u64 {
    let (fa, fb) = (a.to_f64(), b.to_f64());
    if fa.is_nan() || fb.is_nan() {
        return if fa.is_nan() && fb.is_nan() { 0 } else { u64::MAX };
    }
    let ordered = |bits: u64| -> i128 {
        let sign = 1u64 << (total_bits - 1);
        if bits & sign != 0 {
            -((bits & !sign) as i128)
        } else {
            bits as i128
        }
    };
    (ordered(a.bits()) - ordered(b.bits())).unsigned_abs() as u64
}

/// Every element within `max_ulp` of the oracle (already rounded to `T`); NaN positions must
/// match. Returns the largest distance seen.
pub fn check_ulp<T: HostFloat>(
    name: &str,
    got: &[T],
    want: &[T],
    shape: &[usize],
    max_ulp: u64,
) -> Result<u64, String> {
    let bits = (std::mem::size_of::<T>() * 8) as u32;
    let mut worst = (0u64, 0usize);
    let mut bad = 0usize;
    for i in 0..got.len().min(want.len()) {
        let d = ulp_distance(got[i], want[i], bits);
        if d > max_ulp {
            bad += 1;
        }
        if d > worst.0 {
            worst = (d, i);
        }
    }
    if got.len() != want.len() {
        return Err(format!("{name}: length {} != {}", got.len(), want.len()));
    }
    if bad > 0 {
        let i = worst.1;
        return Err(format!(
            "{name}: {bad} of {} elements more than {max_ulp} ULP from the oracle; worst {} ULP at {:?}: got {}, want {}",
            got.len(),
            worst.0,
            unravel(i, shape),
            got[i].to_f64(),
            want[i].to_f64()
        ));
    }
    Ok(worst.0)
}

/// `|got - want| <= bound(i)` everywhere, NaN/Inf positions equal. Returns max |err|/bound.
pub fn check_close(
    name: &str,
    got: &[f64],
    want: &[f64],
    shape: &[usize],
    bound: impl Fn(usize) -> f64,
) -> Result<f64, String> {
    if got.len() != want.len() {
        return Err(format!("{name}: length {} != {}", got.len(), want.len()));
    }
    let mut worst = (0.0f64, 0usize);
    for i in 0..got.len() {
        let (g, w) = (got[i], want[i]);
        if g.is_nan() || w.is_nan() || g.is_infinite() || w.is_infinite() {
            let same = (g.is_nan() && w.is_nan()) || g == w;
            if !same {
                return Err(format!("{name}: non-finite mismatch at {:?}: got {g}, want {w}", unravel(i, shape)));
            }
            continue;
        }
        let b = bound(i);
        let r = (g - w).abs() / b.max(f64::MIN_POSITIVE);
        if r > worst.0 {
            worst = (r, i);
        }
    }
    if worst.0 > 1.0 {
        let i = worst.1;
        return Err(format!(
            "{name}: error {:.3e} exceeds bound {:.3e} at {:?} (got {}, want {}; {:.2}x the bound)",
            (got[i] - want[i]).abs(),
            bound(i),
            unravel(i, shape),
            got[i],
            want[i],
            worst.0
        ));
    }
    Ok(worst.0)
}

/// Cosine difference `1 - <a,b> / (|a| |b|)` (0 for identical directions).
pub fn cosine_diff(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    if na == 0.0 && nb == 0.0 {
        return 0.0;
    }
    1.0 - dot / (na * nb).max(f64::MIN_POSITIVE)
}

/// Real model shapes shared by every op's tests and benchmarks.
pub mod shapes {
    /// Dense and MoE geometry of a model (0 where not applicable).
    #[derive(Clone, Copy, Debug)]
    pub struct Model {
        pub name: &'static str,
        pub hidden: usize,
        pub intermediate: usize,
        pub heads: usize,
        pub kv_heads: usize,
        pub head_dim: usize,
        pub vocab: usize,
        pub experts: usize,
        pub moe_intermediate: usize,
    }

    pub const LLAMA3_8B: Model = Model {
        name: "llama3_8b",
        hidden: 4096,
        intermediate: 14336,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        vocab: 128256,
        experts: 0,
        moe_intermediate: 0,
    };
    pub const QWEN3_30B_A3B: Model = Model {
        name: "qwen3_30b_a3b",
        hidden: 2048,
        intermediate: 6144,
        heads: 32,
        kv_heads: 4,
        head_dim: 128,
        vocab: 151936,
        experts: 128,
        moe_intermediate: 768,
    };
    pub const GPT_OSS_120B: Model = Model {
        name: "gpt_oss_120b",
        hidden: 2880,
        intermediate: 2880,
        heads: 64,
        kv_heads: 8,
        head_dim: 64,
        vocab: 201088,
        experts: 128,
        moe_intermediate: 2880,
    };
    pub const DEEPSEEK_V4_FLASH: Model = Model {
        name: "deepseek_v4_flash",
        hidden: 4096,
        intermediate: 0,
        heads: 64,
        kv_heads: 1,
        head_dim: 512,
        vocab: 129280,
        experts: 256,
        moe_intermediate: 2048,
    };
    pub const DEEPSEEK_V4: Model = Model {
        name: "deepseek_v4",
        hidden: 7168,
        intermediate: 18432,
        heads: 128,
        kv_heads: 1,
        head_dim: 512,
        vocab: 129280,
        experts: 384,
        moe_intermediate: 3072,
    };

    pub const MODELS: &[Model] = &[LLAMA3_8B, QWEN3_30B_A3B, GPT_OSS_120B, DEEPSEEK_V4_FLASH, DEEPSEEK_V4];
}

/// Target archs every shipped kernel must be built for.
pub const REQUIRED_ARCHS: &[&str] = &["sm_90a", "sm_120a", "sm_121a"];

/// Every (kernel, arch, resources) a crate's `KERNEL_MANIFEST` records, in kernel order: ptxas's
/// per-arch resources as `b12x-build` wrote them (`registers`, `smem_bytes`, spills,
/// `wgmma_serialized`). Empty for an unparsable manifest.
pub fn manifest_resources(manifest_json: &str) -> Vec<(String, String, serde_json::Value)> {
    let m: serde_json::Value = serde_json::from_str(manifest_json).unwrap_or_default();
    let mut kernels: std::collections::BTreeMap<String, serde_json::Value> = Default::default();
    for unit in m["units"].as_object().into_iter().flat_map(|u| u.values()) {
        for (k, v) in unit["kernels"].as_object().into_iter().flatten() {
            kernels.insert(k.clone(), v.clone());
        }
    }
    let mut out = Vec::new();
    for (k, per_arch) in kernels {
        for (arch, r) in per_arch.as_object().into_iter().flatten() {
            out.push((k.clone(), arch.clone(), r.clone()));
        }
    }
    out
}

/// Checks a crate's `KERNEL_MANIFEST` (from `b12x-build`): the kernels were built, every symbol
/// in `symbols` exists for every required arch, no kernel spills registers or uses a stack
/// frame for spills, and ptxas serialized no kernel's wgmma instructions (a wgmma kernel that
/// loses its overlap still passes every GPU test, only slower). Set `B12X_ALLOW_PARTIAL_ARCHS=1`
/// for bundles built for one arch only.
pub fn check_manifest(manifest_json: &str, symbols: &[String]) -> Result<(), String> {
    let m: serde_json::Value = serde_json::from_str(manifest_json).map_err(|e| format!("manifest: {e}"))?;
    if m["built"] != serde_json::Value::Bool(true) {
        return Err("kernels not built (no nvcc at build time): run `cargo xtask toolchain` and rebuild".into());
    }
    let built: Vec<&str> = m["archs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str())
        .filter(|a| a.starts_with("sm_"))
        .collect();
    let partial = std::env::var("B12X_ALLOW_PARTIAL_ARCHS").is_ok_and(|v| v == "1");
    let required: Vec<&str> = if partial { built.clone() } else { REQUIRED_ARCHS.to_vec() };
    let resources = manifest_resources(manifest_json);
    let mut errs = Vec::new();
    for sym in symbols {
        for arch in &required {
            if !resources.iter().any(|(k, a, _)| k == sym && a == arch) {
                errs.push(format!("{sym} missing for {arch}"));
            }
        }
    }
    for (k, arch, r) in &resources {
        let spill = r["spill_store_bytes"].as_u64().unwrap_or(0) + r["spill_load_bytes"].as_u64().unwrap_or(0);
        if spill > 0 {
            errs.push(format!("{k} spills {spill} bytes on {arch}"));
        }
        if r["wgmma_serialized"].as_bool() == Some(true) {
            errs.push(format!("ptxas serialized {k}'s wgmma instructions on {arch}"));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// Compiles the C++ file `src` (a `.cu` source is compiled as C++) with the host compiler (`$CXX`,
/// else `c++`), `-O2 -std=c++17` and the include folders, into `dir/name`, and returns the
/// program's path. For the CPU tests of `__host__ __device__` headers the kernels share. Panics
/// with the compiler's output when it fails.
pub fn compile_host_cpp(
    dir: &std::path::Path,
    name: &str,
    src: &std::path::Path,
    includes: &[&std::path::Path],
) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let exe = dir.join(name);
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let mut cmd = std::process::Command::new(&cxx);
    cmd.args(["-O2", "-std=c++17", "-x", "c++"]);
    for inc in includes {
        cmd.arg("-I").arg(inc);
    }
    let out = cmd
        .arg(src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C++ compiler `{cxx}`: {e}"));
    assert!(out.status.success(), "compiling {} failed:\n{}", src.display(), String::from_utf8_lossy(&out.stderr));
    exe
}

/// The archs whose kernels a CPU test of built code should check: [`REQUIRED_ARCHS`], or with
/// `B12X_ALLOW_PARTIAL_ARCHS=1` (GPU bundles build for the GPU's arch only) those of them the
/// manifest `manifest_json` says were built.
pub fn checked_archs(manifest_json: &str) -> Vec<&'static str> {
    let partial = std::env::var("B12X_ALLOW_PARTIAL_ARCHS").is_ok_and(|v| v == "1");
    if !partial {
        return REQUIRED_ARCHS.to_vec();
    }
    let m: serde_json::Value = serde_json::from_str(manifest_json).unwrap_or_default();
    let built: Vec<&str> = m["archs"].as_array().into_iter().flatten().filter_map(|a| a.as_str()).collect();
    REQUIRED_ARCHS.iter().copied().filter(|a| built.contains(a)).collect()
}

/// The pinned `cuobjdump` (`cargo xtask toolchain` installs it into `<repo>/.b12x/sasstool`), or
/// the one `B12X_CUOBJDUMP` names.
pub fn cuobjdump_path() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("B12X_CUOBJDUMP") {
        return p.into();
    }
    let core = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    core.parent().unwrap_or(core).join(".b12x/sasstool/nvidia/cu13/bin/cuobjdump")
}

/// The SASS of every kernel of `arch` (`"sm_120a"`) in a fatbin: kernel name → its listing as
/// `cuobjdump -sass` prints it. This is how the CPU suite checks the code of the archs we cannot
/// run (the sm_120a / sm_121a paths: e.g. that a kernel contains the hardware conversion it was
/// written for). Errors when the inspector is missing (run `cargo xtask toolchain`) or the fatbin
/// holds no kernel for `arch`.
pub fn sass_functions(fatbin: &[u8], arch: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    type Listing = std::collections::BTreeMap<String, String>;
    type Memo = std::sync::Mutex<std::collections::HashMap<(usize, usize, String), Listing>>;
    // Disassembly takes seconds per fatbin and arch; a test binary often asks several times.
    static MEMO: OnceLock<Memo> = OnceLock::new();
    let key = (fatbin.as_ptr() as usize, fatbin.len(), arch.to_string());
    let memo = MEMO.get_or_init(Default::default);
    if let Some(hit) = memo.lock().map_err(|e| e.to_string())?.get(&key) {
        return Ok(hit.clone());
    }
    let listing = disassemble(fatbin, arch)?;
    memo.lock().map_err(|e| e.to_string())?.insert(key, listing.clone());
    Ok(listing)
}

fn disassemble(fatbin: &[u8], arch: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    let tool = cuobjdump_path();
    if !tool.is_file() {
        return Err(format!("{} not found: run `cargo xtask toolchain` (or set B12X_CUOBJDUMP)", tool.display()));
    }
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("b12x-sass-{}-{n}.fatbin", std::process::id()));
    std::fs::write(&path, fatbin).map_err(|e| format!("{}: {e}", path.display()))?;
    let out = std::process::Command::new(&tool).args(["-sass", "-arch", arch]).arg(&path).output();
    let _ = std::fs::remove_file(&path);
    let out = out.map_err(|e| format!("could not run {}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(format!("cuobjdump -sass -arch {arch} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut functions = std::collections::BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(name) = line.trim().strip_prefix("Function : ") {
            if let Some((k, v)) = current.take() {
                functions.insert(k, v);
            }
            current = Some((name.trim().to_string(), String::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((k, v)) = current {
        functions.insert(k, v);
    }
    if functions.is_empty() {
        return Err(format!("the fatbin holds no {arch} kernel"));
    }
    Ok(functions)
}

/// Runs `check(arch, name, sass)` on the kernels of `fatbin` named `prefix*` (exactly `kernels` of
/// them per arch) on every arch of [`checked_archs`]; `check` returns a problem or `None`. The
/// error joins every problem, a wrong kernel count included.
fn check_sass_kernels(
    fatbin: Option<&[u8]>,
    manifest_json: &str,
    prefix: &str,
    kernels: usize,
    check: impl Fn(&str, &str, &str) -> Option<String>,
) -> Result<(), String> {
    let fatbin = fatbin.ok_or("kernels not built (no nvcc at build time): run `cargo xtask toolchain` and rebuild")?;
    let mut errs = Vec::new();
    for arch in checked_archs(manifest_json) {
        let functions = sass_functions(fatbin, arch)?;
        let selected: Vec<(&String, &String)> = functions.iter().filter(|(k, _)| k.starts_with(prefix)).collect();
        if selected.len() != kernels {
            errs.push(format!("{arch}: {} kernels named {prefix}*, expected {kernels}", selected.len()));
        }
        errs.extend(selected.into_iter().filter_map(|(name, sass)| check(arch, name, sass)));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// Checks the SASS of the kernels of `fatbin` whose names start with `prefix` (exactly `kernels`
/// of them per arch) on every arch of [`checked_archs`]: on the archs in `with`, each contains
/// `needle` (an opcode with its modifiers, e.g. `"F2FP.SATFINITE.E2M1.F32"`); on the others none
/// does. For the hardware paths of the archs we cannot run: a kernel that silently fell back to
/// its portable path (or a guard that let the hardware path into the wrong arch) fails here.
pub fn check_sass_opcode(
    fatbin: Option<&[u8]>,
    manifest_json: &str,
    prefix: &str,
    kernels: usize,
    needle: &str,
    with: &[&str],
) -> Result<(), String> {
    check_sass_kernels(fatbin, manifest_json, prefix, kernels, |arch, name, sass| {
        let want = with.contains(&arch);
        (sass.contains(needle) != want)
            .then(|| format!("{name} on {arch} {} {needle}", if want { "lacks" } else { "contains" }))
    })
}

/// The number of SASS instructions in one kernel's listing (as [`sass_functions`] returns it):
/// the lines that carry an instruction address (`/*0a30*/`), without the `NOP`s that pad the
/// function's end.
pub fn sass_instruction_count(listing: &str) -> usize {
    listing
        .lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("/*")?;
            let (addr, op) = rest.split_once("*/")?;
            (!addr.is_empty() && addr.chars().all(|c| c.is_ascii_hexdigit())).then_some(op.trim_start())
        })
        .filter(|op| !op.is_empty() && !op.starts_with("NOP"))
        .count()
}

/// Checks the code size of the kernels of `fatbin` named `prefix*` (exactly `kernels` of them per
/// arch) on every arch of [`checked_archs`]: each has at most `budget(arch, name)` SASS
/// instructions ([`sass_instruction_count`]). For hot loops whose speed depends on staying in the
/// instruction cache — a source edit that inlines more code than it looks like fails here, on the
/// CPU, before a GPU run. The error lists every kernel over its budget with its count.
pub fn check_sass_size(
    fatbin: Option<&[u8]>,
    manifest_json: &str,
    prefix: &str,
    kernels: usize,
    budget: impl Fn(&str, &str) -> usize,
) -> Result<(), String> {
    check_sass_kernels(fatbin, manifest_json, prefix, kernels, |arch, name, sass| {
        let (n, max) = (sass_instruction_count(sass), budget(arch, name));
        (n > max).then(|| format!("{name} on {arch}: {n} SASS instructions, budget {max}"))
    })
}

/// The body of a GPU trial: gets the device, returns a failure message.
#[cfg(feature = "testing")]
pub type TrialFn = Box<dyn FnOnce(&Arc<Device>) -> Result<(), String> + Send>;

/// One GPU test case for [`run_gpu_trials`].
#[cfg(feature = "testing")]
pub struct GpuTrial {
    pub name: String,
    pub run: TrialFn,
}

#[cfg(feature = "testing")]
impl GpuTrial {
    pub fn new(name: impl Into<String>, run: impl FnOnce(&Arc<Device>) -> Result<(), String> + Send + 'static) -> Self {
        Self { name: name.into(), run: Box::new(run) }
    }
}

/// The `main` of every `tests/gpu_*.rs` (libtest-mimic): runs the trials on device 0 one at a
/// time, or lists them as ignored when no CUDA device is present. Never returns.
#[cfg(feature = "testing")]
pub fn run_gpu_trials(trials: Vec<GpuTrial>) -> ! {
    let mut args = libtest_mimic::Arguments::from_args();
    // One GPU, one context: run sequentially.
    args.test_threads = Some(1);
    let dev = gpu();
    if dev.is_none() {
        eprintln!("b12x: no CUDA device; GPU trials are listed as ignored");
    }
    let tests = trials
        .into_iter()
        .map(|t| {
            let dev = dev.clone();
            let ignored = dev.is_none();
            let run = t.run;
            libtest_mimic::Trial::test(t.name, move || match dev {
                Some(d) => run(&d).map_err(Into::into),
                None => Ok(()),
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    libtest_mimic::run(&args, tests).exit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    #[test]
    fn sass_instruction_count_skips_headers_and_padding() {
        let listing = "        .headerflags    @\"EF_CUDA_SM90\"\n\
        /*0000*/                   LDC R1, c[0x0][0x28] ;   /* 0x00000a00ff017b82 */\n\
                                                           /* 0x000fe40000000800 */\n\
        /*0010*/                   S2R R0, SR_TID.X ;       /* 0x0000000000007919 */\n\
        /*0020*/                   EXIT ;                   /* 0x000000000000794d */\n\
        /*0030*/                   BRA 0x30;                /* 0xfffffffc00fc7947 */\n\
        /*0040*/                   NOP;                     /* 0x0000000000007918 */\n\
        /*0050*/                   NOP;                     /* 0x0000000000007918 */\n";
        assert_eq!(sass_instruction_count(listing), 4);
        assert_eq!(sass_instruction_count(""), 0);
    }

    #[test]
    fn comparisons_report_coordinates() {
        let want = cast::<bf16>(&[1.0, 2.0, 3.0, 4.0]);
        let mut got = want.clone();
        assert!(check_bitwise("y", &got, &want, &[2, 2]).is_ok());
        got[3] = bf16::from_bits(want[3].to_bits() + 2);
        let e = check_bitwise("y", &got, &want, &[2, 2]).unwrap_err();
        assert!(e.contains("[1, 1]"), "{e}");
        let (qnan, canon) = (cast::<bf16>(&[f32::NAN]), vec![bf16::from_bits(0x7fff)]);
        assert!(check_bitwise("n", &qnan, &canon, &[1]).is_err());
        assert!(check_bitwise_nan_eq("n", &qnan, &canon, &[1]).is_ok());
        assert!(check_bitwise_nan_eq("n", &qnan, &cast::<bf16>(&[1.0]), &[1]).is_err());
        assert_eq!(check_ulp("y", &got, &want, &[2, 2], 2).unwrap(), 2);
        let e = check_ulp("y", &got, &want, &[2, 2], 1).unwrap_err();
        assert!(e.contains("[1, 1]") && e.contains("2 ULP"), "{e}");
    }

    #[test]
    fn ulp_distance_crosses_zero_and_flags_nan() {
        let p = bf16::from_bits(0x0001);
        let n = bf16::from_bits(0x8001);
        assert_eq!(ulp_distance(p, n, 16), 2);
        assert_eq!(ulp_distance(bf16::ZERO, bf16::NEG_ZERO, 16), 0);
        assert_eq!(ulp_distance(bf16::NAN, bf16::ONE, 16), u64::MAX);
        assert_eq!(ulp_distance(bf16::NAN, bf16::NAN, 16), 0);
    }

    #[test]
    fn close_and_cosine() {
        let want = [1.0, 2.0, f64::NAN];
        assert!(check_close("y", &[1.05, 2.0, f64::NAN], &want, &[3], |_| 0.1).is_ok());
        let e = check_close("y", &[1.2, 2.0, f64::NAN], &want, &[3], |_| 0.1).unwrap_err();
        assert!(e.contains("[0]"), "{e}");
        assert!(check_close("y", &[1.0, 2.0, 0.0], &want, &[3], |_| 0.1).is_err());
        assert!(cosine_diff(&[1.0, 2.0], &[2.0, 4.0]).abs() < 1e-12);
        assert!((cosine_diff(&[1.0, 0.0], &[0.0, 1.0]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn manifest_check_finds_missing_spilling_and_serialized_kernels() {
        let ok = r#"{"built":true,"archs":["sm_90a","sm_120a","sm_121a","compute_120"],"units":{"u":{"hash":"h","kernels":{
            "k1":{"sm_90a":{"spill_store_bytes":0,"spill_load_bytes":0},"sm_120a":{"spill_store_bytes":0,"spill_load_bytes":0},"sm_121a":{"spill_store_bytes":0,"spill_load_bytes":0}},
            "k2":{"sm_90a":{"spill_store_bytes":8,"spill_load_bytes":8}},
            "k4":{"sm_90a":{"spill_store_bytes":0,"spill_load_bytes":0,"wgmma_serialized":true},"sm_120a":{"wgmma_serialized":false}}}}}}"#;
        let e = check_manifest(ok, &["k1".into(), "k2".into(), "k3".into()]).unwrap_err();
        assert!(e.contains("k2 spills 16 bytes on sm_90a"), "{e}");
        assert!(e.contains("ptxas serialized k4's wgmma instructions on sm_90a"), "{e}");
        assert!(!e.contains("k4's wgmma instructions on sm_120a"), "{e}");
        assert!(!e.contains("k1"), "{e}");
        assert!(e.contains("k3 missing for sm_120a"), "{e}");
        assert!(e.contains("k2 missing for sm_121a"), "{e}");
        assert!(check_manifest(r#"{"built":false,"archs":[],"units":{}}"#, &[]).is_err());
    }

    #[test]
    fn own_kernels_are_built_for_every_arch() {
        let own = ["b12x_read_bw", "b12x_read_bw_u8", "b12x_read_bw_bulk", "b12x_flush_fill", "b12x_flush_read"];
        check_manifest(crate::bench::KERNEL_MANIFEST, &own.map(String::from)).unwrap();
    }

    #[test]
    fn seeded_fills_are_reproducible() {
        assert_eq!(uniform(7, 5, -1.0, 1.0), uniform(7, 5, -1.0, 1.0));
        assert_ne!(uniform(7, 5, -1.0, 1.0), uniform(8, 5, -1.0, 1.0));
        assert_eq!(arange(5, 3, 0.5), vec![0.0, 0.5, 1.0, 0.0, 0.5]);
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
    }
}

/// A device buffer of a float dtype the GPU suites write or read (bf16, f16 or f32), for ops whose
/// query picks the dtype: upload, poison, download, views. Errors are strings, as the GPU
/// trials report them.
#[derive(Debug)]
pub enum FloatBuf {
    Bf16(CudaSlice<half::bf16>),
    F16(CudaSlice<half::f16>),
    F32(CudaSlice<f32>),
}

impl FloatBuf {
    /// `v` rounded to `dtype` (bf16, f16; anything else f32).
    pub fn upload(stream: &Arc<CudaStream>, v: &[f32], dtype: crate::DType) -> Result<Self, String> {
        let e = |e: cudarc::driver::DriverError| e.to_string();
        Ok(match dtype {
            crate::DType::BF16 => FloatBuf::Bf16(stream.clone_htod(&cast::<half::bf16>(v)).map_err(e)?),
            crate::DType::F16 => FloatBuf::F16(stream.clone_htod(&cast::<half::f16>(v)).map_err(e)?),
            _ => FloatBuf::F32(stream.clone_htod(v).map_err(e)?),
        })
    }
    /// `n` NaN-poisoned elements of `dtype` ([`alloc_poisoned`]).
    pub fn poisoned(stream: &Arc<CudaStream>, n: usize, dtype: crate::DType) -> Result<Self, String> {
        let e = |e: crate::Error| e.to_string();
        Ok(match dtype {
            crate::DType::BF16 => FloatBuf::Bf16(alloc_poisoned(stream, n).map_err(e)?),
            crate::DType::F16 => FloatBuf::F16(alloc_poisoned(stream, n).map_err(e)?),
            _ => FloatBuf::F32(alloc_poisoned(stream, n).map_err(e)?),
        })
    }
    /// Fills it with NaN again ([`poison`]).
    pub fn poison(&mut self, stream: &CudaStream) -> Result<(), String> {
        match self {
            FloatBuf::Bf16(s) => poison(stream, s),
            FloatBuf::F16(s) => poison(stream, s),
            FloatBuf::F32(s) => poison(stream, s),
        }
        .map_err(|e| e.to_string())
    }
    /// The values, widened to f64.
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<Vec<f64>, String> {
        let e = |e: cudarc::driver::DriverError| e.to_string();
        Ok(match self {
            FloatBuf::Bf16(s) => stream.clone_dtoh(s).map_err(e)?.iter().map(|v| v.to_f64()).collect(),
            FloatBuf::F16(s) => stream.clone_dtoh(s).map_err(e)?.iter().map(|v| v.to_f64()).collect(),
            FloatBuf::F32(s) => stream.clone_dtoh(s).map_err(e)?.iter().map(|&v| f64::from(v)).collect(),
        })
    }
    /// The bit patterns, zero-extended to u32.
    pub fn bits(&self, stream: &Arc<CudaStream>) -> Result<Vec<u32>, String> {
        let e = |e: cudarc::driver::DriverError| e.to_string();
        Ok(match self {
            FloatBuf::Bf16(s) => stream.clone_dtoh(s).map_err(e)?.iter().map(|v| u32::from(v.to_bits())).collect(),
            FloatBuf::F16(s) => stream.clone_dtoh(s).map_err(e)?.iter().map(|v| u32::from(v.to_bits())).collect(),
            FloatBuf::F32(s) => stream.clone_dtoh(s).map_err(e)?.iter().map(|v| v.to_bits()).collect(),
        })
    }
    /// Elements.
    pub fn len(&self) -> usize {
        match self {
            FloatBuf::Bf16(s) => s.len(),
            FloatBuf::F16(s) => s.len(),
            FloatBuf::F32(s) => s.len(),
        }
    }
    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The device address of element 0.
    pub fn ptr(&self) -> u64 {
        match self {
            FloatBuf::Bf16(s) => crate::TensorRef::from_slice(s, &[s.len()]).map(|v| v.ptr()).unwrap_or(0),
            FloatBuf::F16(s) => crate::TensorRef::from_slice(s, &[s.len()]).map(|v| v.ptr()).unwrap_or(0),
            FloatBuf::F32(s) => crate::TensorRef::from_slice(s, &[s.len()]).map(|v| v.ptr()).unwrap_or(0),
        }
    }
    /// The buffer's dtype.
    pub fn dtype(&self) -> crate::DType {
        match self {
            FloatBuf::Bf16(_) => crate::DType::BF16,
            FloatBuf::F16(_) => crate::DType::F16,
            FloatBuf::F32(_) => crate::DType::F32,
        }
    }
    /// A `[rows, cols]` view with row stride `stride` (`cols == 0`: a 1-D `[rows]` view), typed
    /// `dtype` (bad-input tests may label it otherwise on purpose; nothing checks the extent:
    /// callers allocate at least `rows · stride` elements).
    pub fn view(&self, rows: usize, cols: usize, stride: usize, dtype: crate::DType) -> crate::TensorRef<'_> {
        let (shape, strides): (Vec<usize>, Vec<isize>) =
            if cols == 0 { (vec![rows], vec![1]) } else { (vec![rows, cols], vec![stride as isize, 1]) };
        // SAFETY: the caller allocated at least rows * stride elements; borrowed for the view's
        // lifetime.
        unsafe { crate::TensorRef::from_raw(self.ptr(), &shape, &strides, dtype) }.expect("view")
    }
    /// [`FloatBuf::view`], writable (2-D).
    pub fn view_mut(&mut self, rows: usize, cols: usize, stride: usize, dtype: crate::DType) -> crate::TensorMut<'_> {
        // SAFETY: as above; the buffer is borrowed mutably for the view's lifetime.
        unsafe { crate::TensorMut::from_raw(self.ptr(), &[rows, cols], &[stride as isize, 1], dtype) }.expect("view")
    }
}
