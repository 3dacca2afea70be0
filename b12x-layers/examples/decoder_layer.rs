//! One decode step of a Qwen3-8B-shaped dense layer from b12x ops, captured as one CUDA graph and
//! replayed while the contexts grow, checked against the CPU reference layer.
//!
//! ```sh
//! cargo run --release -p b12x-layers --example decoder_layer -- [bf16|block_fp8|nvfp4|all] [B] [steps] [fast]
//! ```
//!
//! Defaults: every weight format, B = 8 with contexts spread up to 8k, 4 steps, the default
//! `LayerOptions`; `fast` runs `LayerOptions::fast_decode(format, B)` (PDL, and for BF16 the
//! fused epilogues: six launches at B ≤ 8). What it does is
//! `b12x_layers::dense::decode_run` (the GPU test runs the same function): seeded weights, one
//! `PreparationSession` for all nine ops, `freeze()`, the step captured once, then per step a new
//! token per request (a new page where one fills), the graph replayed and compared bitwise with
//! the eager step, and the cosine difference against the reference printed.

use b12x_layers::dense::{cosine_bound, decode_run, Config, LayerOptions, WeightFormat};

fn main() -> b12x_core::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let formats: Vec<WeightFormat> = match args.first().map(String::as_str) {
        Some("bf16") => vec![WeightFormat::Bf16],
        Some("block_fp8") => vec![WeightFormat::BlockFp8],
        Some("nvfp4") => vec![WeightFormat::Nvfp4],
        _ => WeightFormat::ALL.to_vec(),
    };
    let b: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(8);
    let steps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4);
    if !b12x_core::cuda_available() {
        eprintln!("decoder_layer: no CUDA device; nothing to run");
        return Ok(());
    }
    let dev = b12x_core::Device::new(0)?;
    let cfg = Config::qwen3_8b();
    // Contexts spread over 1..8k; request 0 crosses a page boundary during the run.
    let contexts: Vec<usize> = (0..b).map(|i| if i == 0 { 8176 - steps / 2 } else { 1 + (i * 2741) % 8000 }).collect();
    for format in formats {
        let fast = args.get(3).is_some_and(|a| a == "fast");
        let options = if fast { LayerOptions::fast_decode(format, b) } else { LayerOptions::default() };
        let r = decode_run(&dev, &cfg, format, options, &contexts, steps, true, 7)?;
        println!(
            "{:>9}{} B={b}: replay == eager {:?}; 1 - cos(y) {:?}; 1 - cos(residual) {:?} (bound {:e}); new pages {}; free memory {} -> {}; faults {}; kernel resolutions after freeze {} (frozen throughout: {})",
            format.name(),
            if fast { " (fast_decode)" } else { "" },
            r.replay_equals_eager,
            r.y_cosine_diff.iter().map(|c| format!("{c:.2e}")).collect::<Vec<_>>(),
            r.residual_cosine_diff.iter().map(|c| format!("{c:.2e}")).collect::<Vec<_>>(),
            cosine_bound(format),
            r.new_pages,
            r.mem_free_before_after.0,
            r.mem_free_before_after.1,
            r.faults,
            r.resolutions_after_freeze,
            r.frozen_throughout
        );
    }
    Ok(())
}
