//! Reads the kernel resource manifests b12x-build writes
//! (`<target>/<profile>/build/<pkg>-<hash>/out/b12x_kernel_manifest.json`) and checks them.

use crate::util::{print_table, Result};
use b12x_build::Manifest;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub const FILE: &str = "b12x_kernel_manifest.json";

/// The newest manifest of each crate under `profile_dir/build/`: crate name -> (path, manifest).
pub fn collect(profile_dir: &Path) -> Result<BTreeMap<String, (PathBuf, Manifest)>> {
    let build = profile_dir.join("build");
    let mut outs = Vec::new();
    for entry in std::fs::read_dir(&build).map_err(|e| format!("{}: {e} (nothing built yet?)", build.display()))? {
        outs.push(entry?.path().join("out"));
    }
    collect_from(&outs).map_err(|e| format!("{e} under {}", build.display()).into())
}

/// The newest manifest of each crate among the build scripts' `OUT_DIR`s `out_dirs`
/// (`<profile>/build/<pkg>-<hash>/out`; those without one are skipped): crate name -> (path,
/// manifest).
pub fn collect_from(out_dirs: &[PathBuf]) -> Result<BTreeMap<String, (PathBuf, Manifest)>> {
    let mut newest: BTreeMap<String, (SystemTime, PathBuf)> = BTreeMap::new();
    for out in out_dirs {
        let Some(dir) = out.parent() else {
            continue;
        };
        let path = out.join(FILE);
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let dir_name = dir.file_name().unwrap_or_default().to_string_lossy().to_string();
        let krate = dir_name.rsplit_once('-').map(|(n, _)| n.to_string()).unwrap_or(dir_name);
        let mtime = meta.modified()?;
        if newest.get(&krate).is_none_or(|(t, _)| mtime > *t) {
            newest.insert(krate, (mtime, path));
        }
    }
    let mut out = BTreeMap::new();
    for (krate, (_, path)) in newest {
        let text = std::fs::read_to_string(&path)?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        out.insert(krate, (path, m));
    }
    if out.is_empty() {
        return Err(format!("no {FILE}").into());
    }
    Ok(out)
}

/// Prints one row per (crate/unit, kernel, arch) and returns the problems found: kernels not
/// built, units without kernels, a cubin arch missing for a kernel, any spill. `expect_archs`
/// (when given) must equal each manifest's arch list.
pub fn print_and_check(
    manifests: &BTreeMap<String, (PathBuf, Manifest)>,
    expect_archs: Option<&[String]>,
) -> Vec<String> {
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for (krate, (path, m)) in manifests {
        if m.units.is_empty() {
            continue;
        }
        if !m.built {
            problems.push(format!(
                "{krate}: kernels not built (no nvcc when it was compiled; run `cargo xtask toolchain`) [{}]",
                path.display()
            ));
            continue;
        }
        if let Some(want) = expect_archs {
            if m.archs != want {
                problems.push(format!("{krate}: built for {:?}, expected {:?}", m.archs, want));
            }
        }
        let cubins = m.cubin_archs();
        for (unit, u) in &m.units {
            if u.kernels.is_empty() {
                problems.push(format!("{krate}/{unit}: no kernels in the ptxas log"));
            }
            for (kernel, per_arch) in &u.kernels {
                for arch in &cubins {
                    if !per_arch.contains_key(arch) {
                        problems.push(format!("{krate}/{unit}: {kernel} missing for {arch}"));
                    }
                }
                for (arch, r) in per_arch {
                    let spills = r.spill_store_bytes + r.spill_load_bytes;
                    if spills > 0 {
                        problems.push(format!(
                            "{krate}/{unit}: {kernel} spills on {arch} ({} B stores, {} B loads)",
                            r.spill_store_bytes, r.spill_load_bytes
                        ));
                    }
                    rows.push(vec![
                        format!("{krate}/{unit}"),
                        kernel.clone(),
                        arch.clone(),
                        r.registers.to_string(),
                        r.smem_bytes.to_string(),
                        r.stack_bytes.to_string(),
                        if spills > 0 {
                            format!("{}/{} SPILL", r.spill_store_bytes, r.spill_load_bytes)
                        } else {
                            "0".into()
                        },
                    ]);
                }
            }
        }
    }
    print_table(&["crate/unit", "kernel", "arch", "registers", "smem (B)", "stack (B)", "spills (st/ld B)"], &rows);
    println!("{} kernel builds in {} crate(s)", rows.len(), manifests.len());
    problems
}
