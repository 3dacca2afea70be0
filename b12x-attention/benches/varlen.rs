//! Benchmark of `attention.varlen` prefill: one sequence of S ∈ {1024, 4096, 16384} tokens,
//! causal, and S = 4096 non-causal, with Llama-3-8B heads (H 32, Hkv 8, D 128), BF16, with the
//! method of DESIGN.md §7: one op call per CUDA graph replay, L2 flushed before each sample,
//! median of `bench::samples()`.
//!
//! Every config of `Query::configs()` is pinned and timed (rows `varlen_prefill/S{s}/{config}`),
//! next to the session's own choice (row `varlen_prefill/S{s}`: raced on the plan's timing
//! case, or cached, or the default with `B12X_AUTOTUNE=0`). FLOPs count `4·S²·H·D` (Q·Kᵀ and
//! P·V), halved for causal (DESIGN.md §7); bytes are the compulsory traffic q + k + v + o. The
//! op is compute-bound: the table's "% ceiling" column is of the HBM read ceiling, so the
//! fraction of the H200's measured `mma.sync` BF16 ceiling (~630 TFLOP/s, DESIGN.md §5) is
//! given in a note. Inputs are seeded random values of unit variance, like the peer's
//! `torch.randn` (the kernel skips the O rescale when no row maximum changed, so constant
//! inputs would time a faster path than real data takes); the oracle is checked by
//! `tests/gpu_varlen.rs`.
//! Peers come from `B12X_PEER_JSON` (bench/peers.py:
//! `torch.nn.functional.scaled_dot_product_attention` on `q [1, 32, S, 128]`,
//! `k`, `v [1, 8, S, 128]` BF16 with `is_causal` and `enable_gqa=True`), keyed
//! `varlen_prefill/S{s}` and `varlen_prefill/S4096_full`. `B12X_BENCH_QUICK=1` drops S = 16384.
//!
//! Run: `cargo bench -p b12x-attention --bench varlen` (rows go to `bench-results/varlen.{json,md}`).

use b12x_attention::paging::ErrorWord;
use b12x_attention::varlen::{self, Args, Query};
use b12x_core::bench::{samples, time_graph, BenchReport};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::testing::{gpu, random_bf16_bytes};
use b12x_core::{DType, Device, OpPlan, PreparationSession, Result, TensorMut, TensorRef};
use std::sync::Arc;

const SEQS: [usize; 3] = [1024, 4096, 16384];
/// S of the non-causal rows.
const FULL_S: usize = 4096;
const H: usize = 32;
const HKV: usize = 8;
const D: usize = 128;
/// The H200's measured `mma.sync` BF16 ceiling (DESIGN.md §5), TFLOP/s.
const MMA_CEILING_TFLOPS: f64 = 630.0;

fn main() -> Result<()> {
    let Some(dev) = gpu() else {
        eprintln!("varlen bench: no CUDA device, nothing to measure");
        return Ok(());
    };
    let quick = b12x_core::bench::quick();
    let mut report = BenchReport::new("varlen", &dev)?;
    report.note(
        "Prefill, one sequence of S tokens, Llama-3-8B heads (H 32, Hkv 8, D 128), BF16; bytes = q + k + v + o; FLOPs = \
         4·S²·H·D, halved for causal. Rows `…/<config>` pin one tile config each; the row without a suffix is the \
         session's selection (its source in brackets). Peer: SDPA (is_causal, enable_gqa) on q [1, 32, S, 128], k/v \
         [1, 8, S, 128] BF16.",
    );
    report.note(&format!(
        "Compute-bound: \"% ceiling\" is of the HBM read ceiling; the mma.sync BF16 ceiling of the H200 is \
         ~{MMA_CEILING_TFLOPS:.0} TFLOP/s (DESIGN.md §5), fractions of it in the last note."
    ));
    let mut fractions = Vec::new();
    for s in SEQS.into_iter().filter(|&s| !quick || s <= 4096) {
        bench_seq(&dev, &mut report, s, true, &mut fractions)?;
    }
    bench_seq(&dev, &mut report, FULL_S, false, &mut fractions)?;
    let line = format!("Fraction of the ~{MMA_CEILING_TFLOPS:.0} TFLOP/s mma.sync ceiling: {}.", fractions.join(", "));
    println!("{line}");
    report.note(&line);
    println!("wrote {}", report.write()?.display());
    Ok(())
}

fn bench_seq(
    dev: &Arc<Device>,
    report: &mut BenchReport,
    s: usize,
    causal: bool,
    fractions: &mut Vec<String>,
) -> Result<()> {
    let peer_case = if causal { format!("varlen_prefill/S{s}") } else { format!("varlen_prefill/S{s}_full") };
    let query = Query {
        heads: H,
        kv_heads: HKV,
        head_dim: D,
        dtype: DType::BF16,
        scale: 1.0 / (D as f32).sqrt(),
        causal,
        window_left: -1,
        sinks: false,
        max_batch: 1,
        max_tokens_q: s,
        max_tokens_k: s,
        max_seqlen_q: s,
    };
    // The session's selection, then every config pinned.
    let mut variants: Vec<Option<&str>> = vec![None];
    variants.extend(query.configs().iter().map(|c| Some(c.name)));
    let cases: Vec<(String, Option<&str>)> = variants
        .into_iter()
        .map(|pin| (pin.map_or_else(|| peer_case.clone(), |c| format!("{peer_case}/{c}")), pin))
        .filter(|(case, _)| b12x_core::bench::selected(case))
        .collect();
    if cases.is_empty() {
        return Ok(());
    }
    let st = dev.stream();
    let (q_bytes, kv_bytes) = (s * H * D * 2, s * HKV * D * 2);
    let (qx, kx, vx) = (
        random_bf16_bytes(st, 1, s * H * D)?,
        random_bf16_bytes(st, 2, s * HKV * D)?,
        random_bf16_bytes(st, 3, s * HKV * D)?,
    );
    let mut o = st.alloc_zeros::<u8>(q_bytes)?;
    let cu = st.clone_htod(&[0i32, s as i32])?;
    let mut err = ErrorWord::new(st)?;
    let raw = |c: &CudaSlice<u8>| -> Result<u64> { Ok(TensorRef::from_slice(c, &[c.len()])?.ptr()) };
    let (qp, kp, vp) = (raw(&qx)?, raw(&kx)?, raw(&vx)?);
    let op = TensorMut::from_slice(&mut o, &[q_bytes])?.ptr();
    let flops = 4.0 * (s * s * H * D) as f64 * if causal { 0.5 } else { 1.0 };
    let bytes = (2 * q_bytes + 2 * kv_bytes) as f64;
    for (case, pin) in cases {
        let plan = varlen::plan(&query, dev)?;
        let mut session = PreparationSession::new(dev)?;
        if let Some(config) = pin {
            session = session.with_autotune(false);
            session.pin(&plan, &plan.buckets()[0].label(), config);
        }
        let records = session.prepare(&[&plan])?;
        let config = records
            .last()
            .map(|r| if pin.is_some() { r.config.clone() } else { format!("{} ({:?})", r.config, r.source) })
            .unwrap_or_default();
        let mut call = |stream: &Arc<CudaStream>| -> Result<()> {
            let q_rows = [(H * D) as isize, D as isize, 1];
            let kv_rows = [(HKV * D) as isize, D as isize, 1];
            // SAFETY: every view lies inside its buffer as allocated above.
            let args = unsafe {
                Args {
                    q: TensorRef::from_raw(qp, &[s, H, D], &q_rows, DType::BF16)?,
                    k: TensorRef::from_raw(kp, &[s, HKV, D], &kv_rows, DType::BF16)?,
                    v: TensorRef::from_raw(vp, &[s, HKV, D], &kv_rows, DType::BF16)?,
                    sinks: None,
                    cu_seqlens_q: TensorRef::from_slice(&cu, &[2])?,
                    cu_seqlens_k: TensorRef::from_slice(&cu, &[2])?,
                    max_seqlen_q: Some(s),
                    o: TensorMut::from_raw(op, &[s, H, D], &q_rows, DType::BF16)?,
                    lse: None,
                    error: err.view()?,
                }
            };
            varlen::run(&plan, args, stream)
        };
        call(st)?;
        let times = time_graph(dev, samples(), &mut call)?;
        let row = report.add_vs(&case, &peer_case, &config, &times, bytes, flops);
        let pct = 100.0 * row.tflops / MMA_CEILING_TFLOPS;
        println!("{:<44} {:>8.1} TFLOP/s = {pct:.1}% of the mma.sync ceiling", row.case, row.tflops);
        fractions.push(format!("{} {pct:.1}%", row.case));
        let faults = err.read(st)?;
        if !faults.is_clear() {
            panic!("{case}: the error word is set: {faults}");
        }
        session.close();
    }
    Ok(())
}
