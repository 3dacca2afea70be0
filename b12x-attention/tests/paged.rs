//! CPU tests of `attention.paged`: query validation, plan geometry, kernel names against the
//! built manifest, and the oracle on hand-computed cases (one key, two keys, sinks, windows,
//! causal extend rows, masked requests, bad page ids).

use b12x_attention::paged::{self, pdl_places_evenly, reference, Query, DEEP_STAGES, HEAD_DIMS, MAX_CLUSTER_SPLITS};
use b12x_attention::paging::{HostBatch, FAULT_LENGTH, FAULT_PAGE_ID, FAULT_QUERY_LAYOUT};
use b12x_core::testing::check_manifest;
use b12x_core::{DType, Error};
use rstest::rstest;

fn query() -> Query {
    Query {
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        page_size: 16,
        q_dtype: DType::BF16,
        kv_dtype: DType::BF16,
        scale: 0.088,
        window_left: -1,
        sinks: false,
        max_batch: 8,
        max_tokens: 8,
        max_q_len: 1,
        max_pages: 64,
        num_pages: 512,
    }
}

#[rstest]
#[case::q_dtype(Query { q_dtype: DType::F32, ..query() }, "q_dtype")]
#[case::kv_f16_with_bf16_q(Query { kv_dtype: DType::F16, ..query() }, "kv_dtype")]
#[case::e4m3_with_f16_q(Query { q_dtype: DType::F16, kv_dtype: DType::E4M3, ..query() }, "kv_dtype")]
#[case::head_dim(Query { head_dim: 80, ..query() }, "head_dim")]
#[case::page_size(Query { page_size: 8, ..query() }, "page_size")]
#[case::group_not_divisor(Query { heads: 30, ..query() }, "heads")]
#[case::group_too_large(Query { heads: 32, kv_heads: 1, ..query() }, "heads")]
#[case::scale(Query { scale: 0.0, ..query() }, "scale")]
#[case::window(Query { window_left: -2, ..query() }, "window_left")]
#[case::max_q_len(Query { max_q_len: 0, ..query() }, "max_q_len")]
#[case::grid_z(Query { max_batch: 10000, ..query() }, "max_batch")]
fn bad_queries_name_the_field(#[case] q: Query, #[case] field: &str) {
    match q.validate() {
        Err(Error::InvalidQuery { field: f, .. }) => assert_eq!(f, field),
        other => panic!("expected InvalidQuery({field}), got {other:?}"),
    }
}

#[test]
fn symbols_are_built_for_every_arch_and_fit_sm120_shared_memory() {
    let mut symbols = Vec::new();
    for d in HEAD_DIMS {
        for (q, kv) in [(DType::BF16, DType::BF16), (DType::F16, DType::F16), (DType::BF16, DType::E4M3)] {
            // Decode with group 4 (8-row tiles at D <= 128) and 8-token verify (16-row tiles).
            for max_q_len in [1, 8] {
                let query = Query { head_dim: d, q_dtype: q, kv_dtype: kv, max_q_len, ..query() };
                query.validate().unwrap();
                assert_eq!(query.eight_row_tiles(), d <= 128 && max_q_len == 1);
                // ≤ 99 KB per CTA for the 2-stage variants (they run on SM120); the 3-stage ones
                // fit SM120 except bf16/f16 at D = 128 (those need an SM90-sized shared memory);
                // the 6-stage decode rings fit only SM90 (one CTA per SM).
                for &st in query.stage_options() {
                    let smem = query.smem_bytes(st);
                    let sm120 = query.ctas_per_sm(st, 99 * 1024);
                    assert!(st >= 3 || smem <= 99 * 1024, "{}: {smem} bytes", query.symbol(st));
                    assert_eq!(sm120 > 0, smem <= 99 * 1024);
                    let sm90 = if st == DEEP_STAGES { 1 } else { 2 };
                    assert!(query.ctas_per_sm(st, 227 * 1024) >= sm90, "{}", query.symbol(st));
                    if st == DEEP_STAGES {
                        assert!(query.eight_row_tiles() && kv != DType::E4M3 && sm120 == 0);
                        assert_eq!(query.ctas_per_sm(st, 227 * 1024), 1);
                    }
                    symbols.push(query.symbol(st));
                    // The 8-warp decode variants: SM90 only, one CTA per SM.
                    for &w in query.warp_options(st).iter().filter(|&&w| w == paged::WIDE_WARPS) {
                        assert!(query.eight_row_tiles() && st == 3);
                        assert_eq!(query.ctas_per_sm_for(st, w, 227 * 1024), 1, "{}", query.symbol_for(st, w));
                        assert_eq!(query.ctas_per_sm_for(st, w, 99 * 1024), 0, "{}", query.symbol_for(st, w));
                        symbols.push(query.symbol_for(st, w));
                    }
                }
            }
        }
    }
    symbols.sort();
    symbols.dedup();
    assert!(symbols.contains(&"b12x_paged_bf16_e4m3_d128".to_string()));
    assert!(symbols.contains(&"b12x_paged_bf16_d128_s3".to_string()));
    assert!(symbols.contains(&"b12x_paged_bf16_e4m3_d128_n8".to_string()));
    assert!(symbols.contains(&"b12x_paged_f16_d64_s3_n8".to_string()));
    assert!(symbols.contains(&"b12x_paged_bf16_d128_s6_n8".to_string()));
    assert!(symbols.contains(&"b12x_paged_bf16_e4m3_d96_s3_n8_w8".to_string()));
    // Per dtype: 2 stages x 2 tile heights at D = 64, 96, 128, one variant at D = 256, the
    // 8-warp 3-stage decode tiles at D = 64, 96, 128; plus the 6-stage decode rings of bf16 and
    // f16 at D = 64, 96, 128.
    assert_eq!(symbols.len(), 3 * (3 * 4 + 1 + 3) + 2 * 3);
    check_manifest(b12x_attention::KERNEL_MANIFEST, &symbols).unwrap();
}

#[test]
fn shared_memory_matches_the_kernels_layout() {
    // The same numbers as the static_asserts on PagedSmem::kBytes in kernels/paged.cu (the two
    // formulas are mirrored by hand): (D, E4M3 cache, ring depth, decode (8-row tiles), bytes).
    let cases = [
        (128, false, 2, true, 74848),
        (128, false, 3, true, 107616),
        (128, false, 6, true, 205920),
        (128, true, 2, true, 42592),
        (64, true, 3, true, 54368),
        (96, false, 2, true, 72800),
        (256, false, 2, false, 74112),
        (64, false, 3, false, 51584),
        (128, true, 2, false, 37760),
    ];
    for (d, e4m3, stages, decode, bytes) in cases {
        let kv_dtype = if e4m3 { DType::E4M3 } else { DType::BF16 };
        let max_q_len = if decode { 1 } else { 8 };
        let q = Query { head_dim: d, kv_dtype, max_q_len, ..query() };
        assert_eq!(q.eight_row_tiles(), decode, "D {d}");
        assert_eq!(q.smem_bytes(stages), bytes, "{}", q.symbol(stages));
    }
    // The 8-warp decode variants (paged.cu's static_asserts).
    for (d, e4m3, bytes) in [(128, false, 205920), (128, true, 107616), (64, false, 103520)] {
        let kv_dtype = if e4m3 { DType::E4M3 } else { DType::BF16 };
        let q = Query { head_dim: d, kv_dtype, max_q_len: 1, ..query() };
        assert_eq!(q.warp_options(3), &[4, paged::WIDE_WARPS]);
        assert_eq!(q.smem_bytes_for(3, paged::WIDE_WARPS), bytes, "{}", q.symbol_for(3, paged::WIDE_WARPS));
        assert!(q.symbol_for(3, paged::WIDE_WARPS).ends_with("_s3_n8_w8"));
        assert_eq!(q.symbol_for(3, 4), q.symbol(3));
        assert_eq!(q.ctas_per_sm_for(3, paged::WIDE_WARPS, 227 * 1024), 1);
        // Too large for SM120's 99 KB per CTA: a plan asking for them there is refused.
        assert_eq!(q.ctas_per_sm_for(3, paged::WIDE_WARPS, 99 * 1024), 0);
    }
    // Only 3-stage 8-row tiles have them.
    assert_eq!(query().warp_options(2), &[4]);
    assert_eq!(Query { max_q_len: 8, ..query() }.warp_options(3), &[4]);
}

#[test]
fn pdl_placement_rule() {
    // The next call's grid fits beside the running one at once, or nearly only in its slots.
    assert!(pdl_places_evenly(256, 528));
    assert!(pdl_places_evenly(256, 264));
    assert!(pdl_places_evenly(128, 264));
    // Part of it fits (140 of 256; 144 of 384): uneven.
    assert!(!pdl_places_evenly(256, 396));
    assert!(!pdl_places_evenly(384, 528));
}

#[test]
fn pdl_plans_pick_a_depth_whose_next_grid_lands_evenly() {
    let optin = 227 * 1024;
    // B = 32 x 2k BF16: 256 single CTAs; 2-stage rings hold 3 per SM (140 of the next grid's 256
    // fit beside the running one), 3-stage rings 2 per SM (8 slots free): a PDL plan takes 3.
    let b32 = Query { max_batch: 32, max_tokens: 32, max_pages: 128, ..query() };
    assert_eq!(b32.default_stages(132, optin), 2);
    assert_eq!(b32.pdl_default_stages(132, optin, true), 3);
    // E4M3: 4 per SM with 2-stage rings, the whole next grid fits: the default stays.
    let b32_e4m3 = Query { kv_dtype: DType::E4M3, ..b32.clone() };
    assert_eq!(b32_e4m3.pdl_default_stages(132, optin, true), 2);
    // B = 8: 2 splits in pairs on one CTA per SM: BF16 takes the 6-stage rings; E4M3 (no such
    // variant) keeps 2.
    assert!(query().deep_ring_default(132, optin, true));
    assert_eq!(query().pdl_default_stages(132, optin, true), DEEP_STAGES);
    // B = 1: 8 splits in a cluster keep the default; at a 32k capacity (16 splits through
    // scratch) the 6-stage rings; D = 64 (not measured) and SM120's shared memory never.
    let b1 = Query { max_batch: 1, max_tokens: 1, ..query() };
    assert_eq!(b1.pdl_default_stages(132, optin, true), 3);
    assert_eq!(Query { max_pages: 2048, ..b1.clone() }.pdl_default_stages(132, optin, true), DEEP_STAGES);
    assert!(!Query { max_pages: 2048, head_dim: 64, ..b1.clone() }.deep_ring_default(132, optin, true));
    assert!(!Query { max_pages: 2048, ..b1 }.deep_ring_default(132, 99 * 1024, true));
    // Unsplit one-wave grids (B = 12: 96 single CTAs at one per SM) keep the default.
    let b12 = Query { max_batch: 12, max_tokens: 12, ..query() };
    assert_eq!(b12.split_choice(132, 1, true).0, 1);
    assert!(!b12.deep_ring_default(132, optin, true));
    assert_eq!(Query { kv_dtype: DType::E4M3, ..query() }.pdl_default_stages(132, optin, true), 2);
    // B = 128: more than a wave, the default stays.
    let b128 = Query { max_batch: 128, max_tokens: 128, ..query() };
    assert_eq!(b128.pdl_default_stages(132, optin, true), b128.default_stages(132, optin));
}

#[test]
fn tiles_and_splits_follow_the_capacity() {
    // Decode, group 4: one 16-row tile; verify of 8 tokens x group 4: two.
    assert_eq!(query().tiles(), 1);
    assert_eq!(Query { max_q_len: 8, ..query() }.tiles(), 2);
    assert_eq!(Query { heads: 40, kv_heads: 8, max_q_len: 7, ..query() }.tiles(), 3);
    // 8 requests x 8 KV heads on 132 SMs: one wave of 3 CTAs per SM holds 6 splits; 32
    // requests fill most of a wave unsplit; beyond a wave, 2.
    assert_eq!(query().max_splits(132), 6);
    assert_eq!(Query { max_batch: 128, ..query() }.max_splits(132), 2);
    assert_eq!(Query { max_batch: 1, kv_heads: 1, heads: 1, ..query() }.max_splits(132), 64);
    assert_eq!(Query { max_batch: 32, ..query() }.max_splits(132), 1);
    // Two CTAs per SM (3-stage bf16 rings): 8 x 8 pairs fill 264 slots with 4 splits.
    assert_eq!(query().max_splits_at(132, 2), 4);
    assert_eq!(query().ctas_per_sm(3, 227 * 1024), 2);
    assert_eq!(query().ctas_per_sm(2, 227 * 1024), 3);
    assert_eq!(query().ctas_per_sm(2, 99 * 1024), 1);
    // 8-row E4M3 tiles: 4 CTAs per SM on SM90 by registers (shared memory allows 5).
    assert_eq!(Query { kv_dtype: DType::E4M3, ..query() }.ctas_per_sm(2, 227 * 1024), 4);
    assert_eq!(Query { kv_dtype: DType::E4M3, max_q_len: 8, ..query() }.ctas_per_sm(2, 227 * 1024), 3);
    // 32 requests fill every SM: unsplit at 4 CTAs per SM too; 8 requests take 8 splits there.
    assert_eq!(Query { max_batch: 32, ..query() }.max_splits_at(132, 4), 1);
    assert_eq!(query().max_splits_at(132, 4), 8);
    assert_eq!(Query { max_batch: 16, ..query() }.max_splits(132), 3);
    // The plan's default: small batches with short capacity contexts take the splits that keep
    // the grid within 3/4 of the slots, merged in a cluster; long contexts and devices without
    // clusters keep the one-wave cap and the scratch merge; beyond a wave, 2 in clusters of 2;
    // a full wave, unsplit. BF16 caches whose pairs fill a third to a half of the SMs: 2 (8 x 8
    // pairs: one CTA per SM, not 3 splits); E4M3 and smaller batches keep the slots' count.
    assert_eq!(query().split_choice(132, 2, true), (2, true));
    assert_eq!(query().split_choice(132, 4, true), (2, true));
    assert_eq!(Query { kv_dtype: DType::E4M3, ..query() }.split_choice(132, 4, true), (6, true));
    assert_eq!(Query { kv_dtype: DType::E4M3, ..query() }.split_choice(132, 2, true), (3, true));
    assert_eq!(Query { max_batch: 4, ..query() }.split_choice(132, 2, true), (6, true));
    assert_eq!(Query { max_batch: 6, ..query() }.split_choice(132, 2, true), (2, true));
    assert_eq!(query().split_choice(132, 2, false), (4, false));
    assert_eq!(Query { max_pages: 1024, ..query() }.split_choice(132, 2, true), (4, false));
    assert_eq!(Query { max_pages: 1023, ..query() }.split_choice(132, 2, true), (2, true));
    assert_eq!(Query { max_batch: 16, ..query() }.split_choice(132, 2, true), (2, true));
    assert_eq!(Query { max_batch: 128, ..query() }.split_choice(132, 3, true), (2, true));
    assert_eq!(Query { max_batch: 128, ..query() }.split_choice(132, 3, false), (2, false));
    assert_eq!(Query { max_batch: 32, ..query() }.split_choice(132, 3, true), (1, false));
    // B = 1: 8 splits in a cluster (not the one-wave 33 / 16 through scratch), except at long
    // capacity contexts.
    assert_eq!(Query { max_batch: 1, ..query() }.split_choice(132, 2, true), (8, true));
    assert_eq!(Query { max_batch: 1, ..query() }.split_choice(132, 1, true), (8, true));
    assert_eq!(Query { max_batch: 1, max_pages: 2048, ..query() }.split_choice(132, 2, true), (33, false));
    assert_eq!(Query { max_batch: 1, max_pages: 2048, ..query() }.split_choice(132, 1, true), (16, false));
    assert_eq!(Query { max_batch: 2, ..query() }.split_choice(132, 1, true), (6, true));
    // A given cap merges in clusters when they fit: 2 always, more while the grid takes at most
    // 3/4 of the slots.
    assert!(query().cluster_fits(2, 132, 1));
    assert!(query().cluster_fits(3, 132, 2));
    assert!(!query().cluster_fits(4, 132, 2));
    assert!(query().cluster_fits(6, 132, 4));
    assert!(!query().cluster_fits(7, 132, 4));
    assert!(!query().cluster_fits(1, 132, 4));
    assert!(!Query { max_batch: 1, ..query() }.cluster_fits(MAX_CLUSTER_SPLITS + 1, 132, 4));
    // 3 stages only for small BF16 batches where the variant fits (not on SM120 at D = 128).
    assert_eq!(query().default_stages(132, 227 * 1024), 3);
    assert_eq!(query().default_stages(132, 99 * 1024), 2);
    assert_eq!(Query { max_batch: 32, ..query() }.default_stages(132, 227 * 1024), 2);
    assert_eq!(Query { kv_dtype: DType::E4M3, ..query() }.default_stages(132, 227 * 1024), 2);
    assert_eq!(Query { head_dim: 256, ..query() }.default_stages(132, 227 * 1024), 2);
}

/// D = 2, one KV head, P = 16; keys and values indexed by position.
fn tiny(lens: &[i32], cu: &[i32], pt: &[i32], window: i32, sinks: Option<&[f32]>, q: &[f32]) -> reference::Output {
    let batch = HostBatch {
        page_table: pt,
        max_pages: pt.len() / lens.len(),
        seq_lens: lens,
        cu_seqlens_q: cu,
        total_q: cu[cu.len() - 1] as usize,
        page_size: 16,
        num_pages: 4,
    };
    // Page `pg`, slot s: k = (1, 0) for position-like index i = pg·16 + s, v = (i, −i).
    let mut k = vec![0.0f32; 4 * 16 * 2];
    let mut v = vec![0.0f32; 4 * 16 * 2];
    for i in 0..64 {
        k[2 * i] = 1.0;
        v[2 * i] = i as f32;
        v[2 * i + 1] = -(i as f32);
    }
    let g = reference::Geometry { heads: 1, kv_heads: 1, head_dim: 2, scale: 1.0, window_left: window };
    let kv = |x: &'static [f32]| reference::HostKv { values: x, scales: None };
    let (k, v): (&'static [f32], &'static [f32]) = (Box::leak(k.into_boxed_slice()), Box::leak(v.into_boxed_slice()));
    reference::paged(&batch, &g, q, kv(k), kv(v), sinks)
}

#[test]
fn equal_logits_average_the_values() {
    // One request, L = 3 on page 2 (positions 0..3 = cache rows 32..35), one new token: it sees
    // all three keys with equal logits q·k = 0.5: o = mean(v) = (33, −33), lse = 0.5 + ln 3.
    let out = tiny(&[3], &[0, 1], &[2, 0, 0, 0], -1, None, &[0.5, 7.0]);
    assert_eq!(out.faults, 0);
    assert!((out.o[0] - 33.0).abs() < 1e-12 && (out.o[1] + 33.0).abs() < 1e-12, "{:?}", out.o);
    assert!((out.lse[0] - (0.5 + 3f64.ln())).abs() < 1e-12);
}

#[test]
fn a_sink_joins_the_denominator_only() {
    // One key (logit 0) and a sink σ = 0: weights 1/2 each, the sink's half is dropped.
    let out = tiny(&[1], &[0, 1], &[1, 0, 0, 0], -1, Some(&[0.0]), &[0.0, 0.0]);
    assert!((out.o[0] - 8.0).abs() < 1e-12, "{:?}", out.o); // v of page 1 slot 0 = (16, −16) / 2
    assert!((out.lse[0] - 2f64.ln()).abs() < 1e-12);
}

#[test]
fn extend_rows_are_causal_and_windowed() {
    // L = 4 (page 0), 2 new tokens at positions 2 and 3; window 1: row 0 sees {1, 2}, row 1 {2, 3}.
    let out = tiny(&[4], &[0, 2], &[0, 0, 0, 0], 1, None, &[0.0, 0.0, 0.0, 0.0]);
    assert!((out.o[0] - 1.5).abs() < 1e-12 && (out.o[2] - 2.5).abs() < 1e-12, "{:?}", out.o);
    // Without the window row 0 sees {0, 1, 2}.
    let out = tiny(&[4], &[0, 2], &[0, 0, 0, 0], -1, None, &[0.0, 0.0, 0.0, 0.0]);
    assert!((out.o[0] - 1.0).abs() < 1e-12 && (out.o[2] - 1.5).abs() < 1e-12, "{:?}", out.o);
}

#[test]
fn bad_pages_hide_their_keys_and_bad_requests_are_zeroed() {
    // L = 17: positions 0..16 on page 0, position 16 on page pt[1] = 9 (out of range): skipped.
    let out = tiny(&[17], &[0, 1], &[0, 9, 0, 0], -1, None, &[0.0, 0.0]);
    assert_eq!(out.faults, FAULT_PAGE_ID);
    assert!((out.o[0] - 7.5).abs() < 1e-12, "{:?}", out.o); // mean of positions 0..15
                                                            // A length past max_pages·P: the row is written as zeros with lse = −inf.
    let out = tiny(&[65], &[0, 1], &[0, 1, 2, 3], -1, None, &[0.0, 0.0]);
    assert_eq!(out.faults, FAULT_LENGTH);
    assert!(out.written[0] && out.o[0] == 0.0 && out.lse[0] == f64::NEG_INFINITY);
    // A decreasing cu_seqlens_q masks everything.
    let out = tiny(&[3, 3], &[0, 1, 0], &[0, 0, 0, 0, 0, 0, 0, 0], -1, None, &[0.0, 0.0]);
    assert_eq!(out.faults, FAULT_QUERY_LAYOUT);
}

#[test]
fn a_row_without_keys_is_zero_with_the_sink_as_lse() {
    // A new token at position 0 always sees key 0, so use a bad page to hide it.
    let out = tiny(&[1], &[0, 1], &[-1, 0, 0, 0], -1, Some(&[1.25]), &[0.0, 0.0]);
    assert_eq!(out.faults, FAULT_PAGE_ID);
    assert_eq!((out.o[0], out.o[1]), (0.0, 0.0));
    assert!((out.lse[0] - 1.25).abs() < 1e-12);
    let out = tiny(&[1], &[0, 1], &[-1, 0, 0, 0], -1, None, &[0.0, 0.0]);
    assert_eq!(out.lse[0], f64::NEG_INFINITY);
}

#[test]
fn wide_default_rule() {
    let (sms, sm90, sm120) = (132, 227 * 1024, 99 * 1024);
    // query(): 8 KV heads, decode, group 4 (8-row tiles).
    let at = |max_batch: usize, ctx: usize, kv_dtype: DType| Query {
        max_batch,
        max_tokens: max_batch,
        max_pages: ctx / 16,
        page_size: 16,
        num_pages: max_batch * ctx / 16 + 8,
        kv_dtype,
        ..query()
    };
    // B = 1 and 8: long BF16 contexts and every E4M3 one; not BF16 below 4k.
    assert!(at(1, 4096, DType::BF16).wide_default(sms, sm90));
    assert!(at(8, 8192, DType::BF16).wide_default(sms, sm90));
    assert!(!at(1, 2048, DType::BF16).wide_default(sms, sm90));
    assert!(!at(8, 2048, DType::BF16).wide_default(sms, sm90));
    assert!(at(1, 2048, DType::E4M3).wide_default(sms, sm90));
    // More (request, KV head) pairs than SMs, 16-row tiles, SM120: never.
    assert!(!at(32, 8192, DType::BF16).wide_default(sms, sm90));
    assert!(!Query { max_q_len: 8, ..at(1, 8192, DType::BF16) }.wide_default(sms, sm90));
    assert!(!at(1, 8192, DType::BF16).wide_default(sms, sm120));
    assert!(!at(1, 8192, DType::E4M3).wide_default(sms, sm120));
}
