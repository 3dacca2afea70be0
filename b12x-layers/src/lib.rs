//! `b12x-layers`: model layers composed from b12x ops, the way an engine composes them.
//!
//! [`dense`] is a Llama / Qwen-style dense decoder layer's **decode step** over a paged KV cache:
//!
//! ```text
//! residual ← x + residual;  h = rmsnorm(residual) · w_ln1           norm.rmsnorm (fused add)
//! qkv = h · W_qkvᵀ                                                   gemm.bf16_gemv | gemm.blockscaled
//! rope(q, k) at position L_b − 1                                     attention.rope (in place)
//! k, v → their pages                                                 attention.kv_append
//! o = attention(q, paged K/V)                                        attention.paged
//! residual ← o · W_oᵀ + residual;  h = rmsnorm(residual) · w_ln2    gemm.* + norm.rmsnorm
//! y = (silu(h · W_gateᵀ) · (h · W_upᵀ)) · W_downᵀ                   gemm.* + activation.silu_and_mul + gemm.*
//! ```
//!
//! with BF16, block-FP8 (128 × 128, f32 scales; W8A16) or NVFP4 (W4A16) weights, every plan
//! prepared by one session, frozen, and the whole step capturable as one CUDA graph that replays
//! while contexts grow (lengths, positions and page tables are device tensors the host updates
//! between replays). [`reference`] is the same layer on the CPU, composed from the ops' oracles.
//!
//! `examples/decoder_layer.rs` runs it (`cargo run --release -p b12x-layers --example
//! decoder_layer`), `tests/gpu_decoder_layer.rs` checks it against the reference, and
//! `benches/decoder_layer.rs` times the captured step, each op and the read ceiling.

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
