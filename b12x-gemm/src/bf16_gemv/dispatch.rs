//! Launch, the session-facing [`OpPlan`] implementation and the autotune race case.

use super::params::{FLAG_BIAS_F32, FLAG_PDL, FLAG_Y_SILU, TMA_FLAG_CLUSTER, TMA_FLAG_EVICT_FIRST};
use super::{
    rms_groups, Bf16GemvActParams, Bf16GemvNormParams, Bf16GemvParams, Bf16GemvRmsParams, Bf16GemvRopeParams,
    Bf16GemvTmaParams, Config, GemvRmsEpi, GemvRopeEpi, Plan, RopeAppend, TmaSchedule, Variant, XAct, XLoad, YAct,
    KERNEL_STATIC_SMEM, OP,
};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::{
    tma::Tma2d, BenchCase, Bucket, DType, Device, Error, Kernel, KernelModule, LaunchDims, LaunchOpts, OpPlan,
    PlanSlot, RaceBuffer, Result, Scratch, Selected,
};
use std::sync::Arc;

/// The parameters of the fused parts a call has (each `None` without it).
#[derive(Clone, Copy, Default)]
pub(super) struct Epilogues<'e> {
    /// `XAct::AddRmsNorm`'s or `XAct::AddRmsScale`'s (its `g` is filled at launch).
    pub norm: Option<&'e Bf16GemvNormParams>,
    /// `YAct::RopeAppend`'s.
    pub rope: Option<&'e GemvRopeEpi>,
    /// `YAct::ResidualRms`'s or `XAct::RmsScale`'s.
    pub rms: Option<&'e GemvRmsEpi>,
}

pub(super) fn launch(
    plan: &Plan,
    bucket: usize,
    sel: &Selected,
    p: &mut Bf16GemvParams,
    epi: Epilogues<'_>,
    stream: &CudaStream,
) -> Result<()> {
    let Epilogues { norm, rope, rms } = epi;
    let unknown = || Error::UnknownConfig { op: OP, bucket: String::new(), config: sel.config.clone() };
    let c = plan.configs(bucket).get(sel.config_index).copied().ok_or_else(unknown)?;
    let kernel = sel.kernels.first().ok_or_else(unknown)?;
    let (q, rows_hi) = (&plan.query, plan.buckets[bucket].hi);
    if q.pdl {
        p.flags |= FLAG_PDL;
    }
    if let Some(s) = c.tma_schedule(q.n, q.k, plan.device.sm_count()) {
        return launch_tma(&c, &s, kernel, p, stream);
    }
    let (per, splits) = c.k_split(q.k);
    let blocks = c.row_blocks(q.n);
    p.k_per_split = per as i32;
    p.ksplit = splits as i32;
    p.warps_k = c.warps_k as i32;
    p.warps_r = c.warps_r as i32;
    p.n_pad = (blocks * c.rows_per_cta() as usize) as i32;
    p.m_pad = c.m_pad(rows_hi) as i32;
    let dims = LaunchDims {
        grid: (blocks as u32, splits as u32, 1),
        block: (c.threads(), 1, 1),
        smem_bytes: c.dynamic_smem(),
    };
    let opts = LaunchOpts { pdl: plan.query.pdl, cluster_x: 0 };
    if c.variant.rope() {
        let n = match norm {
            Some(n) => Bf16GemvNormParams { g: *p, ..*n },
            None => Bf16GemvNormParams { g: *p, ..Bf16GemvNormParams::default() },
        };
        let rp = Bf16GemvRopeParams { n, r: *rope.ok_or_else(unknown)? };
        // SAFETY: as below; Bf16GemvRopeParams mirrors the `_rope` entry points' struct
        // (asserted on both sides); `Query::rope_params` checked the positions, lengths, page
        // table, table, both caches and the error word (the written ones overlapping nothing
        // the call touches), all touched after the PDL wait; the kernel checks every untrusted
        // index before it writes a cache slot.
        return unsafe { kernel.launch_ex(stream, dims, &rp, opts) };
    }
    if c.variant.rms_params() {
        let rp = Bf16GemvRmsParams { g: *p, e: *rms.ok_or_else(unknown)? };
        // SAFETY: as below; Bf16GemvRmsParams mirrors the `_resrms` / `_rmsx` entry points'
        // struct (asserted on both sides); `Query::rms_params` checked the residual and the sums
        // of squares (shapes, row strides, what is written overlapping nothing the call touches),
        // all touched after the PDL wait.
        return unsafe { kernel.launch_ex(stream, dims, &rp, opts) };
    }
    if c.variant.norm_params() {
        let np = Bf16GemvNormParams { g: *p, ..*norm.ok_or_else(unknown)? };
        // SAFETY: as below; Bf16GemvNormParams mirrors the `_addnorm` / `_addrms` entry points'
        // struct (asserted on both sides), and `Query::kernel_params` checked the residual, where
        // the new residual goes (overlapping nothing the kernel reads) and the norm weight
        // (`_addnorm`), all read after the PDL wait.
        return unsafe { kernel.launch_ex(stream, dims, &np, opts) };
    }
    if c.variant.silu() {
        let ap = Bf16GemvActParams { g: *p, limit: q.x_act.kernel_limit(), reserved: 0 };
        // SAFETY: as below; Bf16GemvActParams mirrors the `_silu` entry points' struct (asserted
        // on both sides), and `Query::kernel_params` checked x as [M, 2K] (the up halves).
        return unsafe { kernel.launch_ex(stream, dims, &ap, opts) };
    }
    // SAFETY: Bf16GemvParams mirrors the kernel's struct (asserted on both sides); the tensors
    // passed `Query::kernel_params`, the scratch regions were bound at the plan's sizes (or
    // belong to the race's own buffer); with `pdl` every family reads only W before it waits
    // (griddepcontrol.wait) and x, bias, y and the scratch after.
    unsafe { kernel.launch_ex(stream, dims, p, opts) }
}

/// Encodes the TMA descriptors of W and x from `p` and launches a `tma` config.
fn launch_tma(c: &Config, s: &TmaSchedule, kernel: &Kernel, p: &Bf16GemvParams, stream: &CudaStream) -> Result<()> {
    let (Variant::Tma { nt, rt, cw, .. }, Some(mode)) = (c.variant, c.tma) else {
        return Err(Error::UnknownConfig { op: OP, bucket: String::new(), config: c.id() });
    };
    let (n, k, m) = (p.n as usize, p.k as usize, p.m as usize);
    let w = Tma2d {
        base: p.w,
        dtype: DType::BF16,
        rows: n,
        cols: k,
        row_stride_bytes: p.ldw as usize * 2,
        box_rows: 16 * rt * cw,
        box_cols: 64,
    };
    let x = Tma2d { base: p.x, rows: m, row_stride_bytes: p.ldx as usize * 2, box_rows: 8 * nt, ..w };
    let tp = Bf16GemvTmaParams {
        w_map: w.encode("w")?,
        x_map: x.encode("x")?,
        g: *p,
        kstages: s.kstages as i32,
        units_per_cta: s.units_per_cta as i32,
        stages: mode.stages as i32,
        flags: if mode.evict_first { TMA_FLAG_EVICT_FIRST } else { 0 }
            | if s.cluster > 0 { TMA_FLAG_CLUSTER } else { 0 },
        pad: [0; 14],
    };
    let dims = LaunchDims { grid: (s.grid as u32, 1, 1), block: (c.threads(), 1, 1), smem_bytes: c.dynamic_smem() };
    // SAFETY: Bf16GemvTmaParams mirrors the kernel's struct (asserted on both sides); the
    // descriptors cover exactly the checked views of W and x; the scratch regions were bound
    // at the plan's sizes, which cover this config's partial slots and counters; with `pdl`
    // the kernel reads only W before griddepcontrol.wait; a cluster grid is row blocks ×
    // cluster size, and every rank has at least one k-stage (`enumerate`).
    unsafe { kernel.launch_ex(stream, dims, &tp, LaunchOpts { pdl: p.flags & FLAG_PDL != 0, cluster_x: s.cluster }) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        self.query.key()
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::BF16_GEMV_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, bucket: usize) -> Vec<String> {
        self.configs(bucket).iter().map(Config::id).collect()
    }
    fn symbols(&self, bucket: usize, config_index: usize) -> Vec<String> {
        self.configs(bucket).get(config_index).map(|c| vec![c.variant.symbol(self.query.out_dtype)]).unwrap_or_default()
    }
    fn dynamic_smem(&self, bucket: usize, config_index: usize) -> u32 {
        // The opt-in limit is an attribute of the kernel function, shared by every config (of
        // every bucket) that launches it, and the last one set wins: report the largest need
        // of the variant so a later bucket never lowers it below an earlier bucket's config.
        // Plus the static shared memory: the launch limit covers static + dynamic, so exactly
        // 48 KB of dynamic memory needs the opt-in too.
        let Some(v) = self.configs(bucket).get(config_index).map(|c| c.variant) else { return 0 };
        let need = self.configs.iter().flatten().filter(|c| c.variant == v).map(Config::dynamic_smem).max();
        need.unwrap_or(0) + KERNEL_STATIC_SMEM
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        // One zeroed buffer holds scratch, W, x, y and bias at the bucket's largest M (speed does
        // not depend on values). Note: this is a second copy of W's size while racing. A PDL
        // plan races `pdl_race_calls` back-to-back PDL calls, each on its own copy of W (more
        // W-sized regions): each call's prologue overlaps the previous call's tail, as in a
        // decode graph, so configs that stream more W before `griddepcontrol.wait` (more CTAs)
        // can win. With two calls the first call's un-overlapped start weighed half the score
        // and picked configs 1–10% slower in a steady chain of 8 (the bench's `sweep_x8_pdl`
        // rows on the H200); four calls still ranked the L2 hint opposite to a chain of 8 on
        // 7168×4096 (2%), so weights up to 146 MB race a chain of eight, as a decode graph
        // runs its layers.
        let q = &self.query;
        let m = self.buckets.get(bucket).map_or(1, |b| b.hi);
        // Rows padded to 16 bytes: an `aligned` query promises 16-byte row strides, which K
        // itself need not be (e.g. K = 4100 with a row stride of 4104): the aligned kernels'
        // vector loads must never see a misaligned row here.
        let ldw = q.k.next_multiple_of(8);
        // A fused activation reads x as [M, 2K] ([gate | up]).
        let x_cols = if let XAct::SiluMul { .. } = q.x_act { 2 * q.k } else { q.k };
        let ldx = x_cols.next_multiple_of(16 / q.x_dtype.size_bytes());
        // add+RMSNorm: the residual, where the new one goes ([M, ldx] each), the norm weight.
        let (res_bytes, norm_w_bytes) = match q.x_act.x_load() {
            XLoad::AddNorm => (m * ldx * 2, ldx * 2),
            XLoad::AddRms => (m * ldx * 2, 0),
            _ => (0, 0),
        };
        let sizes = [
            self.scratch.total_bytes(),
            q.n * ldw * 2,
            m * ldx * q.x_dtype.size_bytes(),
            m * q.n * q.out_dtype.size_bytes(),
            q.bias.map_or(0, |b| q.n * b.size_bytes()),
            res_bytes,
            res_bytes,
            norm_w_bytes,
        ];
        // The rope epilogue: positions, lengths, one page-table entry per token and the error
        // word, all zeros: every token's length 0 is a fault, so the race rotates q and k
        // (position 0) and writes y but no cache slot (no cache is given).
        let rope_bytes = if let YAct::RopeAppend(_) = q.y_act { m * 4 } else { 0 };
        // The split add+RMSNorm: the residual ([M, N] bf16) and the sums of squares ([M, groups]
        // f32, zeros for `_rmsx`: rrms = 1/sqrt(eps), speed only).
        let (rms_res, rms_groups_n) = match (q.x_act, q.y_act) {
            (_, YAct::ResidualRms) => (m * q.n * 2, rms_groups(q.n)),
            (XAct::RmsScale { .. }, _) => (0, rms_groups(q.k)),
            _ => (0, 0),
        };
        let sizes: Vec<usize> =
            sizes.into_iter().chain([rope_bytes, rope_bytes, rope_bytes, 4, rms_res, m * rms_groups_n * 4]).collect();
        let extra_w = if q.pdl { pdl_race_calls(q.n * ldw * 2) - 1 } else { 0 };
        let sizes: Vec<usize> = sizes.into_iter().chain(std::iter::repeat_n(q.n * ldw * 2, extra_w)).collect();
        let race = RaceBuffer::new(&self.device, &sizes)?;
        if q.x_act != XAct::None {
            // The activation timed on moderate non-zero values, as real data takes it (as
            // activation.silu_and_mul's race does), not on zeros.
            race.fill_inputs(&self.device, 2, q.x_dtype)?;
        }
        let at = &race.ptrs;
        let silu = matches!(q.y_act, YAct::SiluMul { .. });
        // SAFETY: the first region of `buffer`, owned by the race case and used by nothing else.
        let bound = self.scratch.bind(&unsafe { Scratch::from_raw(at[0], sizes[0]) })?;
        let params = Bf16GemvParams {
            w: at[1],
            x: at[2],
            y: at[3],
            bias: if q.bias.is_some() { at[4] } else { 0 },
            partials: bound.ptr("partials"),
            counters: bound.ptr("counters"),
            ldw: ldw as i64,
            ldx: ldx as i64,
            n: q.n as i32,
            k: q.k as i32,
            m: m as i32,
            flags: if q.bias == Some(DType::F32) { FLAG_BIAS_F32 } else { 0 } | if silu { FLAG_Y_SILU } else { 0 },
            // The SwiGLU epilogue stores [M, N/2] (row stride N/2 fits in the [M, N] region).
            ldy: if silu { (q.n / 2) as i64 } else { q.n as i64 },
            y_limit: q.y_act.kernel_limit(),
            ..Bf16GemvParams::default()
        };
        let norm = match q.x_act {
            // The scale fold (`AddRmsScale`) reads no norm weight: W carries it.
            XAct::AddRmsNorm { eps } | XAct::AddRmsScale { eps } => Some(Bf16GemvNormParams {
                residual: at[5],
                residual_out: at[6],
                norm_w: if norm_w_bytes > 0 { at[7] } else { 0 },
                ldr: ldx as i64,
                ldro: ldx as i64,
                eps,
                ..Bf16GemvNormParams::default()
            }),
            _ => None,
        };
        let rope = match q.y_act {
            // Computed mode whatever the plan's (the race has no table): the same kernels. No
            // cache is given: every token's zero length is a fault before any slot is formed.
            YAct::RopeAppend(r) => Some(
                RopeAppend { inv_freq: Some(r.inv_freq.unwrap_or([1.0e-3; super::ROPE_MAX_PAIRS])), ..r }.epilogue(
                    [at[8], at[9], at[10], 0],
                    [0, 0, at[11]],
                    1,
                ),
            ),
            _ => None,
        };
        let eps = if let XAct::RmsScale { eps } = q.x_act { eps } else { 0.0 };
        let residual = rms_res > 0;
        let rms = (rms_groups_n > 0).then(|| GemvRmsEpi {
            residual: if residual { at[12] } else { 0 },
            sum_sq: at[13],
            ldr: if residual { q.n as i64 } else { 0 },
            lds: rms_groups_n as i64,
            groups: rms_groups_n as i32,
            eps,
        });
        let w_more = at[14..].to_vec();
        Ok(Box::new(RaceCase { plan: self, bucket, params, norm, rope, rms, w_more, _buffer: race.buffer }))
    }
}

/// Most back-to-back calls a PDL plan's race times (each on its own copy of W).
pub const PDL_RACE_CALLS: usize = 8;
/// Extra race memory a PDL plan may use for further copies of W (beyond the one copy every
/// race allocates): above it, fewer calls (at least two).
const PDL_RACE_EXTRA_BYTES: usize = 1 << 30;

/// Back-to-back calls a PDL plan's race times for `w_bytes` of W: as many as
/// [`PDL_RACE_CALLS`] whose extra copies fit in 1 GiB, at least two.
pub fn pdl_race_calls(w_bytes: usize) -> usize {
    (1 + PDL_RACE_EXTRA_BYTES / w_bytes.max(1)).clamp(2, PDL_RACE_CALLS)
}

/// What the autotune race launches each candidate on.
struct RaceCase<'p> {
    plan: &'p Plan,
    bucket: usize,
    params: Bf16GemvParams,
    /// `XAct::AddRmsNorm` / `XAct::AddRmsScale`: the residual, new-residual (and norm-weight)
    /// regions.
    norm: Option<Bf16GemvNormParams>,
    /// `YAct::RopeAppend`: the epilogue on the race's zeroed index regions (no cache slot written).
    rope: Option<GemvRopeEpi>,
    /// `YAct::ResidualRms` / `XAct::RmsScale`: the residual and sums-of-squares regions.
    rms: Option<GemvRmsEpi>,
    /// PDL plans: the further copies of W the further back-to-back calls read, one each.
    w_more: Vec<u64>,
    _buffer: CudaSlice<u8>,
}

impl BenchCase for RaceCase<'_> {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        let epi = Epilogues { norm: self.norm.as_ref(), rope: self.rope.as_ref(), rms: self.rms.as_ref() };
        let mut p = self.params;
        launch(self.plan, self.bucket, selected, &mut p, epi, stream)?;
        for &w in &self.w_more {
            let mut p = Bf16GemvParams { w, ..self.params };
            launch(self.plan, self.bucket, selected, &mut p, epi, stream)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdl_race_calls_fit_the_extra_memory() {
        let mb = 1 << 20;
        // The 58 MB weights race eight calls, the 264 MB ones five, the 1.85 GB LM head two.
        assert_eq!(pdl_race_calls(56 * mb), PDL_RACE_CALLS);
        assert_eq!(pdl_race_calls(252 * mb), 5);
        assert_eq!(pdl_race_calls(1767 * mb), 2);
        // Three copies of 400 MB pass 1 GiB: two extra copies (three calls).
        assert_eq!(pdl_race_calls(400 * mb), 3);
        assert_eq!(pdl_race_calls(0), PDL_RACE_CALLS);
        for w in [1, mb, 100 * mb, 1 << 30, 1 << 33] {
            let calls = pdl_race_calls(w);
            assert!((2..=PDL_RACE_CALLS).contains(&calls));
            assert!(calls == 2 || (calls - 1) * w <= PDL_RACE_EXTRA_BYTES);
        }
    }
}
