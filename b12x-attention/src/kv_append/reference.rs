//! CPU oracle of `attention.kv_append`: straight loops over the rules of [`crate::paging`].
//!
//! Rounding: none for BF16/FP16 caches (the values are copied); for E4M3 caches one rounding,
//! `e4m3(x / scale)` with the f32 division rounded to nearest and
//! [`b12x_quant::codec::e4m3_encode`] (round to nearest even, saturating to ±448, NaN → 0x7F) —
//! the GPU result must be bitwise equal.

use crate::paging::{HostBatch, FAULT_PAGE_ID, FAULT_QUERY_LAYOUT};

/// What the cache stores.
#[derive(Clone, Copy, Debug)]
pub enum HostCache<'a> {
    /// Values copied as they are (the cache has the input's dtype); bits of bf16/f16.
    Same,
    /// E4M3 codes of `x / scale[b, g]` with these `[B, Hkv]` scales (K's or V's).
    E4m3 { scale: &'a [f32] },
}

/// One of K or V: appends `x` (`[T, Hkv, D]` as f32 values, row stride `Hkv · D`) into `cache`
/// (`[num_pages, P, Hkv, D]` as the stored codes: bf16/f16 bits or E4M3 codes, widened to u16)
/// and returns the fault bits. `to_code` turns an input value into the cache's code for
/// [`HostCache::Same`] (the caller's bf16/f16 bits).
pub fn append(
    batch: &HostBatch<'_>,
    kv_heads: usize,
    head_dim: usize,
    x: &[f32],
    cache_kind: HostCache<'_>,
    to_code: impl Fn(f32) -> u16,
    cache: &mut [u16],
) -> u32 {
    if !batch.layout_ok() {
        return FAULT_QUERY_LAYOUT;
    }
    let mut faults = 0;
    let p = batch.page_size;
    for b in 0..batch.batch() {
        let req = match batch.request(b) {
            Ok(r) => r,
            Err(f) => {
                // A request with no new tokens has no row to report from (the kernel's reporter
                // is a thread of one of its rows).
                if batch.cu_seqlens_q[b + 1] > batch.cu_seqlens_q[b] {
                    faults |= f;
                }
                continue;
            }
        };
        for i in 0..req.q_len {
            let pos = req.seq_len - req.q_len + i;
            let Some(page) = batch.page(b, pos) else {
                faults |= FAULT_PAGE_ID;
                continue;
            };
            let row = req.row0 + i;
            for g in 0..kv_heads {
                let src = &x[(row * kv_heads + g) * head_dim..][..head_dim];
                let dst = ((page * p + pos % p) * kv_heads + g) * head_dim;
                for (d, &v) in src.iter().enumerate() {
                    cache[dst + d] = match cache_kind {
                        HostCache::Same => to_code(v),
                        HostCache::E4m3 { scale } => {
                            u16::from(b12x_quant::codec::e4m3_encode(v / scale[b * kv_heads + g]))
                        }
                    };
                }
            }
        }
    }
    faults
}
