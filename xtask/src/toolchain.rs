//! `cargo xtask toolchain`: the pinned CUDA 13.0 compiler from PyPI (DESIGN.md §4).
//!
//! Installed with `python3 -m pip install --target <dir>` into a temporary sibling folder, checked
//! (`nvcc --version` must say 13.0), then moved into place, so an interrupted install never
//! leaves a half-filled toolchain behind. A stamp file records the pinned list; when nvcc exists
//! and the stamp matches, the command only re-checks `nvcc --version`.

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

/// nvcc inside a toolchain folder (b12x-build looks for `.b12x/toolchain/` + this).
const NVCC_REL: &str = "nvidia/cu13/bin/nvcc";
const STAMP: &str = ".b12x-toolchain-stamp";
const EXPECTED_RELEASE: &str = "release 13.0";

fn default_dir() -> PathBuf {
    root().join(".b12x/toolchain")
}

fn stamp_text() -> String {
    PINNED.join("\n") + "\n"
}

/// Runs `nvcc --version` and checks it reports CUDA 13.0. Returns the version line.
fn verify(nvcc: &Path) -> Result<String> {
    let out =
        Command::new(nvcc).arg("--version").output().map_err(|e| format!("could not run {}: {e}", nvcc.display()))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("`{} --version` failed:\n{text}", nvcc.display()).into());
    }
    let line = text.lines().find(|l| l.contains("release")).unwrap_or("").trim().to_string();
    if !line.contains(EXPECTED_RELEASE) {
        return Err(format!("{} is not CUDA 13.0 (`{line}`)", nvcc.display()).into());
    }
    Ok(line)
}

/// Makes sure the pinned toolchain is installed in `dir` (default `<repo>/.b12x/toolchain`) and
/// works. Returns the path of nvcc.
pub fn ensure(dir: Option<&Path>, force: bool) -> Result<PathBuf> {
    let dir = match dir {
        Some(d) if d.is_absolute() => d.to_path_buf(),
        Some(d) => std::env::current_dir()?.join(d),
        None => default_dir(),
    };
    let nvcc = dir.join(NVCC_REL);
    let stamp = dir.join(STAMP);
    let stamp_ok = std::fs::read_to_string(&stamp).is_ok_and(|s| s == stamp_text());
    if !force && nvcc.is_file() && stamp_ok {
        let v = verify(&nvcc)?;
        println!("toolchain: {} ({v})", nvcc.display());
        return Ok(nvcc);
    }
    if !force && nvcc.is_file() && wheels_match(&dir) {
        // Installed by hand with the README's pip line: adopt it (no download, no rebuild).
        let v = verify(&nvcc)?;
        std::fs::write(&stamp, stamp_text())?;
        println!("toolchain: {} ({v}; pinned wheels found, stamp written)", nvcc.display());
        return Ok(nvcc);
    }
    install(&dir)?;
    let v = verify(&nvcc)?;
    println!("toolchain: installed {} ({v})", nvcc.display());
    Ok(nvcc)
}

/// True when `dir` holds exactly the pinned version of every wheel (pip's `.dist-info` folders).
fn wheels_match(dir: &Path) -> bool {
    PINNED.iter().all(|spec| {
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

fn install(dir: &Path) -> Result {
    let parent = dir.parent().ok_or("toolchain folder has no parent")?;
    std::fs::create_dir_all(parent)?;
    let name = dir.file_name().ok_or("toolchain folder has no name")?.to_string_lossy().to_string();
    let tmp = parent.join(format!("{name}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    println!(
        "toolchain: installing the pinned CUDA 13.0 compiler into {} (~270 MB)\n  {}",
        dir.display(),
        PINNED.join(" ")
    );
    let status = Command::new("python3")
        .args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--quiet", "--target"])
        .arg(&tmp)
        .args(PINNED)
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .status()
        .map_err(|e| format!("could not run `python3 -m pip` ({e}): install Python 3 with pip"))?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(format!(
            "`python3 -m pip install --target {} {}` failed ({status}); check network access to PyPI \
             (or set B12X_NVCC / CUDA_HOME to an existing CUDA 13.0 toolkit)",
            tmp.display(),
            PINNED.join(" ")
        )
        .into());
    }
    if let Err(e) = verify(&tmp.join(NVCC_REL)) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    std::fs::write(tmp.join(STAMP), stamp_text())?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("could not replace {}: {e}", dir.display()))?;
    }
    std::fs::rename(&tmp, dir).map_err(|e| format!("could not move {} to {}: {e}", tmp.display(), dir.display()))?;
    Ok(())
}
