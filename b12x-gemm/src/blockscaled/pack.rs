//! `pack_weight`: a checkpoint weight ([`Weight`], row-major codes and scales as b12x-quant's
//! codecs hold them) in the layout the `gemm.blockscaled` kernels load, on the host
//! ([`pack_host`], [`unpack_host`]) or owned on the device ([`pack_weight`], [`PackedWeight`]).
//!
//! Layout v3 ([`LAYOUT_VERSION`]):
//!
//! | part | NVFP4 | MXFP4 / MXFP8 | block FP8 (G × G tiles) | per-tensor FP8 |
//! |---|---|---|---|---|
//! | `codes` | `[N, K/2]` bytes: each little-endian 32-bit word holds the 8 consecutive k of the checkpoint word, bits permuted ([`sm90_permute_word`]) | MXFP4 as NVFP4; MXFP8 `[N, K]` E4M3 | `[N, K]` E4M3 | `[N, K]` E4M3 |
//! | `scales` | UE4M3, swizzled 128×4 (`b12x_quant::layout`) over `[N, K/16]` | UE8M0, swizzled 128×4 over `[N, K/32]` | f32 (4 bytes LE; UE8M0 scales widened exactly), row-major `[⌈N/G⌉, ⌈⌈K/G⌉/4⌉·4]` (rows padded with zeros to whole 16 bytes: [`block_scale_ld`]) | none |
//! | `global` | the encode scale `enc` | 1 | 1 | the f32 scale |
//!
//! Values the kernels cannot carry are refused (typed errors, nothing packed): E4M3 NaN codes
//! (0x7F, 0xFF), NaN block scales (UE8M0 0xFF, non-finite f32) — a checkpoint holding them is
//! corrupt, and the decode paths have no NaN to give for them.
//!
//! Why this layout (design notes in `README.md` beside this file): rows stay whole and in k
//! order (a TMA box of codes covers k-contiguous runs of whole rows), and within each 32-bit word
//! the FP4 bits are permuted so that the SM90 path (`gemm.blockscaled`'s W4A16 kernel) turns a
//! word into its four bf16x2 pairs of `code · 2^-126` with 9 ALU instructions instead of ~16, and
//! multiplies x's bf16 pairs as they are (the permutation and its decoding live in
//! `b12x/fp4_dequant.cuh`, which the CPU tests check against this file on every value). The
//! swizzled 128×4 scales are cuBLASLt's and CUTLASS's layout and what the SM120 scale registers
//! gather from. Layout v1 (session 24) kept the checkpoint nibble order; the SM120 block-scaled
//! path, not written yet, will undo the permutation in registers or take a layout of its own.
//! v3 (session 26) widened block-FP8 scales to padded f32 rows: the W8A16 kernel's producer
//! copies each 128-k box's scales with 4- and 16-byte `cp.async` and multiplies the partial sums
//! of each tile by them in f32.

use super::Weight;
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::{Error, Result};
use b12x_quant::block::{BlockFp8, Fp8ScaleKind, Fp8Scales, Mx, Nvfp4, TensorFp8};
use b12x_quant::codec::{ue8m0_decode, Element};
use b12x_quant::layout::{from_swizzled, to_swizzled};
use std::sync::Arc;

/// The layout [`PackedHost`] and [`PackedWeight`] hold; bumped when the kernels want another.
pub const LAYOUT_VERSION: u32 = 3;

/// Source bit of target bit `t` of pair `q` (module docs; mirrors `e2m1_sm90_rot` of
/// `b12x/fp4_dequant.cuh`).
fn sm90_source(q: usize, t: usize) -> usize {
    let rot = match q {
        0 => 0,
        1 => 4,
        2 => 10,
        _ if t == 6 || t == 22 => 14,
        _ => 6,
    };
    (t + rot) % 32
}

/// Target bits of a pair's bf16x2: element 2q's code bits 0, 1, 2, 3 go to 6, 7, 8, 15, element
/// 2q + 1's to 22, 23, 24, 31.
const SM90_TARGETS: [usize; 8] = [6, 7, 8, 15, 22, 23, 24, 31];

/// A checkpoint word of 8 E2M1 codes (element i at nibble i) as layouts v2 and v3 hold it.
pub fn sm90_permute_word(w: u32) -> u32 {
    let mut o = 0;
    for q in 0..4 {
        for (j, &t) in SM90_TARGETS.iter().enumerate() {
            let (elem, bit) = (2 * q + j / 4, j % 4);
            o |= ((w >> (4 * elem + bit)) & 1) << sm90_source(q, t);
        }
    }
    o
}

/// Inverse of [`sm90_permute_word`].
pub fn sm90_unpermute_word(o: u32) -> u32 {
    let mut w = 0;
    for q in 0..4 {
        for (j, &t) in SM90_TARGETS.iter().enumerate() {
            let (elem, bit) = (2 * q + j / 4, j % 4);
            w |= ((o >> sm90_source(q, t)) & 1) << (4 * elem + bit);
        }
    }
    w
}

/// Applies `f` to every little-endian 32-bit word of `codes` (whole words: K/2 is a multiple of 8).
fn map_words(codes: &[u8], f: fn(u32) -> u32) -> Vec<u8> {
    codes.chunks_exact(4).flat_map(|b| f(u32::from_le_bytes([b[0], b[1], b[2], b[3]])).to_le_bytes()).collect()
}

/// The op id used in errors.
pub const OP: &str = "gemm.pack_weight";

/// A weight's format, as packed weights record it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    Nvfp4,
    Mxfp4,
    Mxfp8,
    /// Block FP8 with `tile × tile` scale tiles (128 or 32).
    BlockFp8 {
        tile: usize,
        scale: Fp8ScaleKind,
    },
    TensorFp8,
}

impl WeightFormat {
    /// Elements per scale along K (tile width for block FP8; K for per-tensor FP8: 0).
    pub fn block(self) -> usize {
        match self {
            WeightFormat::Nvfp4 => 16,
            WeightFormat::Mxfp4 | WeightFormat::Mxfp8 => 32,
            WeightFormat::BlockFp8 { tile, .. } => tile,
            WeightFormat::TensorFp8 => 0,
        }
    }
    /// Bytes of codes per row of K elements.
    pub fn code_bytes(self, k: usize) -> usize {
        match self {
            WeightFormat::Nvfp4 | WeightFormat::Mxfp4 => k / 2,
            _ => k,
        }
    }
}

/// f32 scales per row of a packed block-FP8 weight with `tile × tile` tiles: `⌈K/tile⌉` rounded up
/// to a multiple of 4 (16-byte rows).
pub fn block_scale_ld(k: usize, tile: usize) -> usize {
    k.div_ceil(tile).next_multiple_of(4)
}

/// A weight in layout v3 on the host (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct PackedHost {
    pub format: WeightFormat,
    pub n: usize,
    pub k: usize,
    pub codes: Vec<u8>,
    pub scales: Vec<u8>,
    pub global: f32,
}

fn bad(field: &'static str, reason: String) -> Error {
    Error::InvalidQuery { op: OP, field, reason }
}

fn expect_len(tensor: &'static str, len: usize, want: usize, dims: String) -> Result<()> {
    if len == want {
        Ok(())
    } else {
        Err(Error::Shape { tensor, expected: format!("{dims} = {want} bytes"), actual: vec![len] })
    }
}

impl Weight {
    /// The format of this weight.
    pub fn format(&self) -> Result<WeightFormat> {
        Ok(match self {
            Weight::Nvfp4(_) => WeightFormat::Nvfp4,
            Weight::Mx(q) if q.element == Element::E2M1 => WeightFormat::Mxfp4,
            Weight::Mx(q) if q.element == Element::E4M3 => WeightFormat::Mxfp8,
            Weight::Mx(q) => return Err(bad("element", format!("MX weights are E2M1 or E4M3, got {:?}", q.element))),
            Weight::BlockFp8(q) => {
                let scale = match q.scales {
                    Fp8Scales::F32(_) => Fp8ScaleKind::F32,
                    Fp8Scales::Ue8m0(_) => Fp8ScaleKind::Ue8m0,
                };
                match q.tile {
                    (128, 128) | (32, 32) => WeightFormat::BlockFp8 { tile: q.tile.0, scale },
                    (r, c) => return Err(bad("tile", format!("weights take 128×128 or 32×32 tiles, got {r}×{c}"))),
                }
            }
            Weight::TensorFp8 { .. } => WeightFormat::TensorFp8,
        })
    }
}

/// Checks `w` (shapes of its codes and scales, K a multiple of its block, a finite positive
/// global scale, no NaN E4M3 code or NaN block scale, no UE4M3 scale byte ≥ 0x7F) and packs it
/// into layout v3. Typed errors
/// name the bad part; nothing is kept.
pub fn pack_host(w: &Weight) -> Result<PackedHost> {
    let format = w.format()?;
    let (n, k) = w.shape();
    if n == 0 || k == 0 {
        return Err(bad("shape", format!("N and K must be positive, got {n} × {k}")));
    }
    let block = format.block();
    if block > 0 && !matches!(format, WeightFormat::BlockFp8 { .. }) && k % block != 0 {
        return Err(bad("k", format!("K = {k} is not a multiple of the {format:?} block {block}")));
    }
    let cb = format.code_bytes(k);
    let e4m3_codes_finite = |codes: &[u8]| match codes.iter().position(|&c| c & 0x7F == 0x7F) {
        Some(i) => Err(bad("codes", format!("E4M3 NaN code {:#04x} at element {i}", codes[i]))),
        None => Ok(()),
    };
    let positive = |what: &'static str, v: f32| {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(bad(what, format!("must be finite and > 0, got {v}")))
        }
    };
    let (codes, scales, global) = match w {
        Weight::Nvfp4(q) => {
            expect_len("codes", q.codes.len(), n * cb, format!("[N, K/2] = [{n}, {cb}]"))?;
            expect_len("scales", q.scales.len(), n * (k / 16), format!("[N, K/16] = [{n}, {}]", k / 16))?;
            // UE4M3 0x7F is NaN, and an unsigned scale has no bit 7: the kernels (dequantizing
            // tables, SM120's block-scaled MMA) would each read such a byte their own way.
            if let Some(i) = q.scales.iter().position(|&e| e >= 0x7F) {
                let what = if q.scales[i] == 0x7F { "NaN" } else { "bit 7 set" };
                return Err(bad("scales", format!("UE4M3 scale {:#04x} ({what}) at block {i}", q.scales[i])));
            }
            (map_words(&q.codes, sm90_permute_word), to_swizzled(&q.scales, n, k / 16), positive("enc", q.enc)?)
        }
        Weight::Mx(q) => {
            expect_len(
                "codes",
                q.codes.len(),
                n * cb,
                format!("[N, {}] = [{n}, {cb}]", if cb < k { "K/2" } else { "K" }),
            )?;
            expect_len("scales", q.scales.len(), n * (k / 32), format!("[N, K/32] = [{n}, {}]", k / 32))?;
            if let Some(i) = q.scales.iter().position(|&e| e == 0xFF) {
                return Err(bad("scales", format!("UE8M0 NaN scale (0xff) at block {i}")));
            }
            if format == WeightFormat::Mxfp8 {
                e4m3_codes_finite(&q.codes)?;
            }
            let codes =
                if format == WeightFormat::Mxfp4 { map_words(&q.codes, sm90_permute_word) } else { q.codes.clone() };
            (codes, to_swizzled(&q.scales, n, k / 32), 1.0)
        }
        Weight::BlockFp8(q) => {
            let g = q.tile.0;
            let (gr, gc) = (n.div_ceil(g), k.div_ceil(g));
            expect_len("codes", q.codes.len(), n * k, format!("[N, K] = [{n}, {k}]"))?;
            let values: Vec<f32> = match &q.scales {
                Fp8Scales::F32(v) => {
                    expect_len("scales", 4 * v.len(), 4 * gr * gc, format!("f32 [⌈N/{g}⌉, ⌈K/{g}⌉] × 4"))?;
                    v.clone()
                }
                Fp8Scales::Ue8m0(v) => {
                    expect_len("scales", v.len(), gr * gc, format!("u8 [⌈N/{g}⌉, ⌈K/{g}⌉]"))?;
                    v.iter().map(|&e| ue8m0_decode(e)).collect()
                }
            };
            if let Some(i) = values.iter().position(|s| !s.is_finite()) {
                return Err(bad("scales", format!("non-finite block scale at tile {i}")));
            }
            e4m3_codes_finite(&q.codes)?;
            let ld = block_scale_ld(k, g);
            let mut scales = vec![0u8; 4 * gr * ld];
            for (r, row) in values.chunks_exact(gc).enumerate() {
                for (c, v) in row.iter().enumerate() {
                    scales[4 * (r * ld + c)..][..4].copy_from_slice(&v.to_le_bytes());
                }
            }
            (q.codes.clone(), scales, 1.0)
        }
        Weight::TensorFp8 { q, .. } => {
            expect_len("codes", q.codes.len(), n * k, format!("[N, K] = [{n}, {k}]"))?;
            e4m3_codes_finite(&q.codes)?;
            (q.codes.clone(), Vec::new(), positive("scale", q.scale)?)
        }
    };
    Ok(PackedHost { format, n, k, codes, scales, global })
}

/// The checkpoint weight a packed one came from (exact inverse of [`pack_host`]).
pub fn unpack_host(p: &PackedHost) -> Weight {
    let (n, k) = (p.n, p.k);
    match p.format {
        WeightFormat::Nvfp4 => Weight::Nvfp4(Nvfp4 {
            rows: n,
            k,
            codes: map_words(&p.codes, sm90_unpermute_word),
            scales: from_swizzled(&p.scales, n, k / 16),
            enc: p.global,
        }),
        WeightFormat::Mxfp4 | WeightFormat::Mxfp8 => Weight::Mx(Mx {
            element: if p.format == WeightFormat::Mxfp4 { Element::E2M1 } else { Element::E4M3 },
            rows: n,
            k,
            codes: if p.format == WeightFormat::Mxfp4 {
                map_words(&p.codes, sm90_unpermute_word)
            } else {
                p.codes.clone()
            },
            scales: from_swizzled(&p.scales, n, k / 32),
        }),
        WeightFormat::BlockFp8 { tile, scale } => Weight::BlockFp8(BlockFp8 {
            rows: n,
            k,
            tile: (tile, tile),
            codes: p.codes.clone(),
            scales: {
                let (gc, ld) = (k.div_ceil(tile), block_scale_ld(k, tile));
                let f: Vec<f32> = p
                    .scales
                    .chunks_exact(4 * ld)
                    .flat_map(|row| row[..4 * gc].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                    .collect();
                match scale {
                    Fp8ScaleKind::F32 => Fp8Scales::F32(f),
                    // Widened from UE8M0 by pack_host: 2^(e - 127), e = 0 the subnormal 2^-127.
                    Fp8ScaleKind::Ue8m0 => Fp8Scales::Ue8m0(f.iter().map(|v| (v.to_bits() >> 23) as u8).collect()),
                }
            },
        }),
        WeightFormat::TensorFp8 => Weight::TensorFp8 { n, k, q: TensorFp8 { codes: p.codes.clone(), scale: p.global } },
    }
}

/// A packed weight owned on the device (layout v3): dropping it frees it. It records its format
/// and shape, which the GEMM plans check against their query.
#[derive(Debug)]
pub struct PackedWeight {
    pub format: WeightFormat,
    pub n: usize,
    pub k: usize,
    pub codes: CudaSlice<u8>,
    /// Empty (one zero byte) for per-tensor FP8.
    pub scales: CudaSlice<u8>,
    pub global: f32,
    /// MX weights: the smallest and largest scale byte of the blocks holding a non-zero code
    /// ([`mx_live_scale_range`]); NVFP4: of all its scales; `(0, 0)` otherwise. The GEMM kernels
    /// that hold MX scales as BF16 pick their exponent offset from it.
    pub scale_bytes: (u8, u8),
}

/// The smallest and largest scale byte over the blocks of `q` that hold a non-zero code; `(127,
/// 127)` when every code is zero. A block of zeros (±0 codes) multiplies to zero under any scale,
/// and quantizers give it the smallest scale byte (CeilPow2 and OCP both map amax = 0 to 0): its
/// scale must not narrow the range the kernels hold exactly.
pub fn mx_live_scale_range(q: &Mx) -> (u8, u8) {
    let (e2m1, blocks) = (q.element == Element::E2M1, q.k / 32);
    let bytes = if e2m1 { 16 } else { 32 }; // code bytes per 32-k block
    let zero = |c: &u8| if e2m1 { c & 0x77 == 0 } else { c & 0x7F == 0 };
    let mut range: Option<(u8, u8)> = None;
    for (i, &e) in q.scales.iter().enumerate() {
        let (r, b) = (i / blocks, i % blocks);
        let codes = &q.codes[r * blocks * bytes + b * bytes..][..bytes];
        if !codes.iter().all(zero) {
            range = Some(range.map_or((e, e), |(lo, hi)| (lo.min(e), hi.max(e))));
        }
    }
    range.unwrap_or((127, 127))
}

/// Checks and packs `w` ([`pack_host`]) and uploads it on `stream` (synchronously: packing is a
/// load-time step, never inside a captured graph).
pub fn pack_weight(w: &Weight, stream: &Arc<CudaStream>) -> Result<PackedWeight> {
    let h = pack_host(w)?;
    let codes = stream.clone_htod(&h.codes)?;
    let scales = if h.scales.is_empty() { stream.clone_htod(&[0u8])? } else { stream.clone_htod(&h.scales)? };
    stream.synchronize()?;
    let range = |v: &[u8]| (v.iter().copied().min().unwrap_or(0), v.iter().copied().max().unwrap_or(0));
    let scale_bytes = match w {
        Weight::Nvfp4(q) => range(&q.scales),
        Weight::Mx(q) => mx_live_scale_range(q),
        _ => (0, 0),
    };
    Ok(PackedWeight { format: h.format, n: h.n, k: h.k, codes, scales, global: h.global, scale_bytes })
}

impl PackedWeight {
    /// Downloads it back into layout v3 on the host (tests, inspection).
    pub fn to_host(&self, stream: &Arc<CudaStream>) -> Result<PackedHost> {
        let codes = stream.clone_dtoh(&self.codes)?;
        let scales =
            if self.format == WeightFormat::TensorFp8 { Vec::new() } else { stream.clone_dtoh(&self.scales)? };
        Ok(PackedHost { format: self.format, n: self.n, k: self.k, codes, scales, global: self.global })
    }
}
