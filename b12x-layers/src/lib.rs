//! `b12x-layers`: model layers composed from b12x ops, the way an engine composes them.
//!
//! [`dense`] is a Llama / Qwen-style dense decoder layer's **decode step** over a paged KV cache:
//!
//! ```text
//! residual ← x + residual;  h = rmsnorm(residual) · w_ln1           norm.rmsnorm (fused add)
//! qkv = h · W_qkvᵀ                                                   gemm.bf16_gemv | gemm.blockscaled
//! rope(q) in place; rope(k), v → their pages (position L_b − 1)     attention.rope_kv_append
//!                                                                    (attention.rope + attention.kv_append, one launch)
//! o = attention(q, paged K/V)                                        attention.paged
//! residual ← o · W_oᵀ + residual;  h = rmsnorm(residual) · w_ln2    gemm.* + norm.rmsnorm
//! y = (silu(h · W_gateᵀ) · (h · W_upᵀ)) · W_downᵀ                   gemm.* + activation.silu_and_mul + gemm.*
//!                                                                    (fuse_silu: the activation inside the down GEMV;
//!                                                                     gate_up_silu: in the gate/up GEMV's epilogue)
//! ```
//!
//! with BF16, block-FP8 (128 × 128, f32 scales; W8A16) or NVFP4 (W4A16) weights, every plan
//! prepared by one session, frozen, and the whole step capturable as one CUDA graph that replays
//! while contexts grow (lengths, positions and page tables are device tensors the host updates
//! between replays). [`reference`](mod@reference) is the same layer on the CPU, composed from the ops' oracles.
//!
//! `examples/decoder_layer.rs` runs it (`cargo run --release -p b12x-layers --example
//! decoder_layer`), `tests/gpu_decoder_layer.rs` checks it against the reference, and
//! `benches/decoder_layer.rs` times the captured step, each op and the read ceiling.
//!
//! ```no_run
//! use b12x_core::{Device, PreparationSession};
//! use b12x_layers::dense::{Batch, Capacity, Config, HostWeights, Layer, WeightFormat};
//!
//! fn main() -> b12x_core::Result<()> {
//!     let dev = Device::new(0)?;
//!     let (cfg, format) = (Config::qwen3_8b(), WeightFormat::Nvfp4);
//!     let p = cfg.page_size;
//!     let cap = Capacity { max_batch: 8, max_pages: 8192 / p, num_pages: 8 * 8192 / p };
//!     let weights = HostWeights::random(&cfg, format, 7)?.upload(dev.stream())?;
//!     let layer = Layer::new(&cfg, format, cap, &dev)?; // eight plans: nothing allocated yet
//!     let mut session = PreparationSession::new(&dev)?;
//!     session.prepare(&layer.plans())?; // loads and tunes every op once
//!     session.freeze(); // from here on a late kernel resolution is an error
//!     let contexts = [1000, 4000, 17]; // tokens already cached (by prefill) per request
//!     let mut state = layer.state(dev.stream(), contexts.len())?;
//!     let mut batch = Batch::new(&contexts, p, cap.max_pages, cap.num_pages, 1)?;
//!     let graph = session.capture(dev.stream(), |s| layer.step(&weights, &mut state, s))?;
//!     for _ in 0..4 {
//!         batch.advance()?; // one new token per request; a new page where one fills
//!         state.upload_batch(&batch, dev.stream())?; // lengths, positions, page table
//!         // … write this step's x and residual into state.x / state.residual …
//!         // SAFETY: the graph replays `state`'s and `weights`' buffers, alive here.
//!         unsafe { graph.launch() }?; // the whole step: one graph, no allocation, no sync
//!         // … read state.y and state.residual …
//!     }
//!     Ok(())
//! }
//! ```
//!
//! **Validated on the H200** (`bench-results/2026-12-04-h200-c/`; last run on this session's
//! kernels: `bench-results/2026-12-04-h200-e/call6`): `tests/gpu_decoder_layer.rs`
//! 21/21 — B ∈ {1, 8, 64} with contexts up to 8k, every format, also with PDL launches and 8
//! attention splits; per step, graph replay bitwise equal to the eager step, `1 − cos` against
//! the reference 1.8–4.8e-6 for `y` and 0.2–8e-8 for `residual` (bound 1e-4, [`dense::cosine_bound`]),
//! free device memory unchanged over the steps, no fault bit; compute-sanitizer memcheck clean
//! on the reduced profile (B ∈ {1, 8}, 2 steps).
//!
//! **Speed** (`benches/decoder_layer.rs`, one graph per step, L2 flushed;
//! `bench-results/2026-12-04-h200-e/`, `call7` every format and batch, `call8` B = 1 at the final
//! commit): at B = 1, 4k context, the BF16 step takes 120.8 µs = 71.6% of the read ceiling for
//! its 403 MB (weights + KV; the read probe on those bytes: 96%) with the default options and
//! 115.6 µs = **74.8%** with `LayerOptions { pdl: true, .. }` (114.3 µs = 75.7% in `call7`);
//! four layers' steps in one graph (the `step_x4` row, each layer its own weights and cache: a
//! decode graph's steady state) 113.5 µs = 76.1% per layer (112.7 = 76.8%). The issue's 80%
//! target (≤ 108.1 µs) is missed by 3–5 points. Inside the PDL step (the `prefix/` rows, the
//! step's first k ops in one graph): the graph's start and the first add+rmsnorm 4.3 µs, qkv
//! 13.9 µs (10.8 at the ceiling), rope_kv_append 0.7, attention 11.6 (3.6), o_proj 9.1 (7.2), the
//! second add+rmsnorm 1.6, gate_up 46.6 (43.3), silu_and_mul 1.8, down 24.5 (21.6). Timing every
//! candidate config of the qkv, o_proj and down GEMVs inside the step (`B12X_LAYER_SWEEP`) found
//! none more than 0.73 µs better than the session's own race (`call5`). B = 8: 142.0 µs = 78.7%
//! (PDL). B = 64 at 2k: 356.4 µs = 55.6% (the M = 64 GEMVs run at 28–41% of the ceiling; PDL is
//! 7% slower there). Block FP8 / NVFP4 (W8A16 / W4A16) at B = 1: 104.6 / 80.3 µs with PDL and 8
//! splits (43.1% / 33.6% of their smaller byte counts: the dequantizing decode kernels of
//! `gemm.blockscaled` run at 40–75% of the ceiling on SM90 and have no PDL launch).
//! Session 52 (`bench-results/2026-12-06-h200-c/` call 5, the H200): with
//! `LayerOptions { pdl, gate_up_silu, rope_in_qkv, norm2_in_o_proj, .. }` (the bench's
//! `_pdl_gs_rq_n2` rows) the B = 1 × 4k BF16 step is 110.2–110.8 µs = 78.1–78.5% and `step_x4`
//! 107.5–107.9 µs = **80.2–80.6%** per layer (the target, ≤ 108.1 µs, met in the steady-state
//! row, missed by 2.1–2.7 µs in the single-layer graph), against 113.7–114.6 / 111.3–111.4 for
//! `_pdl_gs` in the same job. `LayerOptions::fast_decode(format, max_batch)` returns those
//! options (BF16, B ≤ 8; PDL + `gate_up_silu` above 8 rows, PDL alone for block-scaled
//! weights). Session 53 (`bench-results/2026-12-06-h200-d/`, an H100): norm 1 folded into the
//! QKV projection as an rrms scale too (`FoldNorms::FirstScale`, five launches) takes 0.2–1.6 µs
//! per layer off `step_x4` but makes the single-layer graph 6.4 µs slower: not in
//! `fast_decode`.
//! Session 39 (`bench-results/2026-12-04-h200-f/`, a slower machine: ceiling 4.56 TB/s): PDL
//! step 116.5 µs, `step_x4` 114.5; the attention with 16 splits (through scratch, 3 or 6 stages)
//! instead of 8 in a cluster added 0.9–2.1 µs to the step, so the default stays.
//!
//! `LayerOptions::fuse_silu` (BF16, B ≤ 8) folds `activation.silu_and_mul` into the down
//! projection's x load (`gemm.bf16_gemv`'s `XAct::SiluMul`): eight launches per step. Validated
//! on the H200 (`tests/gpu_decoder_layer.rs`'s `fused_silu` trials, also under memcheck) and
//! slower: B = 1 × 4k BF16 PDL step 136.88 µs against 116.42 without it (the down GEMV 35.65
//! against 27.97 µs: each of its row blocks recomputes the activation;
//! `bench-results/2026-12-04-h200-g/call1`), so it stays off by default.
//!
//! `LayerOptions::gate_up_silu` (BF16) folds it into the gate/up projection's epilogue instead
//! (`gemm.bf16_gemv`'s `YAct::SiluMul`, the weight's rows interleaved by
//! `Layer::upload_weights`): each output is formed once, by the thread that finishes its gate
//! and up sums, and the step launches eight ops. With PDL it took the B = 1 × 4k BF16 step from
//! 115.22 to 112.51 µs (76.8% of the read ceiling; four layers in one graph 110.09 µs = 78.5%),
//! B = 8 from 141.58 to 138.80 µs (80.4%) (`bench-results/2026-12-04-h200-g/`, calls 3–4). It
//! is an option, not the default: it needs the interleaved weight layout and BF16 weights. The attention's 8-warp decode tiles
//! (`attention.paged`'s `WIDE_WARPS`) are its default at these contexts since session 40.

pub mod dense;
pub mod reference;

/// Runs `f(i)` for `i in 0..n` on all cores (std threads, contiguous chunks); the results in order.
pub fn par_map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(n.max(1));
    let chunk = n.div_ceil(threads.max(1)).max(1);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|lo| s.spawn(move || (lo..(lo + chunk).min(n)).map(f).collect::<Vec<T>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("worker panicked")).collect()
    })
}
