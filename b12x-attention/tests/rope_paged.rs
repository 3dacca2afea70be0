//! CPU tests of `attention.rope_paged`: query validation, kernel symbols (every 8-row variant
//! of `attention.paged` has a fused twin in every arch's build), the parameter layout. The GPU
//! suite (`gpu_rope_paged.rs`) checks the results against rope_kv_append then paged.

use b12x_attention::paged;
use b12x_attention::rope::{self, CosSin, RopeStyle};
use b12x_attention::rope_paged::{PagedRopeParams, Query};
use b12x_core::testing::check_manifest;
use b12x_core::{DType, Error};

fn query() -> Query {
    Query {
        rope: rope::Query {
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            rotary_dim: 128,
            rotary_offset: 0,
            style: RopeStyle::Neox,
            base: 1e6,
            yarn: None,
            dtype: DType::BF16,
            max_tokens: 64,
            max_position: 4096,
            cos_sin: CosSin::Computed,
        },
        attention: paged::Query {
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            page_size: 16,
            q_dtype: DType::BF16,
            kv_dtype: DType::BF16,
            scale: 0.088,
            window_left: -1,
            sinks: false,
            max_batch: 64,
            max_tokens: 64,
            max_q_len: 1,
            max_pages: 256,
            num_pages: 4096,
        },
    }
}

fn field_of(q: Query) -> &'static str {
    match q.validate() {
        Err(Error::InvalidQuery { field, .. }) => field,
        other => panic!("want InvalidQuery, got {other:?}"),
    }
}

#[test]
fn the_queries_must_describe_the_same_rows_on_decode_tiles() {
    query().validate().unwrap();
    let q = query();
    let rope = |r: rope::Query| Query { rope: r, ..q.clone() };
    let attn = |a: paged::Query| Query { attention: a, ..q.clone() };
    assert_eq!(field_of(rope(rope::Query { heads: 16, ..q.rope.clone() })), "rope.heads");
    assert_eq!(field_of(rope(rope::Query { kv_heads: 4, ..q.rope.clone() })), "rope.kv_heads");
    assert_eq!(field_of(rope(rope::Query { kv_heads: 0, ..q.rope.clone() })), "rope.kv_heads");
    assert_eq!(field_of(rope(rope::Query { head_dim: 64, rotary_dim: 64, ..q.rope.clone() })), "rope.head_dim");
    assert_eq!(field_of(rope(rope::Query { dtype: DType::F16, ..q.rope.clone() })), "rope.dtype");
    assert_eq!(field_of(rope(rope::Query { max_tokens: 63, ..q.rope.clone() })), "rope.max_tokens");
    // NeoX pairs need R % 16; GPT-J takes rope's R % 8.
    assert_eq!(field_of(rope(rope::Query { rotary_dim: 24, ..q.rope.clone() })), "rope.rotary_dim");
    rope(rope::Query { rotary_dim: 24, style: RopeStyle::Gptj, ..q.rope.clone() }).validate().unwrap();
    // 16-row tiles (more than 8 rows of a request per KV head, or D = 256) have no fused kernel.
    assert_eq!(field_of(attn(paged::Query { max_q_len: 3, ..q.attention.clone() })), "attention.max_q_len");
    attn(paged::Query { max_q_len: 2, ..q.attention.clone() }).validate().unwrap();
    let d256 = Query {
        rope: rope::Query { head_dim: 256, rotary_dim: 64, rotary_offset: 192, ..q.rope.clone() },
        attention: paged::Query { head_dim: 256, ..q.attention.clone() },
    };
    assert_eq!(field_of(d256), "attention.max_q_len");
    // Each part's own rules still hold (the append's geometry is the attention's).
    assert_eq!(field_of(attn(paged::Query { page_size: 8, ..q.attention.clone() })), "page_size");
    // E4M3 caches take bf16 q (the attention's rule).
    attn(paged::Query { kv_dtype: DType::E4M3, ..q.attention.clone() }).validate().unwrap();
}

#[test]
fn every_eight_row_variant_has_a_fused_twin_for_every_arch() {
    let mut symbols = Vec::new();
    for (q_dtype, kv_dtype) in [(DType::BF16, DType::BF16), (DType::F16, DType::F16), (DType::BF16, DType::E4M3)] {
        for d in [64, 96, 128] {
            let base = query();
            let q = Query {
                rope: rope::Query { dtype: q_dtype, head_dim: d, rotary_dim: d, ..base.rope },
                attention: paged::Query { q_dtype, kv_dtype, head_dim: d, ..base.attention },
            };
            q.validate().unwrap();
            for &stages in q.attention.stage_options() {
                for &warps in q.attention.warp_options(stages) {
                    symbols.push(q.symbol_for(stages, warps));
                }
            }
        }
    }
    symbols.sort();
    symbols.dedup();
    // Per D: bf16 and f16 take 2, 3 (4 and 8 warps) and 6 stages, E4M3 2 and 3 (4 and 8 warps).
    assert_eq!(symbols.len(), 3 * (4 + 4 + 3));
    assert!(symbols.contains(&"b12x_paged_rope_bf16_d128_s3_n8_w8".to_string()));
    assert!(symbols.contains(&"b12x_paged_rope_bf16_e4m3_d64_n8".to_string()));
    assert!(symbols.contains(&"b12x_paged_rope_f16_d96_s6_n8".to_string()));
    check_manifest(b12x_attention::KERNEL_MANIFEST, &symbols).unwrap();
}

#[test]
fn params_hold_the_attention_and_the_rope() {
    assert_eq!(std::mem::size_of::<PagedRopeParams>(), 1352);
    let p = PagedRopeParams::default();
    assert_eq!((p.attn.tokens, p.rope.rotary_dim, p.neox, p.k, p.v), (0, 0, 0, 0, 0));
    assert_eq!(b12x_attention::rope_paged::OP, "attention.rope_paged");
}
