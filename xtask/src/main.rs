//! `cargo xtask <command>`: the project's developer commands (DESIGN.md §2, §7, §8).
//!
//! | command | what it does |
//! |---|---|
//! | `toolchain` | installs the pinned CUDA 13.0 compiler wheels into `.b12x/toolchain` (skips when present) |
//! | `test` | toolchain, then fmt check, clippy `-D warnings`, the whole test suite, rustdoc `-D warnings` |
//! | `prepare` | toolchain, release build of every kernel for every arch, kernel manifest table (fails on spills); autotunes the default plans when a GPU is present |
//! | `ops` | every linked op with its group, crate, dtypes and per-arch validation status |
//! | `gpu-bundle` | release test + bench binaries for the GPU's arch only, with `run.sh`, in `.gpu/bundle/` (≤ 64 MiB) |
//! | `bench` | runs the benchmarks (and the PyTorch peers) on a machine with a GPU |

mod bundle;
mod manifest;
mod profile;
mod toolchain;
mod util;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use util::{cargo, root, run_step, Result};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "b12x developer commands", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install the pinned CUDA 13.0 compiler wheels (fast no-op when already installed).
    Toolchain {
        /// Install into this folder instead of `<repo>/.b12x/toolchain`.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Reinstall even when the stamp matches.
        #[arg(long)]
        force: bool,
    },
    /// The CI gate: toolchain, fmt, clippy -D warnings, tests, rustdoc -D warnings.
    Test {
        /// Skip `cargo doc` (RUSTDOCFLAGS=-D warnings).
        #[arg(long)]
        no_doc: bool,
    },
    /// Build every kernel for every arch (release), print the kernel manifest, autotune on a GPU.
    Prepare {
        /// Do not run `cargo build --release --workspace` first (use the existing build).
        #[arg(long)]
        no_build: bool,
    },
    /// (internal) The GPU half of `prepare`: autotune the default profile plans in this process.
    #[command(hide = true)]
    PrepareGpu,
    /// List every linked op (name, group, crate, dtypes, archs with validation status).
    Ops {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Build the remote-GPU bundle (DESIGN.md §8) into `.gpu/bundle/`.
    GpuBundle {
        /// The GPU's arch (the bundle's kernels are built for this one only).
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        /// Bundle folder (default `<repo>/.gpu/bundle`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Only these packages' tests and benches (comma-separated, e.g.
        /// `b12x-core,b12x-attention`), for when the whole workspace exceeds the 64 MiB limit.
        #[arg(long, value_delimiter = ',')]
        packages: Vec<String>,
        /// Only these binaries, by their bundle names (comma-separated, e.g.
        /// `gpu_kv_append,bench_kv_append`): a build of just those targets, for one op's
        /// suite and bench (minutes less on a 2-core machine than every test and bench), built
        /// in the packages that own them (unless `--packages` names others), without the
        /// xtask binary (`run.sh` skips `prepare`).
        #[arg(long, value_delimiter = ',')]
        targets: Vec<String>,
    },
    /// Run the benchmarks on this machine's GPU (with PyTorch peers when importable).
    Bench {
        /// Fewer shapes (B12X_BENCH_QUICK=1) and fewer peer samples.
        #[arg(long)]
        quick: bool,
        /// Only these packages (default: every workspace package with benches).
        #[arg(short, long = "package")]
        packages: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Toolchain { dir, force } => toolchain::ensure(dir.as_deref(), force).map(|_| ()),
        Cmd::Test { no_doc } => test(no_doc),
        Cmd::Prepare { no_build } => prepare(no_build),
        Cmd::PrepareGpu => profile::autotune(),
        Cmd::Ops { json } => ops(json),
        Cmd::GpuBundle { arch, out, packages, targets } => bundle::gpu_bundle(&arch, out, &packages, &targets),
        Cmd::Bench { quick, packages } => bench(quick, &packages),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nxtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn test(no_doc: bool) -> Result {
    toolchain::ensure(None, false)?;
    let r = root();
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]).current_dir(&r);
    run_step("cargo fmt --all -- --check", &mut fmt).map_err(|e| format!("{e}\n  hint: run `cargo fmt --all`"))?;
    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]).current_dir(&r);
    run_step("cargo clippy --workspace --all-targets -- -D warnings", &mut clippy)?;
    let mut test = cargo();
    test.args(["test", "--workspace"]).current_dir(&r);
    run_step("cargo test --workspace", &mut test)?;
    if !no_doc {
        let mut doc = cargo();
        doc.args(["doc", "--workspace", "--no-deps"]).env("RUSTDOCFLAGS", "-D warnings").current_dir(&r);
        run_step("RUSTDOCFLAGS='-D warnings' cargo doc --workspace --no-deps", &mut doc)?;
    }
    println!("\nxtask test: all checks passed");
    Ok(())
}

fn prepare(no_build: bool) -> Result {
    toolchain::ensure(None, false)?;
    let r = root();
    if !no_build {
        let mut build = cargo();
        build.args(["build", "--release", "--workspace"]).current_dir(&r);
        run_step("cargo build --release --workspace", &mut build)?;
    }
    let manifests = manifest::collect(&util::target_dir().join("release"))?;
    let problems = manifest::print_and_check(&manifests, None);
    if !problems.is_empty() {
        return Err(format!("kernel manifest check failed:\n  {}", problems.join("\n  ")).into());
    }
    if !b12x_core::cuda_available() {
        println!("no CUDA device: skipping autotune (kernels built)");
        return Ok(());
    }
    // A child process, so cargo rebuilds xtask (and the op crates it links) against the kernels
    // just built: this process may predate the toolchain (clean clone).
    let mut gpu = cargo();
    gpu.args(["run", "--quiet", "-p", "xtask", "--", "prepare-gpu"]).current_dir(&r);
    run_step("autotune (cargo xtask prepare-gpu)", &mut gpu)
}

fn ops(json: bool) -> Result {
    let ops = b12x_core::list_ops();
    if json {
        println!("{}", serde_json::to_string_pretty(&ops)?);
        return Ok(());
    }
    if ops.is_empty() {
        println!("no ops linked into xtask (add the op crates to xtask/Cargo.toml, see xtask/src/profile.rs)");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = ops
        .iter()
        .map(|o| {
            let archs: Vec<String> = o
                .archs
                .iter()
                .map(|(a, v)| {
                    let s = match v {
                        b12x_core::Validation::Validated => "validated",
                        b12x_core::Validation::CompiledOnly => "compiled-only",
                    };
                    format!("{a}: {s}")
                })
                .collect();
            vec![o.name.to_string(), o.group.to_string(), o.krate.to_string(), o.dtypes.join("; "), archs.join(", ")]
        })
        .collect();
    util::print_table(&["op", "group", "crate", "dtypes", "archs"], &rows);
    Ok(())
}

fn bench(quick: bool, packages: &[String]) -> Result {
    if !b12x_core::cuda_available() {
        println!(
            "no CUDA device here: benchmarks run on the GPU machine.\n  \
             1. `cargo xtask gpu-bundle` (builds .gpu/bundle/, ≤ 64 MiB)\n  \
             2. copy .gpu/bundle/ to the GPU machine and run `bash bundle/run.sh OUTDIR` there\n     \
             (OUTDIR/results.tar.gz holds logs, peers.json and bench-results/)"
        );
        return Ok(());
    }
    toolchain::ensure(None, false)?;
    let r = root();
    let out = r.join("bench-results");
    std::fs::create_dir_all(&out)?;
    let peers_json = out.join("peers.json");
    let torch_ok = std::process::Command::new("python3")
        .args(["-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if torch_ok {
        let mut peers = std::process::Command::new("python3");
        peers.arg(r.join("bench/peers.py")).arg(&peers_json).current_dir(&r);
        if quick {
            peers.arg("--quick");
        }
        if let Err(e) = run_step("python3 bench/peers.py", &mut peers) {
            eprintln!("xtask bench: peers failed ({e}); continuing without peer timings");
        }
    } else {
        println!("python3 with CUDA-enabled torch not importable: benchmarks run without peers");
    }
    let mut cmd = cargo();
    cmd.args(["bench"]).current_dir(&r).env("B12X_BENCH_OUT", &out).env("B12X_COMMIT", util::commit());
    if packages.is_empty() {
        cmd.arg("--workspace").args(["--exclude", "xtask"]);
    } else {
        for p in packages {
            cmd.args(["-p", p]);
        }
    }
    cmd.arg("--benches");
    if peers_json.is_file() {
        cmd.env("B12X_PEER_JSON", &peers_json);
    }
    if quick {
        cmd.env("B12X_BENCH_QUICK", "1");
    }
    run_step("cargo bench --benches", &mut cmd)?;
    println!("results in {}", out.display());
    Ok(())
}
