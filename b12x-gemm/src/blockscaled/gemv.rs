//! `gemm.blockscaled`: `y = alpha · x · Wᵀ (+ bias)` with a packed weight ([`PackedWeight`])
//! and BF16 activations — **W4A16** (NVFP4, MXFP4) and **W8A16** (MXFP8, block FP8 with 128 × 128
//! or 32 × 32 tiles and f32 or UE8M0 scales, per-tensor FP8) — or BF16 activations quantized
//! inside the call to MXFP8 or block FP8 1 × 32 / 1 × 128 with UE8M0 scales ([`XQuant`]: **W4A8**
//! with MXFP4 weights, MXFP8 × MXFP8, DeepSeek's block FP8 × block FP8), bit-identical to running
//! b12x-quant's quantizer first, or activations the caller quantized ([`XFormat`]: MXFP8, NVFP4 —
//! **NVFP4 × NVFP4** —, block FP8 UE8M0, per-tensor E4M3; codes, row-major scales and a device
//! tensor scale; block FP8 1 × 128 with f32 scales × block-FP8 weights, DeepSeek-V3's recipe).
//! Every M from 1 to the plan's capacity: the decode kernels serve M ≤ 16, the
//! tiled kernels the middle and prefill buckets above (on SM90 the wgmma kernels, [`WgConfig`],
//! race them in buckets above 64 rows); on SM120 / SM121 the native kernels
//! ([`NativeConfig`]: block-scaled `mma.sync`, E4M3 x with UE8M0 scales × MXFP8, UE8M0
//! block-FP8 or MXFP4 weights, NVFP4 x × NVFP4 weights; **unvalidated on SM120**, their emulated
//! build validated on the H200) join those buckets' candidates. (The module keeps its first name, `gemv`, for the decode path it
//! started as.)
//!
//! - Tensors (row-major, strides in elements): `x [M, K]` bf16 (16-byte aligned base and row
//!   stride), `w` a [`PackedWeight`] of shape `[N, K]` in the query's format, `bias [N]` bf16 or
//!   f32 (contiguous, optional), `y [M, N]` bf16, f16 or f32 (rows may be padded).
//! - Math: every weight element is `code · scale` exactly as formats.md decodes it (NVFP4 also
//!   `/ enc`); products are accumulated in f32 in an order the kernel chooses (the
//!   [oracle](super::reference) states the bound), then `alpha ·`, then the bias in f32, then one
//!   rounding to the output dtype. Where the scales apply: block scales of FP4 and MXFP8 weights
//!   multiply the codes in BF16 (exactly: powers of two, or UE4M3 values times a power of two);
//!   block-FP8 scales multiply each scale tile's f32 partial sums (DeepGEMM's promotion);
//!   NVFP4's `1/enc` and the per-tensor FP8 scale multiply the f32 result with alpha. Bitwise
//!   reproducible: same inputs and config, same bits, eager or replayed (no float atomics; merges
//!   in a fixed order).
//! - Capacity and buckets: `Query::max_rows` (1..=[`MAX_CAPACITY`]) splits into power-of-two
//!   buckets `{1}, {2}, {3-4}, …` (cut at capacity), each tuned by the session; buckets up to
//!   [`MAX_ROWS`] = 16 run the decode kernels (M ≤ 8 on 8-token MMA tiles, 9..16 on two), larger
//!   ones the tiled kernels ([`TileConfig`]: 32 × 128 tiles for M ≤ 32, 64 × 256 and 128 × 256
//!   above, split-K candidates up to M = 256; block FP8 128-row weight tiles). The scratch holds
//!   the split-K partial tiles (up to `4 · M_bucket · N · 4` bytes for buckets ≤ 256) and, on
//!   SM90, the wgmma split tail's (at most 2 · SMs tiles of 128 KiB: ≤ 33 MiB on an H200). With
//!   [`Query::x_quant`] the scratch holds x̂ for `max_rows` rows (`max_rows · K · 2` bytes).
//! - Restrictions of this path: K a multiple of 32 (whole 16-byte lines of codes per row for
//!   the TMA; block-FP8 edge tiles may still be partial); FP16 activations are not implemented,
//!   block-FP8 activations with f32 scales only with block-FP8 weights and 1 × 128 groups
//!   ([`Error::Unsupported`] otherwise). With pre-quantized x ([`XFormat`]) the scratch holds x̂
//!   too (and f32 x scales: `max_rows · K/128 · 4` bytes), and the native candidates stage x's
//!   codes and scale tiles (`max_rows · K` bytes and 512 bytes per 128 rows and 128 k; NVFP4 x
//!   half the codes, twice the scales). MX scales
//!   are held as BF16 with an exponent offset chosen from the weight's scale range
//!   ([`PackedWeight::scale_bytes`]: blocks of zeros do not count): MXFP4 weights whose scale
//!   bytes span more than 133 binades, MXFP8 weights spanning more than 131, are refused ([`Error::InvalidQuery`]; no real checkpoint comes near).
//!
//! Kernel (`kernels/blockscaled_gemv.cu`, design in `src/blockscaled/README.md`): one to three
//! persistent CTAs per SM walk an even share of the (128-row block, KB boxes of 128 bytes per
//! row: 256 k of FP4, 128 of FP8) list; a producer warp streams each stage's codes (TMA boxes),
//! scales (MX / NVFP4 tiles as one bulk copy, block-FP8 f32 scales with `cp.async`) and x
//! (staged with `cp.async` in the consumers' read order) into a ring in shared memory; eight
//! consumer warps dequantize in registers (E2M1 / E4M3 → BF16 by bit placement, × the block
//! scale or 2^120 in BF16, exact) and run BF16 `mma.sync` with the weight rows as the MMA's M.
//! Configs `w{4|8}a16_nt{NT}_kb{KB}_s{S}_c{C}`: NT token tiles of 8, units of KB boxes, an
//! S-stage ring, C CTAs per SM. The tiled kernels (same file): CTAs of 32 · WM rows of x × 32 ·
//! WN weight rows stream K in 128-k tiles through a `cp.async` ring (all 256 threads copy, an
//! mbarrier per stage), eight warps dequantize their weight fragments in registers the same way
//! and run BF16 `mma.sync` with the weight as the MMA's A; the middle buckets (M ≤ 256) may split
//! K over 2 or 4 CTAs per output tile, the last to finish summing the f32 partial tiles in split
//! order (deterministic); configs `tile_w{4|8}_wm{WM}_wn{WN}_s{S}_k{SPLITS}`. On SM90 the wgmma
//! kernels (same file, `sm_90a` only) take the tiled kernels' ring and epilogue with 128 × 256
//! (block FP8 also 128 × 128) tiles: two warpgroups run `wgmma.m64n128k16` with the dequantized
//! weight as register A and x read by the tensor cores from shared memory in wgmma's 128-byte
//! swizzle; configs `wg_w{4|8}_wn{WN}_s{S}`, and `…_tail` (the last partial wave's tiles split
//! over K across the SMs it would leave idle; scratch as above).
//!
//! ```no_run
//! use b12x_core::{DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! use b12x_gemm::blockscaled::{gemv, pack::{pack_weight, WeightFormat}, Weight};
//! # fn main() -> b12x_core::Result<()> {
//! // A checkpoint's NVFP4 [4096, 7168] weight (here quantized from f32 by b12x-quant's codec),
//! // packed once at load time; the packed weight owns its device memory.
//! let w_f32 = vec![0.25f32; 4096 * 7168];
//! let checkpoint = Weight::Nvfp4(b12x_quant::block::quantize_nvfp4(&w_f32, 4096, 7168, None).expect("K % 16 == 0"));
//! let dev = Device::new(0)?;
//! let s = dev.stream();
//! let w = pack_weight(&checkpoint, &s)?;
//! let query = gemv::Query {
//!     n: 4096, k: 7168, weight: WeightFormat::Nvfp4, x_format: gemv::XFormat::Bf16,
//!     out_dtype: DType::BF16, bias: None, max_rows: 8, x_quant: None,
//! };
//! let plan = gemv::plan(&query, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let x = s.alloc_zeros::<b12x_core::half::bf16>(7168)?;
//! let mut y = s.alloc_zeros::<b12x_core::half::bf16>(4096)?;
//! let mut scratch = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes().max(1))?;
//! let args = gemv::Args {
//!     x: TensorRef::from_slice(&x, &[1, 7168])?,
//!     x_scales: None,
//!     x_global: None,
//!     w: &w,
//!     bias: None,
//!     y: TensorMut::from_slice(&mut y, &[1, 4096])?,
//!     alpha: 1.0,
//! };
//! gemv::run(&plan, args, Scratch::from_slice(&mut scratch), &s)?;
//! # Ok(()) }
//! ```

use super::pack::{PackedWeight, WeightFormat};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use b12x_core::plan::bucket_of;
use b12x_core::{
    pow2_buckets, require_disjoint, resolve, tma::Tma2d, BenchCase, Bucket, DType, Device, Error, KernelModule,
    LaunchDims, LaunchOpts, OpPlan, PlanSlot, RaceBuffer, Result, Scratch, ScratchLayout, Selected, TensorMut,
    TensorRef,
};
use std::mem::{offset_of, size_of};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "gemm.blockscaled";
/// Largest M of the decode path's buckets (the GEMV kernels); larger buckets run the tiled kernels.
pub const MAX_ROWS: usize = 16;
/// Largest `Query::max_rows`.
pub const MAX_CAPACITY: usize = 1 << 20;
/// Weight rows per unit of work (eight consumer warps × 16).
const ROWS: usize = 128;
/// k per TMA box of codes (128 bytes per row; a unit of work is `kb` boxes): FP4 256, FP8 128.
const fn box_k(w8: bool) -> usize {
    if w8 {
        128
    } else {
        256
    }
}
/// Shared memory per box of a ring stage besides x: a 128 × 128-byte code box and its scales
/// (FP4: up to four 512-byte tiles; FP8: one tile or the f32 block scales).
const fn box_bytes(w8: bool) -> u32 {
    128 * 128 + if w8 { 512 } else { 4 * 512 }
}
/// Staged x per box and 8-token tile: 8 rows at a pitch of `2 · box_k + 64` bytes.
const fn x_tile_bytes(w8: bool) -> u32 {
    8 * (2 * box_k(w8) as u32 + 64)
}
/// Static shared memory of the entry points (barriers, the scale table), rounded up.
const STATIC_SMEM: u32 = 1280;
/// Threads per CTA: eight consumer warps and the producer.
const THREADS: u32 = 32 * 9;

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "gemm",
        entry_points: &["plan", "run", "pack_weight"],
        dtypes: &[
            "nvfp4|mxfp4|mxfp8|block fp8|tensor fp8 w (packed); bf16 x (optionally quantized in the call: mxfp8, \
             block fp8 1x32/1x128 ue8m0) or pre-quantized x (mxfp8, nvfp4, block fp8 ue8m0, tensor e4m3: codes + \
             row-major scales + device f32 tensor scale; block fp8 1x128 with f32 scales x block fp8 w); \
             bf16|f16|f32 y; bf16|f32 bias",
        ],
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-gemm",
        summary: "y = alpha · x · Wᵀ (+ bias), packed FP4 / FP8 weights × BF16 x (W4A16 / W8A16), x quantized in the call (W4A8 / W8A8) or pre-quantized (NVFP4 × NVFP4, FP8 × FP8), any M; SM120 native block-scaled kernels for E4M3 x × MXFP8 / UE8M0 block-FP8 / MXFP4 weights and NVFP4 × NVFP4 (compiled, unvalidated on SM120)",
    }
}

/// Mirror of the kernel's `BsGemvParams` (`kernels/blockscaled_gemv.cu`; size and offsets
/// asserted on both sides).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BsGemvParams {
    /// `CUtensorMap` of the codes (`[N, K/2]` FP4 or `[N, K]` FP8 bytes) viewed as 16-bit
    /// elements: boxes of 64 × 128 rows (128 bytes per row), 128-byte swizzle, zero fill.
    pub codes_map: [u64; 16],
    pub scales: u64,
    pub x: u64,
    pub bias: u64,
    pub y: u64,
    pub partials: u64,
    pub counters: u64,
    pub ldx: i64,
    pub ldy: i64,
    pub n: i32,
    pub k: i32,
    pub m: i32,
    pub kstages: i32,
    pub units_per_cta: i32,
    pub stages: i32,
    pub scale_tiles: i32,
    pub scale_bias: i32,
    pub out_scale: f32,
    pub flags: i32,
    /// Block FP8: f32 scales per row of scale tiles ([`super::pack::block_scale_ld`]).
    pub sld: i32,
    /// Block FP8: rows of scale tiles, `⌈N / tile⌉`.
    pub sgroups: i32,
    /// Pre-quantized x: its device f32 tensor scale ([`Args::x_global`]; divided by with
    /// flags bit 2), 0 for none.
    pub xmult: u64,
    /// Block FP8 x with f32 scales (flags bit 3): the scratch's `x_scales_f32` (`[M, K / 128]` f32,
    /// written by the pre-pass), multiplied into the block-FP8 promotions; 0 otherwise.
    pub xscales: u64,
}

const _: () = {
    assert!(size_of::<BsGemvParams>() == 256);
    assert!(offset_of!(BsGemvParams, scales) == 128);
    assert!(offset_of!(BsGemvParams, ldx) == 176);
    assert!(offset_of!(BsGemvParams, n) == 192);
    assert!(offset_of!(BsGemvParams, out_scale) == 224);
    assert!(offset_of!(BsGemvParams, flags) == 228);
    assert!(offset_of!(BsGemvParams, sgroups) == 236);
    assert!(offset_of!(BsGemvParams, xmult) == 240);
    assert!(offset_of!(BsGemvParams, xscales) == 248);
};

/// [`BsGemvParams::flags`]: the bias is f32 (else bf16).
const FLAG_BIAS_F32: i32 = 1;
/// [`BsGemvParams::flags`]: block FP8 with 32 × 32 scale tiles (else 128 × 128).
const FLAG_TILE32: i32 = 2;
/// [`BsGemvParams::flags`]: `xmult` is an encode scale (NVFP4 activations): the epilogue divides.
const FLAG_XMULT_INV: i32 = 4;
/// [`BsGemvParams::flags`] (block-FP8 weights): x is block FP8 1 × 128 with f32 scales; x̂ holds
/// its codes and each promotion multiplies by the x row's scale too (`xscales`).
const FLAG_XSCALE_F32: i32 = 8;

/// Whether `format` takes the W8A16 (E4M3 codes, 128-k boxes) kernels.
fn is_w8(format: WeightFormat) -> bool {
    !matches!(format, WeightFormat::Nvfp4 | WeightFormat::Mxfp4)
}

/// The parameters that follow from the packed scales' layout (`pack.rs`): 512-byte tiles per
/// 128-row block (NVFP4, MX), or the block-FP8 f32 rows and tile size.
fn set_scale_layout(p: &mut BsGemvParams, format: WeightFormat, n: usize, k: usize) {
    match format {
        WeightFormat::Nvfp4 | WeightFormat::Mxfp4 | WeightFormat::Mxfp8 => {
            p.scale_tiles = (k / format.block()).div_ceil(4) as i32;
        }
        WeightFormat::BlockFp8 { tile, .. } => {
            p.sld = super::pack::block_scale_ld(k, tile) as i32;
            p.sgroups = n.div_ceil(tile) as i32;
            p.flags |= if tile == 32 { FLAG_TILE32 } else { 0 };
        }
        WeightFormat::TensorFp8 => {}
    }
}

/// Bytes of a packed weight's scales (at least 16: per-tensor FP8 keeps a placeholder).
fn scale_bytes(format: WeightFormat, n: usize, k: usize) -> usize {
    match format {
        WeightFormat::Nvfp4 | WeightFormat::Mxfp4 | WeightFormat::Mxfp8 => {
            n.div_ceil(ROWS) * (k / format.block()).div_ceil(4) * 512
        }
        WeightFormat::BlockFp8 { tile, .. } => 4 * n.div_ceil(tile) * super::pack::block_scale_ld(k, tile),
        WeightFormat::TensorFp8 => 16,
    }
}

/// Mirror of the kernel's `BsGemmParams` (the tiled kernels of the middle and prefill buckets;
/// size and offsets asserted on both sides).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BsGemmParams {
    pub codes: u64,
    pub scales: u64,
    pub x: u64,
    pub bias: u64,
    pub y: u64,
    /// Split-K: `[tiles][splits][BM · BN]` f32 partial tiles (scratch).
    pub partials: u64,
    /// Split-K: `[tiles]` tagged arrival counters (scratch, any bits).
    pub counters: u64,
    pub ldx: i64,
    pub ldy: i64,
    pub n: i32,
    pub k: i32,
    pub m: i32,
    /// Code bytes per weight row: K / 2 (FP4) or K (FP8).
    pub row_bytes: i32,
    /// ⌈K / 128⌉.
    pub ktiles: i32,
    /// ⌈M / BM⌉: the grid is `mtiles · ⌈N / BN⌉ × splits` CTAs.
    pub mtiles: i32,
    pub stages: i32,
    pub scale_tiles: i32,
    pub scale_bias: i32,
    pub out_scale: f32,
    pub flags: i32,
    pub sld: i32,
    pub sgroups: i32,
    /// k-tiles per split.
    pub kt_per: i32,
    /// As [`BsGemvParams::xmult`].
    pub xmult: u64,
    /// Native kernels: x's scales as `b12x_bsgemm_stage_xq` stages them (scratch).
    pub xscales: u64,
    /// Split tail ([`WgConfig::tail`]): CTAs from `tail0` on split output tiles `tail0..` in
    /// `tail_splits` parts of K each; ≤ 1: no tail.
    pub tail0: i32,
    pub tail_splits: i32,
}

const _: () = {
    assert!(size_of::<BsGemmParams>() == 152);
    assert!(offset_of!(BsGemmParams, tail0) == 144);
    assert!(offset_of!(BsGemmParams, xmult) == 128);
    assert!(offset_of!(BsGemmParams, xscales) == 136);
    assert!(offset_of!(BsGemmParams, partials) == 40);
    assert!(offset_of!(BsGemmParams, ldx) == 56);
    assert!(offset_of!(BsGemmParams, n) == 72);
    assert!(offset_of!(BsGemmParams, out_scale) == 108);
    assert!(offset_of!(BsGemmParams, kt_per) == 124);
};

/// k per k-tile of the tiled kernels (one ring stage).
const TILE_K: usize = 128;
/// Threads per CTA of the tiled kernels (eight warps, 2 (M) × 4 (N)).
const TILE_THREADS: u32 = 256;
/// Shared memory per stage for scales (the kernel's `kScaleSmem`).
const TILE_SCALE_SMEM: u32 = 2048;

/// A config of the tiled kernels (the buckets above [`MAX_ROWS`]): CTA tiles of `32 · wm` rows of
/// x by `32 · wn` weight rows, a `stages`-deep ring of 128-k tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileConfig {
    /// E4M3 weights (128 code bytes per row and k-tile) rather than E2M1 (64).
    pub w8: bool,
    /// 16-row MMA tiles of x per warp (1, 2 or 4: BM = 32, 64, 128).
    pub wm: usize,
    /// 8-row MMA tiles of the weight per warp (4 or 8: BN = 128, 256).
    pub wn: usize,
    /// Ring depth (2..=8).
    pub stages: usize,
    /// Split-K factor (1, 2 or 4; above 1 only for the middle tiles, `wm ≤ 2`): the k-tiles are
    /// shared by `splits` CTAs per output tile, the last to finish sums their f32 partial tiles
    /// in split order.
    pub splits: usize,
}

impl TileConfig {
    /// `tile_w{4|8}_wm{WM}_wn{WN}_s{S}_k{SPLITS}`.
    pub fn id(&self) -> String {
        let w = if self.w8 { 8 } else { 4 };
        format!("tile_w{w}_wm{}_wn{}_s{}_k{}", self.wm, self.wn, self.stages, self.splits)
    }
    /// Inverse of [`TileConfig::id`].
    pub fn parse(id: &str) -> Option<TileConfig> {
        let (w8, rest) = width_prefix(id, "tile_w8_wm", "tile_w4_wm")?;
        let [wm, wn, stages, splits] = id_fields(rest, ["_wn", "_s", "_k"])?;
        Some(TileConfig { w8, wm, wn, stages, splits })
    }
    /// `(BM, BN)`: rows of x and of the weight per CTA.
    pub fn tile(&self) -> (usize, usize) {
        (32 * self.wm, 32 * self.wn)
    }
    /// Shared memory of one stage: x (BM rows × 128 bf16), the codes (BN rows × 64 or 128
    /// bytes), the scales.
    pub fn stage_bytes(&self) -> u32 {
        let (bm, bn) = self.tile();
        let rb = if self.w8 { 128 } else { 64 };
        (bm * 256 + bn * rb) as u32 + TILE_SCALE_SMEM
    }
    /// Dynamic shared memory: the ring plus 128 bytes of slack for its alignment.
    pub fn dynamic_smem(&self) -> u32 {
        self.stages as u32 * self.stage_bytes() + 128
    }
    /// Whether the kernel exists and one CTA fits `smem_optin` bytes.
    pub fn fits(&self, smem_optin: u32) -> bool {
        matches!(self.wm, 1 | 2 | 4)
            && matches!(self.wn, 4 | 8)
            && (self.wm != 1 || self.wn == 4) // 32-row tiles are 32 × 128
            && (2..=8).contains(&self.stages)
            && (self.splits == 1 || (matches!(self.splits, 2 | 4) && self.wm <= 2))
            && self.dynamic_smem() + STATIC_SMEM <= smem_optin
    }
    /// `(output tiles, mtiles, ktiles, splits, k-tiles per split)` for `m × n × k`: the grid is
    /// `tiles × splits`; splits shrink so that none is empty.
    pub fn schedule(&self, m: usize, n: usize, k: usize) -> (usize, usize, usize, usize, usize) {
        let (bm, bn) = self.tile();
        let mtiles = m.div_ceil(bm);
        let ktiles = k.div_ceil(TILE_K);
        let kt_per = ktiles.div_ceil(self.splits);
        (mtiles * n.div_ceil(bn), mtiles, ktiles, ktiles.div_ceil(kt_per), kt_per)
    }
    /// Scratch bytes `(partials, counters)` of a split-K launch at `m` rows (zero without splits).
    pub fn scratch_bytes(&self, m: usize, n: usize, k: usize) -> (usize, usize) {
        let (tiles, _, _, splits, _) = self.schedule(m, n, k);
        if splits <= 1 {
            return (0, 0);
        }
        let (bm, bn) = self.tile();
        (tiles * splits * bm * bn * 4, tiles * 8)
    }
    /// The kernel symbol for `format` and `out`.
    pub fn symbol(&self, format: WeightFormat, out: DType) -> String {
        self.symbol_x(format, false, out)
    }
    /// [`TileConfig::symbol`]; with `xs_f32` (block-FP8 weights × block FP8 x with f32 scales)
    /// the kernel that multiplies the x scales into its promotions.
    pub fn symbol_x(&self, format: WeightFormat, xs_f32: bool, out: DType) -> String {
        format!("b12x_bsgemm_{}_wm{}_wn{}_{}out", kernel_name(format, xs_f32), self.wm, self.wn, out_name(out))
    }
}

/// The tiled configs of a bucket whose largest M is `rows_hi` (> [`MAX_ROWS`]), default first.
/// Block-FP8 weights take 128-row weight tiles (their per-tile partial sums double the
/// accumulators).
pub fn tile_configs(rows_hi: usize, smem_optin: u32, format: WeightFormat) -> Vec<TileConfig> {
    let w8 = is_w8(format);
    let wide = if matches!(format, WeightFormat::BlockFp8 { .. }) { 4 } else { 8 };
    let shapes: &[usize] = if rows_hi <= 32 {
        &[1, 2]
    } else if rows_hi <= 64 {
        &[2, 1]
    } else {
        &[4, 2, 1] // 32 × 128 tiles also fit SM120's 99 KB with FP8 codes
    };
    let mut out = Vec::new();
    for &wm in shapes {
        let wn = if wm == 1 { 4 } else { wide };
        let base = TileConfig { w8, wm, wn, stages: 2, splits: 1 };
        let most = (2..=8).rev().find(|&s| TileConfig { stages: s, ..base }.fits(smem_optin));
        if let Some(most) = most {
            out.push(TileConfig { stages: most, ..base });
            if most > 3 {
                out.push(TileConfig { stages: 3, ..base });
            }
            // The middle M: too few output tiles to fill the SMs; split K (2 or 4 ways).
            if rows_hi <= 256 && wm <= 2 {
                for splits in [2, 4] {
                    out.push(TileConfig { stages: most.min(4), splits, ..base });
                }
            }
        }
    }
    out
}

/// A config of the SM90-only wgmma kernels (`b12x_bsgemm_wg_*`): 128 rows of x by `32 · wn`
/// weight rows per CTA (256; block FP8 also 128: with 256 its warpgroups' two m64 tiles take
/// turns through one set of per-tile partial sums),
/// two warpgroups each running `wgmma.m64n128k16` on half the weight rows with the dequantized
/// weight as register A and x from shared memory in wgmma's 128-byte swizzle; the tiled kernels'
/// ring, loaders, stage layout and epilogue otherwise. Listed on SM90 devices only (the kernels
/// trap elsewhere: wgmma does not exist on SM120 / SM121).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgConfig {
    /// E4M3 weights (128 code bytes per row and k-tile) rather than E2M1 (64).
    pub w8: bool,
    /// `BN / 32`: 8 (BN = 256) or, block FP8 only, 4 (BN = 128).
    pub wn: usize,
    /// Ring depth (2..=4).
    pub stages: usize,
    /// Split tail: the last partial wave's output tiles are split over K (up to
    /// [`MAX_TAIL_SPLITS`] ways; the rule is [`WgConfig::schedule`]'s), the last part of a tile
    /// to finish summing the f32 partial tiles in split order (bitwise reproducible).
    pub tail: bool,
}

/// The most parts a split-tail tile's K is cut into ([`WgConfig::schedule`]).
pub const MAX_TAIL_SPLITS: usize = 8;

impl WgConfig {
    /// `wg_w{4|8}_wn{WN}_s{S}`, `_tail` appended for the split tail.
    pub fn id(&self) -> String {
        let w = if self.w8 { 8 } else { 4 };
        format!("wg_w{w}_wn{}_s{}{}", self.wn, self.stages, if self.tail { "_tail" } else { "" })
    }
    /// Inverse of [`WgConfig::id`].
    pub fn parse(id: &str) -> Option<WgConfig> {
        let (w8, rest) = width_prefix(id, "wg_w8_wn", "wg_w4_wn")?;
        let (rest, tail) = match rest.strip_suffix("_tail") {
            Some(r) => (r, true),
            None => (rest, false),
        };
        let (wn, stages) = rest.split_once("_s")?;
        Some(WgConfig { w8, wn: wn.parse().ok()?, stages: stages.parse().ok()?, tail })
    }
    /// The tiled kernel shape it shares its ring, stage layout and schedule with.
    pub fn tile(&self) -> TileConfig {
        TileConfig { w8: self.w8, wm: 4, wn: self.wn, stages: self.stages, splits: 1 }
    }
    /// `(output tiles, mtiles, ktiles, tail0, tail splits)` for `m × n × k` on `sm_count` SMs
    /// (one CTA each): the grid is `tail0 + (tiles − tail0) · splits` CTAs, tiles from `tail0`
    /// on split over K. The last partial wave's `rem` tiles: when they fill at most half the
    /// SMs, split as many ways as one sub-wave of CTAs holds (`⌊SMs / rem⌋`, at most
    /// [`MAX_TAIL_SPLITS`] and the k-tiles): the wave takes `1 / s` of a tile. Above half, three
    /// ways when that fits two sub-waves (`3 rem ≤ 2 · SMs`: 2/3 of a tile), else none. Measured
    /// on the H200 (`bench-results/2026-12-03-h200/call3..call5`, against the plain kernel in the
    /// same race): 7168² × M 2048 (52 left) two ways −11%, five ways (two sub-waves) only −9%;
    /// M 8192 (76 left) three ways −2%; 18432 × 7168 × M 256 (12 left) eight ways 178 µs, four
    /// ways 189. Without [`WgConfig::tail`], or with no split, `tail0 = tiles` and one split.
    pub fn schedule(&self, m: usize, n: usize, k: usize, sm_count: u32) -> (usize, usize, usize, usize, usize) {
        let (tiles, mtiles, ktiles, _, _) = self.tile().schedule(m, n, k);
        let slots = (sm_count as usize).max(1);
        let rem = tiles % slots;
        let splits = if !self.tail || rem == 0 {
            1
        } else if 2 * rem <= slots {
            (slots / rem).min(MAX_TAIL_SPLITS).min(ktiles)
        } else if 3 * rem <= 2 * slots {
            3.min(ktiles)
        } else {
            1
        };
        if splits < 2 {
            return (tiles, mtiles, ktiles, tiles, 1);
        }
        (tiles, mtiles, ktiles, tiles - rem, splits)
    }
    /// Scratch bytes `(partials, counters)` for every `m` in `lo..=hi`: the split tail's partial
    /// tiles (at most one per SM) and one counter per split tile.
    pub fn scratch_bytes(&self, lo: usize, hi: usize, n: usize, k: usize, sm_count: u32) -> (usize, usize) {
        let (bm, bn) = self.tile().tile();
        let (mut part, mut cnt) = (0, 0);
        // The schedule depends on m only through ⌈m / BM⌉.
        for mt in lo.div_ceil(bm)..=hi.div_ceil(bm) {
            let (tiles, _, _, tail0, splits) = self.schedule((mt * bm).clamp(lo, hi), n, k, sm_count);
            if splits > 1 {
                part = part.max((tiles - tail0) * splits * bm * bn * 4);
                cnt = cnt.max((tiles - tail0) * 8);
            }
        }
        (part, cnt)
    }
    /// Dynamic shared memory: the ring plus 1024 bytes of slack (wgmma's swizzled x slabs are
    /// 1024-byte aligned).
    pub fn dynamic_smem(&self) -> u32 {
        self.stages as u32 * self.tile().stage_bytes() + 1024
    }
    /// Whether the kernel exists and one CTA fits `smem_optin` bytes.
    pub fn fits(&self, smem_optin: u32) -> bool {
        (self.wn == 8 || (self.w8 && self.wn == 4))
            && (2..=4).contains(&self.stages)
            && self.dynamic_smem() + STATIC_SMEM <= smem_optin
    }
    /// The kernel symbol for `format` and `out`.
    pub fn symbol(&self, format: WeightFormat, out: DType) -> String {
        self.symbol_x(format, false, out)
    }
    /// As [`TileConfig::symbol_x`].
    pub fn symbol_x(&self, format: WeightFormat, xs_f32: bool, out: DType) -> String {
        format!("b12x_bsgemm_wg_{}_wn{}_{}out", kernel_name(format, xs_f32), self.wn, out_name(out))
    }
}

/// The wgmma configs of a bucket whose largest M is `rows_hi`, default first: SM90 only, buckets
/// above 64 rows (the 128-row x tile), two stages first, then three (two were as fast or faster
/// in `bench/proto/bsgemm_tile_proto.cu`, four slower: a deeper ring leaves less L1 for x).
pub fn wg_configs(rows_hi: usize, smem_optin: u32, format: WeightFormat, arch: b12x_core::Arch) -> Vec<WgConfig> {
    if arch != b12x_core::Arch::Sm90 || rows_hi <= 64 {
        return Vec::new();
    }
    let mut out = Vec::new();
    // The split tail with the two-stage ring only (the faster ring at every prefill shape).
    for (tail, rings) in [(false, &[2, 3][..]), (true, &[2][..])] {
        for &wn in wg_widths(format) {
            for &stages in rings {
                let c = WgConfig { w8: is_w8(format), wn, stages, tail };
                if c.fits(smem_optin) {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// The wgmma kernels' CTA widths (`wn`, BN / 32) for `format`, default first: 256 weight rows;
/// block FP8 also 128 (the 256-row tiles were faster at 3 of the 4 prefill shapes).
fn wg_widths(format: WeightFormat) -> &'static [usize] {
    if matches!(format, WeightFormat::BlockFp8 { .. }) {
        &[8, 4]
    } else {
        &[8]
    }
}

/// The weight × activation part of the tiled and wgmma kernels' names: [`format_name`], or with
/// `xs_f32` (block-FP8 weights × block FP8 1 × 128 x with f32 scales) the kernels whose
/// promotions take the x scales (`w8a8f32_fp8block`: a template parameter, so that the others
/// keep their code).
fn kernel_name(format: WeightFormat, xs_f32: bool) -> &'static str {
    if xs_f32 && matches!(format, WeightFormat::BlockFp8 { .. }) {
        "w8a8f32_fp8block"
    } else {
        format_name(format)
    }
}

fn format_name(format: WeightFormat) -> &'static str {
    match format {
        WeightFormat::Nvfp4 => "w4a16_nvfp4",
        WeightFormat::Mxfp4 => "w4a16_mxfp4",
        WeightFormat::Mxfp8 => "w8a16_mxfp8",
        WeightFormat::BlockFp8 { .. } => "w8a16_fp8block",
        WeightFormat::TensorFp8 => "w8a16_fp8tensor",
    }
}

fn out_name(out: DType) -> &'static str {
    match out {
        DType::F32 => "f32",
        DType::F16 => "f16",
        _ => "bf16",
    }
}

/// A candidate of one bucket: a decode (GEMV) config, a tiled one, or a tiled one of the native
/// kernels (SM120's block-scaled MMAs; [`NativeConfig`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Candidate {
    /// The decode kernels (buckets up to [`MAX_ROWS`]).
    Gemv(Config),
    /// The tiled kernels (the middle and prefill buckets).
    Tile(TileConfig),
    /// The native tiled kernels (x quantized too; the middle and prefill buckets).
    Native(NativeConfig),
    /// The SM90 wgmma kernels (every weight format; buckets above 64 rows).
    Wgmma(WgConfig),
}

impl Candidate {
    pub fn id(&self) -> String {
        match self {
            Candidate::Gemv(c) => c.id(),
            Candidate::Tile(c) => c.id(),
            Candidate::Native(c) => c.id(),
            Candidate::Wgmma(c) => c.id(),
        }
    }
    pub fn symbol(&self, format: WeightFormat, out: DType) -> String {
        self.symbol_x(format, false, out)
    }
    /// The GEMM kernel of the candidate, with `xs_f32` for block FP8 x with f32 scales (the decode
    /// kernels take those scales by a runtime flag: one entry point either way).
    pub fn symbol_x(&self, format: WeightFormat, xs_f32: bool, out: DType) -> String {
        match self {
            Candidate::Gemv(c) => c.symbol(format, out),
            Candidate::Tile(c) => c.symbol_x(format, xs_f32, out),
            Candidate::Native(c) => c.symbol(out),
            Candidate::Wgmma(c) => c.symbol_x(format, xs_f32, out),
        }
    }
    pub fn dynamic_smem(&self) -> u32 {
        match self {
            Candidate::Gemv(c) => c.dynamic_smem(),
            Candidate::Tile(c) => c.dynamic_smem(),
            Candidate::Native(c) => c.dynamic_smem(),
            Candidate::Wgmma(c) => c.dynamic_smem(),
        }
    }
}

/// The weights the native kernels multiply with SM120's block-scaled `mma.sync` (`kind::mxf8f6f4`
/// m16n8k32, E4M3 × E4M3 or E2M1 × E4M3, one UE8M0 per 32 k and operand row), against x that is
/// E4M3 with UE8M0 scales: MXFP8 or block FP8 1 × 32 / 1 × 128 UE8M0, pre-quantized ([`XFormat`])
/// or quantized in the call ([`XQuant`]: then `gemm.mxfp8_linear` and UE8M0 `gemm.block_fp8_linear`
/// on SM120, and W4A8 with MXFP4 weights); and NVFP4 weights against pre-quantized NVFP4 x
/// (`kind::mxf4nvf4` m16n8k64, one UE4M3 per 16 k and operand row).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NativeKind {
    /// MXFP8 weights (swizzled UE8M0 tiles).
    Mxf8,
    /// Block-FP8 weights with UE8M0 scales, 128 × 128 or 32 × 32 tiles.
    Fp8Block,
    /// MXFP4 weights (W4A8): each E2M1 code converted in registers to the instruction's byte
    /// container (E2M1 × E4M3 form).
    Mxf4,
    /// NVFP4 weights × NVFP4 x ([`XFormat::Nvfp4`]): the weight's layout-v3 words converted in
    /// registers to packed nibbles (7 ALU instructions per 8 codes), x staged in the same nibble
    /// order by the pre-pass.
    Nvf4,
}

impl NativeKind {
    /// The native kind of a query, if it has one.
    pub fn of(query: &Query) -> Option<NativeKind> {
        use b12x_quant::block::Fp8ScaleKind::Ue8m0;
        let x_e4m3_ue8m0 = matches!(
            (query.x_format, query.x_quant),
            (XFormat::Mxfp8 | XFormat::BlockFp8 { scale: Ue8m0, .. }, None)
                | (XFormat::Bf16, Some(XQuant::Mxfp8 | XQuant::BlockFp8Ue8m0 { .. }))
        );
        match query.weight {
            WeightFormat::Mxfp8 if x_e4m3_ue8m0 => Some(NativeKind::Mxf8),
            WeightFormat::BlockFp8 { scale: Ue8m0, .. } if x_e4m3_ue8m0 => Some(NativeKind::Fp8Block),
            WeightFormat::Mxfp4 if x_e4m3_ue8m0 => Some(NativeKind::Mxf4),
            WeightFormat::Nvfp4 if (query.x_format, query.x_quant) == (XFormat::Nvfp4, None) => Some(NativeKind::Nvf4),
            _ => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
            NativeKind::Mxf8 => "mxf8",
            NativeKind::Fp8Block => "fp8block",
            NativeKind::Mxf4 => "mxf4",
            NativeKind::Nvf4 => "nvf4",
        }
    }
    /// Weight code bytes per row and 128-k tile.
    fn weight_row_bytes(self) -> u32 {
        match self {
            NativeKind::Mxf4 | NativeKind::Nvf4 => 64,
            NativeKind::Mxf8 | NativeKind::Fp8Block => 128,
        }
    }
    /// Staged x code bytes per row and 128-k tile.
    fn x_row_bytes(self) -> u32 {
        match self {
            NativeKind::Nvf4 => 64,
            _ => 128,
        }
    }
    /// Staged x scale bytes per 128-k tile and 128-row block: swizzled 128 × 4 tiles of one
    /// scale byte per 32 k (UE8M0) or 16 k (NVFP4's UE4M3: two tiles).
    fn x_scale_tile_bytes(self) -> usize {
        match self {
            NativeKind::Nvf4 => 1024,
            _ => 512,
        }
    }
}

/// A config of the native tiled kernels: the tiled kernels' CTA tiles and ring (`tile`, code
/// rows for both operands: 128 (E4M3) or 64 (NVFP4) bytes of x and 128 (FP8) or 64 (FP4) of the
/// weight per row and k-tile, plus 512 or 1024 bytes of x scales per stage) with both operands as
/// codes and the scales applied by the MMA.
/// On SM120 / SM121 the kernels run `mma.sync ... block_scale` (**unvalidated**: no SM120 GPU
/// here); other targets build them around an exact emulation of that MMA from the same registers
/// (`bsmma::mma_bs_emulated`), which the H200 suite runs ([`PlanOptions::native_only`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NativeConfig {
    pub kind: NativeKind,
    pub tile: TileConfig,
}

impl NativeConfig {
    /// `native_{kind}_wm{WM}_wn{WN}_s{S}_k{SPLITS}`.
    pub fn id(&self) -> String {
        let t = &self.tile;
        format!("native_{}_wm{}_wn{}_s{}_k{}", self.kind.name(), t.wm, t.wn, t.stages, t.splits)
    }
    /// Shared memory of one stage: x and weight code rows (per k-tile: 128 or 64 bytes each),
    /// the weight's scale tiles, the x rows' scale tiles.
    pub fn stage_bytes(&self) -> u32 {
        let (bm, bn) = self.tile.tile();
        bm as u32 * self.kind.x_row_bytes()
            + bn as u32 * self.kind.weight_row_bytes()
            + TILE_SCALE_SMEM
            + self.kind.x_scale_tile_bytes() as u32
    }
    /// Dynamic shared memory: the ring plus 128 bytes of slack for its alignment.
    pub fn dynamic_smem(&self) -> u32 {
        self.tile.stages as u32 * self.stage_bytes() + 128
    }
    /// The kernel symbol for `out`.
    pub fn symbol(&self, out: DType) -> String {
        format!("b12x_bsgemm_native_{}_wm{}_wn{}_{}out", self.kind.name(), self.tile.wm, self.tile.wn, out_name(out))
    }
}

/// The native configs of a bucket whose largest M is `rows_hi` (> [`MAX_ROWS`]), default first:
/// the tiled kernels' shapes (FP8 code rows) with the deepest ring that fits `smem_optin`.
pub fn native_configs(rows_hi: usize, smem_optin: u32, kind: NativeKind) -> Vec<NativeConfig> {
    tile_configs(rows_hi, smem_optin, WeightFormat::Mxfp8)
        .into_iter()
        .filter_map(|t| {
            let most = (2..=t.stages).rev().find(|&s| {
                let c = NativeConfig { kind, tile: TileConfig { stages: s, ..t } };
                c.dynamic_smem() + STATIC_SMEM <= smem_optin
            })?;
            Some(NativeConfig { kind, tile: TileConfig { stages: most, ..t } })
        })
        .fold(Vec::new(), |mut v, c| {
            if !v.contains(&c) {
                v.push(c);
            }
            v
        })
}

/// Options of [`plan_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Buckets above [`MAX_ROWS`] take the native kernels only (the query must have a native
    /// pair, [`NativeKind::of`]). On SM120 / SM121 the native kernels are candidates anyway, beside
    /// the dequantizing ones; elsewhere this is how tests run their emulated build.
    pub native_only: bool,
}

/// A config id's weight width: `(true, rest)` after the W8 prefix, `(false, rest)` after the W4 one.
fn width_prefix<'a>(id: &'a str, w8: &str, w4: &str) -> Option<(bool, &'a str)> {
    match id.strip_prefix(w8) {
        Some(rest) => Some((true, rest)),
        None => Some((false, id.strip_prefix(w4)?)),
    }
}

/// The four numbers of a config id's tail, split at three markers in order: `"4_wn8_s3_k1"` with
/// `["_wn", "_s", "_k"]` is `[4, 8, 3, 1]`.
fn id_fields(rest: &str, markers: [&str; 3]) -> Option<[usize; 4]> {
    let (a, rest) = rest.split_once(markers[0])?;
    let (b, rest) = rest.split_once(markers[1])?;
    let (c, d) = rest.split_once(markers[2])?;
    Some([a.parse().ok()?, b.parse().ok()?, c.parse().ok()?, d.parse().ok()?])
}

/// One launch configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// E4M3 weights (W8A16: 128-k boxes) rather than E2M1 (W4A16: 256-k boxes).
    pub w8: bool,
    /// 8-token MMA tiles (1: M ≤ 8, 2: M ≤ 16).
    pub nt: usize,
    /// Code boxes (128 rows × 128 bytes) per unit of work and ring stage (1 or 2).
    pub kb: usize,
    /// Ring depth (2..=12).
    pub stages: usize,
    /// CTAs per SM (1..=3; NT = 1 is built for three on SM90, two on SM120; NT = 2 for two on
    /// SM90, one on SM120).
    pub ctas: usize,
}

impl Config {
    /// `w{4|8}a16_nt{NT}_kb{KB}_s{S}_c{C}`.
    pub fn id(&self) -> String {
        let w = if self.w8 { 8 } else { 4 };
        format!("w{w}a16_nt{}_kb{}_s{}_c{}", self.nt, self.kb, self.stages, self.ctas)
    }
    /// Inverse of [`Config::id`].
    pub fn parse(id: &str) -> Option<Config> {
        let (w8, rest) = width_prefix(id, "w8a16_nt", "w4a16_nt")?;
        let [nt, kb, stages, ctas] = id_fields(rest, ["_kb", "_s", "_c"])?;
        Some(Config { w8, nt, kb, stages, ctas })
    }
    /// Shared memory of one ring stage (`kb` code boxes, their scale tiles and staged x, rounded
    /// up to 1024 bytes as the kernel lays it out).
    pub fn stage_bytes(&self) -> u32 {
        (self.kb as u32 * (box_bytes(self.w8) + self.nt as u32 * x_tile_bytes(self.w8))).next_multiple_of(1024)
    }
    /// Dynamic shared memory: the ring plus 1 KB of slack for its 1024-byte alignment.
    pub fn dynamic_smem(&self) -> u32 {
        self.stages as u32 * self.stage_bytes() + 1024
    }
    /// Whether `ctas` CTAs of this config fit an SM: `smem_optin` bytes per CTA at most, and the
    /// SM's shared memory, `smem_optin` + 1 KB on every architecture this library targets (228 KB
    /// on SM90, 100 KB on SM120/SM121), with 1 KB reserved per CTA.
    pub fn fits(&self, smem_optin: u32) -> bool {
        let per_cta = self.dynamic_smem() + STATIC_SMEM;
        let legal = matches!(self.nt, 1 | 2)
            && matches!(self.kb, 1 | 2)
            && (2..=12).contains(&self.stages)
            && (1..=3).contains(&self.ctas);
        legal
            && (self.nt == 1 || self.ctas <= 2)
            && per_cta <= smem_optin
            && self.ctas as u32 * (per_cta + 1024) <= smem_optin + 1024
    }
    /// `(grid, units per CTA, k-stages per row block)` for an `n × k` weight on `sm_count` SMs.
    pub fn schedule(&self, n: usize, k: usize, sm_count: u32) -> (usize, usize, usize) {
        let kstages = k.div_ceil(box_k(self.w8) * self.kb);
        let units = n.div_ceil(ROWS) * kstages;
        let slots = (sm_count as usize * self.ctas).max(1);
        let q = units.div_ceil(slots).max(1);
        (units.div_ceil(q), q, kstages)
    }
    /// Scratch bytes: `(partials, counters)` — two partial tiles per CTA, one tagged counter per
    /// (row block, consumer warp).
    pub fn scratch_bytes(&self, n: usize, k: usize, sm_count: u32) -> (usize, usize) {
        let (grid, _, _) = self.schedule(n, k, sm_count);
        (2 * grid * 8 * self.nt * ROWS * 4, n.div_ceil(ROWS) * 8 * 8)
    }
    /// The kernel symbol for `format` (of this config's width) and `out`.
    pub fn symbol(&self, format: WeightFormat, out: DType) -> String {
        format!("b12x_bsgemv_{}_nt{}_kb{}_{}out", format_name(format), self.nt, self.kb, out_name(out))
    }
}

/// The legal configs for a bucket whose largest M is `rows_hi`, default first (`w8`: the W8A16
/// kernels).
pub fn configs(rows_hi: usize, smem_optin: u32, w8: bool) -> Vec<Config> {
    let nt = if rows_hi <= 8 { 1 } else { 2 };
    // (kb, stages, CTAs per SM).
    let cands: &[(usize, usize, usize)] = if nt == 1 {
        &[(1, 3, 3), (1, 2, 3), (1, 4, 2), (2, 2, 2), (1, 8, 1), (2, 4, 1)]
    } else {
        &[(1, 4, 2), (2, 2, 2), (1, 3, 2), (1, 8, 1), (2, 4, 1)]
    };
    let fit = |cands: &[(usize, usize, usize)]| -> Vec<Config> {
        cands
            .iter()
            .map(|&(kb, stages, ctas)| Config { w8, nt, kb, stages, ctas })
            .filter(|c| c.fits(smem_optin))
            .collect()
    };
    let out = fit(cands);
    if !out.is_empty() {
        return out;
    }
    // Smaller SMs (SM120/SM121: 100 KB each) fit none of those: shallow rings, fewer CTAs.
    fit(if nt == 1 { &[(1, 2, 2), (1, 3, 1), (1, 2, 1)] } else { &[(1, 3, 1), (1, 2, 1)] })
}

/// Every entry point of `kernels/blockscaled_gemv.cu`.
pub fn all_symbols() -> Vec<String> {
    let mut out = Vec::new();
    let block = WeightFormat::BlockFp8 { tile: 128, scale: b12x_quant::block::Fp8ScaleKind::F32 };
    for f in [WeightFormat::Nvfp4, WeightFormat::Mxfp4, WeightFormat::Mxfp8, block, WeightFormat::TensorFp8] {
        for nt in [1, 2] {
            for kb in [1, 2] {
                for o in [DType::BF16, DType::F16, DType::F32] {
                    out.push(Config { w8: is_w8(f), nt, kb, stages: 2, ctas: 1 }.symbol(f, o));
                }
            }
        }
    }
    for f in [WeightFormat::Nvfp4, WeightFormat::Mxfp4, WeightFormat::Mxfp8, block, WeightFormat::TensorFp8] {
        let wide = if matches!(f, WeightFormat::BlockFp8 { .. }) { 4 } else { 8 };
        let xs: &[bool] = if f == block { &[false, true] } else { &[false] };
        for &x in xs {
            for (wm, wn) in [(4, wide), (2, wide), (1, 4)] {
                for o in [DType::BF16, DType::F16, DType::F32] {
                    out.push(TileConfig { w8: is_w8(f), wm, wn, stages: 2, splits: 1 }.symbol_x(f, x, o));
                }
            }
        }
    }
    for f in [WeightFormat::Nvfp4, WeightFormat::Mxfp4, WeightFormat::Mxfp8, block, WeightFormat::TensorFp8] {
        let xs: &[bool] = if f == block { &[false, true] } else { &[false] };
        for &x in xs {
            for &wn in wg_widths(f) {
                for o in [DType::BF16, DType::F16, DType::F32] {
                    out.push(WgConfig { w8: is_w8(f), wn, stages: 2, tail: false }.symbol_x(f, x, o));
                }
            }
        }
    }
    for kind in [NativeKind::Mxf8, NativeKind::Fp8Block, NativeKind::Mxf4, NativeKind::Nvf4] {
        for (wm, wn) in [(4, 8), (2, 8), (1, 4)] {
            for o in [DType::BF16, DType::F16, DType::F32] {
                let tile = TileConfig { w8: true, wm, wn, stages: 2, splits: 1 };
                out.push(NativeConfig { kind, tile }.symbol(o));
            }
        }
    }
    out.push(QUANT_X_SYMBOL.to_string());
    out.push(DEQUANT_X_SYMBOL.to_string());
    out.push(STAGE_XQ_SYMBOL.to_string());
    out
}

/// Quantization of the BF16 activations inside the call (`mm_fused_quant_a`): the GEMV multiplies
/// `x̂ = dequantize(quantize(x))`, bit for bit what b12x-quant's quantizer followed by its
/// dequantization gives (rounded to BF16, which holds it exactly for block scales 2^-124 ..
/// 2^119: every block whose amax lies in about 2^-115 .. 2^127). A pre-pass kernel of the same
/// call writes x̂ into the plan's scratch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XQuant {
    /// MXFP8: E4M3 with a UE8M0 scale per 32 k, the CeilPow2 rule
    /// (`b12x_quant::block::quantize_mx(.., Element::E4M3, MxOptions::default())`). With an
    /// MXFP4 weight: W4A8; with MXFP8: `gemm.mxfp8_linear`'s math.
    Mxfp8,
    /// Block FP8 `1 × group` (32 or 128; K a multiple of it) with UE8M0 scales
    /// (`quantize_block_fp8(.., (1, group), Fp8ScaleKind::Ue8m0)`: amax floored at 1e-4):
    /// `gemm.block_fp8_linear`'s activation side (DeepSeek-V4).
    BlockFp8Ue8m0 { group: usize },
}

impl XQuant {
    /// `(group, floor)` of the pre-pass kernel.
    fn kernel_args(self) -> (i32, i32) {
        match self {
            XQuant::Mxfp8 => (32, 0),
            XQuant::BlockFp8Ue8m0 { group } => (group as i32, 1),
        }
    }
}

/// Mirror of the kernel's `BsQuantXParams` (`kernels/blockscaled_gemv.cu`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BsQuantXParams {
    pub x: u64,
    /// x̂ (bf16), or 0 when the pre-pass stages codes and scales for the native kernels.
    pub xhat: u64,
    pub ldx: i64,
    pub m: i32,
    pub k: i32,
    pub group: i32,
    pub floor: i32,
    /// Native kernels: E4M3 codes `[M, K]` (scratch), else 0.
    pub xcodes: u64,
    /// Native kernels: UE8M0 scale tiles as [`BsStageXqParams`] stages them (scratch).
    pub xscales: u64,
    pub ktiles: i32,
    pub reserved: i32,
}

const _: () = assert!(size_of::<BsQuantXParams>() == 64);

/// The pre-pass kernel of [`XQuant`].
const QUANT_X_SYMBOL: &str = "b12x_bsgemv_quant_x";

/// How the caller passes the activations: BF16 values, or already quantized (as b12x-quant's
/// quantizers write them, row-major scales). Pre-quantized activations are multiplied exactly as
/// formats.md decodes them: a pre-pass of the same call writes `x̂ = code · block scale` as BF16
/// into the scratch (exact: every NVFP4 value, and MXFP8 / block-FP8 values with UE8M0 scale
/// bytes 3 ..= 246 — blocks whose amax lies in about 2^-115 .. 2^127; outside that range x̂ is
/// rounded to BF16), the GEMM stages x̂, and the tensor-level f32 scale (NVFP4's encode scale,
/// per-tensor FP8's scale), read from the device so a captured graph sees new values, multiplies
/// (divides, for the encode scale) the f32 result with alpha. Any weight format takes any
/// activation format: NVFP4 × NVFP4, W4A8 (MXFP4 × MXFP8), MXFP8 × MXFP8, DeepSeek's block FP8 ×
/// block FP8, per-tensor E4M3 × E4M3 (`gemm.tensor_fp8_linear`'s math), and the mixed pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XFormat {
    /// `x [M, K]` bf16: W4A16 / W8A16, or quantized inside the call ([`Query::x_quant`]).
    Bf16,
    /// MXFP8 (`quantization.mxfp8`'s output): `x [M, K]` u8 (or e4m3) E4M3 codes,
    /// [`Args::x_scales`] `[M, K/32]` u8 UE8M0.
    Mxfp8,
    /// NVFP4 (`quantization.nvfp4`): `x [M, K/2]` u8 E2M1 pairs (element 2i in the low nibble),
    /// `x_scales` `[M, K/16]` u8 UE4M3, [`Args::x_global`] `[1]` f32 encode scale `enc` (value =
    /// code · scale / enc).
    Nvfp4,
    /// Block FP8 `1 × group` (`quantization.fp8_block`; group 32 or 128, dividing K): `x [M, K]`
    /// u8 (or e4m3) E4M3 codes, `x_scales` `[M, K/group]` u8 UE8M0 or f32.
    ///
    /// f32 scales (DeepSeek-V3's activations, `norm.rmsnorm_quant`'s block-FP8 output) are taken
    /// with group 128 and block-FP8 weights (128 × 128 or 32 × 32 tiles, f32 or UE8M0 scales):
    /// no E4M3 code times an f32 scale is exact in BF16, so x̂ holds the codes' values and each
    /// weight tile's f32 partial sums (the block-FP8 promotion) are multiplied by `weight scale ·
    /// x scale` of their row and 128-k group — DeepGEMM's recipe; the scratch then holds the
    /// scales too (`x_scales_f32`, `max_rows · K/128 · 4` bytes). Other pairs (FP4 / MXFP8 /
    /// per-tensor weights keep no per-group partial sums; 1 × 32 groups) are
    /// [`Error::Unsupported`].
    BlockFp8 { group: usize, scale: b12x_quant::block::Fp8ScaleKind },
    /// Per-tensor FP8: `x [M, K]` u8 (or e4m3) E4M3 codes, `x_global` `[1]` f32 scale (value =
    /// code · scale).
    TensorFp8,
}

impl XFormat {
    /// Code bytes per row of `x` for `k` (bf16: `2 k`).
    pub fn row_bytes(self, k: usize) -> usize {
        match self {
            XFormat::Bf16 => 2 * k,
            XFormat::Nvfp4 => k / 2,
            _ => k,
        }
    }
    /// Whether the block scales are f32 (block FP8 with
    /// [`Fp8ScaleKind::F32`](b12x_quant::block::Fp8ScaleKind::F32)); else bytes.
    pub fn f32_scales(self) -> bool {
        matches!(self, XFormat::BlockFp8 { scale: b12x_quant::block::Fp8ScaleKind::F32, .. })
    }
    /// k per block scale (0: no block scales).
    pub fn group(self) -> usize {
        match self {
            XFormat::Bf16 | XFormat::TensorFp8 => 0,
            XFormat::Mxfp8 => 32,
            XFormat::Nvfp4 => 16,
            XFormat::BlockFp8 { group, .. } => group,
        }
    }
    /// The name in cache keys: `bf16`, else the variant as `Debug` prints it.
    pub fn name(self) -> String {
        match self {
            XFormat::Bf16 => "bf16".into(),
            other => format!("{other:?}"),
        }
    }
    /// Whether `Args::x_global` (a device f32 `[1]`) is part of the call.
    pub fn has_global(self) -> bool {
        matches!(self, XFormat::Nvfp4 | XFormat::TensorFp8)
    }
}

/// Mirror of the kernel's `BsDequantXParams` (`kernels/blockscaled_gemv.cu`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BsDequantXParams {
    pub codes: u64,
    pub scales: u64,
    pub xhat: u64,
    /// Bytes between rows of `codes`.
    pub ldq: i64,
    /// Bytes between rows of `scales`.
    pub lds: i64,
    pub m: i32,
    pub k: i32,
    pub group: i32,
    /// 0: E4M3 with UE8M0 scales; 1: E2M1 pairs with UE4M3 scales; 2: E4M3 with f32 scales (x̂ =
    /// the codes' values, the scales copied to `xsf`).
    pub mode: i32,
    /// Mode 2: the scratch's `x_scales_f32` (`[M, K / 128]` f32).
    pub xsf: u64,
}

const _: () = assert!(size_of::<BsDequantXParams>() == 64);

/// The pre-pass of a pre-quantized x `xf` whose codes are at `p.x` (its x̂ and f32-scale
/// destinations still 0): block scales at `scales` (0: none), row strides `ldq` bytes (codes) and
/// `lds` scale elements. With f32 scales it also sets `p`'s flag for the kernels' promotions.
fn dequant_prepass(p: &mut BsGemvParams, xf: XFormat, scales: u64, ldq: i64, lds: i64) -> Prepass {
    let mode = if xf == XFormat::Nvfp4 {
        1
    } else if xf.f32_scales() {
        p.flags |= FLAG_XSCALE_F32;
        2
    } else {
        0
    };
    Prepass::Dequant(BsDequantXParams {
        codes: p.x,
        scales,
        ldq,
        lds,
        m: p.m,
        k: p.k,
        group: xf.group() as i32,
        mode,
        ..BsDequantXParams::default()
    })
}

/// The pre-pass kernel of pre-quantized activations ([`XFormat`]).
const DEQUANT_X_SYMBOL: &str = "b12x_bsgemv_dequant_x";

/// Mirror of the kernel's `BsStageXqParams`: x's codes and scales staged for the native kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BsStageXqParams {
    pub codes: u64,
    pub scales: u64,
    pub xcodes: u64,
    pub xscales: u64,
    pub ldq: i64,
    pub lds: i64,
    pub m: i32,
    pub k: i32,
    pub ktiles: i32,
    /// k per user scale byte (32 or 128).
    pub group: i32,
}

const _: () = assert!(size_of::<BsStageXqParams>() == 64);

/// The pre-pass of the native kernels.
const STAGE_XQ_SYMBOL: &str = "b12x_bsgemm_stage_xq";

/// Code bytes per row of the native kernels' staged x: `k` E4M3 codes or `k / 2` NVFP4 pairs.
fn xq_row_bytes(k: usize, kind: NativeKind) -> usize {
    k * kind.x_row_bytes() as usize / TILE_K
}

/// Bytes of the native kernels' staged x scales for `rows` rows: per (128-row block, 128-k
/// tile) one 512-byte tile, two for NVFP4 x.
fn xq_scale_bytes(rows: usize, k: usize, kind: NativeKind) -> usize {
    rows.div_ceil(128) * k.div_ceil(TILE_K) * kind.x_scale_tile_bytes()
}

/// What runs before the GEMM of a call: nothing, the quantization of BF16 x ([`XQuant`]) or the
/// dequantization of pre-quantized x ([`XFormat`]); both write x̂ into the scratch.
#[derive(Clone, Copy, Debug)]
enum Prepass {
    None,
    Quant(BsQuantXParams),
    Dequant(BsDequantXParams),
}

/// The static problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// N: rows of W, columns of y.
    pub n: usize,
    /// K: the reduction length (a multiple of 32).
    pub k: usize,
    /// The packed weight's format: NVFP4, MXFP4 (W4A16), MXFP8, block FP8 (128 × 128 or 32 × 32
    /// tiles, f32 or UE8M0 scales) or per-tensor FP8 (W8A16).
    pub weight: WeightFormat,
    /// How x is passed: bf16 values or pre-quantized codes and scales ([`XFormat`]).
    pub x_format: XFormat,
    /// dtype of y: bf16, f16 or f32.
    pub out_dtype: DType,
    /// dtype of the bias (bf16 or f32), `None` for no bias.
    pub bias: Option<DType>,
    /// Capacity: the largest M `run` accepts (1..=16).
    pub max_rows: usize,
    /// Quantize bf16 x inside the call before the GEMM ([`XQuant`]; only with [`XFormat::Bf16`]);
    /// `None`: x as given.
    pub x_quant: Option<XQuant>,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        let unsupported = |reason: String| Err(Error::Unsupported { op: OP, device: String::new(), reason });
        let limit = i32::MAX as usize - 2 * box_k(false);
        if self.n == 0 || self.n > limit {
            return bad("n", format!("(N) must be in 1..={limit}, got {}", self.n));
        }
        if self.k == 0 || self.k > limit || self.k % 32 != 0 {
            return bad("k", format!("(K) must be a positive multiple of 32 up to {limit}, got {}", self.k));
        }
        if let WeightFormat::BlockFp8 { tile, .. } = self.weight {
            if !matches!(tile, 32 | 128) {
                return bad(
                    "weight",
                    format!("block FP8 weights take 128 × 128 or 32 × 32 tiles, got {tile} × {tile}"),
                );
            }
        }
        match self.x_format {
            XFormat::BlockFp8 { group, scale } => {
                if !matches!(group, 32 | 128) || self.k % group != 0 {
                    let reason = format!(
                        "block FP8 activation groups are 1 × 32 or 1 × 128 and divide K = {}, got 1 × {group}",
                        self.k
                    );
                    return bad("x_format", reason);
                }
                if scale == b12x_quant::block::Fp8ScaleKind::F32 {
                    if !matches!(self.weight, WeightFormat::BlockFp8 { .. }) {
                        return unsupported(format!(
                            "block FP8 activations with f32 scales multiply block-FP8 weights only (their per-tile \
                             partial sums take the x scale); the query has {:?} weights (UE8M0 x scales, or bf16 x \
                             with x_quant, take any weight)",
                            self.weight
                        ));
                    }
                    if group != 128 {
                        return unsupported(
                            "block FP8 activations with f32 scales: groups of 1 × 128 only (1 × 32 takes UE8M0 \
                             scales)"
                                .into(),
                        );
                    }
                }
            }
            XFormat::Bf16 | XFormat::Mxfp8 | XFormat::Nvfp4 | XFormat::TensorFp8 => {}
        }
        if self.x_quant.is_some() && self.x_format != XFormat::Bf16 {
            let reason = format!("quantizes bf16 x in the call; x is already {:?}", self.x_format);
            return bad("x_quant", reason);
        }
        if !matches!(self.out_dtype, DType::BF16 | DType::F16 | DType::F32) {
            return bad("out_dtype", format!("must be bf16, f16 or f32, got {}", self.out_dtype));
        }
        if let Some(b) = self.bias.filter(|&b| !matches!(b, DType::BF16 | DType::F32)) {
            return bad("bias", format!("must be bf16 or f32, got {b}"));
        }
        if let Some(XQuant::BlockFp8Ue8m0 { group }) = self.x_quant {
            if !matches!(group, 32 | 128) || self.k % group != 0 {
                return bad(
                    "x_quant",
                    format!("block FP8 activation groups are 1 × 32 or 1 × 128 and divide K = {}, got {group}", self.k),
                );
            }
        }
        if self.max_rows == 0 || self.max_rows > MAX_CAPACITY {
            return bad("max_rows", format!("(M capacity) must be in 1..={MAX_CAPACITY}, got {}", self.max_rows));
        }
        Ok(())
    }

    /// Checks `args` against the query and builds the kernel parameters (without the codes'
    /// descriptor, the schedule and the scratch pointers) and the codes' address; nothing is
    /// launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<(BsGemvParams, u64)> {
        self.checked(args).map(|c| (c.params, c.codes))
    }

    fn checked(&self, args: &Args<'_>) -> Result<Checked> {
        let (n, k) = (self.n, self.k);
        let w = args.w;
        if w.format != self.weight {
            let reason = format!("the plan takes {:?} weights, got a packed {:?} weight", self.weight, w.format);
            return Err(Error::InvalidQuery { op: OP, field: "w", reason });
        }
        if (w.n, w.k) != (n, k) {
            return Err(Error::Shape { tensor: "w", expected: format!("[N, K] = [{n}, {k}]"), actual: vec![w.n, w.k] });
        }
        let m = args.x.shape().first().copied().unwrap_or(0);
        let xf = self.x_format;
        let x_dtype = match xf {
            XFormat::Bf16 => DType::BF16,
            XFormat::Mxfp8 | XFormat::BlockFp8 { .. } | XFormat::TensorFp8 if args.x.dtype() == DType::E4M3 => {
                DType::E4M3
            }
            _ => DType::U8,
        };
        let x_dims = if xf == XFormat::Bf16 { "[M, K]" } else { "[M, code bytes per row]" };
        args.x.expect("x", x_dims, x_dtype, &[m, xf.row_bytes(k) / x_dtype.size_bytes()])?;
        args.y.expect("y", "[M, N]", self.out_dtype, &[m, n])?;
        let (x_scales, x_global) = x_extras(xf, m, k, args)?;
        if m > self.max_rows {
            return Err(Error::Capacity { what: "M (rows of x)", got: m, capacity: self.max_rows });
        }
        if args.bias.is_some() != self.bias.is_some() {
            let expected = match self.bias {
                Some(d) => format!("[N] = [{n}] {d} (the plan has a bias)"),
                None => "no tensor (the plan has no bias)".into(),
            };
            let actual = args.bias.as_ref().map(|b| b.shape().to_vec()).unwrap_or_default();
            return Err(Error::Shape { tensor: "bias", expected, actual });
        }
        if !args.alpha.is_finite() {
            return Err(Error::InvalidQuery {
                op: OP,
                field: "alpha",
                reason: format!("must be finite, got {}", args.alpha),
            });
        }
        // Codes and scales: whole 16-byte lines (K % 32 == 0); MX / NVFP4 scales are 512-byte
        // tiles, block-FP8 scales padded f32 rows.
        let codes = w.codes.device_ptr(w.codes.stream()).0;
        let scales = w.scales.device_ptr(w.scales.stream()).0;
        let alpha = f64::from(args.alpha);
        let mut p = BsGemvParams {
            scales,
            x: args.x.ptr(),
            y: args.y.ptr(),
            ldx: args.x.row_stride("x")? as i64,
            ldy: args.y.row_stride("y")? as i64,
            n: n as i32,
            k: k as i32,
            m: m as i32,
            ..BsGemvParams::default()
        };
        let mx_range = |code_min_exp: i32, max_exp: i32, bias_at: i32, what: &str| -> Result<(i32, i32)> {
            // The kernel multiplies code · 2^-b (b = 126 E2M1, 120 E4M3) by the BF16 scale
            // 2^(e - 127 + b - c) (exponent field e + scale_bias, scale_bias = b - c): exact
            // while that scale is finite and normal and every product is at least BF16's
            // smallest subnormal 2^-133 at the code's granularity; the epilogue multiplies by
            // 2^c. c = max(0, hi - max_exp) keeps the largest scale finite; the smallest scale
            // byte must then stay above code_min_exp + c.
            let (lo, hi) = (i32::from(w.scale_bytes.0), i32::from(w.scale_bytes.1));
            let c = (hi - max_exp).max(0);
            if lo - c < code_min_exp {
                let reason = format!(
                    "{what} scale bytes span {lo}..={hi}: more binades than the BF16 path holds exactly \
                     ({} at most)",
                    max_exp - code_min_exp
                );
                return Err(Error::InvalidQuery { op: OP, field: "w", reason });
            }
            Ok((bias_at - c, c))
        };
        set_scale_layout(&mut p, w.format, n, k);
        let factor = match w.format {
            WeightFormat::Nvfp4 => 128.0 / f64::from(w.global),
            WeightFormat::Mxfp4 => {
                // E2M1's smallest code 0.5: products ≥ 2^(e - 128 - c) ≥ 2^-133 ⇔ e - c ≥ -5;
                // the scale's exponent field e + 126 - c ≤ 254 ⇔ e - c ≤ 128.
                let (bias, c) = mx_range(-5, 128, 126, "MXFP4")?;
                p.scale_bias = bias;
                (2.0f64).powi(c)
            }
            WeightFormat::Mxfp8 => {
                // E4M3's codes are multiples of 2^-9 (subnormals m · 2^-9, the smallest normals
                // (8 + m) · 2^-9): products are multiples of 2^(e - 136 - c), exact in BF16
                // while that is ≥ 2^-133 ⇔ e - c ≥ 3; the scale's field e + 120 - c ≤ 254 ⇔
                // e - c ≤ 134.
                let (bias, c) = mx_range(3, 134, 120, "MXFP8")?;
                p.scale_bias = bias;
                (2.0f64).powi(c)
            }
            WeightFormat::BlockFp8 { .. } => 1.0,
            WeightFormat::TensorFp8 => f64::from(w.global),
        };
        p.out_scale = (alpha * factor) as f32;
        if !p.out_scale.is_finite() {
            let reason = format!("alpha × the weight's global scale overflows f32 ({alpha} × {factor})");
            return Err(Error::InvalidQuery { op: OP, field: "alpha", reason });
        }
        if let (Some(b), Some(dtype)) = (&args.bias, self.bias) {
            b.expect("bias", "[N]", dtype, &[n])?;
            if n > 1 && b.strides() != [1] {
                let reason = "bias must be contiguous".into();
                return Err(Error::Stride { tensor: "bias", strides: b.strides().to_vec(), reason });
            }
            b.require_aligned("bias", dtype.size_bytes())?;
            p.bias = b.ptr();
            p.flags |= if dtype == DType::F32 { FLAG_BIAS_F32 } else { 0 };
        }
        // bf16 x: 16-byte rows (the GEMM's copies); codes: whole 8-k chunks (the pre-pass).
        args.x.require_aligned(
            "x",
            if xf == XFormat::Nvfp4 {
                4
            } else if xf == XFormat::Bf16 {
                16
            } else {
                8
            },
        )?;
        args.y.require_aligned("y", self.out_dtype.size_bytes())?;
        let y = ("y", args.y.byte_span());
        require_disjoint(y, ("x", args.x.byte_span()))?;
        if let Some(t) = &x_scales {
            require_disjoint(y, ("x_scales", t.byte_span()))?;
        }
        if let Some(t) = &x_global {
            require_disjoint(y, ("x_global", t.byte_span()))?;
            p.xmult = t.ptr();
            p.flags |= if xf == XFormat::Nvfp4 { FLAG_XMULT_INV } else { 0 };
        }
        require_disjoint(y, ("w.codes", (codes, codes + (n * w.format.code_bytes(k)) as u64)))?;
        require_disjoint(y, ("w.scales", (scales, scales + w.scales.len() as u64)))?;
        if let Some(b) = &args.bias {
            require_disjoint(y, ("bias", b.byte_span()))?;
        }
        let prepass = if let Some(xq) = self.x_quant {
            let (group, floor) = xq.kernel_args();
            Prepass::Quant(BsQuantXParams {
                x: p.x,
                ldx: p.ldx,
                m: p.m,
                k: p.k,
                group,
                floor,
                ..BsQuantXParams::default()
            })
        } else if xf != XFormat::Bf16 {
            let lds = match &x_scales {
                Some(t) => t.row_stride("x_scales")? as i64,
                None => 0,
            };
            let ldq = p.ldx * x_dtype.size_bytes() as i64;
            dequant_prepass(&mut p, xf, x_scales.map_or(0, |t| t.ptr()), ldq, lds)
        } else {
            Prepass::None
        };
        // The native kernels apply the block scales in the MMA: only alpha and the NVFP4 weight's
        // 1 / enc stay for the epilogue.
        let native_scale = match w.format {
            WeightFormat::Nvfp4 => (alpha / f64::from(w.global)) as f32,
            _ => args.alpha,
        };
        Ok(Checked { params: p, codes, prepass, native_scale })
    }
}

/// A call's checked parameters: the GEMM's (without scratch pointers and schedule), the codes'
/// address, the pre-pass (its x̂ pointer still 0).
struct Checked {
    params: BsGemvParams,
    codes: u64,
    prepass: Prepass,
    /// `out_scale` of the native kernels.
    native_scale: f32,
}

/// The scratch regions a call stages x in (0 where the plan has none).
#[derive(Clone, Copy, Debug)]
struct Staging {
    x_hat: u64,
    xq_codes: u64,
    xq_scales: u64,
    /// f32 x scales `[max_rows, K / 128]` (block FP8 x with f32 scales).
    x_scales_f32: u64,
}

impl Staging {
    fn of(bound: &b12x_core::BoundScratch) -> Staging {
        Staging {
            x_hat: bound.ptr("x_hat"),
            xq_codes: bound.ptr("xq_codes"),
            xq_scales: bound.ptr("xq_scales"),
            x_scales_f32: bound.ptr("x_scales_f32"),
        }
    }
}

/// Checks the tensors a pre-quantized x comes with: `(x_scales, x_global)`, each `Some` exactly
/// when the format has it.
fn x_extras<'a>(
    xf: XFormat,
    m: usize,
    k: usize,
    args: &Args<'a>,
) -> Result<(Option<TensorRef<'a>>, Option<TensorRef<'a>>)> {
    let group = xf.group();
    let scales = match (&args.x_scales, group) {
        (Some(t), g) if g > 0 => {
            if xf.f32_scales() {
                t.expect("x_scales", "[M, K / group]", DType::F32, &[m, k / g])?;
                t.require_aligned("x_scales", 4)?;
            } else {
                t.expect("x_scales", "[M, K / group]", DType::U8, &[m, k / g])?;
            }
            t.row_stride("x_scales")?;
            Some(*t)
        }
        (None, 0) => None,
        (t, _) => {
            let expected = match k.checked_div(group) {
                Some(cols) => {
                    let dtype = if xf.f32_scales() { "f32" } else { "u8" };
                    format!("[M, K / {group}] = [{m}, {cols}] {dtype} (the {xf:?} activation's block scales)")
                }
                None => format!("no tensor ({xf:?} activations have no block scales)"),
            };
            let actual = t.as_ref().map(|t| t.shape().to_vec()).unwrap_or_default();
            return Err(Error::Shape { tensor: "x_scales", expected, actual });
        }
    };
    let global = match (&args.x_global, xf.has_global()) {
        (Some(t), true) => {
            t.expect("x_global", "[1]", DType::F32, &[1])?;
            t.require_aligned("x_global", 4)?;
            Some(*t)
        }
        (None, false) => None,
        (t, has) => {
            let expected = if has {
                format!("[1] f32 (the {xf:?} activation's tensor scale, on the device)")
            } else {
                format!("no tensor ({xf:?} activations have no tensor scale)")
            };
            let actual = t.as_ref().map(|t| t.shape().to_vec()).unwrap_or_default();
            return Err(Error::Shape { tensor: "x_global", expected, actual });
        }
    };
    Ok((scales, global))
}

impl Default for BsGemvParams {
    fn default() -> Self {
        bytemuck::Zeroable::zeroed()
    }
}

/// A validated query bound to a device; a cheap handle whose prepared state a session fills.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    options: PlanOptions,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    configs: Vec<Vec<Candidate>>,
    scratch: ScratchLayout,
    slot: PlanSlot,
}

/// Validates `query` and enumerates its configs per bucket. Allocates, compiles and launches
/// nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    plan_with(query, device, PlanOptions::default())
}

/// [`plan`] with options ([`PlanOptions`]).
pub fn plan_with(query: &Query, device: &Arc<Device>, options: PlanOptions) -> Result<Plan> {
    query.validate()?;
    let buckets = pow2_buckets(query.max_rows);
    let w8 = is_w8(query.weight);
    let smem = device.smem_optin();
    let native = NativeKind::of(query);
    if options.native_only && native.is_none() {
        let reason = format!(
            "the native kernels multiply E4M3 x with UE8M0 scales (MXFP8, block FP8 UE8M0; given or \
             quantized in the call) × MXFP8, UE8M0 block-FP8 or MXFP4 weights, and NVFP4 x (given) × NVFP4 \
             weights; the query has {:?} x (x_quant {:?}) × {:?}",
            query.x_format, query.x_quant, query.weight
        );
        return Err(Error::InvalidQuery { op: OP, field: "native_only", reason });
    }
    let sm120 = matches!(device.arch(), b12x_core::Arch::Sm120 | b12x_core::Arch::Sm121);
    let configs: Vec<Vec<Candidate>> = buckets
        .iter()
        .map(|b| {
            if b.hi <= MAX_ROWS {
                return configs(b.hi, smem, w8).into_iter().map(Candidate::Gemv).collect();
            }
            let mut out = Vec::new();
            if let Some(kind) = native.filter(|_| options.native_only || sm120) {
                out.extend(native_configs(b.hi, smem, kind).into_iter().map(Candidate::Native));
            }
            if !options.native_only {
                out.extend(wg_configs(b.hi, smem, query.weight, device.arch()).into_iter().map(Candidate::Wgmma));
                out.extend(tile_configs(b.hi, smem, query.weight).into_iter().map(Candidate::Tile));
            }
            out
        })
        .collect();
    if configs.iter().any(Vec::is_empty) {
        let reason = format!("no config fits {} bytes of shared memory per CTA", device.smem_optin());
        return Err(Error::Unsupported { op: OP, device: device.name().to_string(), reason });
    }
    let (mut partials, mut counters) = (0, 0);
    for (b, cands) in buckets.iter().zip(&configs) {
        for c in cands {
            let (p, n) = match c {
                Candidate::Gemv(c) => c.scratch_bytes(query.n, query.k, device.sm_count()),
                Candidate::Tile(c) => c.scratch_bytes(b.hi, query.n, query.k),
                Candidate::Native(c) => c.tile.scratch_bytes(b.hi, query.n, query.k),
                Candidate::Wgmma(c) => c.scratch_bytes(b.lo, b.hi, query.n, query.k, device.sm_count()),
            };
            (partials, counters) = (partials.max(p), counters.max(n));
        }
    }
    let mut scratch = ScratchLayout::new();
    // f32 [2 · CTAs][8 · NT tokens][128 rows]: the partial tiles of row blocks CTAs share.
    scratch.add("partials", partials);
    // [row blocks][8 warps] 8-byte tagged arrival counters; any initial bits.
    scratch.add("counters", counters);
    if query.x_quant.is_some() || query.x_format != XFormat::Bf16 {
        // bf16 [max_rows, K]: x̂, written by the pre-pass, staged by the GEMM.
        scratch.add("x_hat", query.max_rows * query.k * 2);
    }
    if query.x_format.f32_scales() {
        // f32 [max_rows, K / 128]: a block-FP8 x's f32 scales, copied by the pre-pass, multiplied
        // into the promotions.
        scratch.add("x_scales_f32", query.max_rows * (query.k / 128) * 4);
    }
    if let Some(kind) = native.filter(|_| configs.iter().flatten().any(|c| matches!(c, Candidate::Native(_)))) {
        // The native kernels' x: codes [max_rows, K] (NVFP4 K / 2) and scale tiles, staged by
        // the pre-pass.
        scratch.add("xq_codes", query.max_rows * xq_row_bytes(query.k, kind));
        scratch.add("xq_scales", xq_scale_bytes(query.max_rows, query.k, kind));
    }
    Ok(Plan {
        query: query.clone(),
        options,
        device: device.clone(),
        buckets,
        configs,
        scratch,
        slot: PlanSlot::default(),
    })
}

impl Plan {
    pub fn query(&self) -> &Query {
        &self.query
    }
    /// Legal configs of bucket `bucket`, default first.
    pub fn configs(&self, bucket: usize) -> &[Candidate] {
        self.configs.get(bucket).map_or(&[], Vec::as_slice)
    }
    /// The scratch every call needs: `partials` (f32 partial tiles), `counters` (8-byte
    /// tagged arrival counters, no zeroing needed) and, with [`Query::x_quant`] or pre-quantized
    /// activations, `x_hat` (the activations the GEMM multiplies, as BF16).
    pub fn scratch_layout(&self) -> ScratchLayout {
        self.scratch.clone()
    }
}

/// The tensors of one call.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[M, K]` bf16, or a pre-quantized x's codes ([`XFormat`]: `[M, K]` u8 / e4m3 E4M3, `[M,
    /// K/2]` u8 E2M1 pairs; rows 8- (FP8) or 4-byte (NVFP4) aligned).
    pub x: TensorRef<'a>,
    /// A pre-quantized x's block scales, `[M, K / group]` u8 (f32 for block FP8 with f32 scales,
    /// 4-byte aligned), row-major (any row stride); `Some` exactly for [`XFormat::Mxfp8`],
    /// [`XFormat::Nvfp4`] and [`XFormat::BlockFp8`].
    pub x_scales: Option<TensorRef<'a>>,
    /// A pre-quantized x's tensor scale, `[1]` f32 on the device (NVFP4's encode scale,
    /// per-tensor FP8's scale; the caller guarantees a finite value, > 0 for NVFP4); `Some`
    /// exactly for [`XFormat::Nvfp4`] and [`XFormat::TensorFp8`].
    pub x_global: Option<TensorRef<'a>>,
    /// The packed `[N, K]` weight, in the query's format.
    pub w: &'a PackedWeight,
    /// `[N]` contiguous, `Some` exactly when the query has a bias.
    pub bias: Option<TensorRef<'a>>,
    /// `[M, N]`, the output.
    pub y: TensorMut<'a>,
    /// The output scale (finite).
    pub alpha: f32,
}

/// Computes `args.y` on `stream`. Every check happens before any launch; no allocation, no
/// synchronization. `M = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let Checked { params: mut p, codes, prepass, native_scale } = plan.query.checked(&args)?;
    let bound = plan.scratch.bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if p.m == 0 {
        return Ok(());
    }
    let m = p.m as usize;
    let capacity = Error::Capacity { what: "M (rows of x)", got: m, capacity: plan.query.max_rows };
    let bucket = bucket_of(&plan.buckets, m).ok_or(capacity)?;
    let selected = resolve(plan, bucket, stream)?;
    p.partials = bound.ptr("partials");
    p.counters = bound.ptr("counters");
    let call = Call { codes, prepass, staging: Staging::of(&bound), native_scale };
    launch(plan, bucket, &selected, &mut p, call, stream)
}

/// What a launch needs besides the GEMV parameters.
#[derive(Clone, Copy, Debug)]
struct Call {
    codes: u64,
    prepass: Prepass,
    staging: Staging,
    native_scale: f32,
}

fn launch(
    plan: &Plan,
    bucket: usize,
    sel: &Selected,
    p: &mut BsGemvParams,
    call: Call,
    stream: &CudaStream,
) -> Result<()> {
    let Call { codes, prepass, staging, native_scale } = call;
    let x_hat = staging.x_hat;
    let unknown = || Error::UnknownConfig { op: OP, bucket: String::new(), config: sel.config.clone() };
    let cand = plan.configs(bucket).get(sel.config_index).copied().ok_or_else(unknown)?;
    let kernel = sel.kernels.first().ok_or_else(unknown)?;
    let q = &plan.query;
    if let Candidate::Native(c) = cand {
        // x's codes and scales staged for the native kernel (contiguous codes, swizzled scale
        // tiles: copied from a pre-quantized x, or quantized from bf16 x), then the kernel;
        // launched in that order after every check.
        let stage = sel.kernels.get(1).ok_or_else(unknown)?;
        let ktiles = q.k.div_ceil(TILE_K);
        match prepass {
            Prepass::Dequant(dp) => {
                let sp = BsStageXqParams {
                    codes: dp.codes,
                    scales: dp.scales,
                    xcodes: staging.xq_codes,
                    xscales: staging.xq_scales,
                    ldq: dp.ldq,
                    lds: dp.lds,
                    m: p.m,
                    k: p.k,
                    ktiles: ktiles as i32,
                    group: dp.group,
                };
                let threads =
                    (p.m as usize * xq_row_bytes(q.k, c.kind) / 8).max(xq_scale_bytes(p.m as usize, q.k, c.kind));
                let dims = LaunchDims { grid: (threads.div_ceil(256) as u32, 1, 1), block: (256, 1, 1), smem_bytes: 0 };
                // SAFETY: BsStageXqParams mirrors the kernel's struct; the codes ([M, K] E4M3 with
                // 8-byte aligned rows, or [M, K / 2] NVFP4 pairs with 4-byte aligned rows, which the
                // kernel reads 4 bytes at a time) and scales ([M, K / group]) passed
                // `Query::checked`; xq_codes and xq_scales are the plan's scratch regions for
                // max_rows ≥ M rows.
                unsafe { stage.launch(stream, dims, &sp)? };
            }
            Prepass::Quant(qp) => {
                let qp = BsQuantXParams {
                    xhat: 0,
                    xcodes: staging.xq_codes,
                    xscales: staging.xq_scales,
                    ktiles: ktiles as i32,
                    ..qp
                };
                let threads = p.m as usize * q.k / 8;
                let dims = LaunchDims { grid: (threads.div_ceil(256) as u32, 1, 1), block: (256, 1, 1), smem_bytes: 0 };
                // SAFETY: as the x̂ quantization below, writing the staged codes and scale tiles
                // (the plan's scratch regions for max_rows ≥ M rows) instead of x̂.
                unsafe { stage.launch(stream, dims, &qp)? };
            }
            Prepass::None => return Err(unknown()), // native plans have quantized x
        }
        let (tiles, mtiles, ktiles, splits, kt_per) = c.tile.schedule(p.m as usize, q.n, q.k);
        let tp = BsGemmParams {
            codes,
            scales: p.scales,
            x: staging.xq_codes,
            bias: p.bias,
            y: p.y,
            partials: p.partials,
            counters: p.counters,
            ldx: xq_row_bytes(q.k, c.kind) as i64,
            ldy: p.ldy,
            n: p.n,
            k: p.k,
            m: p.m,
            row_bytes: q.weight.code_bytes(q.k) as i32,
            ktiles: ktiles as i32,
            mtiles: mtiles as i32,
            stages: c.tile.stages as i32,
            scale_tiles: p.scale_tiles,
            scale_bias: 0,
            out_scale: native_scale,
            flags: p.flags,
            sld: p.sld,
            sgroups: p.sgroups,
            kt_per: kt_per as i32,
            xmult: p.xmult,
            xscales: staging.xq_scales,
            tail0: 0,
            tail_splits: 1,
        };
        let dims = LaunchDims {
            grid: (tiles as u32, splits as u32, 1),
            block: (TILE_THREADS, 1, 1),
            smem_bytes: c.dynamic_smem(),
        };
        // SAFETY: as the tiled launch below; x is the staged copy (K bytes per row, M rows) and
        // xscales its staged tiles (⌈M / 128⌉ × ktiles × 512 bytes).
        return unsafe { kernel.launch(stream, dims, &tp) };
    }
    if !matches!(prepass, Prepass::None) {
        // x → x̂ (bf16, contiguous) in the scratch, then the GEMM reads x̂ (launched last of all
        // the fallible steps but the GEMM's own: an error launches nothing).
        let pre = sel.kernels.get(1).ok_or_else(unknown)?;
        let threads = p.m as usize * q.k / 8;
        let dims = LaunchDims { grid: (threads.div_ceil(256) as u32, 1, 1), block: (256, 1, 1), smem_bytes: 0 };
        match prepass {
            // SAFETY: BsQuantXParams mirrors the kernel's struct; x passed `Query::checked` ([M, K]
            // bf16, 16-byte aligned rows) and x_hat is the plan's scratch region of max_rows ≥ M
            // rows of K bf16.
            Prepass::Quant(qp) => unsafe { pre.launch(stream, dims, &BsQuantXParams { xhat: x_hat, ..qp })? },
            // SAFETY: BsDequantXParams mirrors the kernel's struct; the codes ([M, row bytes],
            // rows 8- or 4-byte aligned) and scales ([M, K / group] bytes) passed `Query::checked`,
            // x_hat as above.
            // With f32 scales (mode 2) xsf is the plan's `x_scales_f32` region of max_rows ≥ M rows
            // of K / 128.
            Prepass::Dequant(dp) => unsafe {
                pre.launch(stream, dims, &BsDequantXParams { xhat: x_hat, xsf: staging.x_scales_f32, ..dp })?
            },
            Prepass::None => {}
        }
        p.x = x_hat;
        p.ldx = q.k as i64;
        if p.flags & FLAG_XSCALE_F32 != 0 {
            p.xscales = staging.x_scales_f32;
        }
    }
    let c = match cand {
        Candidate::Gemv(c) => c,
        Candidate::Native(_) => return Err(unknown()), // native candidates exist only for pre-quantized x
        Candidate::Tile(_) | Candidate::Wgmma(_) => {
            let (c, smem_bytes) = match cand {
                Candidate::Wgmma(w) => (w.tile(), w.dynamic_smem()),
                Candidate::Tile(c) => (c, c.dynamic_smem()),
                _ => return Err(unknown()),
            };
            let (tiles, mtiles, ktiles, splits, kt_per) = c.schedule(p.m as usize, q.n, q.k);
            let (grid, tail0, tail_splits) = match cand {
                Candidate::Wgmma(w) => {
                    let (_, _, _, tail0, ts) = w.schedule(p.m as usize, q.n, q.k, plan.device.sm_count());
                    (tail0 + (tiles - tail0) * ts, tail0 as i32, ts)
                }
                _ => (tiles, tiles as i32, 1),
            };
            let tp = BsGemmParams {
                codes,
                scales: p.scales,
                x: p.x,
                bias: p.bias,
                y: p.y,
                partials: p.partials,
                counters: p.counters,
                ldx: p.ldx,
                ldy: p.ldy,
                n: p.n,
                k: p.k,
                m: p.m,
                row_bytes: q.weight.code_bytes(q.k) as i32,
                ktiles: ktiles as i32,
                mtiles: mtiles as i32,
                stages: c.stages as i32,
                scale_tiles: p.scale_tiles,
                scale_bias: p.scale_bias,
                out_scale: p.out_scale,
                flags: p.flags,
                sld: p.sld,
                sgroups: p.sgroups,
                kt_per: kt_per as i32,
                xmult: p.xmult,
                // Block FP8 x with f32 scales: `x_scales_f32` ([M, ktiles] f32); else unused.
                xscales: p.xscales,
                tail0,
                tail_splits: tail_splits as i32,
            };
            let dims = LaunchDims { grid: (grid as u32, splits as u32, 1), block: (TILE_THREADS, 1, 1), smem_bytes };
            // SAFETY: BsGemmParams mirrors the kernel's struct (asserted on both sides); the
            // tensors passed `Query::kernel_params` (codes and scales are the packed weight's,
            // whose layout set_scale_layout describes; x, y and bias cover M × K, M × N, N); the
            // scratch's partials and counters were sized by `plan` for every candidate at its
            // bucket's largest M ≥ this M.
            return unsafe { kernel.launch(stream, dims, &tp) };
        }
    };
    let row_bytes = q.weight.code_bytes(q.k);
    let map = Tma2d {
        base: codes,
        dtype: DType::BF16, // the packed bytes as 16-bit elements: 64 of them are a 128-byte line
        rows: q.n,
        cols: row_bytes / 2,
        row_stride_bytes: row_bytes,
        box_rows: ROWS as u32,
        box_cols: 64,
    };
    p.codes_map = map.encode("w.codes")?;
    let (grid, per_cta, kstages) = c.schedule(q.n, q.k, plan.device.sm_count());
    p.units_per_cta = per_cta as i32;
    p.kstages = kstages as i32;
    p.stages = c.stages as i32;
    let dims = LaunchDims { grid: (grid as u32, 1, 1), block: (THREADS, 1, 1), smem_bytes: c.dynamic_smem() };
    // SAFETY: BsGemvParams mirrors the kernel's struct (asserted on both sides); the tensors
    // passed `Query::kernel_params` (the descriptor covers exactly the packed codes, the scale
    // tiles are the packed weight's), and the scratch was bound at the plan's sizes, which cover
    // every candidate's partial slots and counters.
    unsafe { kernel.launch_ex(stream, dims, p, LaunchOpts { pdl: false, cluster_x: 0 }) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        let q = &self.query;
        let bias = q.bias.map_or("none", DType::name);
        let native = if self.options.native_only { " native_only" } else { "" };
        format!(
            "N={} K={} w={:?} x={} x_quant={:?} out={} bias={bias} max_rows={}{native}",
            q.n,
            q.k,
            q.weight,
            q.x_format.name(),
            q.x_quant,
            q.out_dtype,
            q.max_rows
        )
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::BLOCKSCALED_GEMV_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, bucket: usize) -> Vec<String> {
        self.configs(bucket).iter().map(Candidate::id).collect()
    }
    fn symbols(&self, bucket: usize, config_index: usize) -> Vec<String> {
        let q = &self.query;
        let Some(c) = self.configs(bucket).get(config_index) else { return Vec::new() };
        let mut symbols = vec![c.symbol_x(q.weight, q.x_format.f32_scales(), q.out_dtype)];
        if matches!(c, Candidate::Native(_)) {
            symbols.push(if q.x_quant.is_some() { QUANT_X_SYMBOL } else { STAGE_XQ_SYMBOL }.to_string());
        } else if q.x_quant.is_some() {
            symbols.push(QUANT_X_SYMBOL.to_string());
        } else if q.x_format != XFormat::Bf16 {
            symbols.push(DEQUANT_X_SYMBOL.to_string());
        }
        symbols
    }
    fn dynamic_smem(&self, bucket: usize, config_index: usize) -> u32 {
        // The opt-in limit is per kernel function and `prime` sets the device's maximum.
        self.configs(bucket).get(config_index).map_or(0, Candidate::dynamic_smem) + STATIC_SMEM
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        // One zeroed buffer: scratch, codes, scales, x, y, bias at the bucket's largest M (the
        // speed does not depend on the values).
        let q = &self.query;
        let m = self.buckets.get(bucket).map_or(1, |b| b.hi);
        let sizes = [
            self.scratch.total_bytes(),
            q.n * q.weight.code_bytes(q.k),
            scale_bytes(q.weight, q.n, q.k),
            m * q.k * 2,
            m * q.n * q.out_dtype.size_bytes(),
            q.bias.map_or(0, |b| q.n * b.size_bytes()),
            // A pre-quantized x's block scales and tensor scale.
            if q.x_format.group() > 0 {
                m * (q.k / q.x_format.group()) * if q.x_format.f32_scales() { 4 } else { 1 }
            } else {
                0
            },
            4,
        ];
        let race = RaceBuffer::new(&self.device, &sizes)?;
        let at = &race.ptrs;
        // SAFETY: the first region of the race's buffer, used by nothing else.
        let bound = self.scratch.bind(&unsafe { Scratch::from_raw(at[0], sizes[0]) })?;
        let mut params = BsGemvParams {
            scales: at[2],
            x: at[3],
            y: at[4],
            bias: if q.bias.is_some() { at[5] } else { 0 },
            partials: bound.ptr("partials"),
            counters: bound.ptr("counters"),
            ldx: q.k as i64,
            ldy: q.n as i64,
            n: q.n as i32,
            k: q.k as i32,
            m: m as i32,
            scale_bias: 126,
            out_scale: 1.0,
            flags: if q.bias == Some(DType::F32) { FLAG_BIAS_F32 } else { 0 },
            ..BsGemvParams::default()
        };
        set_scale_layout(&mut params, q.weight, q.n, q.k);
        let xf = q.x_format;
        let prepass = if let Some(xq) = q.x_quant {
            let (group, floor) = xq.kernel_args();
            Prepass::Quant(BsQuantXParams {
                x: at[3],
                ldx: q.k as i64,
                m: m as i32,
                k: q.k as i32,
                group,
                floor,
                ..BsQuantXParams::default()
            })
        } else if xf != XFormat::Bf16 {
            if xf.has_global() {
                params.xmult = at[7];
                params.flags |= if xf == XFormat::Nvfp4 { FLAG_XMULT_INV } else { 0 };
            }
            let (scales, lds) = match q.k.checked_div(xf.group()) {
                Some(cols) => (at[6], cols as i64),
                None => (0, 0),
            };
            dequant_prepass(&mut params, xf, scales, xf.row_bytes(q.k) as i64, lds)
        } else {
            Prepass::None
        };
        let call = Call { codes: at[1], prepass, staging: Staging::of(&bound), native_scale: 1.0 };
        Ok(Box::new(RaceCase { plan: self, bucket, params, call, _buffer: race.buffer }))
    }
}

struct RaceCase<'p> {
    plan: &'p Plan,
    bucket: usize,
    params: BsGemvParams,
    call: Call,
    _buffer: CudaSlice<u8>,
}

impl BenchCase for RaceCase<'_> {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        let mut p = self.params;
        launch(self.plan, self.bucket, selected, &mut p, self.call, stream)
    }
}

/// The plans `cargo xtask prepare` tunes by default: the issue's decode shapes ((18432, 7168),
/// (36864, 7168), (7168, 18432), (4096, 7168)) for NVFP4, MXFP4, MXFP8 and block FP8 (128 × 128,
/// f32 scales: DeepSeek's), bf16 out, capacity 16.
pub fn default_profile_plans(device: &Arc<Device>) -> Result<Vec<Box<dyn OpPlan>>> {
    let mut out: Vec<Box<dyn OpPlan>> = Vec::new();
    let block = WeightFormat::BlockFp8 { tile: 128, scale: b12x_quant::block::Fp8ScaleKind::F32 };
    for weight in [WeightFormat::Nvfp4, WeightFormat::Mxfp4, WeightFormat::Mxfp8, block] {
        for (n, k) in [(18432, 7168), (36864, 7168), (7168, 18432), (4096, 7168)] {
            let q = Query {
                n,
                k,
                weight,
                x_format: XFormat::Bf16,
                out_dtype: DType::BF16,
                bias: None,
                max_rows: 16,
                x_quant: None,
            };
            out.push(Box::new(plan(&q, device)?));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_ids_round_trip_and_fit() {
        for w8 in [false, true] {
            for hi in [1, 2, 4, 8, 16] {
                let cs = configs(hi, 232_448, w8);
                assert!(!cs.is_empty());
                for c in cs {
                    assert_eq!(Config::parse(&c.id()), Some(c));
                    assert!(c.fits(232_448));
                    assert_eq!(c.nt, if hi <= 8 { 1 } else { 2 });
                    assert_eq!(c.w8, w8);
                }
            }
            // An SM120-sized opt-in (99 KB; 100 KB per SM) fits shallow rings, and their CTAs
            // per SM fit the SM (the SM90 list's 2–3 CTAs of 48–70 KB would not).
            for hi in [1, 8, 16] {
                let cs = configs(hi, 101_376, w8);
                assert!(!cs.is_empty(), "hi {hi} w8 {w8}");
                for c in cs {
                    assert!(c.dynamic_smem() + STATIC_SMEM <= 101_376);
                    assert!(c.ctas as u32 * (c.dynamic_smem() + STATIC_SMEM + 1024) <= 102_400, "{c:?}");
                }
            }
        }
        // SM90's lists are what they were when the per-SM budget was a 228 KB constant.
        let ids = |hi, w8| configs(hi, 232_448, w8).iter().map(Config::id).collect::<Vec<_>>().join(" ");
        assert_eq!(
            ids(1, false),
            "w4a16_nt1_kb1_s3_c3 w4a16_nt1_kb1_s2_c3 w4a16_nt1_kb1_s4_c2 w4a16_nt1_kb2_s2_c2 w4a16_nt1_kb1_s8_c1 w4a16_nt1_kb2_s4_c1"
        );
        assert_eq!(
            ids(16, false),
            "w4a16_nt2_kb1_s4_c2 w4a16_nt2_kb2_s2_c2 w4a16_nt2_kb1_s3_c2 w4a16_nt2_kb1_s8_c1 w4a16_nt2_kb2_s4_c1"
        );
        assert_eq!(Config::parse("w4a16_nt1_kb1_s6"), None);
        assert_eq!(Config::parse("w8a16_nt1_kb1_s3_c3").map(|c| c.w8), Some(true));
        let c = |nt, kb, stages, ctas| Config { w8: false, nt, kb, stages, ctas };
        assert!(!c(1, 2, 4, 2).fits(232_448));
        // Two CTAs of 12 stages do not fit an SM; NT = 2 never runs three CTAs per SM.
        assert!(!c(1, 1, 12, 2).fits(232_448));
        assert!(!c(2, 1, 2, 3).fits(232_448));
        // FP8 stages are smaller (512 B of scales, 320-byte x rows): 19 KB at KB = 1, NT = 1.
        assert_eq!(Config { w8: true, ..c(1, 1, 2, 1) }.stage_bytes(), 19 * 1024);
        assert_eq!(c(1, 1, 2, 1).stage_bytes(), 23 * 1024);
    }

    #[test]
    fn tile_configs_round_trip_fit_and_cover() {
        let block = WeightFormat::BlockFp8 { tile: 128, scale: b12x_quant::block::Fp8ScaleKind::F32 };
        for f in [WeightFormat::Nvfp4, WeightFormat::Mxfp4, WeightFormat::Mxfp8, block, WeightFormat::TensorFp8] {
            for hi in [32, 64, 128, 8192] {
                for smem in [232_448, 101_376] {
                    let cs = tile_configs(hi, smem, f);
                    assert!(!cs.is_empty(), "{f:?} hi={hi} smem={smem}");
                    for c in cs {
                        assert_eq!(TileConfig::parse(&c.id()), Some(c));
                        assert!(c.fits(smem) && c.w8 == is_w8(f));
                        // Every config's kernel is an entry point.
                        assert!(all_symbols().contains(&c.symbol(f, DType::BF16)), "{}", c.id());
                        let (bm, bn) = c.tile();
                        for (m, n, k) in [(17, 1, 7168), (1000, 4099, 7168), (8192, 18432, 7168), (40, 1000, 96)] {
                            let (tiles, mtiles, ktiles, splits, kt_per) = c.schedule(m, n, k);
                            assert!(mtiles * bm >= m && (mtiles - 1) * bm < m);
                            assert_eq!(tiles, mtiles * n.div_ceil(bn));
                            assert_eq!(ktiles, k.div_ceil(128));
                            // Every split has k-tiles; together they cover K once.
                            assert!(splits >= 1 && splits <= c.splits && (splits - 1) * kt_per < ktiles);
                            assert!(splits * kt_per >= ktiles);
                            let (part, cnt) = c.scratch_bytes(m, n, k);
                            assert_eq!(part > 0, splits > 1);
                            assert!(part == 0 || (part == tiles * splits * bm * bn * 4 && cnt == tiles * 8));
                        }
                    }
                }
            }
        }
        // The prefill tile of FP4: 32 KB of x, 16 KB of codes, 2 KB of scales per stage.
        let c = TileConfig { w8: false, wm: 4, wn: 8, stages: 4, splits: 1 };
        // Split-K only on the middle tiles.
        assert!(!TileConfig { splits: 2, ..c }.fits(232_448));
        assert!(TileConfig { wm: 2, splits: 4, ..c }.fits(232_448));
        assert!(!TileConfig { wm: 2, splits: 3, ..c }.fits(232_448));
        assert_eq!(c.stage_bytes(), 50 * 1024);
        assert!(c.fits(232_448) && !c.fits(101_376));
        assert!(!TileConfig { wm: 1, wn: 8, ..c }.fits(232_448));
        assert_eq!(TileConfig::parse("tile_w4_wm4_wn8"), None);
        assert_eq!(TileConfig::parse("tile_w4_wm4_wn8_s3"), None);
    }

    #[test]
    fn schedule_covers_every_unit_once() {
        for (n, k) in [(18432, 7168), (576, 7168), (1000, 1536), (7168, 18432), (1, 32)] {
            for c in configs(8, 232_448, false).into_iter().chain(configs(8, 232_448, true)) {
                let (grid, q, kstages) = c.schedule(n, k, 132);
                let units = n.div_ceil(128) * kstages;
                assert_eq!(kstages, k.div_ceil(if c.w8 { 128 } else { 256 } * c.kb));
                assert!(grid <= 132 * c.ctas && grid * q >= units && (grid - 1) * q < units);
            }
        }
    }

    #[test]
    fn the_ring_wrap_test_shape_wraps_every_config() {
        // tests/gpu_blockscaled_gemv.rs's 4096 × 14336 case: more units per CTA than stages, so
        // the sanitizers see every ring refilled (H200: 132 SMs).
        for hi in [1, 16] {
            for c in configs(hi, 232_448, false).into_iter().chain(configs(hi, 232_448, true)) {
                let (_, q, _) = c.schedule(4096, 14336, 132);
                assert!(q > c.stages, "{}: {q} units per CTA", c.id());
            }
        }
    }

    #[test]
    fn scale_layout_matches_pack_weight() {
        // The bench's stand-in buffers and the kernel's scale parameters follow pack.rs's
        // layout: bytes of scales, tiles per row block, f32 row stride and tile rows.
        use crate::blockscaled::pack::{block_scale_ld, pack_host};
        use crate::blockscaled::Weight;
        use b12x_quant::block::{quantize_block_fp8, quantize_mx, quantize_nvfp4, Fp8ScaleKind, MxOptions};
        use b12x_quant::codec::Element;
        for (n, k) in [(200, 320), (129, 96), (1, 32), (1000, 1056)] {
            let w: Vec<f32> = (0..n * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
            let mut weights = vec![
                Weight::Nvfp4(quantize_nvfp4(&w, n, k, None).unwrap()),
                Weight::Mx(quantize_mx(&w, n, k, Element::E2M1, MxOptions::default()).unwrap()),
                Weight::Mx(quantize_mx(&w, n, k, Element::E4M3, MxOptions::default()).unwrap()),
            ];
            for tile in [32, 128] {
                for kind in [Fp8ScaleKind::F32, Fp8ScaleKind::Ue8m0] {
                    weights.push(Weight::BlockFp8(quantize_block_fp8(&w, n, k, (tile, tile), kind).unwrap()));
                }
            }
            for weight in weights {
                let packed = pack_host(&weight).unwrap();
                let f = packed.format;
                assert_eq!(scale_bytes(f, n, k), packed.scales.len(), "{f:?} {n}×{k}");
                let mut p = BsGemvParams::default();
                set_scale_layout(&mut p, f, n, k);
                match f {
                    WeightFormat::BlockFp8 { tile, .. } => {
                        assert_eq!(p.sld as usize, block_scale_ld(k, tile));
                        assert_eq!(p.sgroups as usize, n.div_ceil(tile));
                        assert_eq!(p.flags & FLAG_TILE32 != 0, tile == 32);
                        assert_eq!(4 * p.sld as usize * p.sgroups as usize, packed.scales.len());
                    }
                    _ => assert_eq!(n.div_ceil(ROWS) * p.scale_tiles as usize * 512, packed.scales.len()),
                }
            }
        }
    }

    #[test]
    fn wg_configs_sm90_prefill_only() {
        use b12x_core::Arch;
        let smem = 232_448;
        let w4 = |stages| WgConfig { w8: false, wn: 8, stages, tail: false };
        let w4t = WgConfig { tail: true, ..w4(2) };
        assert_eq!(wg_configs(2048, smem, WeightFormat::Nvfp4, Arch::Sm90), vec![w4(2), w4(3), w4t]);
        assert_eq!(w4t.id(), "wg_w4_wn8_s2_tail");
        let block = WeightFormat::BlockFp8 { tile: 32, scale: b12x_quant::block::Fp8ScaleKind::F32 };
        let b = |wn, stages| WgConfig { w8: true, wn, stages, tail: false };
        let bt = |wn| WgConfig { tail: true, ..b(wn, 2) };
        assert_eq!(wg_configs(128, smem, block, Arch::Sm90), vec![b(8, 2), b(8, 3), b(4, 2), b(4, 3), bt(8), bt(4)]);
        let symbols = all_symbols();
        let mut n = 0;
        for f in [WeightFormat::Nvfp4, WeightFormat::Mxfp4, WeightFormat::Mxfp8, block, WeightFormat::TensorFp8] {
            for c in wg_configs(128, smem, f, Arch::Sm90) {
                assert_eq!(WgConfig::parse(&c.id()), Some(c));
                assert!(TileConfig::parse(&c.id()).is_none() && Config::parse(&c.id()).is_none());
                for o in [DType::BF16, DType::F16, DType::F32] {
                    assert!(symbols.contains(&c.symbol(f, o)), "{}", c.symbol(f, o));
                }
                // The tiled kernels' stages (50 KB FP4 / 128-row block FP8, 66 KB 256-row FP8)
                // and the 1024-byte alignment slack.
                let stage = if c.w8 && c.wn == 8 { 67_584 } else { 51_200 };
                assert_eq!(c.dynamic_smem(), c.stages as u32 * stage + 1024);
                n += 1;
            }
        }
        assert_eq!(n, 12 + 6);
        assert_eq!(w4(3).symbol(WeightFormat::Mxfp4, DType::F16), "b12x_bsgemm_wg_w4a16_mxfp4_wn8_f16out");
        assert_eq!(b(4, 2).symbol(block, DType::F32), "b12x_bsgemm_wg_w8a16_fp8block_wn4_f32out");
        assert_eq!(b(4, 2).symbol_x(block, true, DType::F32), "b12x_bsgemm_wg_w8a8f32_fp8block_wn4_f32out");
        assert_eq!(b(8, 2).symbol_x(WeightFormat::Mxfp8, true, DType::F32), "b12x_bsgemm_wg_w8a16_mxfp8_wn8_f32out");
        for x in [false, true] {
            for o in [DType::BF16, DType::F16, DType::F32] {
                assert!(symbols.contains(&bt(8).symbol_x(block, x, o)));
                let t = TileConfig { w8: true, wm: 2, wn: 4, stages: 3, splits: 2 };
                assert!(symbols.contains(&t.symbol_x(block, x, o)), "{}", t.symbol_x(block, x, o));
            }
        }
        assert!(!w4(5).fits(smem) && !w4(4).fits(200_000) && !w4(3).fits(101_376));
        assert!(!WgConfig { w8: false, wn: 4, stages: 3, tail: false }.fits(smem));
        // Not below 128-row buckets, not on SM120 / SM121 (no wgmma), not where the SM's shared
        // memory holds no 2-stage ring.
        assert!(wg_configs(64, smem, WeightFormat::Nvfp4, Arch::Sm90).is_empty());
        assert!(wg_configs(2048, smem, WeightFormat::Nvfp4, Arch::Sm120).is_empty());
        assert!(wg_configs(2048, smem, WeightFormat::Mxfp8, Arch::Sm121).is_empty());
        assert!(wg_configs(2048, 101_376, WeightFormat::Nvfp4, Arch::Sm90).is_empty());
    }

    #[test]
    fn wg_split_tail_schedule() {
        let plain = WgConfig { w8: false, wn: 8, stages: 2, tail: false };
        let c = WgConfig { tail: true, ..plain };
        // 7168² at M = 2048 on 132 SMs: 16 × 28 = 448 tiles = 3 waves + 52; the 52 split two ways
        // (one sub-wave of 104 CTAs). M = 8192: 76 left (more than half), three ways.
        assert_eq!(c.schedule(2048, 7168, 7168, 132), (448, 16, 56, 396, 2));
        assert_eq!(c.schedule(8192, 7168, 7168, 132), (1792, 64, 56, 1716, 3));
        assert_eq!(plain.schedule(2048, 7168, 7168, 132), (448, 16, 56, 448, 1));
        // More than 2/3 of the SMs busy in the last wave, or no partial wave: no split.
        assert_eq!(c.schedule(2048, 18432, 7168, 132).4, 1); // 1152 = 8 · 132 + 96
        assert_eq!(c.schedule(128 * 132, 256, 7168, 132).4, 1);
        // Fewer tiles than SMs: all split, as many ways as one sub-wave holds, at most
        // MAX_TAIL_SPLITS and never more than the k-tiles.
        assert_eq!(c.schedule(256, 7168, 7168, 132), (56, 2, 56, 0, 2));
        assert_eq!(c.schedule(256, 18432, 7168, 132), (144, 2, 56, 132, 8));
        assert_eq!(c.schedule(129, 2048, 7168, 132), (16, 2, 56, 0, MAX_TAIL_SPLITS));
        assert_eq!(c.schedule(129, 2048, 256, 132), (16, 2, 2, 0, 2));
        assert_eq!(c.schedule(129, 2048, 128, 132).4, 1);
        // Every split of every tail tile is non-empty and the parts cover the k-tiles.
        for (m, n, k) in [(2048, 7168, 7168), (129, 2048, 256), (300, 4099, 1056), (1000, 1536, 7168)] {
            let (tiles, _, kt, tail0, s) = c.schedule(m, n, k, 132);
            assert!(s <= MAX_TAIL_SPLITS && (tail0 <= tiles && (tiles - tail0) * s <= 2 * 132 || s == 1));
            for v in 0..s {
                assert!((v + 1) * kt / s > v * kt / s, "{m} {n} {k}: split {v} of {s} empty");
            }
        }
        // Scratch: the largest tail over the bucket's M (one partial tile per split CTA).
        let (part, cnt) = c.scratch_bytes(1025, 2048, 7168, 7168, 132);
        // mtiles 9..=16 leave 120, 16, 44, 72, 100, 128, 24, 52 tiles: no split, 8, 3, 3, none,
        // none, 5, 2 ways; the most CTAs 72 · 3, the most split tiles 72.
        assert_eq!((part, cnt), (216 * 128 * 256 * 4, 72 * 8));
        assert_eq!(plain.scratch_bytes(1025, 2048, 7168, 7168, 132), (0, 0));
    }

    #[test]
    fn symbols_are_the_kernels_entry_points() {
        let all = all_symbols();
        assert_eq!(all.len(), 177);
        b12x_core::testing::check_manifest(crate::KERNEL_MANIFEST, &all).unwrap();
    }
}
