//! `cargo xtask toolchain`: the pinned CUDA 13.0 compiler from PyPI (DESIGN.md §4), and the pinned
//! cubin inspector (`cuobjdump` + `nvdisasm`, which `cuobjdump -sass` runs) that the SASS tests
//! use to check the sm_120a / sm_121a kernels we cannot run (`b12x_core::testing::sass_functions`).
//!
//! Each wheel set is installed with `python3 -m pip install --target <dir>` into a temporary
//! sibling folder, checked (`<tool> --version` must name the pinned release), then moved into
//! place, so an interrupted install never leaves a half-filled folder behind. A stamp file records
//! the pinned list; when the tool exists and the stamp matches, the command only re-checks its
//! version.

use crate::util::{root, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned wheels. Bump together (and check the 580-series driver still accepts the PTX).
pub const PINNED: &[&str] = &[
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-cccl==13.0.85",
];

/// The pinned cubin inspector: the 13.0 compiler wheels ship neither tool, and 13.2 is the oldest
/// release on PyPI (it reads the 13.0 cubins). `bench/sass_count.py` uses the same folder.
pub const SASS_PINNED: &[&str] = &["nvidia-cuda-cuobjdump==13.2.51", "nvidia-cuda-nvdisasm==13.2.51"];

/// One pinned wheel set: where it goes, the tool that proves it works, the release that tool
/// must report.
struct WheelSet {
    what: &'static str,
    pinned: &'static [&'static str],
    /// Relative to the repository root.
    dir: &'static str,
    /// The tool inside the folder (b12x-build looks for `.b12x/toolchain/` + nvcc's path).
    tool: &'static str,
    release: &'static str,
    size: &'static str,
}

const COMPILER: WheelSet = WheelSet {
    what: "the pinned CUDA 13.0 compiler",
    pinned: PINNED,
    dir: ".b12x/toolchain",
    tool: "nvidia/cu13/bin/nvcc",
    release: "release 13.0",
    size: "~270 MB",
};

const SASS_TOOLS: WheelSet = WheelSet {
    what: "the pinned cubin inspector (cuobjdump, nvdisasm)",
    pinned: SASS_PINNED,
    dir: ".b12x/sasstool",
    tool: "nvidia/cu13/bin/cuobjdump",
    release: "release 13.2",
    size: "~11 MB",
};

const STAMP: &str = ".b12x-toolchain-stamp";

fn stamp_text(set: &WheelSet) -> String {
    set.pinned.join("\n") + "\n"
}

/// Runs `<tool> --version` and checks it reports the set's release. Returns the version line.
fn verify(set: &WheelSet, tool: &Path) -> Result<String> {
    let out =
        Command::new(tool).arg("--version").output().map_err(|e| format!("could not run {}: {e}", tool.display()))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("`{} --version` failed:\n{text}", tool.display()).into());
    }
    let line = text.lines().find(|l| l.contains("release")).unwrap_or("").trim().to_string();
    if !line.contains(set.release) {
        return Err(format!("{} is not {} (`{line}`)", tool.display(), set.release).into());
    }
    Ok(line)
}

/// Makes sure the pinned toolchain is installed in `dir` (default `<repo>/.b12x/toolchain`) and
/// works, and the pinned cubin inspector in `<repo>/.b12x/sasstool`. Returns the path of nvcc.
pub fn ensure(dir: Option<&Path>, force: bool) -> Result<PathBuf> {
    let dir = match dir {
        Some(d) if d.is_absolute() => d.to_path_buf(),
        Some(d) => std::env::current_dir()?.join(d),
        None => root().join(COMPILER.dir),
    };
    let nvcc = ensure_set(&COMPILER, &dir, force)?;
    ensure_set(&SASS_TOOLS, &root().join(SASS_TOOLS.dir), force)?;
    Ok(nvcc)
}

/// Installs `set` into `dir` unless its stamp (or, installed by hand, its exact wheels) is there;
/// returns the path of its tool.
fn ensure_set(set: &WheelSet, dir: &Path, force: bool) -> Result<PathBuf> {
    let tool = dir.join(set.tool);
    let stamp = dir.join(STAMP);
    let stamp_ok = std::fs::read_to_string(&stamp).is_ok_and(|s| s == stamp_text(set));
    if !force && tool.is_file() && stamp_ok {
        let v = verify(set, &tool)?;
        println!("toolchain: {} ({v})", tool.display());
        return Ok(tool);
    }
    if !force && tool.is_file() && wheels_match(set, dir) {
        // Installed by hand (the README's pip line, or bench/sass_count.py): adopt it (no download,
        // no rebuild).
        let v = verify(set, &tool)?;
        std::fs::write(&stamp, stamp_text(set))?;
        println!("toolchain: {} ({v}; pinned wheels found, stamp written)", tool.display());
        return Ok(tool);
    }
    install(set, dir)?;
    let v = verify(set, &tool)?;
    println!("toolchain: installed {} ({v})", tool.display());
    Ok(tool)
}

/// True when `dir` holds exactly the pinned version of every wheel of `set` (pip's `.dist-info`
/// folders).
fn wheels_match(set: &WheelSet, dir: &Path) -> bool {
    set.pinned.iter().all(|spec| {
        let (name, version) = spec.split_once("==").unwrap_or((spec, ""));
        let prefix = format!("{}-", name.replace('-', "_"));
        let found: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with(&prefix) && n.ends_with(".dist-info"))
            .collect();
        found.len() == 1 && found[0] == format!("{prefix}{version}.dist-info")
    })
}

fn install(set: &WheelSet, dir: &Path) -> Result {
    let parent = dir.parent().ok_or("toolchain folder has no parent")?;
    std::fs::create_dir_all(parent)?;
    let name = dir.file_name().ok_or("toolchain folder has no name")?.to_string_lossy().to_string();
    let tmp = parent.join(format!("{name}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    println!("toolchain: installing {} into {} ({})\n  {}", set.what, dir.display(), set.size, set.pinned.join(" "));
    let status = Command::new("python3")
        .args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--quiet", "--target"])
        .arg(&tmp)
        .args(set.pinned)
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .status()
        .map_err(|e| format!("could not run `python3 -m pip` ({e}): install Python 3 with pip"))?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(format!(
            "`python3 -m pip install --target {} {}` failed ({status}); check network access to PyPI \
             (or set B12X_NVCC / CUDA_HOME to an existing CUDA 13.0 toolkit)",
            tmp.display(),
            set.pinned.join(" ")
        )
        .into());
    }
    if let Err(e) = verify(set, &tmp.join(set.tool)) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    std::fs::write(tmp.join(STAMP), stamp_text(set))?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("could not replace {}: {e}", dir.display()))?;
    }
    std::fs::rename(&tmp, dir).map_err(|e| format!("could not move {} to {}: {e}", tmp.display(), dir.display()))?;
    Ok(())
}
