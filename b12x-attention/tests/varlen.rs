//! CPU tests of `attention.varlen`: query validation, the config table (shared memory within
//! SM120's 99 KB, symbol names against the built manifest), and the oracle on hand-computed
//! cases: visible key ranges (bottom-right causal, `q_len < k_len`, `q_len > k_len`, windows,
//! non-causal), one key, equal logits, GQA head mapping, sinks-only rows, empty sequences,
//! padding rows, bad packings, and agreement with the paged oracle on a contiguous cache.

use b12x_attention::paged::reference as paged_ref;
use b12x_attention::paging::{HostBatch, FAULT_QUERY_LAYOUT};
use b12x_attention::varlen::reference::{self, visible, Geometry, HostPacking};
use b12x_attention::varlen::{Query, HEAD_DIMS};
use b12x_core::testing::{check_manifest, uniform};
use b12x_core::{DType, Error};
use rstest::rstest;

/// SM120's shared memory per CTA (99 KB).
const SM120_SMEM: u32 = 99 * 1024;

fn query() -> Query {
    Query {
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        dtype: DType::BF16,
        scale: 0.088,
        causal: true,
        window_left: -1,
        sinks: false,
        max_batch: 8,
        max_tokens_q: 4096,
        max_tokens_k: 4096,
        max_seqlen_q: 4096,
    }
}

#[rstest]
#[case::dtype_f32(Query { dtype: DType::F32, ..query() }, "dtype")]
#[case::dtype_e4m3(Query { dtype: DType::E4M3, ..query() }, "dtype")]
#[case::head_dim_96(Query { head_dim: 96, ..query() }, "head_dim")]
#[case::head_dim_512(Query { head_dim: 512, ..query() }, "head_dim")]
#[case::heads_not_multiple(Query { heads: 30, ..query() }, "heads")]
#[case::kv_heads_zero(Query { kv_heads: 0, ..query() }, "heads")]
#[case::heads_zero(Query { heads: 0, ..query() }, "heads")]
#[case::heads_past_grid_x(Query { heads: 65536, kv_heads: 1, ..query() }, "heads")]
#[case::scale_zero(Query { scale: 0.0, ..query() }, "scale")]
#[case::scale_negative(Query { scale: -0.1, ..query() }, "scale")]
#[case::scale_nan(Query { scale: f32::NAN, ..query() }, "scale")]
#[case::scale_inf(Query { scale: f32::INFINITY, ..query() }, "scale")]
#[case::window_minus_2(Query { window_left: -2, ..query() }, "window_left")]
#[case::max_batch_zero(Query { max_batch: 0, ..query() }, "max_batch")]
#[case::max_tokens_q_zero(Query { max_tokens_q: 0, ..query() }, "max_tokens_q")]
#[case::max_tokens_k_zero(Query { max_tokens_k: 0, ..query() }, "max_tokens_k")]
#[case::max_seqlen_q_zero(Query { max_seqlen_q: 0, ..query() }, "max_seqlen_q")]
#[case::max_seqlen_q_past_tokens(Query { max_seqlen_q: 4097, ..query() }, "max_seqlen_q")]
#[case::max_batch_past_grid_z(Query { max_batch: 65536, ..query() }, "max_batch")]
#[case::tokens_q_past_i32_indices(Query { max_tokens_q: 1 << 20, max_seqlen_q: 1, ..query() }, "max_tokens_q")]
#[case::tokens_k_past_i32_indices(Query { max_tokens_k: 1 << 22, ..query() }, "max_tokens_k")]
fn bad_queries_name_the_field(#[case] q: Query, #[case] field: &str) {
    match q.validate() {
        Err(Error::InvalidQuery { field: f, .. }) => assert_eq!(f, field),
        other => panic!("expected InvalidQuery({field}), got {other:?}"),
    }
}

#[rstest]
#[case::llama3_8b(query())]
#[case::qwen3_30b_a3b(Query { kv_heads: 4, ..query() })]
#[case::gpt_oss_120b(Query { heads: 64, head_dim: 64, window_left: 127, sinks: true, ..query() })]
#[case::mqa_d256(Query { heads: 8, kv_heads: 1, head_dim: 256, causal: false, ..query() })]
#[case::window_zero(Query { window_left: 0, ..query() })]
#[case::f16(Query { dtype: DType::F16, ..query() })]
#[case::max_batch_65535(Query { max_batch: 65535, ..query() })]
#[case::seqlen_one(Query { max_seqlen_q: 1, ..query() })]
fn good_queries_validate(#[case] q: Query) {
    q.validate().unwrap();
}

#[test]
fn config_table_names_match_tiles_and_fit_sm120_shared_memory() {
    let mut symbols = Vec::new();
    for d in HEAD_DIMS {
        for dtype in [DType::BF16, DType::F16] {
            let q = Query { head_dim: d, dtype, ..query() };
            q.validate().unwrap();
            let configs = q.configs();
            assert!(!configs.is_empty(), "D = {d}: no config");
            for (i, c) in configs.iter().enumerate() {
                // The name spells the tile; names are unique within a head dim.
                assert_eq!(c.name, format!("m{}_n{}_w{}", c.bm, c.bn, c.warps), "D = {d}");
                assert!(configs[..i].iter().all(|o| o.name != c.name), "D = {d}: {} twice", c.name);
                // Each warp owns whole m16 MMA row blocks; BN is whole k16 MMA steps.
                assert!(c.warps > 0 && c.bm % (16 * c.warps) == 0 && c.bn % 16 == 0, "{}", c.name);
                // ≤ 99 KB per CTA: the kernels run on SM120.
                let smem = q.smem_bytes(c);
                assert!(smem <= SM120_SMEM, "{}: {smem} bytes > {SM120_SMEM}", q.symbol(c));
                // The formula: Q block + 2 stages of K and V tiles, 2-byte elements.
                assert_eq!(smem as usize, (c.bm + 4 * c.bn) * d * 2);
                assert_eq!(q.symbol(c), format!("b12x_varlen_{}_d{d}_{}", dtype.name(), c.name));
                symbols.push(q.symbol(c));
            }
        }
    }
    check_manifest(b12x_attention::KERNEL_MANIFEST, &symbols).unwrap();
}

#[rstest]
#[case::bf16_d128(DType::BF16, 128, "b12x_varlen_bf16_d128_")]
#[case::f16_d64(DType::F16, 64, "b12x_varlen_f16_d64_")]
#[case::bf16_d256(DType::BF16, 256, "b12x_varlen_bf16_d256_")]
fn symbol_names(#[case] dtype: DType, #[case] d: usize, #[case] prefix: &str) {
    let q = Query { dtype, head_dim: d, ..query() };
    let c = q.configs()[0];
    assert_eq!(q.symbol(&c), format!("{prefix}m{}_n{}_w{}", c.bm, c.bn, c.warps));
}

// ---------------------------------------------------------------------------------------------
// visible()

#[rstest]
// Bottom-right causal, q_len = k_len: row i sees keys 0..=i.
#[case::causal_square_first(0, 4, 4, true, -1, 0..1)]
#[case::causal_square_last(3, 4, 4, true, -1, 0..4)]
// q_len < k_len (chunked prefill): the 2 queries are positions 3 and 4 of 5 keys.
#[case::causal_chunk_row0(0, 2, 5, true, -1, 0..4)]
#[case::causal_chunk_row1(1, 2, 5, true, -1, 0..5)]
// q_len > k_len: positions −3, −2, −1 see nothing; position 0 sees key 0, position 1 both.
#[case::causal_longer_q_row0(0, 5, 2, true, -1, 0..0)]
#[case::causal_longer_q_row2(2, 5, 2, true, -1, 0..0)]
#[case::causal_longer_q_row3(3, 5, 2, true, -1, 0..1)]
#[case::causal_longer_q_row4(4, 5, 2, true, -1, 0..2)]
// Window W: keys t − W ..= t.
#[case::window_2(4, 6, 6, true, 2, 2..5)]
#[case::window_2_near_start(1, 6, 6, true, 2, 0..2)]
#[case::window_0_is_the_diagonal(3, 6, 6, true, 0, 3..4)]
#[case::window_chunk(0, 2, 10, true, 3, 5..9)]
// No keys at all.
#[case::causal_no_keys(0, 3, 0, true, -1, 0..0)]
#[case::noncausal_no_keys(2, 3, 0, false, -1, 0..0)]
// Non-causal: every key, whatever the position.
#[case::noncausal(0, 3, 4, false, -1, 0..4)]
#[case::noncausal_longer_q(0, 5, 2, false, -1, 0..2)]
// Non-causal with a window: keys p ≥ t − W, up to the end of the sequence.
#[case::noncausal_window(2, 3, 4, false, 1, 2..4)]
#[case::noncausal_window_negative_position(0, 5, 2, false, 1, 0..2)]
fn visible_ranges(
    #[case] i: usize,
    #[case] q_len: usize,
    #[case] k_len: usize,
    #[case] causal: bool,
    #[case] window: i32,
    #[case] want: std::ops::Range<usize>,
) {
    assert_eq!(visible(i, q_len, k_len, causal, window), want);
}

// ---------------------------------------------------------------------------------------------
// The oracle on hand-computed cases.

fn geo(heads: usize, kv_heads: usize, head_dim: usize, scale: f32, causal: bool, window_left: i32) -> Geometry {
    Geometry { heads, kv_heads, head_dim, scale, causal, window_left }
}

fn pack<'a>(cu_q: &'a [i32], cu_k: &'a [i32], total_q: usize, total_k: usize) -> HostPacking<'a> {
    HostPacking { cu_seqlens_q: cu_q, cu_seqlens_k: cu_k, total_q, total_k }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

#[test]
fn a_single_key_gives_its_value_and_its_logit() {
    // Two sequences of one query and one key each (D = 4, H = 2, Hkv = 1): each query sees
    // only its own sequence's key: o = v, lse = scale · q·k.
    let (h, d, scale) = (2, 4, 0.5f32);
    let q = uniform(1, 2 * h * d, -1.0, 1.0);
    let k = uniform(2, 2 * d, -1.0, 1.0);
    let v = uniform(3, 2 * d, -1.0, 1.0);
    for causal in [true, false] {
        let out =
            reference::varlen(&pack(&[0, 1, 2], &[0, 1, 2], 2, 2), &geo(h, 1, d, scale, causal, -1), &q, &k, &v, None);
        assert_eq!(out.faults, 0);
        for row in 0..2 {
            for head in 0..h {
                let idx = row * h + head;
                assert!(out.written[idx]);
                let dot: f64 = (0..d).map(|e| f64::from(q[idx * d + e]) * f64::from(k[row * d + e])).sum();
                assert!(close(out.lse[idx], f64::from(scale) * dot), "{} vs {}", out.lse[idx], f64::from(scale) * dot);
                for e in 0..d {
                    assert!(close(out.o[idx * d + e], f64::from(v[row * d + e])), "row {row} head {head} e {e}");
                }
            }
        }
    }
}

/// K rows: `k = (1, 0)`, `v = (j, −j)` for packed key row j (D = 2, one KV head).
fn indexed_kv(rows: usize) -> (Vec<f32>, Vec<f32>) {
    let k = (0..rows).flat_map(|_| [1.0, 0.0]).collect();
    let v = (0..rows).flat_map(|j| [j as f32, -(j as f32)]).collect();
    (k, v)
}

#[test]
fn equal_logits_average_the_visible_values() {
    // q = 0: every logit is 0, so o = mean of the visible v and lse = ln(#keys).
    // Sequence 0: 4 queries, 6 keys (rows 0..6), causal: query i sees keys 0..=i+2.
    // Sequence 1: 3 queries, 3 keys (rows 6..9): query i sees keys 6..=6+i.
    let (k, v) = indexed_kv(9);
    let q = vec![0.0f32; 7 * 2];
    let out = reference::varlen(&pack(&[0, 4, 7], &[0, 6, 9], 7, 9), &geo(1, 1, 2, 1.0, true, -1), &q, &k, &v, None);
    assert_eq!(out.faults, 0);
    let want = [(3, 1.0), (4, 1.5), (5, 2.0), (6, 2.5), (1, 6.0), (2, 6.5), (3, 7.0)];
    for (row, &(n, mean)) in want.iter().enumerate() {
        assert!(
            close(out.o[2 * row], mean) && close(out.o[2 * row + 1], -mean),
            "row {row}: {:?}",
            &out.o[2 * row..][..2]
        );
        assert!(close(out.lse[row], (n as f64).ln()), "row {row}: lse {}", out.lse[row]);
    }
    // Non-causal: every query of a sequence sees all of its keys.
    let out = reference::varlen(&pack(&[0, 4, 7], &[0, 6, 9], 7, 9), &geo(1, 1, 2, 1.0, false, -1), &q, &k, &v, None);
    for row in 0..7 {
        let (n, mean) = if row < 4 { (6, 2.5) } else { (3, 7.0) };
        assert!(close(out.o[2 * row], mean) && close(out.lse[row], (n as f64).ln()), "row {row}");
    }
    // Window 1: query i of sequence 0 (position i + 2) sees keys i+1 ..= i+2.
    let out = reference::varlen(&pack(&[0, 4, 7], &[0, 6, 9], 7, 9), &geo(1, 1, 2, 1.0, true, 1), &q, &k, &v, None);
    for row in 0..4 {
        assert!(close(out.o[2 * row], row as f64 + 1.5) && close(out.lse[row], 2f64.ln()), "row {row}");
    }
}

#[test]
fn query_heads_read_their_kv_head() {
    // H = 4, Hkv = 2: heads 0, 1 read KV head 0 (v = 10), heads 2, 3 KV head 1 (v = 20).
    let (h, hkv, d) = (4, 2, 2);
    let k = vec![1.0f32; 3 * hkv * d];
    let v: Vec<f32> = (0..3).flat_map(|_| [10.0, 10.0, 20.0, 20.0]).collect();
    let q = vec![0.0f32; 3 * h * d];
    let out = reference::varlen(&pack(&[0, 3], &[0, 3], 3, 3), &geo(h, hkv, d, 1.0, true, -1), &q, &k, &v, None);
    for row in 0..3 {
        for head in 0..h {
            let want = if head < 2 { 10.0 } else { 20.0 };
            assert!(close(out.o[(row * h + head) * d], want), "row {row} head {head}");
        }
    }
}

#[test]
fn rows_without_keys_are_zero_with_the_sink_as_lse() {
    // Causal, 3 queries, 1 key: positions −2, −1 see nothing; position 0 sees key 0.
    let (k, mut v) = indexed_kv(1);
    v[0] = 4.0;
    let q = vec![0.0f32; 3 * 2];
    let sink32 = 0.7f32;
    let out =
        reference::varlen(&pack(&[0, 3], &[0, 1], 3, 1), &geo(1, 1, 2, 1.0, true, -1), &q, &k, &v, Some(&[sink32]));
    let sink = f64::from(sink32);
    for row in 0..2 {
        assert!(out.written[row]);
        assert_eq!((out.o[2 * row], out.o[2 * row + 1]), (0.0, 0.0), "row {row}");
        assert!(close(out.lse[row], sink), "row {row}: lse {}", out.lse[row]);
    }
    // Row 2: one key of logit 0 against the sink: weight 1 / (1 + e^σ), lse = ln(1 + e^σ).
    let w = 1.0 / (1.0 + sink.exp());
    assert!(close(out.o[4], 4.0 * w), "{:?}", out.o);
    assert!(close(out.lse[2], (1.0 + sink.exp()).ln()));
    // Without sinks the empty rows have lse = −inf (and o = 0), the last row sees its key.
    let out = reference::varlen(&pack(&[0, 3], &[0, 1], 3, 1), &geo(1, 1, 2, 1.0, true, -1), &q, &k, &v, None);
    for row in 0..2 {
        assert!(out.written[row] && out.o[2 * row] == 0.0 && out.lse[row] == f64::NEG_INFINITY);
    }
    assert!(close(out.o[4], 4.0) && close(out.lse[2], 0.0));
}

#[test]
fn a_sink_joins_the_denominator_only() {
    // Two keys with logits 0 and a sink σ = 0: each key's weight is 1/3.
    let (k, v) = indexed_kv(2);
    let out = reference::varlen(
        &pack(&[0, 1], &[0, 2], 1, 2),
        &geo(1, 1, 2, 1.0, false, -1),
        &[0.0, 0.0],
        &k,
        &v,
        Some(&[0.0]),
    );
    assert!(close(out.o[0], 1.0 / 3.0) && close(out.o[1], -1.0 / 3.0), "{:?}", out.o);
    assert!(close(out.lse[0], 3f64.ln()));
}

#[test]
fn empty_sequences_and_padding_rows() {
    // Sequences (q, k): (0, 0), (0, 5), (2, 0), (1, 1); 2 padding rows after cu_q[B] = 3.
    let cu_q = [0, 0, 0, 2, 3];
    let cu_k = [0, 0, 5, 5, 6];
    let (k, v) = indexed_kv(7);
    let q = vec![0.0f32; 5 * 2];
    for causal in [true, false] {
        let out = reference::varlen(&pack(&cu_q, &cu_k, 5, 7), &geo(1, 1, 2, 1.0, causal, -1), &q, &k, &v, None);
        assert_eq!(out.faults, 0);
        // (2, 0): rows 0 and 1 see no key.
        for row in 0..2 {
            assert!(out.written[row] && out.o[2 * row] == 0.0 && out.lse[row] == f64::NEG_INFINITY, "row {row}");
        }
        // (1, 1): row 2 sees key row 5.
        assert!(out.written[2] && close(out.o[4], 5.0) && close(out.lse[2], 0.0));
        // Padding rows 3 and 4 are not written.
        assert!(!out.written[3] && !out.written[4]);
    }
}

#[rstest]
#[case::decreasing_cu_k(&[0, 2, 4], &[0, 3, 2], 4, 4)]
#[case::decreasing_cu_q(&[0, 3, 2], &[0, 2, 4], 4, 4)]
#[case::cu_q_past_total_q(&[0, 2, 5], &[0, 2, 4], 4, 4)]
#[case::cu_k_past_total_k(&[0, 2, 4], &[0, 2, 5], 4, 4)]
#[case::negative_cu_q0(&[-1, 2, 4], &[0, 2, 4], 4, 4)]
#[case::negative_cu_k0(&[0, 2, 4], &[-2, 2, 4], 4, 4)]
fn a_bad_packing_writes_every_row_as_zero(
    #[case] cu_q: &[i32],
    #[case] cu_k: &[i32],
    #[case] total_q: usize,
    #[case] total_k: usize,
) {
    let p = pack(cu_q, cu_k, total_q, total_k);
    assert!(!p.layout_ok());
    let (h, d) = (2, 2);
    let q = uniform(4, total_q * h * d, -1.0, 1.0);
    let k = uniform(5, total_k * d, -1.0, 1.0);
    let v = uniform(6, total_k * d, -1.0, 1.0);
    let out = reference::varlen(&p, &geo(h, 1, d, 1.0, true, -1), &q, &k, &v, Some(&[0.5, 0.5]));
    assert_eq!(out.faults, FAULT_QUERY_LAYOUT);
    // Every row, padding included, is written as o = 0, lse = −inf (sinks do not apply).
    assert!(out.written.iter().all(|&w| w));
    assert!(out.o.iter().all(|&x| x == 0.0));
    assert!(out.lse.iter().all(|&x| x == f64::NEG_INFINITY));
}

#[test]
fn good_packings_pass_the_layout_check() {
    assert!(pack(&[0], &[0], 0, 0).layout_ok()); // B = 0
    assert!(pack(&[0, 0, 0], &[0, 0, 0], 0, 0).layout_ok());
    assert!(pack(&[1, 2], &[3, 3], 5, 3).layout_ok()); // cu[0] > 0 and cu[B] < total
    assert!(!pack(&[0, 1], &[0, 1, 2], 1, 2).layout_ok()); // cu_k has the wrong length
}

/// Decode / extend rows against a contiguous paged cache (page table 0, 1, 2, …, each request's
/// context starting on a page boundary) equal the varlen oracle on the same rows.
#[rstest]
#[case::no_window(-1, false)]
#[case::window_5_sinks(5, true)]
fn agrees_with_the_paged_oracle(#[case] window: i32, #[case] sinks: bool) {
    let (h, hkv, d, p) = (4, 2, 8, 16);
    // Request 0: context 48 (3 pages), 1 new token; request 1: context 21 (pages 3, 4), 3 new.
    let lens = [48, 21];
    let cu_q = [0, 1, 4];
    let cu_k = [0, 48, 69];
    let (num_pages, max_pages) = (5, 3);
    let pt = [0, 1, 2, 3, 4, -1];
    let rows_k = num_pages * p;
    let q = uniform(7, 4 * h * d, -1.0, 1.0);
    let k = uniform(8, rows_k * hkv * d, -1.0, 1.0);
    let v = uniform(9, rows_k * hkv * d, -1.0, 1.0);
    let sink_vals = uniform(10, h, -1.0, 2.0);
    let sinks = sinks.then_some(&sink_vals[..]);
    let scale = 0.3;
    let batch = HostBatch {
        page_table: &pt,
        max_pages,
        seq_lens: &lens,
        cu_seqlens_q: &cu_q,
        total_q: 4,
        page_size: p,
        num_pages,
    };
    let pg = paged_ref::Geometry { heads: h, kv_heads: hkv, head_dim: d, scale, window_left: window };
    let want = paged_ref::paged(&batch, &pg, &q, kv(&k), kv(&v), sinks);
    let got =
        reference::varlen(&pack(&cu_q, &cu_k, 4, rows_k), &geo(h, hkv, d, scale, true, window), &q, &k, &v, sinks);
    assert_eq!((want.faults, got.faults), (0, 0));
    assert_eq!(want.written, got.written);
    for (i, (a, b)) in got.o.iter().zip(&want.o).enumerate() {
        assert!((a - b).abs() <= 1e-12, "o[{i}]: {a} vs {b}");
    }
    for (i, (a, b)) in got.lse.iter().zip(&want.lse).enumerate() {
        assert!((a - b).abs() <= 1e-12, "lse[{i}]: {a} vs {b}");
    }
}

fn kv(values: &[f32]) -> paged_ref::HostKv<'_> {
    paged_ref::HostKv { values, scales: None }
}
