//! `b12x-build` — the `build.rs` helper every b12x kernel crate calls.
//!
//! It finds `nvcc`, compiles each `kernels/*.cu` of the calling crate into a fatbin with
//! explicit `-gencode` pairs (default: `sm_90a`, `sm_120a`, `sm_121a` cubins plus
//! `compute_120` PTX), records the `-Xptxas -v` resource usage of every kernel on every arch
//! into a JSON manifest, and writes `$OUT_DIR/b12x_kernels.rs`, which the crate includes:
//!
//! ```ignore
//! // build.rs
//! fn main() { b12x_build::build_kernels(); }
//! // src/lib.rs
//! include!(concat!(env!("OUT_DIR"), "/b12x_kernels.rs"));
//! ```
//!
//! The generated file defines, for each `kernels/<stem>.cu`, `pub const <STEM>_FATBIN:
//! Option<&[u8]>` and `pub const <STEM>_HASH: &str`, plus `pub const KERNEL_MANIFEST: &str`
//! (JSON, see [`Manifest`]) and `pub const KERNEL_ARCHS: &[&str]`.
//!
//! Without nvcc the build still succeeds: a cargo warning says how to install the compiler,
//! the fatbin constants are `None`, and the ops return a typed "kernels not built" error.
//!
//! nvcc discovery order: `B12X_NVCC`, `NVCC`, the project-local toolchain installed by
//! `cargo xtask toolchain` (`.b12x/toolchain/nvidia/cu13/bin/nvcc` in any ancestor of the
//! crate), `$CUDA_HOME/bin/nvcc`, then `nvcc` on `PATH`.
//!
//! Compilation is parallel (one nvcc per translation unit) and content-hash cached in
//! `<target>/b12x-kernels/`, shared by every profile, so an unchanged file is never rebuilt.
//! `B12X_KERNEL_CACHE=<absolute dir>` puts the cache elsewhere: `cargo xtask gpu-bundle` points its own
//! target folder's build at the host build's cache, so a kernel compiled for the same archs by
//! one is not compiled again by the other (the key covers the source, headers, flags, archs and
//! the compiler).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Default target list: SM90a (validation), SM120a/SM121a (the product), compute_120 PTX.
pub const DEFAULT_ARCHS: &[&str] = &["sm_90a", "sm_120a", "sm_121a", "compute_120"];

/// Relative location of nvcc inside the project-local toolchain folder.
pub const LOCAL_TOOLCHAIN_NVCC: &str = ".b12x/toolchain/nvidia/cu13/bin/nvcc";

/// Flags shared by every translation unit.
const NVCC_FLAGS: &[&str] =
    &["-std=c++17", "-O3", "--expt-relaxed-constexpr", "-Xptxas", "-v", "-Xptxas", "-warn-spills"];

/// Resource usage of one kernel on one arch, as ptxas reported it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelResources {
    pub registers: u32,
    pub smem_bytes: u32,
    pub stack_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    /// ptxas serialized the kernel's `wgmma.mma_async` instructions (its C75xx "Potential
    /// Performance Loss" notes, sm_90a): each wgmma then waits for the previous one, which
    /// undoes the overlap a wgmma kernel is written for, while the kernel still runs correctly.
    #[serde(default)]
    pub wgmma_serialized: bool,
}

/// One translation unit's build record.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct UnitManifest {
    /// Content hash of the source, headers, flags and archs.
    pub hash: String,
    /// kernel symbol -> arch -> resources.
    pub kernels: BTreeMap<String, BTreeMap<String, KernelResources>>,
}

/// The manifest of a crate: whether nvcc was found, the archs, and every unit.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Manifest {
    pub built: bool,
    pub nvcc: Option<String>,
    pub archs: Vec<String>,
    /// stem -> unit
    pub units: BTreeMap<String, UnitManifest>,
}

impl Manifest {
    /// The cubin archs (`sm_*`) of the manifest, i.e. those ptxas reports resources for.
    pub fn cubin_archs(&self) -> Vec<String> {
        self.archs.iter().filter(|a| a.starts_with("sm_")).cloned().collect()
    }
}

/// Parses `B12X_CUDA_ARCHS` (comma separated, e.g. `sm_90a,sm_120a`) or returns the default.
pub fn archs_from_env(value: Option<&str>) -> Vec<String> {
    match value.map(str::trim).filter(|s| !s.is_empty()) {
        Some(v) => v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        None => DEFAULT_ARCHS.iter().map(|s| s.to_string()).collect(),
    }
}

/// The explicit `-gencode` pair for one arch: `sm_90a` -> cubin, `compute_120` -> PTX.
pub fn gencode(arch: &str) -> Result<String, String> {
    if let Some(num) = arch.strip_prefix("sm_") {
        Ok(format!("arch=compute_{num},code=sm_{num}"))
    } else if let Some(num) = arch.strip_prefix("compute_") {
        Ok(format!("arch=compute_{num},code=compute_{num}"))
    } else {
        Err(format!("B12X_CUDA_ARCHS entry `{arch}` must look like sm_90a or compute_120"))
    }
}

/// Finds nvcc in the documented order. `start` is the directory to search upwards from for the
/// project-local toolchain.
pub fn find_nvcc(start: &Path, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    for var in ["B12X_NVCC", "NVCC"] {
        if let Some(p) = env(var).filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(p));
        }
    }
    for dir in start.ancestors() {
        let candidate = dir.join(LOCAL_TOOLCHAIN_NVCC);
        if candidate.is_file() {
            return Some(candidate);
        }
    }
    if let Some(home) = env("CUDA_HOME").filter(|p| !p.is_empty()) {
        let candidate = Path::new(&home).join("bin/nvcc");
        if candidate.is_file() {
            return Some(candidate);
        }
    }
    let path = env("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("nvcc")).find(|c| c.is_file())
}

/// The function a ptxas note of wgmma serialization names (`... are serialized due to ... in the
/// function 'NAME'`), if `line` is one.
fn wgmma_serialized_fn(line: &str) -> Option<&str> {
    if !line.contains("wgmma.mma_async instructions are serialized") {
        return None;
    }
    line.rsplit_once("function '")?.1.split('\'').next()
}

/// Parses ptxas `-v` output into kernel -> arch -> resources.
///
/// ptxas prints its wgmma serialization notes before the entry functions of the same arch's run,
/// so a note marks the next entry of the function it names (or, printed after every entry of
/// the function, its sm_90 entries: wgmma exists there only).
pub fn parse_ptxas(log: &str) -> BTreeMap<String, BTreeMap<String, KernelResources>> {
    let mut out: BTreeMap<String, BTreeMap<String, KernelResources>> = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let mut serialized: Vec<String> = Vec::new();
    let num_before = |line: &str, unit: &str| -> Option<u32> {
        let idx = line.find(unit)?;
        line[..idx].split_whitespace().last()?.parse().ok()
    };
    for line in log.lines() {
        if let Some(name) = wgmma_serialized_fn(line) {
            serialized.push(name.to_string());
            continue;
        }
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let mut parts = rest.split('\'');
            let name = parts.next().unwrap_or_default().to_string();
            let arch = parts.nth(1).unwrap_or_default().to_string();
            let pending = serialized.iter().position(|s| *s == name).map(|i| serialized.swap_remove(i));
            let res = KernelResources { wgmma_serialized: pending.is_some(), ..Default::default() };
            out.entry(name.clone()).or_default().insert(arch.clone(), res);
            current = Some((name, arch));
            continue;
        }
        let Some((name, arch)) = &current else { continue };
        let Some(res) = out.get_mut(name).and_then(|m| m.get_mut(arch)) else { continue };
        if line.contains("bytes stack frame") {
            res.stack_bytes = num_before(line, "bytes stack frame").unwrap_or(0);
            res.spill_store_bytes = num_before(line, "bytes spill stores").unwrap_or(0);
            res.spill_load_bytes = num_before(line, "bytes spill loads").unwrap_or(0);
        } else if line.contains("Used") && line.contains("registers") {
            res.registers = num_before(line, "registers").unwrap_or(0);
            res.smem_bytes = num_before(line, "bytes smem").unwrap_or(0);
        }
    }
    for name in serialized {
        for (arch, res) in out.get_mut(&name).into_iter().flatten() {
            if arch.starts_with("sm_90") {
                res.wgmma_serialized = true;
            }
        }
    }
    out
}

fn hash_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect()
}

fn files_with_ext(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()).is_some_and(|e| exts.contains(&e)))
        .collect();
    v.sort();
    v
}

fn all_headers(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            all_headers(&p, out);
        } else if p.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "cuh" | "h" | "hpp" | "inc")) {
            out.push(p);
        }
    }
}

/// What `build_kernels_in` needs to know; `build_kernels` fills it from cargo's environment.
pub struct BuildRequest {
    pub crate_dir: PathBuf,
    pub out_dir: PathBuf,
    pub cache_dir: PathBuf,
    pub include_dirs: Vec<PathBuf>,
    pub nvcc: Option<PathBuf>,
    pub archs: Vec<String>,
    pub progress: bool,
}

/// Entry point for `build.rs`: compiles `kernels/*.cu` and writes `$OUT_DIR/b12x_kernels.rs`.
///
/// Panics (failing the build) only if nvcc exists and a kernel does not compile: a broken
/// kernel must never ship. No nvcc is a warning.
pub fn build_kernels() {
    let env = |k: &str| std::env::var(k).ok();
    let crate_dir = PathBuf::from(env("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env("OUT_DIR").expect("OUT_DIR"));
    // OUT_DIR is <target>/<profile>/build/<pkg>/out: share one cache across profiles, or across
    // target folders with B12X_KERNEL_CACHE (entries are keyed by everything that goes into them).
    // (An absolute path: a build script runs in its crate's folder, so a relative one would put
    // a cache in every crate; it is ignored with a warning.)
    let shared = env("B12X_KERNEL_CACHE").filter(|v| !v.is_empty()).map(PathBuf::from);
    if shared.as_ref().is_some_and(|d| d.is_relative()) {
        println!("cargo:warning=b12x: B12X_KERNEL_CACHE must be an absolute path; using the target folder's cache");
    }
    let cache_dir = shared.filter(|d| d.is_absolute()).unwrap_or_else(|| {
        out_dir.ancestors().nth(4).map(|t| t.join("b12x-kernels")).unwrap_or_else(|| out_dir.join("cache"))
    });
    let mut include_dirs = vec![crate_dir.join("kernels")];
    let own_include = crate_dir.join("include");
    if own_include.is_dir() {
        include_dirs.push(own_include);
        println!("cargo:include={}", crate_dir.join("include").display());
    }
    if let Some(core_inc) = env("DEP_B12X_CORE_INCLUDE") {
        include_dirs.push(PathBuf::from(core_inc));
    }
    // Other b12x crates' exported headers (`links = "b12x_<name>"` + an include/ dir: b12x-gemm's
    // decode kernel body for b12x-moe), in name order so the header hash is stable.
    let mut deps: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("DEP_B12X_") && k.ends_with("_INCLUDE") && k != "DEP_B12X_CORE_INCLUDE")
        .collect();
    deps.sort();
    include_dirs.extend(deps.into_iter().map(|(_, v)| PathBuf::from(v)));
    // NVCC_PREPEND_FLAGS / NVCC_APPEND_FLAGS change what nvcc does.
    for var in [
        "B12X_NVCC",
        "NVCC",
        "CUDA_HOME",
        "NVCC_PREPEND_FLAGS",
        "NVCC_APPEND_FLAGS",
        "B12X_CUDA_ARCHS",
        "B12X_PRINT_COMPILE_PROGRESS",
        "B12X_KERNEL_CACHE",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    for d in &include_dirs {
        println!("cargo:rerun-if-changed={}", d.display());
    }
    let nvcc = find_nvcc(&crate_dir, &env);
    // PATH decides which nvcc only when nothing more specific did (or none was found).
    let from_path = nvcc
        .as_ref()
        .is_some_and(|n| env("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("nvcc") == *n)));
    if nvcc.is_none() || from_path {
        println!("cargo:rerun-if-env-changed=PATH");
    }
    if let Some(n) = &nvcc {
        println!("cargo:rerun-if-changed={}", n.display());
    } else {
        // Watching the (missing) project-local toolchain makes cargo rerun this script on every
        // build until a compiler exists, so `cargo xtask toolchain` is picked up without a clean.
        for dir in crate_dir.ancestors() {
            if dir.join("Cargo.toml").is_file() {
                println!("cargo:rerun-if-changed={}", dir.join(".b12x/toolchain").display());
            }
        }
    }
    let req = BuildRequest {
        crate_dir,
        out_dir,
        cache_dir,
        include_dirs,
        nvcc,
        archs: archs_from_env(env("B12X_CUDA_ARCHS").as_deref()),
        progress: env("B12X_PRINT_COMPILE_PROGRESS").is_some_and(|v| v != "0"),
    };
    if let Err(e) = build_kernels_in(&req) {
        panic!("b12x-build: {e}");
    }
}

/// Builds the kernels of one crate as described by `req`. Returns the manifest it wrote.
pub fn build_kernels_in(req: &BuildRequest) -> Result<Manifest, String> {
    let sources = files_with_ext(&req.crate_dir.join("kernels"), &["cu"]);
    let mut manifest = Manifest {
        built: req.nvcc.is_some(),
        nvcc: req.nvcc.as_ref().map(|p| p.display().to_string()),
        archs: req.archs.clone(),
        units: BTreeMap::new(),
    };
    let gencodes: Vec<String> = req.archs.iter().map(|a| gencode(a)).collect::<Result<_, _>>()?;
    if req.nvcc.is_none() && !sources.is_empty() {
        println!(
            "cargo:warning=b12x: nvcc not found; kernels of {} are not built and its ops will return \
             Error::KernelsNotBuilt. Run `cargo xtask toolchain` (or `pip install --target .b12x/toolchain \
             nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
             nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85`), or set B12X_NVCC / CUDA_HOME.",
            req.crate_dir.display()
        );
    }
    // Everything a unit's output depends on besides its own text.
    let mut headers = Vec::new();
    for d in &req.include_dirs {
        all_headers(d, &mut headers);
    }
    headers.sort();
    headers.dedup();
    let mut common: Vec<u8> = Vec::new();
    for h in &headers {
        common.extend(h.file_name().unwrap_or_default().to_string_lossy().as_bytes());
        common.extend(fs::read(h).map_err(|e| format!("{}: {e}", h.display()))?);
    }
    common.extend(NVCC_FLAGS.join(" ").as_bytes());
    common.extend(gencodes.join(" ").as_bytes());
    if let Some(n) = &req.nvcc {
        common.extend(n.display().to_string().as_bytes());
        // The same path can hold another toolkit after a reinstall: key on what nvcc says it is,
        // and on the flags it would add from the environment.
        if let Ok(out) = Command::new(n).arg("--version").output() {
            common.extend(out.stdout);
        }
        for var in ["NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"] {
            common.extend(std::env::var(var).unwrap_or_default().as_bytes());
        }
    }
    fs::create_dir_all(&req.cache_dir).map_err(|e| format!("{}: {e}", req.cache_dir.display()))?;

    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let mut results: Vec<(String, String, Option<PathBuf>, UnitManifest)> = Vec::new();
    for chunk in sources.chunks(jobs) {
        let handles: Vec<_> = chunk
            .iter()
            .map(|src| {
                let src = src.clone();
                let common = common.clone();
                let gencodes = gencodes.clone();
                let nvcc = req.nvcc.clone();
                let includes = req.include_dirs.clone();
                let cache = req.cache_dir.clone();
                let progress = req.progress;
                std::thread::spawn(move || compile_unit(&src, &common, &gencodes, nvcc, &includes, &cache, progress))
            })
            .collect();
        for h in handles {
            results.push(h.join().map_err(|_| "compile thread panicked".to_string())??);
        }
    }
    let mut generated = String::from("// @generated by b12x-build. Do not edit.\n");
    for (stem, hash, fatbin, unit) in results {
        let ident = stem.to_uppercase().replace(['-', '.'], "_");
        match fatbin {
            Some(p) => {
                let dest = req.out_dir.join(format!("{stem}.fatbin"));
                fs::copy(&p, &dest).map_err(|e| format!("{}: {e}", dest.display()))?;
                generated += &format!(
                    "/// Fatbin of `kernels/{stem}.cu`.\npub const {ident}_FATBIN: Option<&[u8]> = Some(include_bytes!({:?}));\n",
                    dest.display().to_string()
                );
            }
            None => {
                generated += &format!(
                    "/// Fatbin of `kernels/{stem}.cu` (not built: no nvcc).\npub const {ident}_FATBIN: Option<&[u8]> = None;\n"
                );
            }
        }
        generated += &format!("/// Content hash of `kernels/{stem}.cu` and everything it depends on.\npub const {ident}_HASH: &str = {hash:?};\n");
        manifest.units.insert(stem, unit);
    }
    let manifest_json = serde_json::to_string_pretty(&manifest).map_err(|e| e.to_string())?;
    let manifest_path = req.out_dir.join("b12x_kernel_manifest.json");
    fs::write(&manifest_path, &manifest_json).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    generated += &format!(
        "/// Kernel resource manifest (JSON): kernels per unit, resources per arch.\npub const KERNEL_MANIFEST: &str = include_str!({:?});\n",
        manifest_path.display().to_string()
    );
    generated +=
        &format!("/// Targets the kernels were built for.\npub const KERNEL_ARCHS: &[&str] = &{:?};\n", req.archs);
    fs::write(req.out_dir.join("b12x_kernels.rs"), generated).map_err(|e| e.to_string())?;
    Ok(manifest)
}

type UnitResult = Result<(String, String, Option<PathBuf>, UnitManifest), String>;

fn compile_unit(
    src: &Path,
    common: &[u8],
    gencodes: &[String],
    nvcc: Option<PathBuf>,
    includes: &[PathBuf],
    cache: &Path,
    progress: bool,
) -> UnitResult {
    let stem = src.file_stem().unwrap_or_default().to_string_lossy().to_string();
    let text = fs::read(src).map_err(|e| format!("{}: {e}", src.display()))?;
    let hash = hash_hex(&[&text, common]);
    let Some(nvcc) = nvcc else {
        return Ok((stem, hash.clone(), None, UnitManifest { hash, kernels: BTreeMap::new() }));
    };
    let fatbin = cache.join(format!("{stem}-{hash}.fatbin"));
    let log_path = cache.join(format!("{stem}-{hash}.ptxas.log"));
    if fatbin.is_file() && log_path.is_file() {
        let log = fs::read_to_string(&log_path).unwrap_or_default();
        let kernels = parse_ptxas(&log);
        return Ok((stem, hash.clone(), Some(fatbin), UnitManifest { hash, kernels }));
    }
    let start = std::time::Instant::now();
    let tmp = cache.join(format!("{stem}-{hash}.{}.tmp", std::process::id()));
    let mut cmd = Command::new(&nvcc);
    cmd.arg("-fatbin").args(NVCC_FLAGS);
    for g in gencodes {
        cmd.arg("-gencode").arg(g);
    }
    for i in includes {
        cmd.arg("-I").arg(i);
    }
    cmd.arg(src).arg("-o").arg(&tmp);
    let out = cmd.output().map_err(|e| format!("failed to run {}: {e}", nvcc.display()))?;
    let log = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let _ = fs::remove_file(&tmp);
        return Err(format!("nvcc failed on {}:\n{log}", src.display()));
    }
    // Both land by rename, the log first: another build sharing the cache (B12X_KERNEL_CACHE)
    // that finds the fatbin finds a whole log beside it.
    let log_tmp = cache.join(format!("{stem}-{hash}.ptxas.{}.tmp", std::process::id()));
    fs::write(&log_tmp, &log).map_err(|e| e.to_string())?;
    fs::rename(&log_tmp, &log_path).map_err(|e| e.to_string())?;
    fs::rename(&tmp, &fatbin).map_err(|e| e.to_string())?;
    if progress {
        println!("cargo:warning=b12x: compiled {stem}.cu in {:.1}s", start.elapsed().as_secs_f32());
    }
    let kernels = parse_ptxas(&log);
    Ok((stem, hash.clone(), Some(fatbin), UnitManifest { hash, kernels }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'b12x_rmsnorm_bf16' for 'sm_90a'
ptxas info    : Function properties for b12x_rmsnorm_bf16
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 128 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'b12x_rmsnorm_bf16' for 'sm_120a'
ptxas info    : Function properties for b12x_rmsnorm_bf16
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 38 registers, used 0 barriers
";

    #[test]
    fn parses_ptxas_resources() {
        let m = parse_ptxas(LOG);
        let k = &m["b12x_rmsnorm_bf16"];
        assert_eq!(
            k["sm_90a"],
            KernelResources {
                registers: 40,
                smem_bytes: 128,
                stack_bytes: 8,
                spill_store_bytes: 4,
                spill_load_bytes: 4,
                wgmma_serialized: false,
            }
        );
        assert_eq!(k["sm_120a"].registers, 38);
        assert_eq!(k["sm_120a"].smem_bytes, 0);
    }

    /// ptxas 13.0's notes as it printed them for a kernel whose wgmmas it serialized: before the
    /// entry functions of that arch's run (one note after the entries, in a made-up order, too).
    #[test]
    fn parses_wgmma_serialization_notes() {
        let log = "ptxas info    : (C7513) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions defining input registers of a wgmma between start and end of the pipeline stage in the function 'k_wg'
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_other' for 'sm_90a'
ptxas info    : Used 30 registers, used 0 barriers
ptxas info    : Compiling entry function 'k_wg' for 'sm_90a'
ptxas info    : Function properties for k_wg
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 96 registers, used 1 barriers, 1792 bytes smem
ptxas info    : Compiling entry function 'k_wg' for 'sm_120a'
ptxas info    : Used 20 registers, used 0 barriers
ptxas info    : Compiling entry function 'k_late' for 'sm_90a'
ptxas info    : Used 128 registers, used 1 barriers
ptxas info    : Compiling entry function 'k_late' for 'sm_120a'
ptxas info    : Used 20 registers, used 0 barriers
ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls in the function 'k_late'
";
        let m = parse_ptxas(log);
        assert!(m["k_wg"]["sm_90a"].wgmma_serialized);
        assert_eq!(m["k_wg"]["sm_90a"].registers, 96);
        assert!(!m["k_wg"]["sm_120a"].wgmma_serialized);
        assert!(!m["k_other"]["sm_90a"].wgmma_serialized);
        assert!(m["k_late"]["sm_90a"].wgmma_serialized);
        assert!(!m["k_late"]["sm_120a"].wgmma_serialized);
        assert_eq!(wgmma_serialized_fn("ptxas info    : Used 96 registers"), None);
        // Manifests written before the field existed still read.
        let old: KernelResources = serde_json::from_str(
            r#"{"registers":1,"smem_bytes":0,"stack_bytes":0,"spill_store_bytes":0,"spill_load_bytes":0}"#,
        )
        .unwrap();
        assert!(!old.wgmma_serialized);
    }

    #[test]
    fn gencode_pairs_are_explicit() {
        assert_eq!(gencode("sm_90a").unwrap(), "arch=compute_90a,code=sm_90a");
        assert_eq!(gencode("compute_120").unwrap(), "arch=compute_120,code=compute_120");
        assert!(gencode("90").is_err());
    }

    #[test]
    fn archs_default_and_override() {
        assert_eq!(archs_from_env(None), vec!["sm_90a", "sm_120a", "sm_121a", "compute_120"]);
        assert_eq!(archs_from_env(Some("sm_90a")), vec!["sm_90a"]);
        assert_eq!(archs_from_env(Some(" ")).len(), 4);
    }

    #[test]
    fn nvcc_discovery_order() {
        let dir = std::env::temp_dir().join(format!("b12x-build-test-{}", std::process::id()));
        let local = dir.join(LOCAL_TOOLCHAIN_NVCC);
        fs::create_dir_all(local.parent().unwrap()).unwrap();
        fs::write(&local, b"").unwrap();
        let crate_dir = dir.join("some-crate");
        fs::create_dir_all(&crate_dir).unwrap();
        let none = |_: &str| None;
        assert_eq!(find_nvcc(&crate_dir, &none), Some(local.clone()));
        let explicit = |k: &str| (k == "NVCC").then(|| "/opt/x/nvcc".to_string());
        assert_eq!(find_nvcc(&crate_dir, &explicit), Some(PathBuf::from("/opt/x/nvcc")));
        let both = |k: &str| match k {
            "NVCC" => Some("/opt/x/nvcc".to_string()),
            "B12X_NVCC" => Some("/opt/y/nvcc".to_string()),
            _ => None,
        };
        assert_eq!(find_nvcc(&crate_dir, &both), Some(PathBuf::from("/opt/y/nvcc")));
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(find_nvcc(&crate_dir, &none), None);
    }
}
