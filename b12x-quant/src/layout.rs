//! Scale-factor layouts: row-major and the swizzled 128×4 layout.
//!
//! Block scales of a `[rows, K]` tensor form a `[rows, cols]` byte matrix (`cols = K / block`).
//! Checkpoints store it **row-major**. Block-scaled GEMMs (cuBLASLt `VEC16_UE4M3` /
//! `VEC32_UE8M0`, CUTLASS, b12x's `swizzle_block_scale`) load the **swizzled 128×4** layout:
//!
//! - pad to `rows′ = ⌈rows/128⌉·128`, `cols′ = ⌈cols/4⌉·4` (padding bytes are 0);
//! - cut into tiles of 128 rows × 4 columns = 512 bytes; tiles are stored with the column-tile
//!   index fastest: tile `(R, C)` starts at byte `(R·(cols′/4) + C)·512`;
//! - inside a tile, row `r` (0..128) and column `c` (0..4) sit at
//!   `(r % 32)·16 + (r / 32)·4 + c`: the four 32-row sub-blocks are interleaved, so one 16-byte
//!   line holds rows `r, r+32, r+64, r+96` × 4 columns.
//!
//! ```text
//!  one 512-byte tile (rows 0..128 of the tile, scale columns 0..4):
//!
//!  byte  0.. 3: row  0, cols 0-3 │ byte  4.. 7: row 32, cols 0-3 │ byte  8..11: row 64 │ byte 12..15: row 96
//!  byte 16..19: row  1, cols 0-3 │ byte 20..23: row 33           │ byte 24..27: row 65 │ byte 28..31: row 97
//!  ...
//!  byte 496..499: row 31         │ 500..503: row 63              │ 504..507: row 95    │ 508..511: row 127
//!
//!  tiles of the padded scale matrix ([rows′/128] × [cols′/4] tiles), in memory order:
//!  (0,0) (0,1) … (0,cols′/4−1) (1,0) (1,1) …
//! ```
//!
//! Offset of `(r, c)` in the whole buffer:
//! `((r / 128)·(cols′/4) + c / 4)·512 + (r % 32)·16 + ((r % 128) / 32)·4 + (c % 4)`.

/// Bytes of the swizzled layout of a `[rows, cols]` scale matrix (padded).
pub fn swizzled_len(rows: usize, cols: usize) -> usize {
    rows.div_ceil(128) * 128 * cols.div_ceil(4) * 4
}

/// Byte offset of scale `(r, c)` in the swizzled layout of a matrix with `cols` columns.
pub fn swizzled_offset(r: usize, c: usize, cols: usize) -> usize {
    let col_tiles = cols.div_ceil(4);
    ((r / 128) * col_tiles + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + (c % 4)
}

/// Row-major `[rows, cols]` scales → the swizzled 128×4 layout (padding bytes 0).
///
/// # Panics
/// If `scales.len() != rows * cols`.
pub fn to_swizzled(scales: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    assert_eq!(scales.len(), rows * cols, "scales must be [rows, cols] = [{rows}, {cols}]");
    let mut out = vec![0u8; swizzled_len(rows, cols)];
    for r in 0..rows {
        for c in 0..cols {
            out[swizzled_offset(r, c, cols)] = scales[r * cols + c];
        }
    }
    out
}

/// The swizzled 128×4 layout → row-major `[rows, cols]` scales (padding dropped).
///
/// # Panics
/// If `swizzled.len() != swizzled_len(rows, cols)`.
pub fn from_swizzled(swizzled: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    assert_eq!(swizzled.len(), swizzled_len(rows, cols), "swizzled buffer of [{rows}, {cols}] scales");
    let mut out = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        for c in 0..cols {
            out.push(swizzled[swizzled_offset(r, c, cols)]);
        }
    }
    out
}
