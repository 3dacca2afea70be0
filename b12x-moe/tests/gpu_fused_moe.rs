//! GPU validation of `moe.fused_moe` — the simple path (`WeightLayout::RowMajor`) and the packed
//! layout's paths (`WeightLayout::Packed`: decode at T ≤ 16, above it the grouped GEMV up to
//! `Query::gemv_up_to` and the tiled path beyond), every case on both layouts (trial names
//! `simple::…`, `packed::…`; `packed_tile::…` / `packed_gemv::…` force the tiled path from T = 17
//! or the grouped GEMV beyond its default T with `PlanOptions`; `packed_tile_mma::…` the tiled
//! path with the mma.sync tile, which SM90 replaces by its wgmma tiles by default;
//! `packed_tile_wg64::…` / `packed_tile_wg32::…` with SM90's 64- / 32-row wgmma tiles) —
//! against its CPU oracle (`fused_moe::reference`; libtest-mimic, listed as ignored without a
//! CUDA device). The packed grouping in the scratch (slot count, slots, rows per pair, token and
//! expert per row) must equal `packed::group` exactly (the grouped path: rows within an expert
//! as a set).
//!
//! Comparison rule (a decision): the oracle rounds every dot product once from f64, the kernels
//! from an f32 accumulator in another order, so a BF16 intermediate (g, u, h, an expert's output)
//! may differ by one ulp and move the result a little. Per token row of y: `1 − cos(y, y_ref)`
//! ≤ 2e-4 and every element within 2⁻⁵ · max|y_ref row| of the oracle (layout or indexing bugs
//! miss both by orders of magnitude). The error word must equal the oracle's faults exactly,
//! and a second run and a graph replay must equal the first run bitwise.
//!
//! Weights: `reference::Experts::random` (random E2M1 bytes, scales in a narrow range), the
//! layout b12x-quant's structs hold; NVFP4 activation scales `reference::ActScales::random`.
//! Cases: tiny shapes for every activation (SiLU with and without a limit, SwiGLU-OAI, ReLU²)
//! and recipe (W4A16 NVFP4 / MXFP4, W4A8 MX, NVFP4 × NVFP4 with per-expert activation scales)
//! at T ∈ {1, 2, 5, 8, 32} (the decode path's two buckets: 8- and 16-row slots; T = 32 the
//! grouped GEMV's largest default T on every architecture, 8 rows per expert; with shared
//! routing each expert's 32 rows take two slots); the model shapes with their activations and recipes at
//! T ∈ {1, 8} (DeepSeek-V4-Flash TP2 and V4.1-Flash TP4 W4A8 MX, Qwen3-30B-A3B W4A16 NVFP4 and
//! NVFP4 × NVFP4, gpt-oss-120b W4A16 MXFP4); routings from
//! every token on the same experts to all distinct, experts no token picks; ids outside
//! `[0, E)`; graph replay after the routing changes; `run` allocates nothing; typed errors.

use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::half::bf16;
use b12x_core::testing::{check_run_allocates_nothing, run_gpu_trials, uniform, GpuTrial};
use b12x_core::{Device, Error, PreparationSession, Scratch, TensorMut, TensorRef};
use b12x_gemm::blockscaled::gemv::{TileConfig, WgConfig};
use b12x_moe::fused_moe::reference::{fused_moe, ActScales, Experts};
use b12x_moe::fused_moe::{
    self, packed, ActScaleArgs, Activation, Args, ExpertWeights, Fp4, PackedExperts, Path, PlanOptions, Query, Recipe,
    Routing, Shape, TileKernel, WeightArgs, WeightLayout,
};
use rand::{Rng, SeedableRng};
use std::sync::Arc;

type TrialResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// How tokens pick experts.
#[derive(Clone, Copy, Debug)]
enum Workload {
    /// Distinct random experts per token.
    Random,
    /// Every token on experts 0..k (all share).
    Shared,
    /// Token t on experts t·k .. t·k + k (mod E): all distinct where E allows.
    Distinct,
    /// b12x's shared_P: the first round(P·k / 100) slots of every token on experts 0, 1, ..
    /// (shared by all), the rest distinct random experts outside them.
    SharedPct(u32),
}

fn route(s: &Shape, t: usize, how: Workload, seed: u64) -> (Vec<i32>, Vec<f32>) {
    let (e, k) = (s.experts, s.top_k);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5151);
    let mut ids = Vec::with_capacity(t * k);
    for tok in 0..t {
        match how {
            Workload::Shared => ids.extend(0..k as i32),
            Workload::Distinct => ids.extend((0..k).map(|j| ((tok * k + j) % e) as i32)),
            Workload::Random => {
                let mut pick: Vec<i32> = (0..e as i32).collect();
                for j in 0..k {
                    let r = rng.random_range(j..e);
                    pick.swap(j, r);
                }
                ids.extend(&pick[..k]);
            }
            Workload::SharedPct(pct) => {
                let shared = ((pct as usize * k + 50) / 100).min(k);
                let mut pick: Vec<i32> = (0..e as i32).collect();
                for j in shared..k {
                    let r = rng.random_range(j..e);
                    pick.swap(j, r);
                }
                ids.extend(&pick[..k]);
            }
        }
    }
    let w = (0..t * k).map(|_| rng.random_range(0.05f32..1.0)).collect();
    (ids, w)
}

/// The experts on the device, matrix by matrix concatenated over E.
struct DevExperts {
    w1_codes: CudaSlice<u8>,
    w1_scales: CudaSlice<u8>,
    w1_enc: CudaSlice<f32>,
    w2_codes: CudaSlice<u8>,
    w2_scales: CudaSlice<u8>,
    w2_enc: CudaSlice<f32>,
    /// The NVFP4 recipe's activation encode scales (x's, h's).
    a1: CudaSlice<f32>,
    a2: CudaSlice<f32>,
    /// The same on the host, for the oracle.
    act: ActScales,
    /// The decode path's layout of the same experts.
    packed: Option<PackedExperts>,
}

fn upload_experts(sh: &Shape, x: &Experts, layout: WeightLayout, s: &Arc<CudaStream>) -> Result<DevExperts, String> {
    let (w1, w2) = x.stacked();
    let act = ActScales::random(x.fc1.len(), x.fc1.len() as u64);
    Ok(DevExperts {
        packed: match layout {
            WeightLayout::Packed => Some(PackedExperts::new(sh, x, s).map_err(err)?),
            WeightLayout::RowMajor => None,
        },
        a1: s.clone_htod(&act.fc1).map_err(err)?,
        a2: s.clone_htod(&act.fc2).map_err(err)?,
        act,
        w1_codes: s.clone_htod(&w1.codes).map_err(err)?,
        w1_scales: s.clone_htod(&w1.scales).map_err(err)?,
        w1_enc: s.clone_htod(&w1.enc).map_err(err)?,
        w2_codes: s.clone_htod(&w2.codes).map_err(err)?,
        w2_scales: s.clone_htod(&w2.scales).map_err(err)?,
        w2_enc: s.clone_htod(&w2.enc).map_err(err)?,
    })
}

fn weight_args<'a>(sh: &Shape, d: &'a DevExperts) -> Result<ExpertWeights<'a>, String> {
    if let Some(p) = &d.packed {
        return Ok(ExpertWeights::Packed(p));
    }
    let (e, hd, i, r1, b) = (sh.experts, sh.hidden, sh.inter, sh.fc1_rows(), sh.recipe.weights().block());
    let nv = sh.recipe.weights() == Fp4::Nvfp4;
    Ok(ExpertWeights::RowMajor(WeightArgs {
        w1_codes: TensorRef::from_slice(&d.w1_codes, &[e, r1, hd / 2]).map_err(err)?,
        w1_scales: TensorRef::from_slice(&d.w1_scales, &[e, r1, hd / b]).map_err(err)?,
        w1_enc: nv.then(|| TensorRef::from_slice(&d.w1_enc, &[e])).transpose().map_err(err)?,
        w2_codes: TensorRef::from_slice(&d.w2_codes, &[e, hd, i / 2]).map_err(err)?,
        w2_scales: TensorRef::from_slice(&d.w2_scales, &[e, hd, i / b]).map_err(err)?,
        w2_enc: nv.then(|| TensorRef::from_slice(&d.w2_enc, &[e])).transpose().map_err(err)?,
    }))
}

fn act_args<'a>(sh: &Shape, d: &'a DevExperts) -> b12x_core::Result<Option<ActScaleArgs<'a>>> {
    if sh.recipe != Recipe::Nvfp4 {
        return Ok(None);
    }
    let e = sh.experts;
    Ok(Some(ActScaleArgs { fc1: TensorRef::from_slice(&d.a1, &[e])?, fc2: TensorRef::from_slice(&d.a2, &[e])? }))
}

/// One call's device inputs and outputs.
struct Call {
    x: CudaSlice<bf16>,
    ids: CudaSlice<i32>,
    w: CudaSlice<f32>,
    y: CudaSlice<bf16>,
    error: CudaSlice<i32>,
    scratch: CudaSlice<u8>,
}

fn new_call(plan: &fused_moe::Plan, x: &[bf16], ids: &[i32], w: &[f32], s: &Arc<CudaStream>) -> Result<Call, String> {
    Ok(Call {
        x: s.clone_htod(x).map_err(err)?,
        ids: s.clone_htod(ids).map_err(err)?,
        w: s.clone_htod(w).map_err(err)?,
        y: s.clone_htod(&vec![bf16::from_f32(f32::NAN); x.len().max(1)]).map_err(err)?,
        error: s.alloc_zeros(1).map_err(err)?,
        scratch: s.alloc_zeros(plan.scratch_layout().total_bytes().max(1)).map_err(err)?,
    })
}

fn call_args<'a>(sh: &Shape, c: &'a mut Call, d: &'a DevExperts) -> Result<Args<'a>, String> {
    let t = c.ids.len() / sh.top_k;
    Ok(Args {
        x: TensorRef::from_slice(&c.x, &[t, sh.hidden]).map_err(err)?,
        routing: Routing::TopK {
            ids: TensorRef::from_slice(&c.ids, &[t, sh.top_k]).map_err(err)?,
            weights: TensorRef::from_slice(&c.w, &[t, sh.top_k]).map_err(err)?,
        },
        experts: weight_args(sh, d)?,
        act_scales: act_args(sh, d).map_err(err)?,
        y: TensorMut::from_slice(&mut c.y, &[t, sh.hidden]).map_err(err)?,
        error: TensorMut::from_slice(&mut c.error, &[1]).map_err(err)?,
    })
}

fn run_call(
    plan: &fused_moe::Plan,
    sh: &Shape,
    d: &DevExperts,
    c: &mut Call,
    st: &Arc<CudaStream>,
) -> b12x_core::Result<()> {
    let Call { x, ids, w, y, error, scratch } = c;
    let t = ids.len() / sh.top_k;
    let args = Args {
        x: TensorRef::from_slice(x, &[t, sh.hidden])?,
        routing: Routing::TopK {
            ids: TensorRef::from_slice(ids, &[t, sh.top_k])?,
            weights: TensorRef::from_slice(w, &[t, sh.top_k])?,
        },
        experts: weight_args(sh, d).map_err(|e| Error::SessionState { state: "test", what: e })?,
        act_scales: act_args(sh, d)?,
        y: TensorMut::from_slice(y, &[t, sh.hidden])?,
        error: TensorMut::from_slice(error, &[1])?,
    };
    fused_moe::run(plan, args, Scratch::from_slice(scratch), st)
}

fn prepared(dev: &Arc<Device>, q: &Query) -> Result<(fused_moe::Plan, PreparationSession), String> {
    prepared_with(dev, q, PlanOptions::default())
}

fn prepared_with(
    dev: &Arc<Device>,
    q: &Query,
    opts: PlanOptions,
) -> Result<(fused_moe::Plan, PreparationSession), String> {
    let plan = fused_moe::plan_with(q, dev, opts).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?;
    session.prepare(&[&plan]).map_err(err)?;
    Ok((plan, session))
}

/// The comparison rule of the module docs.
fn compare(hd: usize, got: &[bf16], want: &[bf16]) -> TrialResult {
    for (t, (g, w)) in got.chunks(hd).zip(want.chunks(hd)).enumerate() {
        let (g, w): (Vec<f64>, Vec<f64>) =
            (g.iter().map(|v| v.to_f64()).collect(), w.iter().map(|v| v.to_f64()).collect());
        let cos = b12x_core::testing::cosine_diff(&g, &w);
        let scale = w.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0f64, f64::max);
        if cos.is_nan() || cos > 2e-4 || worst > scale / 32.0 + 1e-30 {
            return Err(format!("token {t}: 1 − cos {cos:.3e}, max |Δ| {worst:.3e} against max |y_ref| {scale:.3e}"));
        }
    }
    Ok(())
}

/// The packed layout's grouping in the scratch equals `packed::group` (the plan's slot rows at T:
/// 8 for T ≤ 8, 16 up to the grouped GEMV's largest T, 64 on the tiled path); the tiled path's
/// rows inside an expert are compared as a set (its ranks are atomic).
fn check_grouping(plan: &fused_moe::Plan, sh: &Shape, c: &Call, ids: &[i32], s: &Arc<CudaStream>) -> TrialResult {
    let t = ids.len() / sh.top_k;
    let grouped = plan.path(t) == Path::GroupedTile;
    let want = packed::group_tail(ids, sh.experts, sh.top_k, plan.slot_rows(t), plan.tail_rows(t));
    let bytes = s.clone_dtoh(&c.scratch).map_err(err)?;
    let layout = plan.scratch_layout();
    let region = |name: &str| {
        let r = layout.regions().iter().find(|r| r.name == name).expect("a decode scratch region");
        bytes[r.offset..r.offset + r.bytes]
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect::<Vec<i32>>()
    };
    let (meta, slots) = (region("meta"), region("slots"));
    let rows = want.row_token.len();
    if meta[0] as usize != want.slots.len() || meta[1] as usize != rows {
        return Err(format!("grouping: {} slots / {} rows, want {} / {rows}", meta[0], meta[1], want.slots.len()));
    }
    let got_slots: Vec<[i32; 4]> =
        slots.chunks_exact(4).take(want.slots.len()).map(|c| [c[0], c[1], c[2], c[3]]).collect();
    if got_slots != want.slots {
        return Err(format!("grouping: slots {got_slots:?}, want {:?}", want.slots));
    }
    // Tail slots (SM90's 128-row wgmma tile): meta[2] of them in their own region.
    if plan.tail_rows(t) > 0 || !want.tail_slots.is_empty() {
        let tails = region("tail_slots");
        let got: Vec<[i32; 4]> =
            tails.chunks_exact(4).take(meta[2].max(0) as usize).map(|c| [c[0], c[1], c[2], c[3]]).collect();
        if got != want.tail_slots {
            return Err(format!("grouping: tail slots {got:?}, want {:?}", want.tail_slots));
        }
    }
    if grouped {
        // Rows inside an expert in no fixed order: every valid pair on its own row of its
        // expert's run, with its token; the masked ones on none.
        let (pair_row, row_token, row_expert) = (region("pair_row"), region("row_token"), region("row_expert"));
        let mut seen = vec![false; rows];
        for (p, &r) in pair_row[..ids.len()].iter().enumerate() {
            if want.pair_row[p] < 0 {
                if r != -1 {
                    return Err(format!("grouping: masked pair {p} on row {r}"));
                }
                continue;
            }
            let r = usize::try_from(r).map_err(|_| format!("grouping: pair {p} has no row"))?;
            if r >= rows || seen[r] || row_expert[r] != ids[p] || row_token[r] as usize != p / sh.top_k {
                return Err(format!("grouping: pair {p} (expert {}) on row {r}", ids[p]));
            }
            seen[r] = true;
        }
        return Ok(());
    }
    for (name, want) in [("pair_row", &want.pair_row), ("row_token", &want.row_token), ("row_expert", &want.row_expert)]
    {
        let got = region(name);
        if got[..want.len()] != want[..] {
            return Err(format!("grouping: {name} {:?}, want {want:?}", &got[..want.len()]));
        }
    }
    Ok(())
}

fn check(
    dev: &Arc<Device>,
    layout: WeightLayout,
    sh: Shape,
    t: usize,
    how: Workload,
    bad: &[(usize, i32)],
    seed: u64,
) -> TrialResult {
    check_opts(dev, layout, PlanOptions::default(), None, sh, t, how, bad, seed)
}

/// The tiled trials' kernel: the device's own at every tiled T, the mma.sync tile, or SM90's
/// 64- or 32-row wgmma tile.
#[derive(Clone, Copy, PartialEq)]
enum Tiles {
    Own,
    /// The device's own without tail slots (SM90: every 128-row slot from the 128-row tile).
    OwnNoTail,
    Mma,
    Wg64,
    /// SM90's 32-row wgmma tile (session 64).
    Wg32,
}

/// The tiled path from T = 17 with the device's own tile kernel at every tiled T (SM90: the
/// wgmma one, which it takes by default from `Query::wgmma_from` only), the mma.sync one, or
/// SM90's 64- or 32-row wgmma tile (4 stages; elsewhere the device's own: the trials stay
/// runnable).
fn tile_opts(dev: &Arc<Device>, kind: Tiles) -> PlanOptions {
    let tile = match kind {
        Tiles::Own | Tiles::OwnNoTail => None,
        Tiles::Mma => TileKernel::mma(dev.smem_optin()),
        Tiles::Wg64 if dev.arch() == b12x_core::Arch::Sm90 => Some(TileKernel::Wgmma64 { stages: 4 }),
        Tiles::Wg64 => None,
        Tiles::Wg32 if dev.arch() == b12x_core::Arch::Sm90 => Some(TileKernel::Wgmma32 { stages: 4 }),
        Tiles::Wg32 => None,
    };
    PlanOptions {
        gemv_up_to: Some(fused_moe::GROUPED_ABOVE),
        tile,
        wgmma_from: Some(0),
        no_tail_slots: kind == Tiles::OwnNoTail,
        ..Default::default()
    }
}

/// [`check`] on a plan made with `opts`, asserting that T takes `path` (and the forced tile
/// kernel, if any) when given.
#[allow(clippy::too_many_arguments)]
fn check_opts(
    dev: &Arc<Device>,
    layout: WeightLayout,
    opts: PlanOptions,
    path: Option<Path>,
    sh: Shape,
    t: usize,
    how: Workload,
    bad: &[(usize, i32)],
    seed: u64,
) -> TrialResult {
    check_in(dev, layout, opts, path, t.max(1), sh, t, how, bad, seed)
}

/// [`check_opts`] on a plan of capacity `cap` (≥ T).
#[allow(clippy::too_many_arguments)]
fn check_in(
    dev: &Arc<Device>,
    layout: WeightLayout,
    opts: PlanOptions,
    path: Option<Path>,
    cap: usize,
    sh: Shape,
    t: usize,
    how: Workload,
    bad: &[(usize, i32)],
    seed: u64,
) -> TrialResult {
    let s = dev.stream();
    let q = Query { shape: sh, max_tokens: cap, layout, router: None };
    let (plan, session) = prepared_with(dev, &q, opts)?;
    if let Some(p) = path {
        if plan.path(t) != p {
            return Err(format!("T = {t} takes {:?}, the trial is for {p:?}", plan.path(t)));
        }
    }
    if opts.tile.is_some() && plan.tile_kernel(t) != opts.tile {
        return Err(format!("the plan's tile kernel is {:?}, the trial is for {:?}", plan.tile_kernel(t), opts.tile));
    }
    let experts = Experts::random(&sh, seed);
    let d = upload_experts(&sh, &experts, layout, s)?;
    let x: Vec<bf16> = uniform(seed ^ 0xabc, t * sh.hidden, -2.0, 2.0).into_iter().map(bf16::from_f32).collect();
    let (mut ids, w) = route(&sh, t, how, seed);
    for &(slot, id) in bad {
        ids[slot] = id;
    }
    // Large T: the f64 oracle on 64 sampled tokens (tokens are independent); the fault bits
    // from every token's ids.
    let sample: Vec<usize> = if t > 256 { (0..64).map(|i| (i * 7919) % t).collect() } else { (0..t).collect() };
    let (k, hd) = (sh.top_k, sh.hidden);
    let pick = |v: &[bf16]| -> Vec<bf16> { sample.iter().flat_map(|&i| v[i * hd..][..hd].to_vec()).collect() };
    let (sx, sids, sw): (Vec<bf16>, Vec<i32>, Vec<f32>) = (
        pick(&x),
        sample.iter().flat_map(|&i| ids[i * k..][..k].to_vec()).collect(),
        sample.iter().flat_map(|&i| w[i * k..][..k].to_vec()).collect(),
    );
    let want = fused_moe(&sh, &experts, &sx, &sids, &sw, Some(&d.act)).map_err(err)?;
    let faults = if ids.iter().any(|&e| e < 0 || e as usize >= sh.experts) { fused_moe::FAULT_EXPERT_ID } else { 0 };
    let mut c = new_call(&plan, &x, &ids, &w, s)?;
    run_call(&plan, &sh, &d, &mut c, s).map_err(err)?;
    let got = s.clone_dtoh(&c.y).map_err(err)?;
    let error = s.clone_dtoh(&c.error).map_err(err)?[0] as u32;
    if error != faults {
        return Err(format!("error word {error:#x}, the oracle has {faults:#x}"));
    }
    if layout == WeightLayout::Packed && t > 0 {
        check_grouping(&plan, &sh, &c, &ids, s)?;
    }
    compare(sh.hidden, &pick(&got[..t * hd]), &want.y)?;
    // Bitwise reproducible: a second eager run and a graph replay.
    run_call(&plan, &sh, &d, &mut c, s).map_err(err)?;
    if s.clone_dtoh(&c.y).map_err(err)? != got {
        return Err("a second run differs".into());
    }
    let exec = session.capture(s, |st| run_call(&plan, &sh, &d, &mut c, st)).map_err(err)?;
    s.memcpy_htod(&vec![bf16::ZERO; t * sh.hidden], &mut c.y).map_err(err)?;
    // SAFETY: the graph's buffers live in `c` and `d`, alive here.
    unsafe { exec.launch() }.map_err(err)?;
    if s.clone_dtoh(&c.y).map_err(err)? != got {
        return Err("the graph replay differs from the eager run".into());
    }
    Ok(())
}

fn tiny(f: Fp4, activation: Activation) -> Shape {
    Shape { experts: 16, top_k: 4, hidden: 256, inter: 128, activation, recipe: Recipe::W4a16(f) }
}

/// Trial prefixes: `simple::` (row-major weights) and `packed::` (the decode path at T ≤
/// GROUPED_ABOVE, the grouped path above).
const LAYOUTS: [(&str, WeightLayout); 2] = [("simple", WeightLayout::RowMajor), ("packed", WeightLayout::Packed)];

fn trials() -> Vec<GpuTrial> {
    let mut out = Vec::new();
    let acts = [
        ("silu", Activation::Silu { limit: None }),
        ("silu_limit1", Activation::Silu { limit: Some(1.0) }),
        ("oai7", Activation::SwigluOai { limit: 7.0 }),
        ("relu2", Activation::Relu2),
    ];
    let recipes = [
        ("w4a16_nvfp4", Recipe::W4a16(Fp4::Nvfp4)),
        ("w4a16_mxfp4", Recipe::W4a16(Fp4::Mxfp4)),
        ("w4a8_mx", Recipe::W4a8Mx),
        ("nvfp4", Recipe::Nvfp4),
    ];
    let models = [
        ("deepseek_v4_flash_tp2", Shape::deepseek_v4_flash_tp2()),
        ("deepseek_v41_flash_tp4", Shape::deepseek_v41_flash_tp4()),
        ("qwen3_30b_a3b", Shape::qwen3_30b_a3b()),
        ("gpt_oss_120b", Shape::gpt_oss_120b()),
        ("qwen3_30b_a3b_nvfp4_nvfp4", Shape { recipe: Recipe::Nvfp4, ..Shape::qwen3_30b_a3b() }),
    ];
    for (path, layout) in LAYOUTS {
        for (fname, recipe) in recipes {
            for (aname, act) in acts {
                for t in [1usize, 2, 5, 8, 32] {
                    let sh = Shape { recipe, ..tiny(Fp4::Mxfp4, act) };
                    out.push(GpuTrial::new(format!("{path}::tiny::{fname}_{aname}::t{t}"), move |dev| {
                        check(dev, layout, sh, t, Workload::Random, &[], t as u64)
                    }));
                }
            }
        }
        for (name, sh) in models {
            for t in [1usize, 8] {
                out.push(GpuTrial::new(format!("{path}::models::{name}::t{t}"), move |dev| {
                    check(dev, layout, sh, t, Workload::Random, &[], 3)
                }));
            }
        }
        for (name, how) in [("shared", Workload::Shared), ("distinct", Workload::Distinct)] {
            let sh = tiny(Fp4::Mxfp4, Activation::Silu { limit: Some(10.0) });
            for t in [8usize, 32] {
                out.push(GpuTrial::new(format!("{path}::routing::{name}::t{t}"), move |dev| {
                    check(dev, layout, sh, t, how, &[], 5)
                }));
            }
        }
        // Ids outside [0, E): skipped and reported (E itself, a negative id, a huge one).
        out.push(GpuTrial::new(format!("{path}::bad_ids_masked"), move |dev| {
            let sh = tiny(Fp4::Nvfp4, Activation::SwigluOai { limit: 7.0 });
            check(dev, layout, sh, 5, Workload::Random, &[(0, 16), (5, -1), (19, i32::MAX)], 7)
        }));
        // Every id bad: nothing grouped, y all zeros.
        out.push(GpuTrial::new(format!("{path}::all_ids_bad"), move |dev| {
            let sh = tiny(Fp4::Nvfp4, Activation::Silu { limit: None });
            let bad: Vec<(usize, i32)> = (0..2 * sh.top_k).map(|i| (i, -1 - i as i32)).collect();
            check(dev, layout, sh, 2, Workload::Random, &bad, 9)
        }));
        // The grouped path's boundary and masking (T 17, 32: the grouped GEMV on every
        // architecture), and its graph replay.
        for t in [17usize, 32] {
            out.push(GpuTrial::new(format!("{path}::bad_ids_masked::t{t}"), move |dev| {
                let sh = tiny(Fp4::Mxfp4, Activation::Silu { limit: Some(10.0) });
                check(dev, layout, sh, t, Workload::Random, &[(0, 16), (5, -1), (19, i32::MAX)], 8)
            }));
        }
        for t in [8usize, 32] {
            out.push(GpuTrial::new(format!("{path}::graph_replay_with_new_routing_equals_eager::t{t}"), move |dev| {
                graph_replay(dev, layout, t, PlanOptions::default())
            }));
        }
        out.push(GpuTrial::new(format!("{path}::run_allocates_nothing"), move |dev| {
            let sh = tiny(Fp4::Mxfp4, Activation::Silu { limit: None });
            let q = Query { shape: sh, max_tokens: 8, layout, router: None };
            let (plan, _session) = prepared(dev, &q)?;
            let s = dev.stream();
            let d = upload_experts(&sh, &Experts::random(&sh, 1), layout, s)?;
            let (ids, w) = route(&sh, 8, Workload::Random, 1);
            let mut c = new_call(&plan, &vec![bf16::ONE; 8 * sh.hidden], &ids, &w, s)?;
            check_run_allocates_nothing(dev, s, 10, || run_call(&plan, &sh, &d, &mut c, s))
        }));
    }
    // Each grouped path where the default takes the other one ([`Path::GroupedGemv`] up to
    // `Query::gemv_up_to`, e.g. T ≤ 64 on the tiny shape, 32 on SM90): the tiled path forced from T = 17
    // (every recipe and activation at T = 64, masking and graph replay at T = 40, the model
    // shapes at T 64 and 512), the grouped GEMV forced beyond its default (the model shapes at
    // T = 1024, DeepSeek-V4.1-Flash TP4 at 2048).
    // The tiled trials run four times: `packed_tile` with the device's default tile kernel (SM90:
    // the wgmma body, 128-row slots, an expert's last ≤ 64 rows in tail slots that the 64-row
    // wgmma tile runs), `packed_tile_notail` the same without tail slots, `packed_tile_mma` with
    // the mma.sync body forced (64-row slots: the kernel every other architecture runs, validated
    // here on SM90 too), `packed_tile_wg64` with SM90's 64-row wgmma tile forced (the device's
    // own elsewhere) and `packed_tile_wg32` with its 32-row one (slots of 32 rows: at T = 300 on
    // shared routing ten slots per expert, the last of 12 rows).
    let gemv = PlanOptions { gemv_up_to: Some(usize::MAX), ..Default::default() };
    let packed = WeightLayout::Packed;
    for (prefix, mma) in [
        ("packed_tile", Tiles::Own),
        ("packed_tile_notail", Tiles::OwnNoTail),
        ("packed_tile_mma", Tiles::Mma),
        ("packed_tile_wg64", Tiles::Wg64),
        ("packed_tile_wg32", Tiles::Wg32),
    ] {
        for (fname, recipe) in recipes {
            for (aname, act) in acts {
                let sh = Shape { recipe, ..tiny(Fp4::Mxfp4, act) };
                out.push(GpuTrial::new(format!("{prefix}::tiny::{fname}_{aname}::t64"), move |dev| {
                    let tile = tile_opts(dev, mma);
                    check_opts(dev, packed, tile, Some(Path::GroupedTile), sh, 64, Workload::Random, &[], 64)
                }));
            }
        }
        // 300 tokens, top-4 of 16 experts: ~75 rows per expert at random (two 64-row slots or
        // one 128-row slot, partly filled), 300 on each of 4 experts when all share (three slots
        // of 128, the last 44 rows).
        for pct in [0u32, 50, 100] {
            out.push(GpuTrial::new(format!("{prefix}::tiny::shared_{pct}::t300"), move |dev| {
                let sh = tiny(Fp4::Nvfp4, Activation::Silu { limit: None });
                let tile = tile_opts(dev, mma);
                check_opts(dev, packed, tile, Some(Path::GroupedTile), sh, 300, Workload::SharedPct(pct), &[], 21)
            }));
        }
        // 256 tokens all on the same 4 experts: 256 rows each, whole 128-row slots and no tail
        // slot (a plan with tail slots meeting none).
        out.push(GpuTrial::new(format!("{prefix}::tiny::shared_100::t256"), move |dev| {
            let sh = tiny(Fp4::Mxfp4, Activation::SwigluOai { limit: 7.0 });
            let tile = tile_opts(dev, mma);
            check_opts(dev, packed, tile, Some(Path::GroupedTile), sh, 256, Workload::SharedPct(100), &[], 23)
        }));
        out.push(GpuTrial::new(format!("{prefix}::bad_ids_masked::t40"), move |dev| {
            let sh = tiny(Fp4::Mxfp4, Activation::Silu { limit: Some(10.0) });
            let bad = [(0, 16), (5, -1), (19, i32::MAX)];
            check_opts(dev, packed, tile_opts(dev, mma), Some(Path::GroupedTile), sh, 40, Workload::Random, &bad, 8)
        }));
        // (T = 300: captured on shared routing — 4 experts of 300 rows, two full 128-row slots and
        // a 44-row tail each on SM90 — replayed on random routing: both of SM90's kernels work)
        for t in [40usize, 300] {
            out.push(GpuTrial::new(
                format!("{prefix}::graph_replay_with_new_routing_equals_eager::t{t}"),
                move |dev| graph_replay(dev, packed, t, tile_opts(dev, mma)),
            ));
        }
        for (name, sh) in
            [("deepseek_v4_flash_tp2", Shape::deepseek_v4_flash_tp2()), ("gpt_oss_120b", Shape::gpt_oss_120b())]
        {
            out.push(GpuTrial::new(format!("{prefix}::models::{name}::t64"), move |dev| {
                check_opts(dev, packed, tile_opts(dev, mma), Some(Path::GroupedTile), sh, 64, Workload::Random, &[], 4)
            }));
        }
        for (name, sh) in [
            ("deepseek_v4_flash_tp2", Shape::deepseek_v4_flash_tp2()),
            ("deepseek_v41_flash_tp4", Shape::deepseek_v41_flash_tp4()),
            ("qwen3_30b_a3b", Shape::qwen3_30b_a3b()),
            ("gpt_oss_120b", Shape::gpt_oss_120b()),
        ] {
            out.push(GpuTrial::new(format!("{prefix}::models::{name}::t512"), move |dev| {
                let tile = tile_opts(dev, mma);
                check_opts(dev, packed, tile, Some(Path::GroupedTile), sh, 512, Workload::Random, &[], 13)
            }));
        }
    }
    // FC1's fused activation against the unfused plan, bit for bit: every W4A16 recipe and
    // activation (ReLU² and the quantizing recipes: both plans unfused) on each of SM90's tiles —
    // T = 64: only 64-row tail slots with the default tiles; shared_50 at T = 300: full 128-row
    // slots and tails; the 64- and 32-row tiles forced — and the models at T = 512 (the 64-row
    // tile) and 1024 (the 128-row tile and tails).
    for (tname, kind) in [("own", Tiles::Own), ("wg64", Tiles::Wg64), ("wg32", Tiles::Wg32), ("mma", Tiles::Mma)] {
        for (fname, recipe) in recipes {
            for (aname, act) in acts {
                let sh = Shape { recipe, ..tiny(Fp4::Mxfp4, act) };
                out.push(GpuTrial::new(format!("fused_act::{tname}::tiny::{fname}_{aname}::t64"), move |dev| {
                    fused_act_equals_unfused(dev, tile_opts(dev, kind), sh, 64, Workload::Random, 31)
                }));
            }
        }
        out.push(GpuTrial::new(format!("fused_act::{tname}::tiny::shared_50::t300"), move |dev| {
            let sh = tiny(Fp4::Nvfp4, Activation::SwigluOai { limit: 7.0 });
            fused_act_equals_unfused(dev, tile_opts(dev, kind), sh, 300, Workload::SharedPct(50), 33)
        }));
    }
    for (name, sh) in [("qwen3_30b_a3b", Shape::qwen3_30b_a3b()), ("gpt_oss_120b", Shape::gpt_oss_120b())] {
        for t in [512usize, 1024] {
            out.push(GpuTrial::new(format!("fused_act::models::{name}::t{t}"), move |dev| {
                fused_act_equals_unfused(dev, PlanOptions::default(), sh, t, Workload::Random, 35)
            }));
        }
    }
    // The tile kernel a plan picks: SM90 the wgmma body (128-row slots) from `Query::wgmma_from`
    // (1024 on Qwen3-30B-A3B) and the 64-row wgmma tile (64-row slots) below it, elsewhere the
    // mma.sync body (64-row slots); `PlanOptions::wgmma_from` moves the boundary; wgmma forced off SM90, or an
    // mma.sync tile this op does not build, is a typed error.
    out.push(GpuTrial::new("packed_tile::kernel_choice", move |dev| {
        let q = Query { shape: Shape::qwen3_30b_a3b(), max_tokens: 4096, layout: packed, router: None };
        let sm90 = dev.arch() == b12x_core::Arch::Sm90;
        let choice = |opts: PlanOptions, t: usize| -> Result<(Option<TileKernel>, usize), String> {
            let plan = fused_moe::plan_with(&q, dev, opts).map_err(|e| e.to_string())?;
            Ok((plan.tile_kernel(t), plan.slot_rows(t)))
        };
        // `wgmma`: the 128-row wgmma tile; else the 64-row slots' tile — SM90's 64-row wgmma
        // tile, the mma.sync tile elsewhere.
        let want = |t: usize, opts: PlanOptions, wgmma: bool| -> TrialResult {
            match choice(opts, t)? {
                (Some(TileKernel::Wgmma(_)), 128) if wgmma => Ok(()),
                (Some(TileKernel::Wgmma64 { stages: 4 }), 64) if !wgmma && sm90 => Ok(()),
                (Some(TileKernel::Mma(_)), 64) if !wgmma && !sm90 => Ok(()),
                got => Err(format!("{:?} T = {t} with {opts:?}: {got:?}", dev.arch())),
            }
        };
        let default = PlanOptions::default();
        // Tail slots: SM90's 128-row wgmma buckets only, on the 64-row wgmma tile (4 stages),
        // off with `no_tail_slots`.
        let tail = |opts: PlanOptions, t: usize| -> Result<(Option<TileKernel>, usize), String> {
            let plan = fused_moe::plan_with(&q, dev, opts).map_err(|e| e.to_string())?;
            Ok((plan.tail_kernel(t), plan.tail_rows(t)))
        };
        let wg64_s4 = Some(TileKernel::Wgmma64 { stages: 4 });
        for (t, opts, want_tail) in [
            (4096, default, sm90),
            (1024, default, sm90),
            (1023, default, false),
            (4096, PlanOptions { no_tail_slots: true, ..default }, false),
            (512, PlanOptions { wgmma_from: Some(0), ..default }, sm90),
        ] {
            match tail(opts, t)? {
                (k, 64) if want_tail && k == wg64_s4 => {}
                (None, 0) if !want_tail => {}
                got => return Err(format!("tail slots at T = {t} with {opts:?}: {got:?}")),
            }
        }
        // FC1's fused activation (opt-in): wherever a wgmma tile runs a W4A16 recipe with a gated
        // activation (Qwen3-30B-A3B: W4A16 NVFP4, SiLU), not on the GEMV paths, not by default.
        let fused = PlanOptions { fused_activation: true, ..default };
        for (t, opts, want_fused) in
            [(4096, fused, sm90), (512, fused, sm90), (8, fused, false), (4096, default, false)]
        {
            let plan = fused_moe::plan_with(&q, dev, opts).map_err(|e| e.to_string())?;
            if plan.fused_activation(t) != want_fused {
                return Err(format!("fused activation at T = {t} with {opts:?}: {}", plan.fused_activation(t)));
            }
        }
        for sh in [Shape { recipe: Recipe::W4a8Mx, ..q.shape }, Shape { activation: Activation::Relu2, ..q.shape }] {
            let plan = fused_moe::plan_with(&Query { shape: sh, ..q }, dev, fused).map_err(|e| e.to_string())?;
            if plan.fused_activation(4096) {
                return Err(format!("fused activation planned for {:?} / {:?}", sh.recipe, sh.activation));
            }
        }
        want(4096, default, sm90)?;
        want(1024, default, sm90)?;
        want(1023, default, false)?;
        want(512, default, false)?;
        want(512, PlanOptions { wgmma_from: Some(0), ..default }, sm90)?;
        want(4096, PlanOptions { wgmma_from: Some(usize::MAX), ..default }, false)?;
        // The grouped GEMV's largest default T: 128 on SM90 (8 rows per expert; the 32-row
        // wgmma tile from 129 up to `Query::wg32_up_to`, 256: 16 rows, the 64-row one above),
        // 256 elsewhere (16 rows; the mma.sync tile from 257).
        let gemv_hi = if sm90 { q.gemv_up_to_wg64() } else { q.gemv_up_to() };
        if choice(default, gemv_hi)?.0.is_some() {
            return Err(format!("T = {gemv_hi} is the grouped GEMV's, yet a tile kernel is named"));
        }
        let want32 = |t: usize, opts: PlanOptions, wg32: bool| -> TrialResult {
            match choice(opts, t)? {
                (Some(TileKernel::Wgmma32 { stages: 4 }), 32) if wg32 && sm90 => Ok(()),
                (Some(TileKernel::Wgmma64 { stages: 4 }), 64) if !wg32 && sm90 => Ok(()),
                (Some(TileKernel::Mma(_)), 64) if !sm90 => Ok(()),
                got => Err(format!("{:?} T = {t} with {opts:?}: {got:?}", dev.arch())),
            }
        };
        want32(gemv_hi + 1, default, true)?;
        want32(q.wg32_up_to(), default, true)?;
        want32(q.wg32_up_to() + 1, default, false)?;
        want32(200, PlanOptions { wg32_up_to: Some(0), ..default }, false)?;
        want32(300, PlanOptions { wg32_up_to: Some(300), ..default }, true)?;
        // `wgmma_from` wins over the 32-row bucket: `Some(0)` is the 128-row tile at every tiled T.
        want(gemv_hi + 1, PlanOptions { wgmma_from: Some(0), ..default }, sm90)?;
        want(200, PlanOptions { wgmma_from: Some(200), ..default }, sm90)?;
        want32(199, PlanOptions { wgmma_from: Some(200), ..default }, true)?;
        let wg = TileKernel::Wgmma(WgConfig { w8: false, wn: 8, stages: 2, tail: false });
        let forced = fused_moe::plan_with(&q, dev, PlanOptions { tile: Some(wg), ..Default::default() });
        match (sm90, forced) {
            (true, Ok(p)) if p.tile_kernel(512) == Some(wg) && p.tile_kernel(4096) == Some(wg) => {}
            (false, Err(Error::Unsupported { .. })) => {}
            (_, r) => return Err(format!("wgmma forced on {:?}: {:?}", dev.arch(), r.map(|p| p.tile_kernel(4096)))),
        }
        // The 64-row wgmma tile: SM90 only, 64-row slots, 2..=4 stages (its epilogue-params ring).
        let wg64 = TileKernel::Wgmma64 { stages: 3 };
        match (sm90, fused_moe::plan_with(&q, dev, PlanOptions { tile: Some(wg64), ..Default::default() })) {
            (true, Ok(p)) if p.tile_kernel(512) == Some(wg64) && p.slot_rows(512) == 64 => {}
            (false, Err(Error::Unsupported { .. })) => {}
            (_, r) => return Err(format!("wg64 forced on {:?}: {:?}", dev.arch(), r.map(|p| p.tile_kernel(512)))),
        }
        let wg32 = TileKernel::Wgmma32 { stages: 3 };
        match (sm90, fused_moe::plan_with(&q, dev, PlanOptions { tile: Some(wg32), ..Default::default() })) {
            (true, Ok(p)) if p.tile_kernel(512) == Some(wg32) && p.slot_rows(512) == 32 => {}
            (false, Err(Error::Unsupported { .. })) => {}
            (_, r) => return Err(format!("wg32 forced on {:?}: {:?}", dev.arch(), r.map(|p| p.tile_kernel(512)))),
        }
        for bad in [TileKernel::Wgmma64 { stages: 5 }, TileKernel::Wgmma32 { stages: 5 }] {
            if let Ok(p) = fused_moe::plan_with(&q, dev, PlanOptions { tile: Some(bad), ..Default::default() }) {
                return Err(format!("a 5-stage tile was planned: {:?}", p.tile_kernel(512)));
            }
        }
        let wm4 = TileKernel::Mma(TileConfig { w8: false, wm: 4, wn: 8, stages: 2, splits: 1 });
        match fused_moe::plan_with(&q, dev, PlanOptions { tile: Some(wm4), ..Default::default() }) {
            Err(Error::Unsupported { .. }) => Ok(()),
            r => Err(format!("a 128-row mma.sync tile: {:?}", r.map(|p| p.tile_kernel(4096)))),
        }
    }));
    // SM90's wgmma tile at 2, 3 and 4 stages on a deeper shape than `tiny`: hidden 1088 (8.5
    // k-tiles) and I = 576 (4.5), so the ring refills its stages, both K tails read the TMA's
    // zeros (NVFP4: the last k-tile's second scale tile is not copied), and FC1's 1152 rows end in
    // an N tile with one live 128-row block. Off SM90: the default (mma.sync) tile.
    for (stages, f, act) in [
        (2usize, Fp4::Nvfp4, Activation::Silu { limit: Some(10.0) }),
        (3, Fp4::Mxfp4, Activation::SwigluOai { limit: 7.0 }),
        (4, Fp4::Nvfp4, Activation::Relu2),
    ] {
        out.push(GpuTrial::new(format!("packed_tile::ring::s{stages}::t300"), move |dev| {
            let sh = Shape { hidden: 1088, inter: 576, ..tiny(f, act) };
            let mut opts = tile_opts(dev, Tiles::Own);
            if dev.arch() == b12x_core::Arch::Sm90 {
                opts.tile = Some(TileKernel::Wgmma(WgConfig { w8: false, wn: 8, stages, tail: false }));
            }
            check_opts(dev, packed, opts, Some(Path::GroupedTile), sh, 300, Workload::SharedPct(50), &[], 31)
        }));
    }
    // SM90's wgmma tile is persistent: with its grid capped at 1 or 3 CTAs (`tile_ctas`) each CTA
    // walks many (slot, N tile) tiles through one ring — consecutive tiles of different slots and
    // experts, the epilogue params' ring wrapping, tiles with fewer k-tiles than stages (the tiny
    // shape's FC2: K = 128, one k-tile) and with more (the ring shape: 9 and 5). Off SM90 the
    // option is accepted and unused (the mma.sync tile).
    // (`notail`: every remainder in the 128-row tile's partial slots, as before tail slots.)
    for (ctas, hidden, inter, stages, tail) in [
        (1usize, 1088usize, 576usize, 4usize, true),
        (3, 256, 128, 4, true),
        (3, 1088, 576, 2, true),
        (2, 256, 128, 3, true),
        (3, 1088, 576, 2, false),
    ] {
        let name =
            format!("packed_tile::persist::c{ctas}::h{hidden}_s{stages}{}::t300", if tail { "" } else { "_notail" });
        out.push(GpuTrial::new(name, move |dev| {
            let sh = Shape { hidden, inter, ..tiny(Fp4::Nvfp4, Activation::Silu { limit: Some(10.0) }) };
            let kind = if tail { Tiles::Own } else { Tiles::OwnNoTail };
            let mut opts = PlanOptions { tile_ctas: Some(ctas), ..tile_opts(dev, kind) };
            if dev.arch() == b12x_core::Arch::Sm90 {
                opts.tile = Some(TileKernel::Wgmma(WgConfig { w8: false, wn: 8, stages, tail: false }));
            }
            check_opts(dev, packed, opts, Some(Path::GroupedTile), sh, 300, Workload::SharedPct(50), &[], 37)
        }));
    }
    // SM90's 64- and 32-row wgmma tiles (m64n64k16, m64n32k16) on the ring shape at 2, 3 and 4
    // stages (each recipe once: its x̂ rows), and persistent with the grid capped at 3 CTAs — ~75
    // rows per expert at T = 300: full and partial slots. Off SM90: the device's own tile.
    for (name, rows) in [("packed_tile_wg64", 64usize), ("packed_tile_wg32", 32)] {
        for (stages, recipe, act, ctas) in [
            (2usize, Recipe::W4a8Mx, Activation::Silu { limit: Some(10.0) }, None),
            (3, Recipe::W4a16(Fp4::Mxfp4), Activation::SwigluOai { limit: 7.0 }, None),
            (4, Recipe::Nvfp4, Activation::Relu2, None),
            (4, Recipe::W4a16(Fp4::Nvfp4), Activation::Silu { limit: None }, Some(3usize)),
        ] {
            let c = ctas.map_or(String::new(), |c| format!("c{c}::"));
            out.push(GpuTrial::new(format!("{name}::ring::{c}s{stages}::t300"), move |dev| {
                let sh = Shape { hidden: 1088, inter: 576, recipe, ..tiny(Fp4::Nvfp4, act) };
                let mut opts = PlanOptions { tile_ctas: ctas, ..tile_opts(dev, Tiles::Own) };
                if dev.arch() == b12x_core::Arch::Sm90 {
                    opts.tile =
                        Some(if rows == 64 { TileKernel::Wgmma64 { stages } } else { TileKernel::Wgmma32 { stages } });
                }
                check_opts(dev, packed, opts, Some(Path::GroupedTile), sh, 300, Workload::SharedPct(50), &[], 41)
            }));
        }
    }
    out.push(GpuTrial::new("packed_tile::persist::zero_ctas", move |dev| {
        let q = Query { shape: tiny(Fp4::Nvfp4, Activation::Relu2), max_tokens: 300, layout: packed, router: None };
        match fused_moe::plan_with(&q, dev, PlanOptions { tile_ctas: Some(0), ..Default::default() }) {
            Err(Error::InvalidQuery { field: "tile_ctas", .. }) => Ok(()),
            r => Err(format!("tile_ctas = 0: {:?}", r.map(|p| p.tile_kernel(300)))),
        }
    }));
    // One plan of capacity 300 on the tiny shape (on SM90 the 32-row wgmma tile up to T = 64, the
    // 64-row one up to 255, the 128-row one from 256) run at T = 40, 200 (the mma.sync tile
    // elsewhere) and 300: each T launches its own bucket's kernel and scratch sized for all three.
    for t in [40usize, 200, 300] {
        out.push(GpuTrial::new(format!("packed_tile::split::t{t}"), move |dev| {
            let sh = tiny(Fp4::Mxfp4, Activation::SwigluOai { limit: 7.0 });
            let opts = PlanOptions { gemv_up_to: Some(fused_moe::GROUPED_ABOVE), ..Default::default() };
            let q = Query { shape: sh, max_tokens: 300, layout: packed, router: None };
            let plan = fused_moe::plan_with(&q, dev, opts).map_err(|e| e.to_string())?;
            let sm90 = dev.arch() == b12x_core::Arch::Sm90;
            let (wg32, wgmma) = (sm90 && t <= q.wg32_up_to(), sm90 && t >= q.wgmma_from());
            match plan.tile_kernel(t) {
                Some(TileKernel::Wgmma(_)) if wgmma => {}
                Some(TileKernel::Wgmma32 { .. }) if wg32 => {}
                Some(TileKernel::Wgmma64 { .. }) if !wgmma && !wg32 && sm90 => {}
                Some(TileKernel::Mma(_)) if !wgmma && !sm90 => {}
                k => return Err(format!("T = {t}: {k:?}")),
            }
            check_in(dev, packed, opts, Some(Path::GroupedTile), 300, sh, t, Workload::SharedPct(50), &[], 31)
        }));
    }
    out.push(GpuTrial::new("packed::routing::shared_pct50::t32", move |dev| {
        let sh = tiny(Fp4::Nvfp4, Activation::SwigluOai { limit: 7.0 });
        check_opts(
            dev,
            packed,
            PlanOptions::default(),
            Some(Path::GroupedGemv),
            sh,
            32,
            Workload::SharedPct(50),
            &[],
            3,
        )
    }));
    for (name, sh) in [
        ("deepseek_v4_flash_tp2", Shape::deepseek_v4_flash_tp2()),
        ("deepseek_v41_flash_tp4", Shape::deepseek_v41_flash_tp4()),
        ("qwen3_30b_a3b", Shape::qwen3_30b_a3b()),
        ("gpt_oss_120b", Shape::gpt_oss_120b()),
    ] {
        let t = if name == "deepseek_v41_flash_tp4" { 2048 } else { 1024 };
        out.push(GpuTrial::new(format!("packed_gemv::models::{name}::t{t}"), move |dev| {
            check_opts(dev, packed, gemv, Some(Path::GroupedGemv), sh, t, Workload::Random, &[], 13)
        }));
    }
    // The grouped paths on model shapes at T = 64 (the default: the grouped GEMV, 16-row slots).
    for (name, sh) in
        [("deepseek_v4_flash_tp2", Shape::deepseek_v4_flash_tp2()), ("gpt_oss_120b", Shape::gpt_oss_120b())]
    {
        out.push(GpuTrial::new(format!("packed::models::{name}::t64"), move |dev| {
            check(dev, WeightLayout::Packed, sh, 64, Workload::Random, &[], 4)
        }));
    }
    // The decode path's largest T (16-row token tiles). (FC1 groups the ids itself only at
    // T·k ≤ 8: the T = 1 trials and tiny T = 2 above; the kernel can up to 64 pairs, validated
    // with that threshold in bench-results/2026-12-05-h200-b/call2/.)
    for (name, sh) in
        [("deepseek_v4_flash_tp2", Shape::deepseek_v4_flash_tp2()), ("qwen3_30b_a3b", Shape::qwen3_30b_a3b())]
    {
        out.push(GpuTrial::new(format!("packed::models::{name}::t16"), move |dev| {
            check(dev, WeightLayout::Packed, sh, 16, Workload::Random, &[], 6)
        }));
    }
    // b12x's shared_0 .. shared_100 workloads on DeepSeek-V4-Flash TP2 at T = 8, both paths.
    for (path, layout) in LAYOUTS {
        for pct in [0u32, 25, 50, 75, 100] {
            out.push(GpuTrial::new(format!("{path}::models::deepseek_v4_flash_tp2::shared_{pct}::t8"), move |dev| {
                check(dev, layout, Shape::deepseek_v4_flash_tp2(), 8, Workload::SharedPct(pct), &[], 12)
            }));
        }
    }
    // Large T (the 512 and 4096; the oracle on 64 sampled tokens): the simple path on
    // every model shape, on both layouts (the packed one's grouped path).
    for (name, sh) in [
        ("deepseek_v4_flash_tp2", Shape::deepseek_v4_flash_tp2()),
        ("deepseek_v41_flash_tp4", Shape::deepseek_v41_flash_tp4()),
        ("qwen3_30b_a3b", Shape::qwen3_30b_a3b()),
        ("gpt_oss_120b", Shape::gpt_oss_120b()),
    ] {
        for t in [512usize, 4096] {
            for (path, layout) in LAYOUTS {
                out.push(GpuTrial::new(format!("{path}::models::{name}::t{t}"), move |dev| {
                    check(dev, layout, sh, t, Workload::Random, &[], 13)
                }));
            }
        }
    }
    // Router logits routed in the op (DeepSeek-V4's sqrtsoftplus + bias, and its hash layers).
    for (path, layout) in LAYOUTS {
        for hash in [false, true] {
            let name = if hash { "hash" } else { "bias" };
            out.push(GpuTrial::new(format!("{path}::logits::{name}"), move |dev| routed_by_logits(dev, layout, hash)));
        }
    }
    out.push(GpuTrial::new("simple::bad_inputs_are_typed_errors", bad_inputs));
    out.push(GpuTrial::new("packed::bad_inputs_are_typed_errors", bad_inputs_decode));
    out
}

/// Router logits in the op: the scratch's ids must be the router oracle's selection (hash: equal;
/// top-k: up to near-ties, route_topk's rule) and its weights the oracle's weights for those ids;
/// y is compared with the fused oracle on the ids and weights the GPU chose; the error word holds
/// the router's faults and the masked slots' FAULT_EXPERT_ID.
fn routed_by_logits(dev: &Arc<Device>, layout: WeightLayout, hash: bool) -> TrialResult {
    use b12x_moe::route_topk::{reference as rr, Router};
    let s = dev.stream();
    let sh = tiny(Fp4::Nvfp4, Activation::Silu { limit: Some(10.0) });
    let (e, k, hd, t, vocab) = (sh.experts, sh.top_k, sh.hidden, 6usize, 50usize);
    let router = Router::deepseek_v4(e, k, hash.then_some(vocab));
    let q = Query { shape: sh, max_tokens: 8, layout, router: Some(router) };
    let (plan, session) = prepared(dev, &q)?;
    let experts = Experts::random(&sh, 21);
    let d = upload_experts(&sh, &experts, layout, s)?;
    let x: Vec<bf16> = uniform(22, t * hd, -2.0, 2.0).into_iter().map(bf16::from_f32).collect();
    let logits = uniform(23, t * e, -4.0, 4.0);
    let bias = uniform(24, e, -0.5, 0.5);
    let mut tid2eid: Vec<i32> = (0..vocab * k).map(|i| ((i * 5 + i / k) % e) as i32).collect();
    tid2eid[3 * k + 1] = e as i32; // a bad table entry: masked, fault
    let token_ids: Vec<i32> = vec![3, 7, 49, 50, 0, 3]; // 50 is outside the table: masked, fault
    let (xd, ld, bd, td, tabd) = (
        s.clone_htod(&x).map_err(err)?,
        s.clone_htod(&logits).map_err(err)?,
        s.clone_htod(&bias).map_err(err)?,
        s.clone_htod(&token_ids).map_err(err)?,
        s.clone_htod(&tid2eid).map_err(err)?,
    );
    let mut y = s.clone_htod(&vec![bf16::from_f32(f32::NAN); t * hd]).map_err(err)?;
    let mut error = s.alloc_zeros::<i32>(1).map_err(err)?;
    let mut scratch = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes()).map_err(err)?;
    let call =
        |y: &mut CudaSlice<bf16>, error: &mut CudaSlice<i32>, scratch: &mut CudaSlice<u8>, st: &Arc<CudaStream>| {
            let routing = Routing::Logits(fused_moe::RouterArgs {
                logits: TensorRef::from_slice(&ld, &[t, e])?,
                bias: (!hash).then(|| TensorRef::from_slice(&bd, &[e])).transpose()?,
                token_ids: hash.then(|| TensorRef::from_slice(&td, &[t])).transpose()?,
                tid2eid: hash.then(|| TensorRef::from_slice(&tabd, &[vocab, k])).transpose()?,
            });
            let args = Args {
                x: TensorRef::from_slice(&xd, &[t, hd])?,
                routing,
                experts: weight_args(&sh, &d).map_err(|e| Error::SessionState { state: "test", what: e })?,
                act_scales: act_args(&sh, &d)?,
                y: TensorMut::from_slice(y, &[t, hd])?,
                error: TensorMut::from_slice(error, &[1])?,
            };
            fused_moe::run(&plan, args, Scratch::from_slice(scratch), st)
        };
    call(&mut y, &mut error, &mut scratch, s).map_err(err)?;
    let bytes = s.clone_dtoh(&scratch).map_err(err)?;
    let region = |name: &str| -> Vec<[u8; 4]> {
        let r = plan.scratch_layout().regions().iter().find(|r| r.name == name).cloned().expect("a topk region");
        bytes[r.offset..r.offset + 4 * t * k].chunks_exact(4).map(|b| [b[0], b[1], b[2], b[3]]).collect()
    };
    let gids: Vec<i32> = region("topk_ids").into_iter().map(i32::from_le_bytes).collect();
    let gw: Vec<f32> = region("topk_weights").into_iter().map(f32::from_le_bytes).collect();
    let routed = if hash {
        rr::route_hash(&router, &logits, &token_ids, &tid2eid)
    } else {
        rr::route(&router, &logits, Some(&bias))
    };
    for tok in 0..t {
        let row = &gids[tok * k..][..k];
        if hash {
            if row != &routed.ids[tok * k..][..k] {
                return Err(format!("token {tok}: ids {row:?}, the table gives {:?}", &routed.ids[tok * k..][..k]));
            }
        } else {
            let sc = rr::scores(router.score, &logits[tok * e..][..e]);
            let keys = rr::keys(&sc, Some(&bias));
            let tol = 1e-5 * keys.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            rr::check_selection(&keys, row, tol).map_err(|m| format!("token {tok}: {m}"))?;
        }
        let sc = rr::scores(router.score, &logits[tok * e..][..e]);
        let want = rr::weights(&router, &sc, row);
        for (j, (&g, &w)) in gw[tok * k..][..k].iter().zip(&want).enumerate() {
            if (g - w).abs() > 1e-5 * w.abs().max(1e-6) {
                return Err(format!("token {tok} slot {j}: weight {g}, the router oracle {w}"));
            }
        }
    }
    let want = fused_moe(&sh, &experts, &x, &gids, &gw, Some(&d.act)).map_err(err)?;
    let got = s.clone_dtoh(&y).map_err(err)?;
    compare(hd, &got, &want.y)?;
    let faults = routed.faults | want.faults;
    let word = s.clone_dtoh(&error).map_err(err)?[0] as u32;
    if word != faults {
        return Err(format!("error word {word:#x}, the oracles have {faults:#x}"));
    }
    // The router inside a captured graph: the replay equals the eager call.
    let exec = session.capture(s, |st| call(&mut y, &mut error, &mut scratch, st)).map_err(err)?;
    s.memcpy_htod(&vec![bf16::ZERO; t * hd], &mut y).map_err(err)?;
    // SAFETY: the graph's buffers (x, logits, tables, y, error, scratch, the experts) are alive.
    unsafe { exec.launch() }.map_err(err)?;
    if s.clone_dtoh(&y).map_err(err)? != got {
        return Err("the graph replay differs from the eager run".into());
    }
    Ok(())
}

/// Captured on one routing, replayed after new ids and weights are uploaded: equal to an eager
/// call on the new routing.
fn graph_replay(dev: &Arc<Device>, layout: WeightLayout, t: usize, opts: PlanOptions) -> TrialResult {
    let s = dev.stream();
    let sh = tiny(Fp4::Nvfp4, Activation::Silu { limit: Some(10.0) });
    let q = Query { shape: sh, max_tokens: t, layout, router: None };
    let (plan, session) = prepared_with(dev, &q, opts)?;
    let experts = Experts::random(&sh, 11);
    let d = upload_experts(&sh, &experts, layout, s)?;
    let x: Vec<bf16> = (0..t * sh.hidden).map(|i| bf16::from_f32(((i * 37) % 17) as f32 / 8.0 - 1.0)).collect();
    let (ids0, w0) = route(&sh, t, Workload::Shared, 1);
    let (ids1, w1) = route(&sh, t, Workload::Random, 2);
    let mut c = new_call(&plan, &x, &ids0, &w0, s)?;
    let exec = session.capture(s, |st| run_call(&plan, &sh, &d, &mut c, st)).map_err(err)?;
    s.memcpy_htod(&ids1, &mut c.ids).map_err(err)?;
    s.memcpy_htod(&w1, &mut c.w).map_err(err)?;
    // SAFETY: the graph's buffers live in `c` and `d`, alive here.
    unsafe { exec.launch() }.map_err(err)?;
    let replayed = s.clone_dtoh(&c.y).map_err(err)?;
    let mut e = new_call(&plan, &x, &ids1, &w1, s)?;
    run_call(&plan, &sh, &d, &mut e, s).map_err(err)?;
    if replayed != s.clone_dtoh(&e.y).map_err(err)? {
        return Err("the replay on a new routing differs from an eager call on it".into());
    }
    compare(sh.hidden, &replayed, &fused_moe(&sh, &experts, &x, &ids1, &w1, Some(&d.act)).map_err(err)?.y)
}

/// FC1's fused activation (`PlanOptions::fused_activation`; SM90's wgmma tiles, W4A16 recipes,
/// gated activations): y equal bit for bit to the plan without it (FC1's gate/up rows, then the
/// activation kernel; checked against the oracle by the `packed_tile*` trials) on the same
/// inputs, and each plan reports what it runs (`Plan::fused_activation`: asked for, SM90, a
/// W4A16 recipe, a gated activation).
fn fused_act_equals_unfused(
    dev: &Arc<Device>,
    opts: PlanOptions,
    sh: Shape,
    t: usize,
    how: Workload,
    seed: u64,
) -> TrialResult {
    let s = dev.stream();
    let q = Query { shape: sh, max_tokens: t, layout: WeightLayout::Packed, router: None };
    let experts = Experts::random(&sh, seed);
    let d = upload_experts(&sh, &experts, WeightLayout::Packed, s)?;
    let x: Vec<bf16> = uniform(seed ^ 0xabc, t * sh.hidden, -2.0, 2.0).into_iter().map(bf16::from_f32).collect();
    let (ids, w) = route(&sh, t, how, seed);
    let fusable = dev.arch() == b12x_core::Arch::Sm90
        && matches!(sh.recipe, Recipe::W4a16(_))
        && sh.activation.gated()
        && opts.tile.is_none_or(|k| k.is_wgmma());
    let mut ys = Vec::new();
    for fused in [true, false] {
        let (plan, _session) = prepared_with(dev, &q, PlanOptions { fused_activation: fused, ..opts })?;
        if plan.path(t) != Path::GroupedTile {
            return Err(format!("T = {t} takes {:?}, the trial is for the tiled path", plan.path(t)));
        }
        if plan.fused_activation(t) != (fusable && fused) {
            return Err(format!(
                "fused_activation {fused}: Plan::fused_activation(T = {t}) = {}",
                plan.fused_activation(t)
            ));
        }
        let mut c = new_call(&plan, &x, &ids, &w, s)?;
        run_call(&plan, &sh, &d, &mut c, s).map_err(err)?;
        ys.push(s.clone_dtoh(&c.y).map_err(err)?);
    }
    let differ = ys[0].iter().zip(&ys[1]).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
    if differ > 0 {
        return Err(format!("{differ} of {} outputs differ between the fused and the unfused activation", ys[0].len()));
    }
    Ok(())
}

fn bad_inputs(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let sh = tiny(Fp4::Nvfp4, Activation::Silu { limit: None });
    for (q, field) in [
        (
            Query { shape: Shape { hidden: 40, ..sh }, max_tokens: 4, layout: WeightLayout::RowMajor, router: None },
            "hidden",
        ),
        (
            Query {
                shape: Shape { hidden: 8192 + 32, ..sh },
                max_tokens: 4,
                layout: WeightLayout::RowMajor,
                router: None,
            },
            "hidden",
        ),
        (Query { shape: sh, max_tokens: 0, layout: WeightLayout::RowMajor, router: None }, "max_tokens"),
    ] {
        match fused_moe::plan(&q, dev) {
            Err(Error::InvalidQuery { field: f, .. }) if f == field => {}
            other => return Err(format!("{field}: want InvalidQuery, got {:?}", other.err())),
        }
    }
    let q = Query { shape: sh, max_tokens: 4, layout: WeightLayout::RowMajor, router: None };
    let (plan, _session) = prepared(dev, &q)?;
    let d = upload_experts(&sh, &Experts::random(&sh, 2), WeightLayout::RowMajor, s)?;
    let (ids, w) = route(&sh, 4, Workload::Random, 2);
    let x = vec![bf16::ONE; 4 * sh.hidden];
    let mut c = new_call(&plan, &x, &ids, &w, s)?;
    // Scratch one byte short.
    let mut small = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes() - 1).map_err(err)?;
    match fused_moe::run(&plan, call_args(&sh, &mut c, &d)?, Scratch::from_slice(&mut small), s) {
        Err(Error::ScratchTooSmall { .. }) => {}
        other => return Err(format!("short scratch: want ScratchTooSmall, got {other:?}")),
    }
    let mut a = call_args(&sh, &mut c, &d)?;
    if let ExpertWeights::RowMajor(w) = &mut a.experts {
        w.w1_enc = None;
    }
    match fused_moe::run(&plan, a, Scratch::none(), s) {
        Err(Error::Shape { tensor: "w1_enc", .. }) => {}
        other => return Err(format!("no w1_enc: want Shape(w1_enc), got {other:?}")),
    }
    let short = s.alloc_zeros::<bf16>(4 * (sh.hidden - 16)).map_err(err)?;
    let mut a = call_args(&sh, &mut c, &d)?;
    a.x = TensorRef::from_slice(&short, &[4, sh.hidden - 16]).map_err(err)?;
    match fused_moe::run(&plan, a, Scratch::none(), s) {
        Err(Error::Shape { tensor: "x", .. }) => {}
        other => return Err(format!("short x rows: want Shape(x), got {other:?}")),
    }
    // Nothing launched: y still holds its NaN fill, no fault.
    if s.clone_dtoh(&c.y).map_err(err)?.iter().any(|v| !v.is_nan()) || s.clone_dtoh(&c.error).map_err(err)?[0] != 0 {
        return Err("a refused call wrote y or the error word".into());
    }
    Ok(())
}

/// The decode path refuses bad calls before launching anything: a query it cannot serve, packed
/// experts of another shape, row-major weights on a packed plan, short scratch, misaligned x.
fn bad_inputs_decode(dev: &Arc<Device>) -> TrialResult {
    let s = dev.stream();
    let sh = tiny(Fp4::Mxfp4, Activation::Silu { limit: None });
    let packed = WeightLayout::Packed;
    for (q, field) in [
        (Query { shape: Shape { hidden: 272, ..sh }, max_tokens: 4, layout: packed, router: None }, "hidden"),
        (
            Query { shape: sh, max_tokens: fused_moe::MAX_PAIRS / sh.top_k + 1, layout: packed, router: None },
            "max_tokens",
        ),
    ] {
        match fused_moe::plan(&q, dev) {
            Err(Error::InvalidQuery { field: f, .. }) if f == field => {}
            other => return Err(format!("{field}: want InvalidQuery, got {:?}", other.err())),
        }
    }
    let q = Query { shape: sh, max_tokens: 4, layout: packed, router: None };
    let (plan, _session) = prepared(dev, &q)?;
    let d = upload_experts(&sh, &Experts::random(&sh, 2), packed, s)?;
    let other = Shape { inter: 256, ..sh };
    let d_other = upload_experts(&other, &Experts::random(&other, 2), packed, s)?;
    let rowmajor = upload_experts(&sh, &Experts::random(&sh, 2), WeightLayout::RowMajor, s)?;
    let (ids, w) = route(&sh, 4, Workload::Random, 2);
    let x = vec![bf16::ONE; 4 * sh.hidden];
    let mut c = new_call(&plan, &x, &ids, &w, s)?;
    let mut small = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes() - 1).map_err(err)?;
    match fused_moe::run(&plan, call_args(&sh, &mut c, &d)?, Scratch::from_slice(&mut small), s) {
        Err(Error::ScratchTooSmall { .. }) => {}
        other => return Err(format!("short scratch: want ScratchTooSmall, got {other:?}")),
    }
    let mut scratch = s.alloc_zeros::<u8>(plan.scratch_layout().total_bytes()).map_err(err)?;
    let mut a = call_args(&sh, &mut c, &d)?;
    a.experts = ExpertWeights::Packed(d_other.packed.as_ref().expect("packed"));
    match fused_moe::run(&plan, a, Scratch::from_slice(&mut scratch), s) {
        Err(Error::InvalidQuery { field: "experts", .. }) => {}
        other => return Err(format!("experts of another shape: want InvalidQuery(experts), got {other:?}")),
    }
    let a = call_args(&sh, &mut c, &rowmajor)?;
    match fused_moe::run(&plan, a, Scratch::from_slice(&mut scratch), s) {
        Err(Error::Shape { tensor: "experts", .. }) => {}
        other => return Err(format!("row-major weights on a packed plan: want Shape(experts), got {other:?}")),
    }
    // x rows 8 bytes off a 16-byte line.
    let wide = s.alloc_zeros::<bf16>(4 * sh.hidden + 4).map_err(err)?;
    let off = wide.slice(4..);
    let mut a = call_args(&sh, &mut c, &d)?;
    a.x = TensorRef::from_view(&off, &[4, sh.hidden]).map_err(err)?;
    match fused_moe::run(&plan, a, Scratch::from_slice(&mut scratch), s) {
        Err(Error::Misaligned { tensor: "x", .. }) => {}
        other => return Err(format!("misaligned x: want Misaligned(x), got {other:?}")),
    }
    if s.clone_dtoh(&c.y).map_err(err)?.iter().any(|v| !v.is_nan()) || s.clone_dtoh(&c.error).map_err(err)?[0] != 0 {
        return Err("a refused call wrote y or the error word".into());
    }
    Ok(())
}

fn main() {
    run_gpu_trials(trials())
}
