//! The launch shape shared by the flat quantizer kernels (`quantization.mxfp8`, `mxfp4`,
//! `nvfp4`, `fp8_block`): the input is cut into slots of 16 elements of a row (two 16-byte
//! loads); a CTA of `threads` threads covers `threads · unroll` consecutive slots, thread `t`
//! taking slots `t, t + threads, …` (`ChunkGrid` / `load_units` in `b12x/quant.cuh`; nvfp4 and
//! mx address unpadded rows from the flat slot index instead, `load_dense`) and issuing
//! all its loads before converting any. 16 elements per lane (rather than 8) halves the scale,
//! shuffle and address work per element: on the H200 it took mxfp4 from 73% to 93% of the read
//! ceiling and mxfp8 / block FP8 from 84–86% to 90–93% (`bench-results/2026-11-30-h200-j`).
//!
//! A config id is `"t{threads}_u{unroll}"`, e.g. `"t256_u2"`; every pair of [`THREADS`] ×
//! [`UNROLL`] is instantiated in each kernel file.

use b12x_core::{Error, LaunchDims, Result, Selected};

/// CTA sizes instantiated in the flat quantizer kernels.
pub const THREADS: [u32; 3] = [128, 256, 512];
/// Slots (16 elements each) per thread instantiated in the flat quantizer kernels.
pub const UNROLL: [u32; 3] = [1, 2, 4];
/// Elements of one slot: the 16 consecutive elements of a row a lane converts (two 16-byte
/// loads of bf16/f16; `load_units` in `b12x/quant.cuh`).
pub const SLOT_ELEMENTS: u64 = 16;
/// The config used when autotuning is off (`FlatConfig::all()[0]`).
pub const DEFAULT: FlatConfig = FlatConfig { threads: 256, unroll: 2 };
/// The largest chunk grid (`rows · K/8`, padding rows included) the kernels index: the
/// device side computes chunk indices in 32 bits.
pub const MAX_CHUNKS: u64 = (1 << 32) - 4096;

/// One flat-kernel variant: CTA size and chunks per thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlatConfig {
    pub threads: u32,
    pub unroll: u32,
}

impl FlatConfig {
    /// Every instantiated config, [`DEFAULT`] first.
    pub fn all() -> Vec<FlatConfig> {
        let mut out = vec![DEFAULT];
        for threads in THREADS {
            for unroll in UNROLL {
                let c = FlatConfig { threads, unroll };
                if c != DEFAULT {
                    out.push(c);
                }
            }
        }
        out
    }
    /// The config id used in pins and caches, and the symbol part: `"t256_u2"`.
    pub fn id(&self) -> String {
        format!("t{}_u{}", self.threads, self.unroll)
    }
    /// Parses an id made by [`FlatConfig::id`] (instantiated pairs only).
    pub fn parse(id: &str) -> Option<Self> {
        let (t, u) = id.strip_prefix('t')?.split_once("_u")?;
        let c = FlatConfig { threads: t.parse().ok()?, unroll: u.parse().ok()? };
        (THREADS.contains(&c.threads) && UNROLL.contains(&c.unroll)).then_some(c)
    }
    /// The launch over `chunks` slots (a non-zero count, at most [`MAX_CHUNKS`]): the ops pass
    /// [`slots`]`(rows, K)`.
    pub fn dims(&self, chunks: u64) -> LaunchDims {
        let per_cta = u64::from(self.threads * self.unroll);
        LaunchDims { grid: (chunks.div_ceil(per_cta) as u32, 1, 1), block: (self.threads, 1, 1), smem_bytes: 0 }
    }
}

/// The slots of a `[rows, k]` input (`k` a multiple of [`SLOT_ELEMENTS`]): what
/// [`FlatConfig::dims`] launches over.
pub fn slots(rows: u64, k: u64) -> u64 {
    rows * (k / SLOT_ELEMENTS)
}

/// The error for a selection that is not one of the op's configs (or lacks its kernels).
pub(crate) fn unknown_config(selected: &Selected, op: &'static str) -> Error {
    Error::UnknownConfig { op, bucket: String::new(), config: selected.config.clone() }
}

/// The config a session selected for a flat op (`UnknownConfig` if it is not one of ours).
pub(crate) fn selected_config(selected: &Selected, op: &'static str) -> Result<FlatConfig> {
    FlatConfig::parse(&selected.config).ok_or_else(|| unknown_config(selected, op))
}

/// `Query::max_rows` check shared by the flat ops: 1 ..= [`max_rows`]`(k, pad)`.
pub(crate) fn check_max_rows(op: &'static str, k: usize, pad: usize, max_rows: usize) -> Result<()> {
    let cap = self::max_rows(k, pad);
    if max_rows == 0 || max_rows > cap {
        let reason = format!("must be in 1..={cap} for K = {k}, got {max_rows}");
        return Err(Error::InvalidQuery { op, field: "max_rows", reason });
    }
    Ok(())
}

/// The row limit of a flat grid: `rows_padded(M) · K/8 ≤ MAX_CHUNKS` for every `M ≤` the
/// returned value, where `rows_padded` rounds up to `pad` (1, or 128 for the swizzled layout).
pub(crate) fn max_rows(k: usize, pad: usize) -> usize {
    let chunks = (k / 8).max(1) as u64;
    let rows = MAX_CHUNKS / chunks;
    (rows - rows % pad as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_reject_others() {
        let all = FlatConfig::all();
        assert_eq!(all.len(), THREADS.len() * UNROLL.len());
        assert_eq!(all[0], DEFAULT);
        for c in &all {
            assert_eq!(FlatConfig::parse(&c.id()), Some(*c));
        }
        for bad in ["t256", "t256_u3", "t64_u1", "u2", "t256_u", "t_u2", "x256_u2"] {
            assert_eq!(FlatConfig::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn grid_covers_every_chunk_once() {
        let c = FlatConfig { threads: 128, unroll: 4 };
        assert_eq!(c.dims(1).grid.0, 1);
        assert_eq!(c.dims(512).grid.0, 1);
        assert_eq!(c.dims(513).grid.0, 2);
        assert_eq!(c.dims(513).block.0, 128);
    }

    #[test]
    fn row_limit_keeps_padded_grid_in_32_bits() {
        for k in [32, 4096, 7168, 1 << 20, 1 << 27] {
            for pad in [1, 128] {
                let rows = max_rows(k, pad);
                assert_eq!(rows % pad, 0);
                assert!(rows as u64 * (k / 8) as u64 <= MAX_CHUNKS);
                // Plus one CTA's overshoot of indices past the end still fits in 32 bits.
                assert!(rows as u64 * (k / 8) as u64 + 2048 < 1 << 32);
            }
        }
    }
}
