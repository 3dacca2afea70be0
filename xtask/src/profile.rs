//! WIRING POINT for the op crates: which plans `cargo xtask prepare` autotunes on a GPU, and
//! which crates `cargo xtask ops` lists. Adding an op crate = one dependency line in
//! `xtask/Cargo.toml` plus one line in each function below.

use crate::util::{print_table, Result};
use b12x_core::{Device, OpPlan, PreparationSession};
use std::sync::Arc;
// Linked for their `inventory` op registrations (`cargo xtask ops`).
use b12x_attention as _;
use b12x_gemm as _;
use b12x_norm as _;
use b12x_quant as _;

/// The default profile: the plans every op crate wants prepared (and tuned) on this device.
///
/// Wiring an op crate: add it to `[dependencies]` in `xtask/Cargo.toml` and extend `plans` with
/// its `<op>::default_profile_plans(device)?` here (b12x-norm: `rmsnorm`, `silu_and_mul`, b12x-gemm: `bf16_gemv`, `blockscaled::gemv`, b12x-quant: `mx`,
/// b12x-attention: `paged`, `varlen`).
pub fn default_profile_plans(device: &Arc<Device>) -> b12x_core::Result<Vec<Box<dyn OpPlan>>> {
    let mut plans: Vec<Box<dyn OpPlan>> = Vec::new();
    plans.extend(b12x_norm::rmsnorm::default_profile_plans(device)?);
    plans.extend(b12x_norm::silu_and_mul::default_profile_plans(device)?);
    plans.extend(b12x_gemm::bf16_gemv::default_profile_plans(device)?);
    plans.extend(b12x_gemm::blockscaled::gemv::default_profile_plans(device)?);
    plans.extend(b12x_quant::mx::default_profile_plans(device)?);
    plans.extend(b12x_attention::paged::default_profile_plans(device)?);
    plans.extend(b12x_attention::varlen::default_profile_plans(device)?);
    Ok(plans)
}

/// Prepares the default profile in a `PreparationSession` and prints every selection.
pub fn autotune() -> Result {
    let device = Device::new(0)?;
    println!("\n==> autotune on {} (sm_{}{}, {} SMs)", device.name(), device.cc().0, device.cc().1, device.sm_count());
    let plans = default_profile_plans(&device)?;
    if plans.is_empty() {
        println!("no profile plans wired (xtask/src/profile.rs): nothing to autotune");
        return Ok(());
    }
    let refs: Vec<&dyn OpPlan> = plans.iter().map(|p| p.as_ref()).collect();
    let mut session = PreparationSession::new(&device)?;
    let records = session.prepare(&refs)?;
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            vec![
                r.op.to_string(),
                r.query.clone(),
                r.bucket.clone(),
                r.config.clone(),
                format!("{:?}", r.source),
                format!("{:.1}", r.millis),
            ]
        })
        .collect();
    print_table(&["op", "query", "bucket", "config", "source", "ms"], &rows);
    println!(
        "{} plan(s), {} selection(s); cache: {}",
        plans.len(),
        records.len(),
        b12x_core::env::cache_dir().display()
    );
    Ok(())
}
