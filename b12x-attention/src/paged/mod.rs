//! `attention.paged`: attention of new query tokens against each request's paged KV cache —
//! decode (one new token per request) and extend / verify (`q_len_b ≥ 1` new tokens, the last
//! positions of the context, causal among themselves).
//!
//! ```text
//! row (packed row r = cu[b] + i, head h, KV head g = h / (H / Hkv)) at position t = L_b − q_len_b + i
//! sees keys p ∈ [t − W, t] (W = window_left; −1: [0, t]):
//!   s_p = scale · q·k_p,   L = log(Σ_p exp(s_p) + exp(σ_h)),   o = Σ_p exp(s_p − L) · v_p,   lse = L
//! ```
//!
//! The sink `σ_h` (`sinks [H]`, when the query has them) joins the denominator only, and `lse`
//! includes it. A row without visible keys gets `o = 0` and `lse = σ_h` (sinks) or `−inf`.
//! E4M3 caches are dequantized as `code · k_scale[b, g]`, `code · v_scale[b, g]`.
//!
//! - Tensors: `q [total_q, H, D]` bf16/f16 (rows may be strided, heads contiguous); caches
//!   `[num_pages, P, Hkv, D]` of q's dtype, or E4M3 (views labelled `E4M3` or `U8`; bf16 q) with
//!   `k_scale`, `v_scale [B, Hkv]` f32 on the device; `sinks [H]` f32; the batch's index tensors
//!   of [`crate::paging`]; outputs `o [total_q, H, D]` (q's dtype) and optional `lse [total_q, H]`
//!   f32; `error [1]` i32 (an [`ErrorWord`](crate::paging::ErrorWord)).
//! - Untrusted indices ([`crate::paging`]): keys on a page whose id is out of range are skipped
//!   (`FAULT_PAGE_ID`); rows of a request with a bad length get `o = 0`, `lse = −inf`; a bad
//!   `cu_seqlens_q` gives every packed row `o = 0`, `lse = −inf`. Nothing outside the tensors is
//!   read or written. Rows past `cu[B]` (padding) are not written.
//! - Graphs: B and the tensors' shapes are host values; lengths, page tables, scales and sinks
//!   are read on the device, and the split of each request's keys over CTAs is computed there
//!   from its length, so a captured graph replays correctly after they change.
//! - Accuracy: f32 accumulation, probabilities rounded to q's dtype for the P·V product (f16 with
//!   E4M3 caches, whose MMAs run in f16: q is stored as f16 · 2⁻⁴, exact for |q| in
//!   [2⁻¹⁰, 2²⁰) — larger |q| overflows), one rounding of o: cosine difference ≤ 1e-5 (2e-5 with
//!   E4M3) against the f64 oracle ([`reference`](mod@reference)).
//! - Constraints: `D ∈ {64, 96, 128, 256}`, `P ∈ {16, 32, 64}`, `H / Hkv ≤ 16` (any divisor),
//!   16-byte aligned rows; `max_q_len` new tokens per request at most (1 for decode plans).
//! - Kernel ([`KERNEL_NOTE`]): per (request, KV head, 16-row tile) CTAs over chunks of its keys
//!   with `mma.sync`; split partials merged on the device in split order — either the splits
//!   launch as one thread block cluster and merge through distributed shared memory (16-row
//!   tiles read their peers' partials after a cluster barrier, 8-row tiles push each share into
//!   the shared memory of the split that finishes it before one; no
//!   scratch, no atomics; split caps 2 to [`MAX_CLUSTER_SPLITS`], where the plan's rule
//!   [`Query::split_choice`] / [`Query::cluster_fits`] takes it) or the last CTA to arrive
//!   merges them from the scratch ([`PlanOptions::cluster_merge`], [`Plan::cluster_merge`]).
//!   Each warp streams 16-key blocks through a 2- or 3-stage `cp.async` ring
//!   ([`Plan::stages`], [`Query::default_stages`]); E4M3 codes are converted to f16 in registers.
//!   Tiles of at most 8 rows (decode with a group ≤ 8, D ≤ 128) compute `S^T = K Q^T` with the
//!   keys as the MMA's M ([`Query::eight_row_tiles`]): half the MMAs and accumulators. Their
//!   8-warp variants (3-stage rings, [`WIDE_WARPS`]: each warp walks half the chain of blocks)
//!   are the default for decode grids of at most one CTA per SM with long contexts or E4M3
//!   caches ([`Query::wide_default`]; SM90 only, one CTA per SM).
//!   [`plan_with`] overrides the split cap, the ring depth and the warps (for tuning tools and
//!   benchmarks).
//!   Stale cache slots past a request's length (on its last page) may hold anything, NaN
//!   included: they are read as zeros.
//!
//! ```no_run
//! use b12x_attention::paged::{self, Args, Query};
//! use b12x_attention::paging::ErrorWord;
//! use b12x_core::{DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let (b, h, hkv, d, p, max_pages, num_pages) = (2, 32, 8, 128, 16, 64, 128);
//! let q = Query {
//!     heads: h, kv_heads: hkv, head_dim: d, page_size: p, q_dtype: DType::BF16, kv_dtype: DType::BF16,
//!     scale: 1.0 / (d as f32).sqrt(), window_left: -1, sinks: false,
//!     max_batch: 8, max_tokens: 8, max_q_len: 1, max_pages, num_pages,
//! };
//! let plan = paged::plan(&q, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let s = dev.stream();
//! let mut scratch = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes().max(1))?;
//! let qx = s.alloc_zeros::<b12x_core::half::bf16>(b * h * d)?;
//! let kc = s.alloc_zeros::<b12x_core::half::bf16>(num_pages * p * hkv * d)?;
//! let vc = s.alloc_zeros::<b12x_core::half::bf16>(num_pages * p * hkv * d)?;
//! let pt = s.clone_htod(&(0..(b * max_pages) as i32).collect::<Vec<_>>())?;
//! let lens = s.clone_htod(&[5i32, 9])?;
//! let cu = s.clone_htod(&[0i32, 1, 2])?;
//! let mut o = s.alloc_zeros::<b12x_core::half::bf16>(b * h * d)?;
//! let mut err = ErrorWord::new(s)?;
//! let args = Args {
//!     q: TensorRef::from_slice(&qx, &[b, h, d])?,
//!     k_cache: TensorRef::from_slice(&kc, &[num_pages, p, hkv, d])?,
//!     v_cache: TensorRef::from_slice(&vc, &[num_pages, p, hkv, d])?,
//!     k_scale: None,
//!     v_scale: None,
//!     sinks: None,
//!     page_table: TensorRef::from_slice(&pt, &[b, max_pages])?,
//!     seq_lens: TensorRef::from_slice(&lens, &[b])?,
//!     cu_seqlens_q: TensorRef::from_slice(&cu, &[b + 1])?,
//!     o: TensorMut::from_slice(&mut o, &[b, h, d])?,
//!     lse: None,
//!     error: err.view()?,
//! };
//! paged::run(&plan, args, Scratch::from_slice(&mut scratch), s)?;
//! # Ok(()) }
//! ```

mod params;
pub mod reference;

pub use params::{PagedParams, FLAG_PDL};

use crate::paging::{check_batch_tensors, require_contiguous};
use b12x_core::cudarc::driver::CudaStream;
use b12x_core::RaceBuffer;
use b12x_core::{
    resolve, BenchCase, Bucket, DType, Device, Error, KernelModule, LaunchDims, LaunchOpts, OpPlan, PlanSlot, Result,
    Scratch, ScratchLayout, Selected, TensorMut, TensorRef,
};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "attention.paged";
/// What the kernel does, in one line (for docs and `cargo xtask ops`).
pub const KERNEL_NOTE: &str =
    "split-KV mma.sync (S^T = K Q^T on 8-row decode tiles, 4 or 8 warps), 16-key blocks per warp through a 2- or 3-stage cp.async ring; E4M3 KV converted to f16 in registers, f16 MMAs; splits merged in a cluster through DSMEM (<= 8) or through scratch";
/// Head dims with a kernel.
pub const HEAD_DIMS: [usize; 4] = [64, 96, 128, 256];
/// Page sizes the plan accepts.
pub const PAGE_SIZES: [usize; 3] = [16, 32, 64];
/// Fewest keys a split takes (`min_chunk`).
pub const MIN_CHUNK: usize = 256;
/// Most splits of one request's keys (grid x).
pub const MAX_SPLITS: usize = 64;
/// The deep ring variant's depth (`_s6_n8`: BF16/FP16 decode tiles, one CTA per SM).
pub const DEEP_STAGES: usize = 6;
/// Warps per CTA of the wide decode variants (`_s3_n8_w8`: 8-row tiles, 3-stage rings, D ≤ 128,
/// every cache dtype; one CTA per SM at D = 128 BF16/FP16): see [`PlanOptions::warps`].
pub const WIDE_WARPS: u32 = 8;
/// Context capacity (`max_pages · page_size`) from which BF16/FP16 decode plans take the 8-warp
/// variant by default ([`Query::wide_default`]).
pub const WIDE_MIN_CONTEXT: usize = 4096;
/// Most splits the cluster merge takes (`kMaxClusterSplits`: the portable cluster size).
pub const MAX_CLUSTER_SPLITS: usize = 8;
/// Capacity context (keys per request, `max_pages · P`) from which small batches keep the
/// one-wave split cap and the scratch merge instead of fewer splits merged in a cluster
/// ([`Query::split_choice`]).
pub const LONG_CONTEXT: usize = 16 * 1024;
/// Most rows of (token, head in group) per CTA tile (the MMA's M); the scratch holds this many
/// per tile.
const TILE_ROWS: usize = 16;
/// The one config (the split cap is derived from the plan's capacity).
const CONFIG: &str = "split_auto";

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "attention",
        entry_points: &["plan", "run"],
        dtypes: &["bf16", "f16", "bf16 q / e4m3 kv"],
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-attention",
        summary: "decode / extend attention over a paged BF16, FP16 or E4M3 KV cache (GQA, sinks, window)",
    }
}

/// The static problem.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// H: query heads.
    pub heads: usize,
    /// Hkv: KV heads (divides H, H / Hkv ≤ 16).
    pub kv_heads: usize,
    /// D, one of [`HEAD_DIMS`].
    pub head_dim: usize,
    /// P, one of [`PAGE_SIZES`].
    pub page_size: usize,
    /// dtype of q and o: bf16 or f16.
    pub q_dtype: DType,
    /// dtype of the caches: `q_dtype`, or E4M3 (with bf16 q).
    pub kv_dtype: DType,
    /// Softmax scale (finite, > 0), usually 1/√D.
    pub scale: f32,
    /// Sliding window: a row at position t sees keys t − window_left ..= t; −1 = off.
    pub window_left: i32,
    /// Per-head sink logits (`sinks [H]`) join the softmax denominator.
    pub sinks: bool,
    /// Capacity: the largest B.
    pub max_batch: usize,
    /// Capacity: the largest total_q (packed rows of q and o).
    pub max_tokens: usize,
    /// New tokens per request at most: 1 for a decode plan; more for extend / verify.
    pub max_q_len: usize,
    /// Page table entries per request: contexts up to `max_pages · P`.
    pub max_pages: usize,
    /// Pages in each cache.
    pub num_pages: usize,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if !matches!(self.q_dtype, DType::BF16 | DType::F16) {
            return bad("q_dtype", format!("must be bf16 or f16, got {}", self.q_dtype));
        }
        if self.kv_dtype != self.q_dtype && !(self.kv_dtype == DType::E4M3 && self.q_dtype == DType::BF16) {
            return bad(
                "kv_dtype",
                format!("must be {} (q's) or e4m3 with bf16 q, got {}", self.q_dtype, self.kv_dtype),
            );
        }
        if !HEAD_DIMS.contains(&self.head_dim) {
            return bad("head_dim", format!("must be one of {HEAD_DIMS:?}, got {}", self.head_dim));
        }
        if !PAGE_SIZES.contains(&self.page_size) {
            return bad("page_size", format!("must be one of {PAGE_SIZES:?}, got {}", self.page_size));
        }
        if self.kv_heads == 0 || self.heads == 0 || self.heads % self.kv_heads != 0 || self.heads / self.kv_heads > 16 {
            return bad(
                "heads",
                format!(
                    "must be a multiple of kv_heads with H / Hkv ≤ 16, got H = {} Hkv = {}",
                    self.heads, self.kv_heads
                ),
            );
        }
        crate::checks::scale_and_window(OP, self.scale, self.window_left)?;
        crate::checks::capacities(
            OP,
            &[
                ("max_batch", self.max_batch),
                ("max_tokens", self.max_tokens),
                ("max_q_len", self.max_q_len),
                ("max_pages", self.max_pages),
                ("num_pages", self.num_pages),
            ],
        )?;
        let max = i32::MAX as usize;
        if self.max_batch * self.kv_heads > 65535 {
            return bad(
                "max_batch",
                format!("· kv_heads must be ≤ 65535 (grid z), got {}", self.max_batch * self.kv_heads),
            );
        }
        if self.max_pages * self.page_size > max || self.max_tokens * self.heads * self.head_dim > max {
            return bad("max_pages", "· page_size and max_tokens · H · D must fit 32-bit indices".into());
        }
        Ok(())
    }

    fn e4m3(&self) -> bool {
        self.kv_dtype == DType::E4M3
    }
    fn group(&self) -> usize {
        self.heads / self.kv_heads
    }
    /// (request, KV head, tile) triples of the capacity batch: the CTAs of one split, and the
    /// split-merge slots of the scratch.
    pub fn tile_slots(&self) -> usize {
        self.max_batch * self.kv_heads * self.tiles()
    }
    /// Row tiles per (request, KV head).
    pub fn tiles(&self) -> usize {
        (self.max_q_len * self.group()).div_ceil(self.tile_rows())
    }

    /// Whether the kernel computes `S^T = K Q^T` on tiles of 8 rows (the `_n8` variants): when
    /// a request's rows of one KV head (`max_q_len · H / Hkv`) fit 8 and D ≤ 128 — decode with
    /// a group of at most 8. Half the MMAs and accumulators of a 16-row tile.
    pub fn eight_row_tiles(&self) -> bool {
        self.max_q_len * self.group() <= 8 && self.head_dim <= 128
    }

    /// Rows of (token, head in group) per CTA tile: 8 or 16 (see [`Query::eight_row_tiles`]).
    pub fn tile_rows(&self) -> usize {
        if self.eight_row_tiles() {
            8
        } else {
            TILE_ROWS
        }
    }
    /// Warps per CTA of the base variants (`WARPS`): 2 at D = 256, else 4.
    pub fn base_warps(&self) -> u32 {
        if self.head_dim == 256 {
            2
        } else {
            4
        }
    }

    /// Warps per CTA with a kernel at ring depth `stages`: the base count, and [`WIDE_WARPS`] for
    /// 3-stage 8-row tiles (D ≤ 128).
    pub fn warp_options(&self, stages: usize) -> &'static [u32] {
        if self.eight_row_tiles() && stages == 3 {
            &[4, WIDE_WARPS]
        } else if self.head_dim == 256 {
            &[2]
        } else {
            &[4]
        }
    }

    /// Dynamic shared memory of the base kernel variant with `stages`-deep rings
    /// (`PagedSmem::kBytes`).
    pub fn smem_bytes(&self, stages: usize) -> u32 {
        self.smem_bytes_for(stages, self.base_warps())
    }

    /// Dynamic shared memory of the variant with `stages`-deep rings and `warps` warps per CTA.
    pub fn smem_bytes_for(&self, stages: usize, warps: u32) -> u32 {
        let d = self.head_dim;
        let warps = warps as usize;
        let tile = 16 * (d + 8) * 2;
        let es = if self.e4m3() { 1 } else { 2 };
        let ring_tile = 16 * (d * es).div_ceil(128) * 128;
        let per_warp = stages * 2 * ring_tile;
        let merge = warps * 16 * d * 4 + warps * 16 * 2 * 4;
        // 8-row tiles: the area peers push split partials into (kRecvO + kRecvMl).
        let recv = if self.eight_row_tiles() {
            (d + MAX_CLUSTER_SPLITS - 1) * 8 * 4 + MAX_CLUSTER_SPLITS * 8 * 2 * 4
        } else {
            0
        };
        (tile + (warps * per_warp).max(merge) + 16 * 2 * 4 + recv) as u32
    }

    /// The kernel symbol of the base variant with `stages`-deep rings, e.g.
    /// `b12x_paged_bf16_e4m3_d128` (2 stages) or `b12x_paged_bf16_d128_s3`.
    pub fn symbol(&self, stages: usize) -> String {
        self.symbol_for(stages, self.base_warps())
    }

    /// The kernel symbol with `stages`-deep rings and `warps` warps per CTA (one of
    /// [`Query::warp_options`]), e.g. `b12x_paged_bf16_d128_s3_n8_w8`.
    pub fn symbol_for(&self, stages: usize, warps: u32) -> String {
        let kv = if self.e4m3() { "_e4m3" } else { "" };
        let s = if stages > 2 { format!("_s{stages}") } else { String::new() };
        let n8 = if self.eight_row_tiles() { "_n8" } else { "" };
        let w = if warps != self.base_warps() { format!("_w{warps}") } else { String::new() };
        format!("b12x_paged_{}{kv}_d{}{s}{n8}{w}", self.q_dtype.name(), self.head_dim)
    }

    /// Ring depths with a kernel: 2 for every head dim, 3 for D ≤ 128, and 6 for BF16/FP16
    /// caches on 8-row (decode) tiles (one CTA per SM on SM90; SM120's 99 KB per CTA does not
    /// hold it, so a plan asking for it there gets `Unsupported`).
    pub fn stage_options(&self) -> &'static [usize] {
        if self.head_dim > 128 {
            &[2]
        } else if self.eight_row_tiles() && !self.e4m3() {
            &[2, 3, DEEP_STAGES]
        } else {
            &[2, 3]
        }
    }

    /// CTAs of the `stages` variant one SM holds on a device with `smem_optin` bytes of shared
    /// memory per CTA (an SM has about 1 KB more; each CTA also reserves 1 KB), capped by what
    /// the kernel's register budget allows (`MINB`: 3; 2 at D = 256 and for 3-stage BF16/FP16
    /// rings; 4 for 2-stage E4M3 rings on 8-row tiles; 1 for the 6-stage rings). 0 when one CTA
    /// does not fit.
    pub fn ctas_per_sm(&self, stages: usize, smem_optin: u32) -> usize {
        self.ctas_per_sm_for(stages, self.base_warps(), smem_optin)
    }

    /// [`Query::ctas_per_sm`] of the variant with `warps` warps per CTA (the wide variants'
    /// register budget is for one CTA per SM).
    pub fn ctas_per_sm_for(&self, stages: usize, warps: u32, smem_optin: u32) -> usize {
        let smem = self.smem_bytes_for(stages, warps);
        if smem > smem_optin {
            return 0;
        }
        let regs = if stages == DEEP_STAGES || warps == WIDE_WARPS {
            1
        } else if self.head_dim == 256 || (stages == 3 && !self.e4m3()) {
            2
        } else if stages == 2 && self.e4m3() && self.eight_row_tiles() {
            4
        } else {
            3
        };
        (((smem_optin + 1024) / (smem + 1024)) as usize).min(regs)
    }

    /// The ring depth `plan` takes on a device with `sm_count` SMs and `smem_optin` bytes of
    /// shared memory per CTA: 3 for BF16/FP16 caches when the capacity batch has at most one
    /// (request, KV head, tile) CTA per SM (the splits then fill the machine and each warp's
    /// deeper ring shortens its long chain of blocks) and the variant fits; else 2. Fitted to the
    /// H200 decode bench (`bench-results/2026-11-30-h200-i/`: B = 8 is 1–8% faster with 3 stages,
    /// B = 32 the same, B = 128 up to 3% slower; E4M3 no faster at any B).
    pub fn default_stages(&self, sm_count: u32, smem_optin: u32) -> usize {
        let pairs = self.tile_slots();
        let three = !self.e4m3() && self.stage_options().contains(&3) && self.ctas_per_sm(3, smem_optin) > 0;
        if three && pairs <= sm_count as usize {
            3
        } else {
            2
        }
    }

    /// Whether a PDL plan without a split or stage override takes the 6-stage decode rings
    /// ([`DEEP_STAGES`]): at D = 128 with a BF16/FP16 cache where the variant fits, when its
    /// default grid ([`Query::split_choice`] at one CTA per SM) is one wave of at least 2 splits
    /// per pair, merged through scratch or in pairs (unsplit grids, e.g. B = 9–16 of 8 KV heads,
    /// keep the 3-stage default: not measured) — each warp's chain of blocks is then long and the deeper
    /// ring keeps 5 blocks in flight (and issues them before `griddepcontrol.wait`). Measured on
    /// the H200 in PDL decode graphs of 8 calls (`bench-results/2026-12-04-h200-d/`, call 2):
    /// B = 8 × 2k / 8k (2 splits in pairs) 19.18 / 63.40 µs against 19.69 / 64.78 with 3
    /// stages; B = 1 × 32k (16 splits through scratch) 40.10 against 44.64 (33 splits, 3
    /// stages); but B = 1 × 2k / 8k with 8 splits in a cluster 7.40 / 16.29 against 6.69 /
    /// 15.81 (hence not for clusters of more than 2). D = 64 / 96 are tested, not measured.
    pub fn deep_ring_default(&self, sm_count: u32, smem_optin: u32, clusters: bool) -> bool {
        if self.head_dim != 128
            || !self.stage_options().contains(&DEEP_STAGES)
            || self.ctas_per_sm(DEEP_STAGES, smem_optin) == 0
        {
            return false;
        }
        let (cap, cluster) = self.split_choice(sm_count, 1, clusters);
        cap >= 2 && self.tile_slots() * cap <= sm_count as usize && (!cluster || cap == 2)
    }

    /// The ring depth a PDL plan takes by default ([`PlanOptions::pdl`]): [`deep_ring_default`](Query::deep_ring_default)'s 6, else [`Query::default_stages`],
    /// unless its default grid is one wave of single CTAs (no cluster) that the next call could
    /// only partly place beside the running one, and another depth's default grid is one wave
    /// that it places evenly (see [`pdl_places_evenly`]). Measured on the H200, 8 back-to-back
    /// calls per graph: B = 32 × 2k BF16 with PDL takes 79 µs per call with 2-stage rings (3
    /// CTAs per SM, 140 of the next call's 256 CTAs fit beside the running call) and 62.7 µs with
    /// 3 (2 per SM, 8 free slots), against 65.3 µs without PDL
    /// (`bench-results/2026-12-01-h200-i/`, call 6). Grids merged in clusters keep the default:
    /// B = 8 E4M3 (6 splits in clusters, 38% fit) gained from PDL as it is, and lost 30% with 3
    /// stages (call 7).
    pub fn pdl_default_stages(&self, sm_count: u32, smem_optin: u32, clusters: bool) -> usize {
        if self.deep_ring_default(sm_count, smem_optin, clusters) {
            return DEEP_STAGES;
        }
        let base = self.default_stages(sm_count, smem_optin);
        // (one wave of single CTAs, placed evenly) of the default grid at `stages`.
        let grid = |stages: usize| -> Option<(bool, bool)> {
            let ctas = self.ctas_per_sm(stages, smem_optin);
            if ctas == 0 {
                return None;
            }
            let (cap, cluster) = self.split_choice(sm_count, ctas, clusters);
            let (g, slots) = (self.tile_slots() * cap, ctas * sm_count as usize);
            Some((!cluster && g <= slots, pdl_places_evenly(g, slots)))
        };
        match grid(base) {
            Some((true, false)) => self
                .stage_options()
                .iter()
                .copied()
                .find(|&s| s != base && s != DEEP_STAGES && grid(s) == Some((true, true)))
                .unwrap_or(base),
            _ => base,
        }
    }

    /// Whether a plan without a `stages` or `warps` override takes the 8-warp decode variant
    /// (3-stage rings, [`WIDE_WARPS`]): 8-row tiles where the variant fits (one CTA per SM;
    /// never on SM120), at most one (request, KV head, tile) triple per SM (its grid is one wave
    /// of single CTAs, the splits filling the machine), and either an E4M3 cache or a capacity of
    /// at least [`WIDE_MIN_CONTEXT`] tokens per request (each warp's chain of blocks long enough
    /// to gain from halving it). Measured on the H200, PDL, 8 calls per graph, µs per call,
    /// 4 warps (the plan's previous default) against 8 (`bench-results/2026-12-04-h200-g/call2`):
    /// B = 1 × 2k / 8k / 32k BF16 6.65 / 15.82 / 39.91 against 7.01 / 13.81 / 37.63, E4M3 6.92 /
    /// 15.82 / 36.96 against 6.34 / 11.71 / 25.36; B = 8 × 2k / 8k BF16 19.09 / 63.55 against
    /// 18.81 / 63.82, E4M3 13.67 / 40.13 against 13.10 / 36.74. (Hence not BF16 at 2k.)
    pub fn wide_default(&self, sm_count: u32, smem_optin: u32) -> bool {
        self.warp_options(3).contains(&WIDE_WARPS)
            && self.ctas_per_sm_for(3, WIDE_WARPS, smem_optin) > 0
            && self.tile_slots() <= sm_count as usize
            && (self.e4m3() || self.max_pages * self.page_size >= WIDE_MIN_CONTEXT)
    }

    /// The one-wave split cap for `sm_count` SMs (3 CTAs per SM), merged through scratch (a
    /// plan takes [`Query::split_choice`], which starts from it): when the capacity batch's
    /// (request, KV head, tile) CTAs fill more than a wave, 2 (shorter CTAs even out the SMs
    /// over the waves); when they fill every SM but fit one wave, 1; when fewer than one per SM,
    /// as many splits as keep it one wave (a CTA's fixed costs — Q tile, warp and split merges —
    /// are paid once per long stretch of keys). Fitted to the H200 decode bench
    /// (`bench-results/2026-11-30-h200-g/attention/`: B = 8 best at 6 of {6, 25, 50}, B = 32 at 1
    /// of {1, 7, 13}, B = 128 at 2 of {1, 2, 4}; `bench-results/2026-11-30-h200-i/n8/`: B = 32
    /// E4M3 at 1 of {1, 2} with 4 CTAs per SM); a tuning race over split caps is the better
    /// answer. Within [1, MAX_SPLITS]; each split takes at least [`MIN_CHUNK`] keys, so short
    /// contexts use fewer.
    pub fn max_splits(&self, sm_count: u32) -> usize {
        self.max_splits_at(sm_count, 3)
    }

    /// The split cap and merge a plan takes by default for a variant holding `ctas_per_sm` CTAs
    /// per SM, on a device with thread block clusters when `clusters`: `(cap, cluster_merge)`.
    ///
    /// Beyond a wave: 2 splits, merged in clusters of 2 (a pair of CTAs always fits where two
    /// single ones do). Small batches with capacity contexts below [`LONG_CONTEXT`]: as many
    /// splits as keep the grid within 3/4 of the slots (at least 2, at most
    /// [`MAX_CLUSTER_SPLITS`]; 2 for BF16/FP16 caches whose pairs fill a third to a half of the
    /// SMs), merged in a cluster — clusters of 3 or more hold only 77–94% of
    /// the single CTAs an H200 holds at once (`cudaOccupancyMaxActiveClusters`), so a full wave
    /// of them would spill into a second. Otherwise [`Query::max_splits_at`] with the scratch
    /// merge. Fitted to the H200 decode bench at B = 8 and 128 (`bench-results/2026-12-01-h200/`):
    /// B = 8 × 2k BF16 29.9 µs with 3 splits in clusters against 32.5 µs with 4 through scratch,
    /// E4M3 20.5 against 23.2 µs with 6 against 8; at 32k BF16 loses 4% that way and E4M3 5%
    /// (hence the scratch merge for long contexts); B = 128 2–4% faster with clusters of 2;
    /// B = 4 and 16 BF16 2.5–12% faster at 2k and 8k, but E4M3 at B = 16 × 8k 7% slower with 3
    /// splits in clusters than with 4 through scratch. A race over split caps on the live
    /// lengths would be the better answer.
    pub fn split_choice(&self, sm_count: u32, ctas_per_sm: usize, clusters: bool) -> (usize, bool) {
        let pairs = self.tile_slots();
        let slots = ctas_per_sm.max(1) * sm_count as usize;
        let full = self.max_splits_at(sm_count, ctas_per_sm);
        if !clusters || full < 2 {
            return (full, false);
        }
        if pairs > slots {
            return (2, true);
        }
        // The most splits whose clusters still fit (at least 2: pairs always fit). BF16/FP16
        // caches whose pairs fill a third to a half of the SMs take 2 (one CTA per SM): B = 8 ×
        // Llama-3-8B heads (64 pairs) on 128 SMs rather than 3 splits on 124 of them, two CTAs
        // on most — 4–5% faster at 2k and 8k; at B = 4 one CTA per SM (4 splits) against 6 was
        // 3% faster at 2k and 2% slower at 8k, so smaller batches keep the slots' count
        // (`bench-results/2026-12-01-h200-h/paged-push/`). E4M3's register conversion wants
        // the CTAs in flight (6 splits beat 4 at B = 8).
        // At most MAX_CLUSTER_SPLITS: a batch whose pairs fill less than 3/32 of the slots
        // (B = 1, 2 of 8 KV heads) merges 8 splits in clusters rather than keeping the one-wave
        // cap through scratch — B = 1 × 2k / 8k BF16 in a PDL decode graph 6.69 / 15.81 µs
        // against 10.80 / 19.09 with 33 scratch-merged splits, E4M3 6.55 / 15.49 against 12.15
        // / 19.04 (`bench-results/2026-12-04-h200-d/`, call 2; plain, in the decoder layer's
        // B = 1 × 4k step: attention alone 17.7 → 13.7 µs, call 5). B = 2 (16 pairs; B = 3
        // already took 8 in a cluster), x8 graphs against its old 16 through scratch (call 10):
        // 2k 10.00 / 8.46 µs (plain / PDL) against 13.69 / 11.34, 8k 22.03 / 22.24 against
        // 27.17 / 24.57; E4M3 at 8k +4% plain (20.31 against 19.55), even with PDL.
        let mut fit = (3 * slots / (4 * pairs)).clamp(2, MAX_CLUSTER_SPLITS);
        if !self.e4m3() && 2 * pairs <= sm_count as usize && 3 * pairs > sm_count as usize {
            fit = 2;
        }
        if self.max_pages * self.page_size < LONG_CONTEXT && self.cluster_fits(fit, sm_count, ctas_per_sm) {
            (fit, true)
        } else {
            (full, false)
        }
    }

    /// Whether a split cap `cap` of this query's capacity batch may merge in clusters without
    /// losing occupancy: 2 always; 3 to [`MAX_CLUSTER_SPLITS`] when the grid takes at most 3/4
    /// of the `ctas_per_sm · sm_count` slots (see [`Query::split_choice`]).
    pub fn cluster_fits(&self, cap: usize, sm_count: u32, ctas_per_sm: usize) -> bool {
        let slots = ctas_per_sm.max(1) * sm_count as usize;
        cap == 2 || ((3..=MAX_CLUSTER_SPLITS).contains(&cap) && 4 * cap * self.tile_slots() <= 3 * slots)
    }

    /// The one-wave split cap for a variant holding `ctas_per_sm` CTAs per SM (merged through
    /// scratch; [`Query::split_choice`] is what a plan takes).
    pub fn max_splits_at(&self, sm_count: u32, ctas_per_sm: usize) -> usize {
        let pairs = self.tile_slots();
        let slots = ctas_per_sm.max(1) * sm_count as usize;
        if pairs > slots {
            2
        } else if pairs >= sm_count as usize {
            1
        } else {
            (slots / pairs).clamp(1, MAX_SPLITS)
        }
    }

    /// Checks `args` against the query and builds the kernel parameters (scratch pointers
    /// left 0); nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<PagedParams> {
        let (h, hkv, d, p) = (self.heads, self.kv_heads, self.head_dim, self.page_size);
        let (b, pt_stride) =
            check_batch_tensors(&args.page_table, &args.seq_lens, &args.cu_seqlens_q, self.max_pages, self.max_batch)?;
        let t = args.q.shape().first().copied().unwrap_or(0);
        args.q.expect("q", "[total_q, H, D]", self.q_dtype, &[t, h, d])?;
        args.o.expect("o", "[total_q, H, D]", self.q_dtype, &[t, h, d])?;
        if t > self.max_tokens {
            return Err(Error::Capacity { what: "total_q (rows of q)", got: t, capacity: self.max_tokens });
        }
        let cache = [self.num_pages, p, hkv, d];
        for (name, c) in [("k_cache", &args.k_cache), ("v_cache", &args.v_cache)] {
            let dtype = if self.e4m3() && c.dtype() == DType::U8 { DType::U8 } else { self.kv_dtype };
            c.expect(name, "[num_pages, P, Hkv, D]", dtype, &cache)?;
            require_contiguous(name, c)?;
            c.require_aligned(name, 16)?;
        }
        for (name, s) in [("k_scale", &args.k_scale), ("v_scale", &args.v_scale)] {
            match (s, self.e4m3()) {
                (Some(s), true) => {
                    s.expect(name, "[B, Hkv]", DType::F32, &[b, hkv])?;
                    require_contiguous(name, s)?;
                }
                (None, false) => {}
                (s, e4m3) => {
                    let expected = if e4m3 { format!("[B, Hkv] = [{b}, {hkv}] (E4M3 cache)") } else { "none".into() };
                    let actual = s.map(|s| s.shape().to_vec()).unwrap_or_default();
                    return Err(Error::Shape { tensor: name, expected, actual });
                }
            }
        }
        crate::checks::sinks(&args.sinks, self.sinks, h)?;
        let q_stride = crate::checks::heads_row_stride("q", args.q.strides(), t, h, d)?;
        let o_stride = crate::checks::heads_row_stride("o", args.o.strides(), t, h, d)?;
        args.q.require_aligned("q", 16)?;
        args.o.require_aligned("o", 16)?;
        let lse_stride = crate::checks::lse_row_stride(&args.lse, t, h)?;
        args.error.expect("error", "[1]", DType::I32, &[1])?;
        // Outputs must not overlap any input or each other (absent tensors: empty spans, no
        // allocation on this path).
        let span = |x: &Option<TensorRef<'_>>| x.as_ref().map_or((0, 0), |x| x.byte_span());
        let inputs = [
            ("q", args.q.byte_span()),
            ("k_cache", args.k_cache.byte_span()),
            ("v_cache", args.v_cache.byte_span()),
            ("k_scale", span(&args.k_scale)),
            ("v_scale", span(&args.v_scale)),
            ("sinks", span(&args.sinks)),
            ("page_table", args.page_table.byte_span()),
            ("seq_lens", args.seq_lens.byte_span()),
            ("cu_seqlens_q", args.cu_seqlens_q.byte_span()),
        ];
        let lse_span = args.lse.as_ref().map_or((0, 0), |l| l.byte_span());
        let outputs = [("o", args.o.byte_span()), ("error", args.error.byte_span()), ("lse", lse_span)];
        crate::checks::outputs_disjoint(&inputs, &outputs)?;
        Ok(PagedParams {
            q: args.q.ptr(),
            k_cache: args.k_cache.ptr(),
            v_cache: args.v_cache.ptr(),
            k_scale: args.k_scale.map_or(0, |s| s.ptr()),
            v_scale: args.v_scale.map_or(0, |s| s.ptr()),
            sinks: args.sinks.map_or(0, |s| s.ptr()),
            page_table: args.page_table.ptr(),
            seq_lens: args.seq_lens.ptr(),
            cu_seqlens_q: args.cu_seqlens_q.ptr(),
            o: args.o.ptr(),
            lse: args.lse.as_ref().map_or(0, |l| l.ptr()),
            error: args.error.ptr(),
            q_stride,
            o_stride,
            lse_stride,
            tokens: t as i32,
            batch: b as i32,
            max_pages: self.max_pages as i32,
            pt_stride: pt_stride as i32,
            num_pages: self.num_pages as i32,
            heads: h as i32,
            kv_heads: hkv as i32,
            page_size: p as i32,
            tiles: self.tiles() as i32,
            min_chunk: MIN_CHUNK as i32,
            scale_log2: self.scale * std::f32::consts::LOG2_E,
            window_left: self.window_left,
            ..PagedParams::default()
        })
    }
}

/// A validated query bound to a device; a cheap handle whose prepared state a session fills.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    max_splits: usize,
    stages: usize,
    warps: u32,
    cluster_merge: bool,
    pdl: bool,
    scratch: ScratchLayout,
    slot: PlanSlot,
}

/// Validates `query` and sizes the split scratch. Allocates, compiles and launches nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    plan_with(query, device, PlanOptions::default())
}

/// Overrides of what [`plan`] derives from the query and the device, for tuning tools and
/// benchmarks that sweep them. `None` keeps the derived value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Most CTAs one request's keys are split over, in `[1, MAX_SPLITS]` (the scratch grows with
    /// it); default from [`Query::split_choice`] for the variant.
    pub max_splits: Option<usize>,
    /// Depth of each warp's ring of 16-key blocks, one of [`Query::stage_options`], and the
    /// variant must fit the device's shared memory; default 3 with the 8-warp variant
    /// ([`Query::wide_default`]), else [`Query::pdl_default_stages`] for PDL plans without a split
    /// cap, else [`Query::default_stages`].
    pub stages: Option<usize>,
    /// Whether a request's splits merge through distributed shared memory (`true`: the splits
    /// of one (request, KV head, tile) launch as one thread block cluster) or through the
    /// scratch (`false`: the last split to arrive merges). Default: [`Query::split_choice`]'s
    /// with the default cap, [`Query::cluster_fits`] with a given one, on a device with clusters
    /// (compute capability ≥ 9.0). `Some(true)` needs a cap in `[2, MAX_CLUSTER_SPLITS]` and
    /// such a device (else a typed error); it may cost occupancy where it does not fit.
    pub cluster_merge: Option<bool>,
    /// Launch every call with programmatic dependent launch (PDL), so that in a stream or graph
    /// of back-to-back kernels (a decode step) the call starts while the kernel before it
    /// finishes: before `griddepcontrol.wait` the kernel reads only the lengths, the page table,
    /// `k_scale` and (8-row decode tiles) the first blocks of the cache whose keys all precede
    /// the request's new tokens; Q, the blocks holding new tokens and every write (o, lse, the
    /// error word, the scratch) come after it. Each CTA lets the next PDL kernel launch right
    /// after its own wait, so only the kernel right before a call can still be running.
    /// **The lengths, `cu_seqlens_q`, the page table and `k_scale` must not be written by that
    /// kernel** (`attention.kv_append` writes only K and V; engines update lengths and page
    /// tables from the host or earlier in the step). Default `false`.
    ///
    /// Measure it on your shapes. In 8 back-to-back decode calls per graph on the H200 it took
    /// 1.8–11% off per call at B = 8 × 2k and 8k (BF16 and E4M3) and at B = 32 × 2k E4M3, but
    /// made B = 32 × 2k BF16 20% slower with the default 2-stage rings (79 instead of 65 µs).
    /// What decides it is where the next call's CTAs land. They land evenly when they all fit in
    /// the CTA slots the running call leaves free, or when nearly none are free (so they take
    /// the slots its CTAs leave). They land unevenly when only part of them fit. At B = 32 × 2k
    /// BF16, `stages: Some(3)` (two CTAs per SM instead of three) with PDL takes 62.7 µs, 92% of
    /// the read ceiling; the same depth made E4M3 slower (42.9 against 37.4 µs), because it
    /// moved E4M3 from all-fit to part-fit (`bench-results/2026-12-01-h200-i/`, calls 3 and 6).
    /// Without `stages` (and `max_splits`), a PDL plan takes [`Query::pdl_default_stages`],
    /// which applies this rule.
    ///
    /// (`gemm.bf16_gemv` has its flag in its `Query` because a PDL plan races chains of PDL
    /// calls and caches its choice under its own key; this op's choices do not depend on it.)
    pub pdl: bool,
    /// Warps per CTA, one of [`Query::warp_options`] at the plan's ring depth: [`WIDE_WARPS`]
    /// takes the `_s3_n8_w8` variants (8-row decode tiles, D ≤ 128; without `stages` the plan
    /// then takes 3-stage rings), whose 8 warps split a CTA's keys so each walks half the chain
    /// of blocks — for grids of at most one CTA per SM, where the 4-warp tile's warps are bound
    /// by their own instruction chains. Default: [`WIDE_WARPS`] where [`Query::wide_default`]
    /// says (only when `stages` is not given either), else [`Query::base_warps`].
    pub warps: Option<u32>,
}

/// Whether a call launched with PDL while another call of the same one-wave grid (`grid` CTAs
/// in `slots` CTA slots) runs finds its slots evenly: all of it fits in the free slots at once
/// (`slots − grid ≥ grid`), or almost none does (`slots − grid ≤ grid / 16`) and it takes the
/// slots the running call's CTAs leave, as they leave. In between, part of it lands beside the
/// running call and the rest wherever CTAs exit first, unevenly over the SMs.
pub fn pdl_places_evenly(grid: usize, slots: usize) -> bool {
    let free = slots.saturating_sub(grid);
    free >= grid || 16 * free <= grid
}

/// [`plan`] with `options` overriding the split cap or the ring depth.
///
/// ```no_run
/// # use b12x_attention::paged::{self, PlanOptions, Query};
/// # fn demo(query: &Query, dev: &std::sync::Arc<b12x_core::Device>) -> b12x_core::Result<()> {
/// let options = PlanOptions { max_splits: Some(12), stages: Some(3), ..Default::default() };
/// let plan = paged::plan_with(query, dev, options)?;
/// assert_eq!((plan.max_splits(), plan.stages(), plan.cluster_merge()), (12, 3, false));
/// # Ok(())
/// # }
/// ```
pub fn plan_with(query: &Query, device: &Arc<Device>, options: PlanOptions) -> Result<Plan> {
    query.validate()?;
    let optin = device.smem_optin();
    let clusters = device.cc().0 >= 9;
    // The 8-warp decode variant by default where it gains (without a stages or warps override).
    let wide = options.stages.is_none() && options.warps.is_none() && query.wide_default(device.sm_count(), optin);
    let stages = options.stages.unwrap_or_else(|| {
        if wide || options.warps == Some(WIDE_WARPS) {
            3
        } else if options.pdl && options.max_splits.is_none() {
            query.pdl_default_stages(device.sm_count(), optin, clusters)
        } else {
            query.default_stages(device.sm_count(), optin)
        }
    });
    if !query.stage_options().contains(&stages) {
        return Err(Error::InvalidQuery {
            op: OP,
            field: "stages",
            reason: format!("must be one of {:?} at D = {}, got {stages}", query.stage_options(), query.head_dim),
        });
    }
    let warps = options.warps.unwrap_or(if wide { WIDE_WARPS } else { query.base_warps() });
    if !query.warp_options(stages).contains(&warps) {
        return Err(Error::InvalidQuery {
            op: OP,
            field: "warps",
            reason: format!(
                "must be one of {:?} with {stages}-stage rings at D = {} ({}-row tiles), got {warps}",
                query.warp_options(stages),
                query.head_dim,
                query.tile_rows()
            ),
        });
    }
    let ctas = query.ctas_per_sm_for(stages, warps, optin);
    if ctas == 0 {
        return Err(Error::Unsupported {
            op: OP,
            device: device.name().to_string(),
            reason: format!(
                "the {stages}-stage {warps}-warp variant needs {} bytes of shared memory per CTA, the device has {optin}",
                query.smem_bytes_for(stages, warps)
            ),
        });
    }
    let (max_splits, cluster_default) = match options.max_splits {
        Some(cap) => (cap, clusters && query.cluster_fits(cap, device.sm_count(), ctas)),
        None => query.split_choice(device.sm_count(), ctas, clusters),
    };
    if !(1..=MAX_SPLITS).contains(&max_splits) {
        return Err(Error::InvalidQuery {
            op: OP,
            field: "max_splits",
            reason: format!("must lie in [1, {MAX_SPLITS}], got {max_splits}"),
        });
    }
    let cluster_ok = clusters && (2..=MAX_CLUSTER_SPLITS).contains(&max_splits);
    let cluster_merge = match options.cluster_merge {
        Some(true) if !cluster_ok => {
            return Err(Error::InvalidQuery {
                op: OP,
                field: "cluster_merge",
                reason: format!(
                    "needs a split cap in [2, {MAX_CLUSTER_SPLITS}] (got {max_splits}) on a device with clusters \
                     (compute capability {:?})",
                    device.cc()
                ),
            })
        }
        Some(c) => c,
        None => cluster_default,
    };
    let slots = query.tile_slots();
    let mut scratch = ScratchLayout::new();
    if max_splits > 1 && !cluster_merge {
        // Per (request, KV head, tile) and split: the 16 x D unnormalized output, then (m, l)
        // of its 16 rows, then one 8-byte tagged arrival word (no zeroing needed).
        scratch.add("partials", slots * max_splits * TILE_ROWS * query.head_dim * 4);
        scratch.add("partial_ml", slots * max_splits * TILE_ROWS * 2 * 4);
        scratch.add("counters", slots * 8);
    }
    let buckets = vec![Bucket { lo: 1, hi: query.max_batch }];
    Ok(Plan {
        query: query.clone(),
        device: device.clone(),
        buckets,
        max_splits,
        stages,
        warps,
        cluster_merge,
        pdl: options.pdl,
        scratch,
        slot: PlanSlot::default(),
    })
}

impl Plan {
    pub fn query(&self) -> &Query {
        &self.query
    }
    /// Most CTAs one request's keys are split over on this device.
    pub fn max_splits(&self) -> usize {
        self.max_splits
    }
    /// Depth of each warp's ring of 16-key blocks (the kernel variant).
    pub fn stages(&self) -> usize {
        self.stages
    }
    /// Warps per CTA (the kernel variant; see [`PlanOptions::warps`]).
    pub fn warps(&self) -> u32 {
        self.warps
    }
    /// Whether split partials merge through distributed shared memory (see
    /// [`PlanOptions::cluster_merge`]).
    pub fn cluster_merge(&self) -> bool {
        self.cluster_merge
    }
    /// Whether calls launch with programmatic dependent launch ([`PlanOptions::pdl`]).
    pub fn pdl(&self) -> bool {
        self.pdl
    }
    /// The launch's cluster size along x: the split cap when the splits merge in a cluster, else
    /// 0 (no cluster).
    pub(crate) fn cluster_x(&self) -> u32 {
        if self.cluster_merge {
            self.max_splits as u32
        } else {
            0
        }
    }
    /// Scratch for the split merges (`partials`, `partial_ml`, `counters`), empty when the plan
    /// never splits or merges its splits in a cluster.
    pub fn scratch_layout(&self) -> ScratchLayout {
        self.scratch.clone()
    }
}

/// The plans `cargo xtask prepare` prepares by default: Llama-3-8B decode (H 32, Hkv 8, D 128,
/// P 16), BF16 and E4M3 KV, up to 64 requests of 8k tokens. One config each: preparing loads the
/// kernels (nothing is raced).
pub fn default_profile_plans(device: &Arc<Device>) -> Result<Vec<Box<dyn OpPlan>>> {
    let mut out: Vec<Box<dyn OpPlan>> = Vec::new();
    for kv_dtype in [DType::BF16, DType::E4M3] {
        let q = Query {
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            page_size: 16,
            q_dtype: DType::BF16,
            kv_dtype,
            scale: 1.0 / 128f32.sqrt(),
            window_left: -1,
            sinks: false,
            max_batch: 64,
            max_tokens: 64,
            max_q_len: 1,
            max_pages: 512,
            num_pages: 64 * 512,
        };
        out.push(Box::new(plan(&q, device)?));
    }
    Ok(out)
}

/// The tensors of one call. Shapes and dtypes as in the module docs.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[total_q, H, D]`.
    pub q: TensorRef<'a>,
    /// `[num_pages, P, Hkv, D]`.
    pub k_cache: TensorRef<'a>,
    /// `[num_pages, P, Hkv, D]`.
    pub v_cache: TensorRef<'a>,
    /// `[B, Hkv]` f32, E4M3 caches only.
    pub k_scale: Option<TensorRef<'a>>,
    /// `[B, Hkv]` f32, E4M3 caches only.
    pub v_scale: Option<TensorRef<'a>>,
    /// `[H]` f32, exactly when the plan has sinks.
    pub sinks: Option<TensorRef<'a>>,
    /// `[B, max_pages]` i32.
    pub page_table: TensorRef<'a>,
    /// `[B]` i32: context lengths including the new tokens.
    pub seq_lens: TensorRef<'a>,
    /// `[B + 1]` i32.
    pub cu_seqlens_q: TensorRef<'a>,
    /// `[total_q, H, D]`, q's dtype.
    pub o: TensorMut<'a>,
    /// `[total_q, H]` f32, optional.
    pub lse: Option<TensorMut<'a>>,
    /// `[1]` i32 fault bits.
    pub error: TensorMut<'a>,
}

/// Computes `args.o` (and `args.lse`) on `stream`. Every check happens before the launch; no
/// allocation, no synchronization. `B = 0` or `total_q = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let mut params = plan.query.kernel_params(&args)?;
    let bound = plan.scratch.bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.batch == 0 || params.tokens == 0 {
        return Ok(());
    }
    params.max_splits = plan.max_splits as i32;
    params.partials = bound.ptr("partials");
    params.partial_ml = bound.ptr("partial_ml");
    params.counters = bound.ptr("counters");
    let selected = resolve(plan, 0, stream)?;
    if plan.pdl {
        params.flags |= params::FLAG_PDL;
    }
    launch(&plan.query, plan.stages, plan.warps, plan.cluster_x(), &selected, &params, stream)
}

/// The grid of a call with parameters `p` (also `attention.rope_paged`'s).
pub(crate) fn launch_dims(q: &Query, stages: usize, warps: u32, p: &PagedParams) -> LaunchDims {
    LaunchDims {
        grid: (p.max_splits as u32, p.tiles as u32, (p.batch * p.kv_heads) as u32),
        block: (32 * warps, 1, 1),
        smem_bytes: q.smem_bytes_for(stages, warps),
    }
}

fn launch(
    q: &Query,
    stages: usize,
    warps: u32,
    cluster_x: u32,
    selected: &Selected,
    p: &PagedParams,
    stream: &CudaStream,
) -> Result<()> {
    let kernel = selected.kernels.first().ok_or_else(|| Error::UnknownConfig {
        op: OP,
        bucket: String::new(),
        config: selected.config.clone(),
    })?;
    let dims = launch_dims(q, stages, warps, p);
    // SAFETY: PagedParams mirrors the kernel's struct (asserted on both sides) and passed
    // `Query::kernel_params`; the scratch regions were bound at the plan's sizes (grid x =
    // max_splits, z = B · Hkv ≤ capacity); the kernel bounds every device index before use.
    // A cluster spans grid x exactly (cluster_x = max_splits).
    // With FLAG_PDL the kernel waits (griddepcontrol.wait) before every write and every read
    // the kernel before it may write (see PlanOptions::pdl).
    let pdl = p.flags & params::FLAG_PDL != 0;
    unsafe { kernel.launch_ex(stream, dims, p, LaunchOpts { pdl, cluster_x }) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        let q = &self.query;
        format!(
            "H={} Hkv={} D={} P={} q={} kv={} window={} sinks={} max_batch={} max_tokens={} max_q_len={} max_pages={} \
             num_pages={}",
            q.heads,
            q.kv_heads,
            q.head_dim,
            q.page_size,
            q.q_dtype,
            q.kv_dtype,
            q.window_left,
            q.sinks,
            q.max_batch,
            q.max_tokens,
            q.max_q_len,
            q.max_pages,
            q.num_pages
        )
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::PAGED_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        vec![CONFIG.into()]
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        if config_index == 0 {
            vec![self.query.symbol_for(self.stages, self.warps)]
        } else {
            Vec::new()
        }
    }
    fn dynamic_smem(&self, _bucket: usize, _config_index: usize) -> u32 {
        self.query.smem_bytes_for(self.stages, self.warps)
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        // One config: the session never races it. For tools that time every op.
        let (race, params) = self.race_call(&[])?;
        Ok(Box::new(RaceCase {
            query: self.query.clone(),
            stages: self.stages,
            warps: self.warps,
            cluster_x: self.cluster_x(),
            params,
            _buffer: race,
        }))
    }
}

impl Plan {
    /// The timing tools' call: one request, one new token, context of one page (page 0), zero
    /// inputs, in one race buffer holding q, o, the k and v pages, the scales, the sinks, the
    /// page table's row, the length, cu, the error word and the scratch (buffers 0–11), then
    /// `extra` more buffers (12.., for `attention.rope_paged`'s rows).
    pub(crate) fn race_call(&self, extra: &[usize]) -> Result<(RaceBuffer, PagedParams)> {
        let q = &self.query;
        let stream = self.device.stream();
        let (h, hkv, d) = (q.heads, q.kv_heads, q.head_dim);
        let page = q.page_size * hkv * d * q.kv_dtype.size_bytes();
        let row = h * d * q.q_dtype.size_bytes();
        let scratch = self.scratch.total_bytes();
        let mut sizes = vec![row, row, page, page, hkv * 4, hkv * 4, h * 4, q.max_pages * 4, 4, 8, 4, scratch];
        sizes.extend_from_slice(extra);
        let race = RaceBuffer::new(&self.device, &sizes)?;
        b12x_core::memset_u32(stream, race.ptrs[8], 1, 1)?;
        b12x_core::memset_u32(stream, race.ptrs[9] + 4, 1, 1)?;
        let at = |i: usize| race.ptrs[i];
        let region =
            |name: &str| self.scratch.regions().iter().find(|r| r.name == name).map_or(0, |r| at(11) + r.offset as u64);
        let e4m3 = q.e4m3();
        let params = PagedParams {
            q: at(0),
            o: at(1),
            k_cache: at(2),
            v_cache: at(3),
            k_scale: if e4m3 { at(4) } else { 0 },
            v_scale: if e4m3 { at(5) } else { 0 },
            sinks: if q.sinks { at(6) } else { 0 },
            page_table: at(7),
            seq_lens: at(8),
            cu_seqlens_q: at(9),
            error: at(10),
            partials: region("partials"),
            partial_ml: region("partial_ml"),
            counters: region("counters"),
            q_stride: (h * d) as i64,
            o_stride: (h * d) as i64,
            tokens: 1,
            batch: 1,
            max_pages: q.max_pages as i32,
            pt_stride: q.max_pages as i32,
            num_pages: 1,
            heads: h as i32,
            kv_heads: hkv as i32,
            page_size: q.page_size as i32,
            tiles: q.tiles() as i32,
            max_splits: self.max_splits as i32,
            min_chunk: MIN_CHUNK as i32,
            scale_log2: q.scale * std::f32::consts::LOG2_E,
            window_left: q.window_left,
            ..PagedParams::default()
        };
        Ok((race, params))
    }
}

/// What a timing tool launches.
struct RaceCase {
    query: Query,
    stages: usize,
    warps: u32,
    cluster_x: u32,
    params: PagedParams,
    _buffer: RaceBuffer,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(&self.query, self.stages, self.warps, self.cluster_x, selected, &self.params, stream)
    }
}
