//! The variant table of `kernels/bf16_gemv.cu`, configs and their enumeration per bucket.

use b12x_core::DType;

/// Tensor-core variants (BF16 x, 16-byte aligned): `(NT, RT, U, STAGES)` as instantiated.
/// NT: 8-token n-tiles (M ≤ 8·NT); RT: 16-row tiles per warp; U: 32-wide k steps per ring
/// stage; STAGES: cp.async ring depth (STAGES−1 stages in flight per warp).
pub const MMA_VARIANTS: [(u32, u32, u32, u32); 9] = [
    (1, 1, 4, 4),
    (1, 1, 8, 3),
    (1, 2, 4, 3),
    (2, 1, 4, 3),
    (2, 2, 2, 4),
    (4, 1, 2, 4),
    (4, 2, 2, 3),
    (8, 1, 2, 3),
    (8, 2, 2, 3),
];
/// Tensor-core variants with the direct register feed (BF16 x, 16-byte aligned): `(NT, RT, U)`.
/// Each warp keeps one group of U 32-wide k steps of its 16·RT rows (and x) in flight in
/// registers; no shared-memory ring.
pub const DIRECT_VARIANTS: [(u32, u32, u32); 10] =
    [(1, 1, 4), (1, 1, 8), (1, 2, 4), (2, 1, 4), (2, 1, 8), (2, 2, 4), (4, 1, 4), (4, 2, 2), (8, 1, 2), (8, 2, 2)];
/// TMA variants (BF16 x, 16-byte aligned): `(NT, RT, CW, KB)`. CW consumer warps own 16·RT W
/// rows each (16·RT·CW rows per CTA row block), one producer warp keeps a ring of TMA boxes in flight;
/// a ring stage holds KB 64-wide k boxes of W and x. On the H200 longer stretches of each row
/// per stage (KB = 4, 8: 512 B, 1 KB) stream faster than KB = 2, and 64-row blocks beat 128.
/// 32-row blocks (CW = 2) double the CTAs of one-CTA-per-row-block work where N is small
/// (4096 rows: 128 CTAs instead of 64), which matters with PDL: every CTA streams its first
/// ring of W before `griddepcontrol.wait`. 144-row blocks (RT = 3, CW = 3) make one CTA per
/// row block exactly one wave of 128 CTAs on 18432-row W (no merges; 64-row blocks need 288).
pub const TMA_VARIANTS: [(u32, u32, u32, u32); 11] = [
    (1, 1, 4, 4),
    (1, 1, 4, 8),
    (1, 1, 2, 8),
    (1, 3, 3, 2),
    (1, 3, 3, 4),
    (2, 1, 4, 4),
    (2, 1, 4, 8),
    (2, 1, 2, 8),
    (2, 3, 3, 2),
    (2, 3, 3, 4),
    (4, 1, 4, 2),
];
/// Deepest TMA ring the kernel supports (`kMaxTmaStages`).
pub const TMA_MAX_STAGES: u32 = 16;
/// Token tile of the fused x-load variants (`_silu`, `_addnorm`): the NT = 1 entries of
/// `MMA_VARIANTS` and `DIRECT_VARIANTS` are also instantiated with the SwiGLU x load and with
/// the add+RMSNorm x load (M ≤ 8), for BF16 output only.
pub const SILU_NT: u32 = 1;
/// SIMT variants (f32 x, aligned): `(MT, RS)`, MT tokens per pass, RS rows per warp.
pub const SIMT_VARIANTS: [(u32, u32); 5] = [(1, 2), (1, 4), (2, 2), (4, 2), (8, 2)];
/// Token tiles of the unaligned fallbacks (MMA: NT with RT = 1, U = 2; SIMT: MT with RS = 2).
pub const UNALIGNED_TILES: [u32; 4] = [1, 2, 4, 8];
/// Largest M a plan accepts (8 n-tiles of 8 tokens).
pub const MAX_ROWS: usize = 64;
/// Launch bound of every entry point (`kMaxThreads`).
pub const MAX_THREADS: u32 = 256;
/// K split granularity: k_per_split is a multiple of this (`kMmaStepK`).
const K_GRANULE: usize = 32;
/// Shared-memory row padding of the partial tile (`kRowPad`).
const ROW_PAD: u32 = 4;
/// Static shared memory of the kernels (the merge flag) plus headroom, kept off the opt-in limit.
const STATIC_SMEM_RESERVE: u32 = 1024;
/// Bytes of one merge counter: a tagged arrival word (`arrive_tagged` in `b12x/common.cuh`:
/// the launch's grid id and an arrival count, so no memset is needed before a launch).
pub const COUNTER_BYTES: usize = 8;
/// Split counts the enumeration considers.
const KSPLITS: [u32; 6] = [1, 2, 4, 8, 16, 32];
/// CTA shapes (warps_r, warps_k) considered, first = default.
const MMA_WARPS: [(u32, u32); 5] = [(1, 2), (1, 4), (2, 2), (2, 4), (1, 8)];
const DIRECT_WARPS: [(u32, u32); 7] = [(1, 8), (1, 4), (2, 4), (4, 2), (8, 1), (2, 2), (1, 2)];
const SIMT_WARPS: [(u32, u32); 3] = [(1, 4), (2, 4), (1, 8)];

/// What the tensor-core entry points make of x as they load it (`Query::x_act`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XLoad {
    /// x as it is (parameters `Bf16GemvParams`).
    Plain,
    /// `_silu`: SwiGLU of `[gate | up]` (x is `[M, 2K]`, parameters `Bf16GemvActParams`).
    SiluMul,
    /// `_addnorm`: norm.rmsnorm's fused form of x and the residual (parameters
    /// `Bf16GemvNormParams`).
    AddNorm,
    /// `_rmsx`: x as it is, every sum scaled by its token's rrms from the sums of squares
    /// (parameters `Bf16GemvRmsParams`; ring feed only).
    RmsScale,
    /// `_addrms`: `r = bf16(x + residual)` as it is, every sum scaled by its token's rrms from
    /// the CTA's own Σ r² (parameters `Bf16GemvNormParams`, `norm_w` unused; ring feed only).
    AddRms,
}

impl XLoad {
    /// The entry points' name suffix.
    pub fn suffix(self) -> &'static str {
        match self {
            XLoad::Plain => "",
            XLoad::SiluMul => "_silu",
            XLoad::AddNorm => "_addnorm",
            XLoad::RmsScale => "_rmsx",
            XLoad::AddRms => "_addrms",
        }
    }
    /// x piece sets a ring stage holds: x; gate and up (x and residual); x, residual and norm
    /// weight.
    pub fn ring_sets(self) -> u32 {
        match self {
            XLoad::Plain | XLoad::RmsScale => 1,
            XLoad::SiluMul | XLoad::AddRms => 2,
            XLoad::AddNorm => 3,
        }
    }
}

/// The store of the `mma` ring entry points (`Query::y_act`'s epilogues that need their own
/// entry points; the SwiGLU epilogue is a run-time flag of every variant).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaEpi {
    /// y as the GEMV finishes it.
    Plain,
    /// `_rope`: the rope + KV-append epilogue (`YAct::RopeAppend`, parameters `Bf16GemvRopeParams`).
    Rope,
    /// `_resrms`: the residual add and the 16-row sums of squares (`YAct::ResidualRms`,
    /// parameters `Bf16GemvRmsParams`).
    ResidualRms,
}

/// Which kernel family and template instance a config launches.
///
/// `x`: what the `mma` / `mmad` entry point makes of x as it loads it ([`XLoad`]); `epi`: the
/// ring entry points' own epilogues ([`MmaEpi`]; NT = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    Mma { nt: u32, rt: u32, u: u32, stages: u32, x: XLoad, epi: MmaEpi },
    MmaDirect { nt: u32, rt: u32, u: u32, x: XLoad },
    MmaUnaligned { nt: u32 },
    Tma { nt: u32, rt: u32, cw: u32, kb: u32 },
    Simt { mt: u32, rs: u32 },
    SimtUnaligned { mt: u32 },
}

impl Variant {
    /// Rows of W one warp owns.
    pub fn rows_per_warp(self) -> u32 {
        match self {
            Variant::Mma { rt, .. } | Variant::MmaDirect { rt, .. } | Variant::Tma { rt, .. } => 16 * rt,
            Variant::MmaUnaligned { .. } => 16,
            Variant::Simt { rs, .. } => rs,
            Variant::SimtUnaligned { .. } => 2,
        }
    }
    /// Tokens of one pass (the partial tile's width).
    pub fn tokens(self) -> u32 {
        match self {
            Variant::Mma { nt, .. }
            | Variant::MmaDirect { nt, .. }
            | Variant::MmaUnaligned { nt }
            | Variant::Tma { nt, .. } => 8 * nt,
            Variant::Simt { mt, .. } | Variant::SimtUnaligned { mt } => mt,
        }
    }
    /// What the entry point makes of x as it loads it (`Plain` for every family but `mma` /
    /// `mmad`).
    pub fn x_load(self) -> XLoad {
        match self {
            Variant::Mma { x, .. } | Variant::MmaDirect { x, .. } => x,
            _ => XLoad::Plain,
        }
    }
    /// Whether the entry point fuses the SwiGLU x load.
    pub fn silu(self) -> bool {
        self.x_load() == XLoad::SiluMul
    }
    /// Whether the entry point stores through the rope + KV-append epilogue (`_rope`).
    pub fn rope(self) -> bool {
        matches!(self, Variant::Mma { epi: MmaEpi::Rope, .. })
    }
    /// Whether the entry point stores through the residual + sums-of-squares epilogue (`_resrms`).
    pub fn residual_rms(self) -> bool {
        matches!(self, Variant::Mma { epi: MmaEpi::ResidualRms, .. })
    }
    /// Whether the entry point takes `Bf16GemvRmsParams` (`_resrms`, `_rmsx`).
    pub fn rms_params(self) -> bool {
        self.residual_rms() || self.x_load() == XLoad::RmsScale
    }
    /// Whether the entry point finishes its tiles only unsplit (`ksplit` 1): its epilogue runs
    /// where a CTA finishes a tile (`_rope`, `_resrms`, `_rmsx`), or its CTAs sum r² over the
    /// whole row (`_addrms`).
    pub fn unsplit_only(self) -> bool {
        self.rope() || self.rms_params() || self.x_load() == XLoad::AddRms
    }
    /// Whether the entry point takes `Bf16GemvNormParams` (alone or in `Bf16GemvRopeParams`):
    /// `_addnorm`, `_addrms`.
    pub fn norm_params(self) -> bool {
        matches!(self.x_load(), XLoad::AddNorm | XLoad::AddRms)
    }
    fn id(self) -> String {
        let act = self.x_load().suffix();
        match self {
            Variant::Mma { nt, rt, u, stages, epi, .. } => {
                let epi = match epi {
                    MmaEpi::Plain => "",
                    MmaEpi::Rope => "_rope",
                    MmaEpi::ResidualRms => "_resrms",
                };
                format!("mma_nt{nt}_rt{rt}_u{u}_s{stages}{act}{epi}")
            }
            Variant::MmaDirect { nt, rt, u, .. } => format!("mmad_nt{nt}_rt{rt}_u{u}{act}"),
            Variant::MmaUnaligned { nt } => format!("mma_nt{nt}_unaligned"),
            Variant::Tma { nt, rt, cw, kb } => format!("tma_nt{nt}_rt{rt}_cw{cw}_kb{kb}"),
            Variant::Simt { mt, rs } => format!("simt_mt{mt}_rs{rs}"),
            Variant::SimtUnaligned { mt } => format!("simt_mt{mt}_unaligned"),
        }
    }
    /// The kernel symbol for an output dtype, e.g. `b12x_bf16_gemv_mma_nt1_rt1_u4_s4_bf16out`.
    pub fn symbol(self, out: DType) -> String {
        format!("b12x_bf16_gemv_{}_{}out", self.id(), out.name())
    }
}

/// The tensor-core variants of the tables, plain or with a fused x load (the [`SILU_NT`] entries
/// only), direct feed first.
fn mma_variants(x: XLoad) -> impl Iterator<Item = Variant> {
    let keep = move |nt: u32| x == XLoad::Plain || nt == SILU_NT;
    let direct =
        DIRECT_VARIANTS.iter().filter(move |v| keep(v.0)).map(move |&(nt, rt, u)| Variant::MmaDirect { nt, rt, u, x });
    let ring = MMA_VARIANTS.iter().filter(move |v| keep(v.0)).map(move |&(nt, rt, u, stages)| Variant::Mma {
        nt,
        rt,
        u,
        stages,
        x,
        epi: MmaEpi::Plain,
    });
    direct.chain(ring)
}

/// The ring-only variants of the [`SILU_NT`] rows: `_rope` (x `Plain`, `AddNorm` or `AddRms`),
/// `_resrms` (x `Plain`), `_rmsx` (x `RmsScale`, epilogue `Plain`) and `_addrms` (x `AddRms`,
/// epilogue `Plain`).
fn ring_variants(x: XLoad, epi: MmaEpi) -> impl Iterator<Item = Variant> {
    MMA_VARIANTS.iter().filter(|v| v.0 == SILU_NT).map(move |&(nt, rt, u, stages)| Variant::Mma {
        nt,
        rt,
        u,
        stages,
        x,
        epi,
    })
}

/// Every symbol the variant table names (both output dtypes): the manifest test checks them.
pub fn all_symbols() -> Vec<String> {
    let mut v: Vec<Variant> = mma_variants(XLoad::Plain).collect();
    v.extend(TMA_VARIANTS.iter().map(|&(nt, rt, cw, kb)| Variant::Tma { nt, rt, cw, kb }));
    v.extend(SIMT_VARIANTS.iter().map(|&(mt, rs)| Variant::Simt { mt, rs }));
    v.extend(UNALIGNED_TILES.iter().map(|&nt| Variant::MmaUnaligned { nt }));
    v.extend(UNALIGNED_TILES.iter().map(|&mt| Variant::SimtUnaligned { mt }));
    let mut out: Vec<String> = v.iter().flat_map(|v| [v.symbol(DType::BF16), v.symbol(DType::F32)]).collect();
    // The fused x-load variants exist for BF16 output only.
    out.extend(mma_variants(XLoad::SiluMul).map(|v| v.symbol(DType::BF16)));
    out.extend(mma_variants(XLoad::AddNorm).map(|v| v.symbol(DType::BF16)));
    out.extend(ring_variants(XLoad::Plain, MmaEpi::Rope).map(|v| v.symbol(DType::BF16)));
    out.extend(ring_variants(XLoad::AddNorm, MmaEpi::Rope).map(|v| v.symbol(DType::BF16)));
    out.extend(ring_variants(XLoad::Plain, MmaEpi::ResidualRms).map(|v| v.symbol(DType::BF16)));
    out.extend(ring_variants(XLoad::RmsScale, MmaEpi::Plain).map(|v| v.symbol(DType::BF16)));
    out.extend(ring_variants(XLoad::AddRms, MmaEpi::Plain).map(|v| v.symbol(DType::BF16)));
    out.extend(ring_variants(XLoad::AddRms, MmaEpi::Rope).map(|v| v.symbol(DType::BF16)));
    out
}

/// One launch configuration: a variant, the CTA shape and the number of K splits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    pub variant: Variant,
    /// Warps of a CTA along N (row groups); for `tma`, the consumer warps.
    pub warps_r: u32,
    /// Warps of a CTA along K (merged through shared memory in warp order); 1 for `tma`.
    pub warps_k: u32,
    /// CTAs along K (merged by the last-arriving CTA in split order); 1 for `tma`.
    pub ksplit: u32,
    /// How a `tma` config walks its work; `None` for the other families.
    pub tma: Option<TmaMode>,
}

/// The run-time choices of a `tma` config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TmaMode {
    /// Ring depth (stages of KB boxes of W and x), as deep as shared memory allows.
    pub stages: u32,
    /// How the (row block, k-stage) units are dealt to CTAs.
    pub work: TmaWork,
    /// Stream W with an L2 evict-first hint (`ef`) or none (`nh`). On the H200 the hint wins
    /// the 58 MB shapes and loses the LM head, so the race decides.
    pub evict_first: bool,
}

/// How a `tma` config deals its (row block, k-stage) units to CTAs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TmaWork {
    /// `sk`: the row-major unit list split evenly over one CTA per SM (stream-K); row blocks
    /// shared by two or more CTAs are merged through scratch by the last to arrive.
    StreamK,
    /// `rb`: each CTA owns one whole row block (no merges, as many CTAs as row blocks).
    RowBlocks,
    /// `c{C}`: a cluster of C CTAs per row block, rank c taking k-stages
    /// `[c·kstages/C, (c+1)·kstages/C)`; the partial tiles are summed in rank order through
    /// distributed shared memory (no scratch). For few row blocks and long K (the router).
    Cluster(u32),
}

/// Cluster sizes the `c{C}` configs use (portable sizes: every sm_90 / sm_120 part runs them).
pub const TMA_CLUSTERS: [u32; 3] = [2, 4, 8];

/// The launch geometry of a `tma` config for one problem. CTA c walks the units
/// [`TmaSchedule::units_of`] names of the row-major (row block, k-stage) list; the kernel
/// repeats [`TmaSchedule::ctas_of`] and [`TmaSchedule::slot`] to merge shared row blocks
/// (stream-K) and `units_of` to find its slice (every split).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaSchedule {
    pub row_blocks: usize,
    /// k-stages per row block.
    pub kstages: usize,
    /// row_blocks × kstages.
    pub units: usize,
    pub units_per_cta: usize,
    pub grid: usize,
    /// Some row block is shared by two or more CTAs (partials and counters are used).
    pub merges: bool,
    /// CTAs per cluster (`Cluster` work; 0 otherwise): the grid is `row_blocks × cluster`.
    pub cluster: u32,
}

/// The geometry `enumerate` needs (from the query and the device).
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub n: usize,
    pub k: usize,
    pub x_f32: bool,
    pub aligned: bool,
    /// `Query::x_act`'s x load: `SiluMul` / `AddNorm` only the `_silu` / `_addnorm` variants
    /// (BF16 x, aligned, M ≤ 8).
    pub x: XLoad,
    /// `Query::y_act` is SwiGLU: no `tma` cluster configs (their ranks store fragments apart).
    pub y_silu: bool,
    /// `Query::y_act` is the rope + KV-append epilogue: only the `_rope` ring variants, no K
    /// split (the epilogue runs where a CTA finishes its tile).
    pub y_rope: bool,
    /// `Query::y_act` is the residual + sums-of-squares epilogue: only the `_resrms` ring
    /// variants, no K split.
    pub y_res: bool,
    /// Largest M of the bucket.
    pub rows_hi: usize,
    pub sm_count: u32,
    pub smem_optin: u32,
}

impl TmaSchedule {
    /// The first and last CTA whose units cover row block `rb`.
    pub fn ctas_of(&self, rb: usize) -> (usize, usize) {
        (rb * self.kstages / self.units_per_cta, ((rb + 1) * self.kstages - 1) / self.units_per_cta)
    }
    /// The partial slot CTA `c` writes for a shared row block `rb`: 0 when `rb` is the first
    /// row block of c's units, 1 otherwise (then it is the last).
    pub fn slot(&self, c: usize, rb: usize) -> usize {
        usize::from(c * self.units_per_cta / self.kstages != rb)
    }
    /// The units `[begin, begin + count)` CTA `c` walks, exactly as the kernel derives them.
    pub fn units_of(&self, c: usize) -> (usize, usize) {
        if self.cluster > 0 {
            let nc = self.cluster as usize;
            let (rank, rb) = (c % nc, c / nc);
            let (lo, hi) = (rank * self.kstages / nc, (rank + 1) * self.kstages / nc);
            (rb * self.kstages + lo, hi - lo)
        } else {
            let begin = (c * self.units_per_cta).min(self.units);
            (begin, (self.units - begin).min(self.units_per_cta))
        }
    }
}

impl Config {
    /// The stable config id used in pins and caches: `"mma_nt1_rt1_u4_s4_wr1_wk2_ks1"`.
    pub fn id(&self) -> String {
        match self.tma {
            Some(t) => format!(
                "{}_s{}_{}_{}",
                self.variant.id(),
                t.stages,
                match t.work {
                    TmaWork::StreamK => "sk".to_string(),
                    TmaWork::RowBlocks => "rb".to_string(),
                    TmaWork::Cluster(c) => format!("c{c}"),
                },
                if t.evict_first { "ef" } else { "nh" }
            ),
            None => format!("{}_wr{}_wk{}_ks{}", self.variant.id(), self.warps_r, self.warps_k, self.ksplit),
        }
    }
    pub fn threads(&self) -> u32 {
        let producer = if self.tma.is_some() { 32 } else { 0 };
        32 * self.warps_r * self.warps_k + producer
    }
    /// Bytes of one TMA ring stage (0 for the other families).
    pub fn tma_stage_bytes(&self) -> u32 {
        match self.variant {
            Variant::Tma { nt, rt, cw, kb } => kb * (16 * rt * cw * 128 + 8 * nt * 128),
            _ => 0,
        }
    }
    /// Bytes of the per-CTA partial tile of the cluster split-K configs: every consumer lane's
    /// 16·RT × 8·NT fragment values, f32.
    pub fn tma_cluster_tile_bytes(&self) -> u32 {
        match self.variant {
            Variant::Tma { nt, rt, cw, .. } => cw * 32 * rt * nt * 4 * 4,
            _ => 0,
        }
    }
    /// The work split of a `tma` config over `sm_count` SMs (`None` for the other families).
    pub fn tma_schedule(&self, n: usize, k: usize, sm_count: u32) -> Option<TmaSchedule> {
        let (Variant::Tma { kb, .. }, Some(mode)) = (self.variant, self.tma) else { return None };
        let row_blocks = self.row_blocks(n);
        let kstages = tma_kstages(k, kb);
        let units = row_blocks * kstages;
        let (units_per_cta, cluster) = match mode.work {
            TmaWork::StreamK => (units.div_ceil(sm_count.max(1) as usize), 0),
            TmaWork::RowBlocks => (kstages, 0),
            TmaWork::Cluster(c) => (kstages, c),
        };
        let grid = if cluster > 0 { row_blocks * cluster as usize } else { units.div_ceil(units_per_cta) };
        let merges = cluster == 0 && units > units_per_cta && units_per_cta % kstages != 0;
        Some(TmaSchedule { row_blocks, kstages, units, units_per_cta, grid, merges, cluster })
    }
    /// Rows of W per CTA.
    pub fn rows_per_cta(&self) -> u32 {
        self.variant.rows_per_warp() * self.warps_r
    }
    pub fn row_blocks(&self, n: usize) -> usize {
        n.div_ceil(self.rows_per_cta() as usize)
    }
    /// K elements per split (multiple of 32) and the number of non-empty splits.
    pub fn k_split(&self, k: usize) -> (usize, usize) {
        let per = k.div_ceil(K_GRANULE).div_ceil(self.ksplit as usize) * K_GRANULE;
        (per, k.div_ceil(per))
    }
    /// Token capacity of the partials for a bucket ending at `rows_hi`.
    pub fn m_pad(&self, rows_hi: usize) -> usize {
        rows_hi.next_multiple_of(self.variant.tokens() as usize)
    }
    /// Dynamic shared memory, exactly as the kernel lays it out: the per-warp partial tile
    /// `[warps_k][tokens][rows_per_cta + 4]` f32, overlaid (MMA) on the cp.async ring.
    pub fn dynamic_smem(&self) -> u32 {
        if let Some(t) = self.tma {
            // The ring, plus slack to align it to 1024 bytes (the 128-byte swizzle's period),
            // plus (cluster split-K) the partial tile the cluster sums.
            let cluster_tile = if matches!(t.work, TmaWork::Cluster(_)) { self.tma_cluster_tile_bytes() } else { 0 };
            return t.stages * self.tma_stage_bytes() + 1024 + cluster_tile;
        }
        let tile = self.warps_k * self.variant.tokens() * (self.rows_per_cta() + ROW_PAD) * 4;
        let ring = match self.variant {
            Variant::Mma { nt, rt, u, stages, x, .. } => {
                // W tile, then the x pieces (gate and up; x, residual and norm weight when fused).
                let x_sets = x.ring_sets();
                let stage = 16 * rt * 4 * u * 16 + x_sets * u * nt * 32 * 16;
                self.warps_r * self.warps_k * stages * stage
            }
            _ => 0,
        };
        tile.max(ring)
    }
    /// `(partials bytes, counters bytes)` this config needs; zero without split-K (or, for
    /// `tma`, without merges): `tma` keeps two partial slots `[tokens][rows per CTA]` f32 per
    /// CTA and one counter per (row block, consumer warp). Counters are 8-byte tagged words
    /// (`arrive_tagged` in `b12x/common.cuh`): they need no zeroing between calls.
    pub fn scratch_bytes(&self, n: usize, k: usize, rows_hi: usize, sm_count: u32) -> (usize, usize) {
        if let Some(s) = self.tma_schedule(n, k, sm_count) {
            if !s.merges {
                return (0, 0);
            }
            let slot = self.variant.tokens() as usize * self.rows_per_cta() as usize * 4;
            return (s.grid * 2 * slot, s.row_blocks * self.warps_r as usize * COUNTER_BYTES);
        }
        let (_, splits) = self.k_split(k);
        if splits <= 1 {
            return (0, 0);
        }
        let n_pad = self.row_blocks(n) * self.rows_per_cta() as usize;
        (splits * self.m_pad(rows_hi) * n_pad * 4, self.row_blocks(n) * COUNTER_BYTES)
    }
}

/// k-stages of one TMA row block: KB 64-wide boxes per stage.
fn tma_kstages(k: usize, kb: u32) -> usize {
    k.div_ceil(64 * kb as usize)
}

/// The 8-token n-tiles (NT) of the tensor-core variants serving a bucket: the smallest that
/// covers `rows_hi`.
fn token_tiles(rows_hi: usize) -> u32 {
    (rows_hi.div_ceil(8).next_power_of_two() as u32).min(8)
}

/// The variants that serve a bucket: the token tile is the smallest that covers `rows_hi`.
fn variants(g: &Geometry) -> Vec<Variant> {
    let nt = token_tiles(g.rows_hi);
    let mt = (g.rows_hi.next_power_of_two() as u32).min(8);
    // The rope epilogue: only its own variants (validate keeps it to aligned BF16 x, M ≤ 8).
    let ring_only = |x: XLoad, epi: MmaEpi| -> Vec<Variant> {
        ring_variants(x, epi).filter(|v| !g.x_f32 && g.aligned && v.tokens() == 8 * nt).collect()
    };
    if g.y_rope {
        return ring_only(g.x, MmaEpi::Rope);
    }
    // The split add+RMSNorm (validate keeps both to aligned BF16 x, M ≤ 8, plain other side).
    if g.y_res {
        return ring_only(XLoad::Plain, MmaEpi::ResidualRms);
    }
    if matches!(g.x, XLoad::RmsScale | XLoad::AddRms) {
        return ring_only(g.x, MmaEpi::Plain);
    }
    // A fused x load: only its own variants (validate keeps it to aligned BF16 x, M ≤ 8).
    if g.x != XLoad::Plain {
        return mma_variants(g.x).filter(|v| !g.x_f32 && g.aligned && v.tokens() == 8 * nt).collect();
    }
    match (g.x_f32, g.aligned) {
        (false, true) => mma_variants(XLoad::Plain).filter(|v| v.tokens() == 8 * nt).collect(),
        (false, false) => vec![Variant::MmaUnaligned { nt }],
        (true, true) => SIMT_VARIANTS.iter().filter(|v| v.0 == mt).map(|&(mt, rs)| Variant::Simt { mt, rs }).collect(),
        (true, false) => vec![Variant::SimtUnaligned { mt }],
    }
}

/// Legal configs of one bucket, default first. Pruning rules, one line each:
/// - shared memory within the device's opt-in limit (minus the static reserve);
/// - a K split must give every warp of the CTA at least two 32·U-wide groups (else the ring
///   never fills and splitting only adds merge traffic);
/// - more splits only while the grid with half as many splits is under two waves of CTAs
///   (beyond that every SM is already busy and splits only add partial traffic);
/// - with a fused x load (`x`) only its `_silu` / `_addnorm` ring and direct variants: the
///   `tma`, `simt` and unaligned kernels have no fused x load;
/// - with the rope epilogue (`y_rope`) only the `_rope` ring variants, unsplit; with the split
///   add+RMSNorm (`y_res`, `x` = `RmsScale`) only the `_resrms` / `_rmsx` ring variants, unsplit;
///   with norm 1 as a scale (`x` = `AddRms`) only the `_addrms` (`_addrms_rope`) ring variants,
///   unsplit.
///
/// The default is the first variant, the first CTA shape, and the fewest splits whose grid
/// covers every SM once.
pub fn enumerate(g: &Geometry) -> Vec<Config> {
    let mut out = Vec::new();
    let mut default = None;
    for variant in variants(g) {
        let (shapes, step) = match variant {
            Variant::MmaDirect { u, .. } => (&DIRECT_WARPS[..], 32 * u as usize),
            Variant::Mma { u, .. } => (&MMA_WARPS[..], 32 * u as usize),
            Variant::MmaUnaligned { .. } => (&MMA_WARPS[..3], 64),
            _ => (&SIMT_WARPS[..], 256),
        };
        for &(warps_r, warps_k) in shapes.iter() {
            for ksplit in KSPLITS {
                if ksplit > 1 && variant.unsplit_only() {
                    continue;
                }
                let c = Config { variant, warps_r, warps_k, ksplit, tma: None };
                if c.threads() > MAX_THREADS || c.dynamic_smem() + STATIC_SMEM_RESERVE > g.smem_optin {
                    continue;
                }
                let blocks = c.row_blocks(g.n);
                let (per, splits) = c.k_split(g.k);
                if ksplit > 1 && (splits < ksplit as usize || per < 2 * step * warps_k as usize) {
                    continue;
                }
                if ksplit > 1 && blocks * (ksplit as usize / 2) >= 2 * g.sm_count as usize {
                    continue;
                }
                if default.is_none() && blocks * splits >= g.sm_count as usize {
                    default = Some(out.len());
                }
                out.push(c);
            }
        }
    }
    // TMA configs (aligned BF16 x, no fused activation: the TMA boxes carry x as it is): raced,
    // never the default. Every ring as deep as shared memory allows (at least two stages); both
    // work splits and both W hints.
    if !g.x_f32 && g.aligned && g.x == XLoad::Plain && !g.y_rope && !g.y_res {
        let nt = token_tiles(g.rows_hi);
        for &(vnt, rt, cw, kb) in TMA_VARIANTS.iter().filter(|v| v.0 == nt) {
            let variant = Variant::Tma { nt: vnt, rt, cw, kb };
            let probe = Config { variant, warps_r: cw, warps_k: 1, ksplit: 1, tma: None };
            let stage = probe.tma_stage_bytes();
            let depth = |reserve: u32| {
                (g.smem_optin.saturating_sub(STATIC_SMEM_RESERVE + 1024 + reserve) / stage).min(TMA_MAX_STAGES)
            };
            let stages = depth(0);
            if stages < 2 {
                continue;
            }
            // Clusters only where one CTA per row block leaves SMs idle, every rank gets at
            // least one k-stage (the kernel traps otherwise: a rank without work would skip
            // the cluster barriers), and the grid is at most one CTA per SM (whether it is
            // resident at once depends on how clusters pack into GPCs; the race measures it).
            let row_blocks = probe.row_blocks(g.n);
            let kstages = tma_kstages(g.k, kb);
            let clusters = TMA_CLUSTERS
                .into_iter()
                .filter(|&c| !g.y_silu && c as usize <= kstages && row_blocks * c as usize <= g.sm_count as usize)
                .map(TmaWork::Cluster);
            for work in [TmaWork::StreamK, TmaWork::RowBlocks].into_iter().chain(clusters) {
                let stages =
                    if matches!(work, TmaWork::Cluster(_)) { depth(probe.tma_cluster_tile_bytes()) } else { stages };
                if stages < 2 {
                    continue;
                }
                for evict_first in [true, false] {
                    let tma = Some(TmaMode { stages, work, evict_first });
                    out.push(Config { tma, ..probe });
                }
            }
        }
    }
    // No config fills the device (tiny N and K): the one with the most CTAs of the first shape.
    if let Some(first) = out.first().copied() {
        let same = |c: &Config| c.variant == first.variant && (c.warps_r, c.warps_k) == (first.warps_r, first.warps_k);
        let d = default.unwrap_or_else(|| out.iter().rposition(same).unwrap_or(0));
        out[..=d].rotate_right(1);
    }
    out
}
