//! CPU tests of `attention.kv_append`: query validation, the oracle on hand-checked batches
//! (positions, pages, padding rows, every fault), kernel names against the built manifest.

use b12x_attention::kv_append::{reference, reference::HostCache, Query, HEAD_DIMS};
use b12x_attention::paging::{Faults, HostBatch, FAULT_LENGTH, FAULT_PAGE_ID, FAULT_QUERY_LAYOUT};
use b12x_core::testing::check_manifest;
use b12x_core::{DType, Error};
use rstest::rstest;

fn query() -> Query {
    Query {
        kv_heads: 2,
        head_dim: 64,
        page_size: 16,
        dtype: DType::BF16,
        cache_dtype: DType::BF16,
        max_batch: 4,
        max_tokens: 16,
        max_pages: 4,
        num_pages: 8,
    }
}

#[rstest]
#[case::dtype(Query { dtype: DType::F32, cache_dtype: DType::F32, ..query() }, "dtype")]
#[case::cache(Query { cache_dtype: DType::F16, ..query() }, "cache_dtype")]
#[case::head_dim(Query { head_dim: 80, ..query() }, "head_dim")]
#[case::page_size(Query { page_size: 8, ..query() }, "page_size")]
#[case::kv_heads(Query { kv_heads: 0, ..query() }, "kv_heads")]
#[case::max_batch(Query { max_batch: 0, ..query() }, "max_batch")]
#[case::max_pages(Query { max_pages: 1 << 30, ..query() }, "max_pages")]
fn bad_queries_name_the_field(#[case] q: Query, #[case] field: &str) {
    match q.validate() {
        Err(Error::InvalidQuery { field: f, .. }) => assert_eq!(f, field),
        other => panic!("expected InvalidQuery({field}), got {other:?}"),
    }
}

#[test]
fn good_queries_and_symbols() {
    for d in HEAD_DIMS {
        for (dtype, cache, sym) in [
            (DType::BF16, DType::BF16, "b12x_kv_append_bf16"),
            (DType::F16, DType::F16, "b12x_kv_append_f16"),
            (DType::BF16, DType::E4M3, "b12x_kv_append_bf16_e4m3"),
            (DType::F16, DType::E4M3, "b12x_kv_append_f16_e4m3"),
        ] {
            let q = Query { head_dim: d, dtype, cache_dtype: cache, ..query() };
            q.validate().unwrap();
            assert_eq!(q.symbol(), sym);
        }
    }
}

#[test]
fn every_symbol_is_built_for_every_arch() {
    let symbols: Vec<String> =
        ["bf16", "f16", "bf16_e4m3", "f16_e4m3"].iter().map(|s| format!("b12x_kv_append_{s}")).collect();
    check_manifest(b12x_attention::KERNEL_MANIFEST, &symbols).unwrap();
}

/// Two KV heads of D = 64, P = 16: values encode (row, head, d) so each write is traceable.
fn x_of(rows: usize) -> Vec<f32> {
    (0..rows * 2 * 64).map(|i| i as f32).collect()
}

fn batch<'a>(pt: &'a [i32], lens: &'a [i32], cu: &'a [i32], total_q: usize) -> HostBatch<'a> {
    HostBatch { page_table: pt, max_pages: 4, seq_lens: lens, cu_seqlens_q: cu, total_q, page_size: 16, num_pages: 8 }
}

const UNSET: u16 = 0xdead;

fn run(b: &HostBatch<'_>, rows: usize) -> (Vec<u16>, u32) {
    let mut cache = vec![UNSET; 8 * 16 * 2 * 64];
    let f = reference::append(b, 2, 64, &x_of(rows), HostCache::Same, |v| v as u16, &mut cache);
    (cache, f)
}

/// Cache element of (page, slot, head, d).
fn at(page: usize, slot: usize, g: usize, d: usize) -> usize {
    ((page * 16 + slot) * 2 + g) * 64 + d
}

#[test]
fn new_tokens_land_at_the_end_of_their_context() {
    // Request 0: L = 17, 2 new tokens at positions 15 (page pt[0,0] = 5, slot 15) and 16
    // (page pt[0,1] = 2, slot 0). Request 1: empty. Request 2: L = 1, 1 new token at position 0
    // of page 7. Row 3 is padding (cu[3] = 3 < T = 4).
    let pt = [5, 2, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0];
    let (lens, cu) = ([17, 0, 1], [0, 2, 2, 3]);
    let (cache, faults) = run(&batch(&pt, &lens, &cu, 4), 4);
    assert_eq!(faults, 0);
    let row = |r: usize, g: usize, d: usize| ((r * 2 + g) * 64 + d) as u16;
    assert_eq!(cache[at(5, 15, 0, 0)], row(0, 0, 0));
    assert_eq!(cache[at(5, 15, 1, 63)], row(0, 1, 63));
    assert_eq!(cache[at(2, 0, 1, 7)], row(1, 1, 7));
    assert_eq!(cache[at(7, 0, 0, 3)], row(2, 0, 3));
    let written = cache.iter().filter(|&&v| v != UNSET).count();
    assert_eq!(written, 3 * 2 * 64, "exactly the three rows, padding row 3 untouched");
}

#[test]
fn a_bad_page_id_masks_only_its_rows() {
    // Request 0's second token needs pt[0,1] = 8 (= num_pages): masked; the first is written.
    let pt = [5, 8, 0, 0];
    let (lens, cu) = ([17], [0, 2]);
    let (cache, faults) = run(&batch(&pt, &lens, &cu, 2), 2);
    assert_eq!(faults, FAULT_PAGE_ID);
    assert_eq!(cache.iter().filter(|&&v| v != UNSET).count(), 2 * 64);
    let pt = [-1, 0, 0, 0];
    assert_eq!(run(&batch(&pt, &[3], &[0, 1], 1), 1).1, FAULT_PAGE_ID);
}

#[rstest]
#[case::too_long(&[65], &[0, 1], FAULT_LENGTH)]
#[case::negative(&[-1], &[0, 1], FAULT_LENGTH)]
#[case::more_new_than_context(&[1], &[0, 2], FAULT_QUERY_LAYOUT)]
#[case::decreasing_cu(&[4, 4], &[0, 2, 1], FAULT_QUERY_LAYOUT)]
#[case::cu_past_rows(&[4], &[0, 3], FAULT_QUERY_LAYOUT)]
#[case::negative_cu0(&[4], &[-1, 1], FAULT_QUERY_LAYOUT)]
fn bad_lengths_mask_and_report(#[case] lens: &[i32], #[case] cu: &[i32], #[case] want: u32) {
    let pt = vec![0; lens.len() * 4];
    let (cache, faults) = run(&batch(&pt, lens, cu, 2), 2);
    assert_eq!(faults, want, "{}", Faults(faults));
    assert!(cache.iter().all(|&v| v == UNSET), "nothing written");
}

#[test]
fn a_faulty_request_without_new_tokens_reports_nothing() {
    // L = 99 is out of range, but the request has no row to report from (as on the GPU).
    let pt = [0; 8];
    assert_eq!(run(&batch(&pt, &[99, 1], &[0, 0, 1], 1), 1).1, 0);
}

#[test]
fn e4m3_codes_are_x_over_scale_rounded_and_saturated() {
    let pt = [0, 0, 0, 0];
    let b = batch(&pt, &[1], &[0, 1], 1);
    let mut x = vec![0.0f32; 2 * 64];
    x[0] = 1.0; // / 0.5 = 2.0 → 0x40
    x[1] = 1000.0; // / 0.5 = 2000 → saturates to 448 (0x7e)
    x[2] = -0.0; // → 0x80
    x[3] = f32::NAN; // → 0x7f
    x[64] = 3.0; // head 1, scale 2.0: 1.5 → 0x3c
    let mut cache = vec![UNSET; 8 * 16 * 2 * 64];
    let f = reference::append(&b, 2, 64, &x, HostCache::E4m3 { scale: &[0.5, 2.0] }, |_| unreachable!(), &mut cache);
    assert_eq!(f, 0);
    assert_eq!(&cache[..4], &[0x40, 0x7e, 0x80, 0x7f]);
    assert_eq!(cache[at(0, 0, 1, 0)], 0x3c);
}

#[test]
fn faults_display_names_each_bit() {
    assert_eq!(Faults(0).to_string(), "no faults");
    let s = Faults(FAULT_PAGE_ID | FAULT_QUERY_LAYOUT | 64).to_string();
    assert!(s.contains("page id") && s.contains("cu_seqlens_q") && s.contains("0x40"), "{s}");
    assert!(Faults(3).has(FAULT_LENGTH) && !Faults(1).has(FAULT_LENGTH));
}
