//! Batches shared by the GPU suites of b12x-attention: seeded, scattered page tables.
#![allow(dead_code)]

use b12x_attention::paging::HostBatch;
use b12x_core::half::{bf16, f16};
use b12x_core::{DType, Device, OpPlan, PreparationSession};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// One request: context length and new tokens.
pub type Req = (i32, i32);

/// A batch on the host: requests, page table, packing, the rows of k/v, the faults to inject.
#[derive(Clone, Debug)]
pub struct Batch {
    pub lens: Vec<i32>,
    pub cu: Vec<i32>,
    pub pt: Vec<i32>,
    pub max_pages: usize,
    pub num_pages: usize,
    /// Packed rows of k and v (≥ cu[B]; the rest are padding).
    pub rows: usize,
}

/// Scattered pages: each request's pages are drawn from a seeded permutation of all pages, so
/// tables are non-contiguous and distinct requests never share a page.
pub fn make_batch(reqs: &[Req], p: usize, seed: u64, padding: usize) -> Batch {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let max_pages = reqs.iter().map(|&(l, _)| (l.max(1) as usize).div_ceil(p)).max().unwrap_or(1);
    let need: usize = reqs.iter().map(|&(l, _)| (l.max(0) as usize).div_ceil(p)).sum();
    let num_pages = need + 3;
    let mut pages: Vec<i32> = (0..num_pages as i32).collect();
    pages.shuffle(&mut rng);
    let mut pt = vec![0i32; reqs.len() * max_pages];
    let mut next = 0;
    for (b, &(l, _)) in reqs.iter().enumerate() {
        for j in 0..(l.max(0) as usize).div_ceil(p) {
            pt[b * max_pages + j] = pages[next];
            next += 1;
        }
        // Unused entries hold garbage ids the op must never use.
        for j in (l.max(0) as usize).div_ceil(p)..max_pages {
            pt[b * max_pages + j] = rng.random_range(-5..5) * 1000;
        }
    }
    let mut cu = vec![0i32];
    for &(_, q) in reqs {
        cu.push(cu.last().unwrap() + q);
    }
    let rows = *cu.last().unwrap() as usize + padding;
    Batch { lens: reqs.iter().map(|r| r.0).collect(), cu, pt, max_pages, num_pages, rows }
}

pub fn host(b: &Batch, p: usize) -> HostBatch<'_> {
    HostBatch {
        page_table: &b.pt,
        max_pages: b.max_pages,
        seq_lens: &b.lens,
        cu_seqlens_q: &b.cu,
        total_q: b.rows,
        page_size: p,
        num_pages: b.num_pages,
    }
}

/// What a GPU trial returns.
pub type TrialResult = Result<(), String>;

/// `v` rounded to `dtype` (bf16, else f16) and back: the values the GPU sees.
pub fn round(dtype: DType, v: Vec<f32>) -> Vec<f32> {
    match dtype {
        DType::BF16 => v.iter().map(|&x| bf16::from_f32(x).to_f32()).collect(),
        _ => v.iter().map(|&x| f16::from_f32(x).to_f32()).collect(),
    }
}

pub fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A session that prepared `plan` (one config: nothing is raced).
pub fn prepared(dev: &Arc<Device>, plan: &dyn OpPlan) -> Result<PreparationSession, String> {
    let mut s = PreparationSession::new(dev).map_err(err)?;
    s.prepare(&[plan]).map_err(err)?;
    Ok(s)
}

/// A way to break a batch's index tensors (on a 3-request batch with P = 16).
pub type Mutate = fn(&mut Batch);
/// The untrusted-index cases both GPU suites run: each must be masked and reported.
pub const FAULTS: &[(&str, Mutate)] = &[
    ("page_id_past_num_pages", |b| b.pt[1] = b.num_pages as i32),
    ("negative_page_id", |b| b.pt[b.max_pages] = -7),
    ("length_past_max_pages", |b| b.lens[1] = (b.max_pages * 16 + 1) as i32),
    ("negative_length", |b| b.lens[2] = -3),
    ("more_new_tokens_than_context", |b| b.lens[2] = 0),
    ("decreasing_cu_seqlens", |b| b.cu[2] = b.cu[1] - 1),
    ("cu_seqlens_past_rows", |b| b.cu[3] = b.rows as i32 + 1),
];
