//! CPU tests of `attention.rope_kv_append`: query validation, kernel symbols, the parameter
//! layout. The GPU suite (`gpu_rope_kv_append.rs`) checks the results.

use b12x_attention::rope::{self, CosSin, RopeStyle};
use b12x_attention::rope_kv_append::{Query, RopeKvAppendParams};
use b12x_attention::{kv_append, rope_kv_append};
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
        append: kv_append::Query {
            kv_heads: 8,
            head_dim: 128,
            page_size: 16,
            dtype: DType::BF16,
            cache_dtype: DType::BF16,
            max_batch: 64,
            max_tokens: 64,
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
fn the_two_queries_must_describe_the_same_rows() {
    query().validate().unwrap();
    let q = query();
    assert_eq!(field_of(Query { rope: rope::Query { kv_heads: 4, ..q.rope.clone() }, ..q.clone() }), "rope.kv_heads");
    assert_eq!(field_of(Query { rope: rope::Query { kv_heads: 0, ..q.rope.clone() }, ..q.clone() }), "rope.kv_heads");
    let d64 = rope::Query { head_dim: 64, rotary_dim: 64, ..q.rope.clone() };
    assert_eq!(field_of(Query { rope: d64, ..q.clone() }), "rope.head_dim");
    assert_eq!(
        field_of(Query { rope: rope::Query { dtype: DType::F16, ..q.rope.clone() }, ..q.clone() }),
        "rope.dtype"
    );
    assert_eq!(
        field_of(Query { rope: rope::Query { max_tokens: 63, ..q.rope.clone() }, ..q.clone() }),
        "rope.max_tokens"
    );
    // NeoX pairs need R % 16 (GPT-J takes rope's R % 8); each part's own rules still hold.
    assert_eq!(
        field_of(Query { rope: rope::Query { rotary_dim: 24, ..q.rope.clone() }, ..q.clone() }),
        "rope.rotary_dim"
    );
    Query { rope: rope::Query { rotary_dim: 24, style: RopeStyle::Gptj, ..q.rope.clone() }, ..q.clone() }
        .validate()
        .unwrap();
    assert_eq!(field_of(Query { append: kv_append::Query { page_size: 8, ..q.append.clone() }, ..q }), "page_size");
}

#[test]
fn symbols_are_built_for_every_arch() {
    let mut symbols = Vec::new();
    for dtype in [DType::BF16, DType::F16] {
        for cache in [dtype, DType::E4M3] {
            for style in [RopeStyle::Neox, RopeStyle::Gptj] {
                for cos_sin in [CosSin::Computed, CosSin::Table] {
                    let q = query();
                    let q = Query {
                        rope: rope::Query { dtype, style, cos_sin, ..q.rope },
                        append: kv_append::Query { dtype, cache_dtype: cache, ..q.append },
                    };
                    q.validate().unwrap();
                    symbols.push(q.symbol());
                }
            }
        }
    }
    symbols.sort();
    symbols.dedup();
    assert_eq!(symbols.len(), 16);
    assert!(symbols.contains(&"b12x_rope_kv_append_bf16_neox_table_e4m3".to_string()));
    assert!(symbols.contains(&"b12x_rope_kv_append_f16_gptj".to_string()));
    check_manifest(b12x_attention::KERNEL_MANIFEST, &symbols).unwrap();
}

#[test]
fn params_hold_the_two_ops_params() {
    assert_eq!(std::mem::size_of::<RopeKvAppendParams>(), 1256);
    let p = RopeKvAppendParams::default();
    assert_eq!((p.q_blocks, p.append.tokens, p.rope.kv_heads, p.warm_blocks), (0, 0, 0, 0));
    // The warm part's read modes are distinct flag sets, none of them FLAG_EARLY.
    use rope_kv_append::{FLAG_EARLY, FLAG_WARM_EVICT_LAST, FLAG_WARM_PREFETCH};
    assert_eq!(FLAG_EARLY & (FLAG_WARM_EVICT_LAST | FLAG_WARM_PREFETCH), 0);
    assert_ne!(FLAG_WARM_EVICT_LAST, FLAG_WARM_PREFETCH);
    assert_eq!(rope_kv_append::OP, "attention.rope_kv_append");
}
