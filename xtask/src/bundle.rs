//! `cargo xtask gpu-bundle` (DESIGN.md §8): release test and bench binaries for one GPU arch,
//! stripped, with `run.sh` and `peers.py`, in one git-ignored folder of at most 64 MiB.
//!
//! Layout of the bundle:
//! ```text
//! run.sh  peers.py  COMMIT  ARCH  FILES.txt  kernel_manifest_<crate>.json
//! bin/gpu_<op>             GPU suites (libtest-mimic, harness = false)
//! bin/cpu_<crate>_<test>   CPU test targets of the op crates (and their lib unit tests: `_lib`)
//! bin/bench_<name>         bench targets (harness = false, run directly)
//! ```

use crate::util::{cargo, commit, mib, root, Result};
use crate::{manifest, toolchain};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Hard limit on the bundle (what the GPU machine accepts in one transfer).
pub const MAX_BYTES: u64 = 64 << 20;
/// Packages whose targets never go into the bundle (host tools).
const EXCLUDED: &[&str] = &["xtask", "b12x-build"];
const RUN_SH: &str = include_str!("../assets/run.sh");

struct Artifact {
    name: String,
    exe: PathBuf,
}

fn classify(pkg: &str, kinds: &[String], target: &str, is_test: bool) -> Option<String> {
    if kinds.iter().any(|k| k == "bench") {
        return Some(format!("bench_{target}"));
    }
    if kinds.iter().any(|k| k == "test") {
        if target.starts_with("gpu_") {
            return Some(target.to_string());
        }
        return Some(format!("cpu_{pkg}_{target}"));
    }
    if is_test && kinds.iter().any(|k| k == "lib" || k == "rlib") {
        return Some(format!("cpu_{pkg}_lib"));
    }
    None
}

/// Cargo's target selection for bundle names: `gpu_<op>` is the test target of that name,
/// `bench_<name>` the bench target `<name>`; empty: every test and bench.
fn target_args(targets: &[String]) -> Result<Vec<String>> {
    if targets.is_empty() {
        return Ok(vec!["--tests".into(), "--benches".into()]);
    }
    let mut args = Vec::new();
    for t in targets {
        if let Some(bench) = t.strip_prefix("bench_") {
            args.extend(["--bench".to_string(), bench.to_string()]);
        } else if t.starts_with("gpu_") {
            args.extend(["--test".to_string(), t.clone()]);
        } else {
            return Err(format!("--targets takes bundle names gpu_<op> or bench_<name>, got `{t}`").into());
        }
    }
    Ok(args)
}

/// Builds the bundle; `packages` (empty: the whole workspace) limits it to those packages and
/// `targets` (empty: every test and bench) to those binaries.
/// With `targets`, no xtask binary (`run.sh` then skips its `prepare` step) and, without
/// `packages`, only the packages that own them (so that the build compiles those packages'
/// kernels and their dependencies' only).
pub fn gpu_bundle(arch: &str, out: Option<PathBuf>, packages: &[String], targets: &[String]) -> Result {
    let target_args = target_args(targets)?;
    toolchain::ensure(None, false)?;
    let r = root();
    let num = arch.trim_start_matches("sm_").trim_end_matches('a');
    // (absolute: the build scripts that read B12X_KERNEL_CACHE run in their crates' folders)
    let host_target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => std::path::absolute(d)?,
        None => r.join("target"),
    };
    let target_dir = r.join("target").join(format!("bundle-sm{num}"));
    let out = out.unwrap_or_else(|| r.join(".gpu/bundle"));
    let owners;
    let packages = if packages.is_empty() && !targets.is_empty() {
        let mut meta = cargo();
        meta.args(["metadata", "--no-deps", "--format-version", "1"]).current_dir(&r);
        let o = meta.output()?;
        if !o.status.success() {
            return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&o.stderr)).into());
        }
        owners = owning_packages(&serde_json::from_slice(&o.stdout)?, targets)?;
        &owners[..]
    } else {
        packages
    };
    // The kernel cache of the host build (`cargo xtask` itself compiles every op crate's kernels):
    // with `B12X_CUDA_ARCHS` set to the bundle's arch for that build too, the bundle compiles
    // none of them again.
    let cache = std::env::var_os("B12X_KERNEL_CACHE")
        .filter(|v| !v.is_empty())
        .map(std::path::absolute)
        .transpose()?
        .unwrap_or_else(|| host_target.join("b12x-kernels"));

    println!(
        "\n==> B12X_CUDA_ARCHS={arch} cargo build --profile bundle {} {} (target {})",
        if packages.is_empty() { "--workspace".to_string() } else { format!("-p {}", packages.join(" -p ")) },
        target_args.join(" "),
        target_dir.display()
    );
    let mut cmd = cargo();
    cmd.args(["build", "--profile", "bundle"]);
    if packages.is_empty() {
        cmd.arg("--workspace");
        for p in EXCLUDED {
            cmd.args(["--exclude", p]);
        }
    } else {
        for p in packages.iter().filter(|p| !EXCLUDED.contains(&p.as_str())) {
            cmd.args(["-p", p]);
        }
    }
    cmd.args(&target_args)
        .arg("--message-format=json-render-diagnostics")
        .env("B12X_CUDA_ARCHS", arch)
        .env("B12X_KERNEL_CACHE", &cache)
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(&r)
        .stdout(Stdio::piped());
    let mut child = cmd.spawn()?;
    let mut artifacts: Vec<Artifact> = Vec::new();
    // This build's build scripts' OUT_DIRs: its kernel manifests (not older builds' of other
    // packages or commits that the same target folder still holds).
    let mut out_dirs: Vec<PathBuf> = Vec::new();
    let stdout = child.stdout.take().ok_or("no stdout from cargo")?;
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line?;
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if msg["reason"] == "build-script-executed" {
            if let Some(dir) = msg["out_dir"].as_str() {
                out_dirs.push(PathBuf::from(dir));
            }
            continue;
        }
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        let pkg = Path::new(msg["manifest_path"].as_str().unwrap_or(""))
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let kinds: Vec<String> = msg["target"]["kind"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str().map(String::from))
            .collect();
        let target = msg["target"]["name"].as_str().unwrap_or("").to_string();
        let is_test = msg["profile"]["test"].as_bool().unwrap_or(false);
        if let Some(name) = classify(&pkg, &kinds, &target, is_test) {
            artifacts.push(Artifact { name, exe: PathBuf::from(exe) });
        }
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("bundle build failed ({status})").into());
    }

    // The xtask binary itself: its `prepare-gpu` command is the GPU half of `cargo xtask prepare`
    // (run twice by run.sh to show the second process reuses the cached selections).
    if targets.is_empty() {
        let mut xt = cargo();
        xt.args(["build", "--profile", "bundle", "-p", "xtask", "--bin", "xtask"])
            .env("B12X_CUDA_ARCHS", arch)
            .env("B12X_KERNEL_CACHE", &cache)
            .env("CARGO_TARGET_DIR", &target_dir)
            .current_dir(&r);
        if !xt.status()?.success() {
            return Err("bundle build of xtask failed".into());
        }
        artifacts.push(Artifact { name: "b12x-xtask".into(), exe: target_dir.join("bundle").join("xtask") });
    }

    // Every kernel built for the bundle's arch, none spilling.
    let manifests = manifest::collect_from(&out_dirs)?;
    let problems = manifest::print_and_check(&manifests, Some(&[arch.to_string()]));
    if !problems.is_empty() {
        return Err(format!("kernel manifest check failed:\n  {}", problems.join("\n  ")).into());
    }

    artifacts.sort_by(|a, b| a.name.cmp(&b.name));
    artifacts.dedup_by(|a, b| a.name == b.name);
    if !artifacts.iter().any(|a| a.name.starts_with("gpu_")) {
        println!("warning: no gpu_* test targets in the workspace yet");
    }
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    let bin = out.join("bin");
    std::fs::create_dir_all(&bin)?;
    for a in &artifacts {
        std::fs::copy(&a.exe, bin.join(&a.name)).map_err(|e| format!("{}: {e}", a.exe.display()))?;
    }
    write_exec(&out.join("run.sh"), RUN_SH)?;
    std::fs::copy(r.join("bench/peers.py"), out.join("peers.py"))?;
    std::fs::write(out.join("COMMIT"), commit() + "\n")?;
    std::fs::write(out.join("ARCH"), format!("{arch}\n"))?;
    for (krate, (path, _)) in &manifests {
        std::fs::copy(path, out.join(format!("kernel_manifest_{krate}.json")))?;
    }

    let mut sizes = sizes_of(&out)?;
    let mut total: u64 = sizes.iter().map(|(_, s)| s).sum();
    if total > MAX_BYTES {
        // The `bundle` profile strips already; try harder before giving up.
        for a in &artifacts {
            let _ = Command::new("strip").arg("--strip-all").arg(bin.join(&a.name)).status();
        }
        sizes = sizes_of(&out)?;
        total = sizes.iter().map(|(_, s)| s).sum();
    }
    sizes.sort_by_key(|s| std::cmp::Reverse(s.1));
    let listing: Vec<String> = sizes.iter().map(|(p, s)| format!("{:>12}  {p}", mib(*s))).collect();
    std::fs::write(out.join("FILES.txt"), listing.join("\n") + "\n")?;
    println!("\n{}", listing.join("\n"));
    if total > MAX_BYTES {
        return Err(format!(
            "bundle is {} > {} limit ({}); the largest files are listed above",
            mib(total),
            mib(MAX_BYTES),
            out.display()
        )
        .into());
    }
    let shown = out.strip_prefix(&r).unwrap_or(&out).display().to_string();
    println!(
        "\nbundle: {shown} ({} binaries, {} of {} allowed)\n\
         on the GPU machine (from the folder holding {shown}):\n  \
         bash {shown}/run.sh OUTDIR [--quick] [--only tests,sanitizer,peers,bench]\n\
         results: OUTDIR/results.tar.gz (summary.txt, *.log, peers.json, bench-results/)",
        artifacts.len(),
        mib(total),
        mib(MAX_BYTES),
    );
    Ok(())
}

/// The workspace packages (from `cargo metadata --no-deps`) that own the bundle names `targets`
/// (`gpu_<op>`: a test target, `bench_<name>`: a bench target), in first-named order; a name no
/// package owns is an error.
fn owning_packages(metadata: &serde_json::Value, targets: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for t in targets {
        let (kind, name) = match t.strip_prefix("bench_") {
            Some(b) => ("bench", b),
            None => ("test", t.as_str()),
        };
        let owner = metadata["packages"].as_array().into_iter().flatten().find(|p| {
            p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|tg| tg["name"] == name && tg["kind"].as_array().into_iter().flatten().any(|k| k == kind))
        });
        let Some(pkg) = owner.and_then(|p| p["name"].as_str()) else {
            return Err(format!("no workspace package has the {kind} target `{name}` (bundle name `{t}`)").into());
        };
        if !out.iter().any(|o| o == pkg) {
            out.push(pkg.to_string());
        }
    }
    Ok(out)
}

fn write_exec(path: &Path, text: &str) -> Result {
    std::fs::write(path, text)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

fn sizes_of(dir: &Path) -> Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap_or(&p).display().to_string();
                out.push((rel, std::fs::metadata(&p)?.len()));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{classify, owning_packages, target_args};

    fn k(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn targets_select_cargo_targets() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(target_args(&[]).unwrap(), names(&["--tests", "--benches"]));
        assert_eq!(
            target_args(&names(&["gpu_kv_append", "bench_kv_append"])).unwrap(),
            names(&["--test", "gpu_kv_append", "--bench", "kv_append"])
        );
        assert!(target_args(&names(&["cpu_b12x-norm_lib"])).is_err());
    }

    #[test]
    fn targets_name_their_packages() {
        let meta = serde_json::json!({"packages": [
            {"name": "b12x-norm", "targets": [
                {"name": "b12x_norm", "kind": ["lib"]},
                {"name": "gpu_rmsnorm", "kind": ["test"]},
                {"name": "rmsnorm", "kind": ["bench"]}]},
            {"name": "b12x-moe", "targets": [
                {"name": "gpu_fused_moe", "kind": ["test"]},
                {"name": "fused_moe", "kind": ["bench"]},
                {"name": "rmsnorm", "kind": ["test"]}]}
        ]});
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let owners = |v: &[&str]| owning_packages(&meta, &names(v));
        assert_eq!(owners(&["gpu_fused_moe", "bench_fused_moe"]).unwrap(), names(&["b12x-moe"]));
        // (the bench `rmsnorm` is b12x-norm's; b12x-moe's `rmsnorm` is a test)
        assert_eq!(owners(&["bench_rmsnorm", "gpu_fused_moe"]).unwrap(), names(&["b12x-norm", "b12x-moe"]));
        assert!(owners(&["gpu_nothing"]).is_err());
        assert!(owners(&["bench_gpu_rmsnorm"]).is_err());
    }

    #[test]
    fn artifacts_are_named_by_role() {
        assert_eq!(classify("b12x-norm", &k(&["test"]), "gpu_rmsnorm", true).as_deref(), Some("gpu_rmsnorm"));
        assert_eq!(classify("b12x-norm", &k(&["test"]), "rmsnorm", true).as_deref(), Some("cpu_b12x-norm_rmsnorm"));
        assert_eq!(classify("b12x-norm", &k(&["lib"]), "b12x_norm", true).as_deref(), Some("cpu_b12x-norm_lib"));
        assert_eq!(classify("b12x-norm", &k(&["bench"]), "rmsnorm", false).as_deref(), Some("bench_rmsnorm"));
        assert_eq!(classify("b12x-norm", &k(&["lib"]), "b12x_norm", false), None);
    }
}
