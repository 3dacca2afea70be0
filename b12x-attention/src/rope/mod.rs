//! `attention.rope`: rotary position embedding applied in place to Q and K.
//!
//! ```text
//! for row t (position pos = positions[t]), each head of q and of k, pair j < R/2:
//!   NeoX (halves):      (a, b) = (x[off + j], x[off + j + R/2])
//!   GPT-J (interleaved): (a, b) = (x[off + 2j], x[off + 2j + 1])
//!   angle = pos · inv_freq[j],  inv_freq[j] = θ^(−2j/R)   (YaRN: blended, see `reference::inv_freq`)
//!   a' = a·cos − b·sin,  b' = b·cos + a·sin                  (cos, sin × YaRN's mscale ratio)
//! ```
//!
//! - Tensors: `q [T, H, D]`, `k [T, Hkv, D]` bf16/f16, rotated in place; rows may be strided and
//!   q, k may be column slices of one fused QKV buffer (heads contiguous within a row; see
//!   [`TensorMut::split_last`] and [`TensorMut::unflatten_last`]); `positions [T]` i32 on the
//!   device; `cos_sin [max_position, R]` f32 in table mode ([`Plan::cos_sin_table`]); `error [1]`
//!   i32 (an [`ErrorWord`](crate::paging::ErrorWord)).
//! - Partial rotary: only dims `rotary_offset .. rotary_offset + R` are read and written
//!   (`rotary_offset = D − R` is DeepSeek-V4's "rotate the last R dims").
//! - Frequencies (`Query::yarn`): plain `θ^(−2j/R)`, or YaRN in the DeepSeek form (factor,
//!   original context, β_fast, β_slow; the ramp over pair indices; `mscale`/`mscale_all_dim`
//!   giving the factor on cos/sin, and [`Yarn::softmax_scale_factor`] the one the attention
//!   scale takes). Always applied when given (DeepSeek-V3's reference applies YaRN only when the
//!   configured context exceeds the original; decide that when building the query). Computed on
//!   the host in f64, rounded once to f32, passed in the kernel's parameters.
//! - cos/sin: computed in the kernel (`sincosf` of the f32 angle, full range reduction: exact to
//!   the last f32 bit or one off) or read from a planned f32 table ([`CosSin::Table`]: 4·R bytes
//!   per position, built once on the host by [`Plan::cos_sin_table`]). Rounding points in
//!   [`reference`](mod@reference): table mode is **bitwise equal** to [`reference::rotate`];
//!   computed mode is within one ULP of bf16/f16 plus 2^-20 of the pair's magnitude
//!   (`|a'| + |b'|`: where `a·c − b·s` cancels, the last f32 bit of `sincosf` shows).
//! - Untrusted positions: a position outside `[0, max_position)` leaves its row unrotated and
//!   sets [`FAULT_POSITION`](crate::paging::FAULT_POSITION) (both modes, so results never depend
//!   on the mode).
//! - Constraints: `R % 8 == 0`, `rotary_offset % 8 == 0`, `rotary_offset + R ≤ D`, `R ≤ 512`,
//!   `D % 8 == 0`; q and k rows 16-byte aligned; the table 16-byte aligned.
//! - Kernel: one thread per 4 pairs of one (row, head), q and k heads in one grid, 8-byte (NeoX)
//!   or 16-byte (GPT-J) accesses. One config. Each entry point first waits for the kernel
//!   before it (a PDL launch with [`Plan::with_pdl`]; on plain launches the wait returns at
//!   once), then lets a PDL-launched next kernel start.
//! - Fused with `attention.kv_append` as [`attention.rope_kv_append`](crate::rope_kv_append)
//!   (one launch, bitwise the two ops' result): a decode step's rope costs ~4.6 µs alone in a
//!   graph, most of it the launch (`b12x-layers`' breakdown).
//!
//! **Status: validated on the H200 (sm_90a)**: `tests/gpu_rope.rs` 33/33 (Qwen3, Llama-3,
//! DeepSeek-V4 YaRN on the last 64 of 512 dims, partial rotary, HF-style scaled cos/sin, bad
//! positions, graph replay; table mode bitwise equal to the oracle, computed mode within one ULP
//! plus 2^-20 of the pair's magnitude: where `a·c − b·s` cancels, the last f32 bit of `sincosf`
//! shows), compute-sanitizer memcheck 33/33 and racecheck 33/33
//! (`bench-results/2026-12-04-h200-c/call2`, again after the PDL release in `…/call4`);
//! sm_120a/sm_121a compiled, not run.
//!
//! **Performance** (H200, `benches/rope.rs`, `bench-results/2026-12-04-h200-c/call2/r/bench`):
//! decode (T ≤ 64) 4.2–5.3 µs per call; prefill, Qwen3 heads, T = 4096 / 32768: table 79.0% /
//! 79.6% of the read ceiling (size-matched read probes 83.6% / 98.7%), computed 59.1% / 65.8%;
//! DeepSeek-V4 form: table 73.9% / 66.6%, computed 58.4% / 59.4%. Computed mode pays `sincosf`
//! (ALU, and the slow range reduction past ~1e5 rad): prefer the table for long prompts. No peer
//! timed yet.
//!
//! ```no_run
//! use b12x_attention::paging::ErrorWord;
//! use b12x_attention::rope::{self, Args, CosSin, Query, RopeStyle};
//! use b12x_core::{DType, Device, PreparationSession, Scratch, TensorMut, TensorRef};
//! # fn main() -> b12x_core::Result<()> {
//! let dev = Device::new(0)?;
//! let (t, h, hkv, d) = (4, 32, 8, 128);
//! let query = Query {
//!     heads: h, kv_heads: hkv, head_dim: d, rotary_dim: d, rotary_offset: 0,
//!     style: RopeStyle::Neox, base: 1e6, yarn: None, dtype: DType::BF16,
//!     max_tokens: 64, max_position: 40960, cos_sin: CosSin::Computed,
//! };
//! let plan = rope::plan(&query, &dev)?;
//! let mut session = PreparationSession::new(&dev)?;
//! session.prepare(&[&plan])?;
//! let s = dev.stream();
//! // A fused QKV projection's output [T, (H + 2·Hkv)·D]: rotate its Q and K columns in place.
//! let mut qkv = s.alloc_zeros::<b12x_core::half::bf16>(t * (h + 2 * hkv) * d)?;
//! let pos = s.clone_htod(&[0i32, 17, 4095, 9])?;
//! let mut err = ErrorWord::new(s)?;
//! let mut parts = TensorMut::from_slice(&mut qkv, &[t, (h + 2 * hkv) * d])?.split_last(&[h * d, hkv * d, hkv * d])?;
//! let _v = parts.pop();
//! let k = parts.pop().expect("k").unflatten_last(&[hkv, d])?;
//! let q = parts.pop().expect("q").unflatten_last(&[h, d])?;
//! let args = Args { q, k: Some(k), positions: TensorRef::from_slice(&pos, &[t])?, cos_sin: None, error: err.view()? };
//! rope::run(&plan, args, Scratch::none(), s)?;
//! assert!(err.read(s)?.is_clear());
//! # Ok(()) }
//! ```

mod params;
pub mod reference;

pub use params::{RopeParams, MAX_PAIRS};

use b12x_core::cudarc::driver::CudaStream;
use b12x_core::{
    require_disjoint, require_disjoint_views, resolve, BenchCase, Bucket, DType, Device, Error, KernelModule,
    LaunchDims, LaunchOpts, OpPlan, PlanSlot, RaceBuffer, Result, Scratch, ScratchLayout, Selected, TensorMut,
    TensorRef,
};
use std::sync::Arc;

/// The op id.
pub const OP: &str = "attention.rope";
/// Threads per CTA (`kRopeThreads`).
const THREADS: usize = 256;
/// The one config.
const CONFIG: &str = "t256";

b12x_core::inventory::submit! {
    b12x_core::OpInfo {
        name: OP,
        group: "attention",
        entry_points: &["plan", "run"],
        dtypes: &["bf16", "f16"],
        archs: &[
            ("sm_90a", b12x_core::Validation::Validated),
            ("sm_120a", b12x_core::Validation::CompiledOnly),
            ("sm_121a", b12x_core::Validation::CompiledOnly),
        ],
        krate: "b12x-attention",
        summary: "rotary embedding in place on Q and K (NeoX / GPT-J pairs, partial rotary, YaRN; cos/sin computed or from a table)",
    }
}

/// Which dims form a rotated pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeStyle {
    /// `(j, j + R/2)`: the two halves (GPT-NeoX, Llama, Qwen in HF layout).
    Neox,
    /// `(2j, 2j + 1)`: interleaved pairs (GPT-J, DeepSeek's reference, Meta's original Llama).
    Gptj,
}

/// Where cos and sin come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CosSin {
    /// `sincosf` in the kernel: no table to keep, a few more instructions per pair.
    Computed,
    /// Read from `Args::cos_sin`, `[max_position, R]` f32 built by [`Plan::cos_sin_table`]
    /// (and uploaded once by the caller): `4 · R · max_position` bytes.
    Table,
}

/// YaRN context extension, the DeepSeek form (see [`reference::inv_freq`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    /// s: the context extension factor (> 1).
    pub factor: f32,
    /// L: the context length the model was trained with.
    pub original_max_position: usize,
    /// β_fast (rotations; DeepSeek 32).
    pub beta_fast: f32,
    /// β_slow (DeepSeek 1).
    pub beta_slow: f32,
    /// `m` of `mscale(s, m) = 0.1 · m · ln s + 1` for cos/sin (DeepSeek's `mscale`, HF's 1).
    pub mscale: f32,
    /// The same for the divisor of cos/sin (DeepSeek's `mscale_all_dim`; 0 gives the divisor 1).
    /// cos and sin are multiplied by `mscale(s, mscale) / mscale(s, mscale_all_dim)`.
    pub mscale_all_dim: f32,
}

impl Yarn {
    /// DeepSeek-V4's numbers (rotary dim 64, θ 160000): factor 16, original context 65536,
    /// β 32 / 1, mscale 0 (cos and sin unscaled).
    pub fn deepseek_v4() -> Self {
        Yarn {
            factor: 16.0,
            original_max_position: 65536,
            beta_fast: 32.0,
            beta_slow: 1.0,
            mscale: 0.0,
            mscale_all_dim: 0.0,
        }
    }
    /// The factor DeepSeek-V3's reference multiplies the softmax scale by:
    /// `mscale(s, mscale_all_dim)²` (pass it to the attention op's scale).
    pub fn softmax_scale_factor(&self) -> f32 {
        let m = reference::yarn_mscale(self.factor as f64, self.mscale_all_dim as f64);
        (m * m) as f32
    }
}

/// The static problem.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// H: query heads.
    pub heads: usize,
    /// Hkv: key heads; 0 when only q is rotated (`Args::k` is `None`).
    pub kv_heads: usize,
    /// D (a multiple of 8).
    pub head_dim: usize,
    /// R: rotated dims per head (a multiple of 8, ≤ 512).
    pub rotary_dim: usize,
    /// The first rotated dim (a multiple of 8; `rotary_offset + R ≤ D`): 0 for the usual
    /// "first R dims", `D − R` for DeepSeek-V4's last R dims.
    pub rotary_offset: usize,
    pub style: RopeStyle,
    /// θ (finite, > 1).
    pub base: f32,
    pub yarn: Option<Yarn>,
    /// bf16 or f16.
    pub dtype: DType,
    /// Capacity: the largest T.
    pub max_tokens: usize,
    /// Positions must lie in `[0, max_position)` (the table's rows in table mode).
    pub max_position: usize,
    pub cos_sin: CosSin,
}

impl Query {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: String| Err(Error::InvalidQuery { op: OP, field, reason });
        if !matches!(self.dtype, DType::BF16 | DType::F16) {
            return bad("dtype", format!("must be bf16 or f16, got {}", self.dtype));
        }
        let max = i32::MAX as usize;
        for (field, v) in [("heads", self.heads), ("head_dim", self.head_dim), ("max_tokens", self.max_tokens)] {
            if v == 0 || v > max {
                return bad(field, format!("must be in 1..={max}, got {v}"));
            }
        }
        if self.kv_heads > max {
            return bad("kv_heads", format!("must be ≤ {max}, got {}", self.kv_heads));
        }
        if self.max_position == 0 || self.max_position > max {
            return bad("max_position", format!("must be in 1..={max}, got {}", self.max_position));
        }
        if self.head_dim % 8 != 0 {
            return bad("head_dim", format!("must be a multiple of 8, got {}", self.head_dim));
        }
        let r = self.rotary_dim;
        if r == 0 || r % 8 != 0 || r > 2 * MAX_PAIRS {
            return bad("rotary_dim", format!("must be a positive multiple of 8 up to {}, got {r}", 2 * MAX_PAIRS));
        }
        if self.rotary_offset % 8 != 0 || self.rotary_offset + r > self.head_dim {
            return bad(
                "rotary_offset",
                format!(
                    "must be a multiple of 8 with rotary_offset + rotary_dim ≤ head_dim ({}), got {} + {r}",
                    self.head_dim, self.rotary_offset
                ),
            );
        }
        if !(self.base.is_finite() && self.base > 1.0) {
            return bad("base", format!("(θ) must be finite and > 1, got {}", self.base));
        }
        if let Some(y) = &self.yarn {
            if !(y.factor.is_finite() && y.factor > 1.0) {
                return bad("yarn", format!("factor must be finite and > 1, got {}", y.factor));
            }
            if y.original_max_position == 0 {
                return bad("yarn", "original_max_position must be positive".into());
            }
            if !(y.beta_fast.is_finite() && y.beta_slow.is_finite() && y.beta_fast > y.beta_slow && y.beta_slow > 0.0) {
                return bad("yarn", format!("needs β_fast > β_slow > 0, got {} and {}", y.beta_fast, y.beta_slow));
            }
            if !(y.mscale.is_finite() && y.mscale_all_dim.is_finite()) {
                return bad("yarn", "mscale and mscale_all_dim must be finite".into());
            }
            let scale = reference::cos_sin_scale(Some(y));
            if !(scale.is_finite() && scale > 0.0) {
                return bad("yarn", format!("the cos/sin factor mscale ratio must be finite and > 0, got {scale}"));
            }
        }
        let threads = (self.heads + self.kv_heads).checked_mul(r / 8).and_then(|x| x.checked_mul(self.max_tokens));
        if threads.is_none_or(|n| n > max) {
            return bad("max_tokens", "· (heads + kv_heads) · rotary_dim / 8 must fit a 32-bit grid".into());
        }
        if self.cos_sin == CosSin::Table && self.max_position.checked_mul(r).is_none_or(|n| n > max) {
            return bad("max_position", "· rotary_dim must fit i32 in table mode".into());
        }
        Ok(())
    }

    /// The `R / 2` frequencies the kernel uses ([`reference::inv_freq`]).
    pub fn inv_freq(&self) -> Vec<f32> {
        reference::inv_freq(self.rotary_dim, self.base as f64, self.yarn.as_ref())
    }

    /// The kernel's frequencies (zero-padded to [`MAX_PAIRS`]) and its cos/sin factor
    /// ([`reference::cos_sin_scale`]); a plan computes them once.
    pub fn frequencies(&self) -> Frequencies {
        let mut inv_freq = [0f32; MAX_PAIRS];
        for (dst, f) in inv_freq.iter_mut().zip(self.inv_freq()) {
            *dst = f;
        }
        Frequencies { inv_freq, scale: reference::cos_sin_scale(self.yarn.as_ref()) }
    }

    /// Checks `args` against the query and builds the kernel parameters; nothing is launched.
    pub fn kernel_params(&self, args: &Args<'_>) -> Result<RopeParams> {
        self.kernel_params_with(args, &self.frequencies())
    }

    /// [`Query::kernel_params`] with the frequencies computed already (what `run` uses: the
    /// plan's, so a call does no f64 `powf`).
    pub fn kernel_params_with(&self, args: &Args<'_>, freqs: &Frequencies) -> Result<RopeParams> {
        let (h, hkv, d) = (self.heads, self.kv_heads, self.head_dim);
        let t = args.q.shape().first().copied().unwrap_or(0);
        args.q.expect("q", "[T, H, D]", self.dtype, &[t, h, d])?;
        args.positions.expect("positions", "[T]", DType::I32, &[t])?;
        crate::paging::require_contiguous("positions", &args.positions)?;
        args.error.expect("error", "[1]", DType::I32, &[1])?;
        if t > self.max_tokens {
            return Err(Error::Capacity { what: "T (rows of q and k)", got: t, capacity: self.max_tokens });
        }
        let row_stride = |name: &'static str, x: &TensorRef<'_>, heads: usize| -> Result<i64> {
            let s = x.strides();
            if s[2] != 1 || (heads > 1 && s[1] != d as isize) || (t > 1 && s[0] < (heads * d) as isize) {
                let reason = "heads must be contiguous within a row ([s, D, 1], s ≥ heads·D)".into();
                return Err(Error::Stride { tensor: name, strides: s.to_vec(), reason });
            }
            x.require_aligned(name, 16)?;
            Ok(s[0] as i64)
        };
        let q_stride = row_stride("q", &args.q.as_ref(), h)?;
        let k_stride = match (&args.k, hkv) {
            (None, 0) => 0,
            (Some(k), n) if n > 0 => {
                k.expect("k", "[T, Hkv, D]", self.dtype, &[t, hkv, d])?;
                let ks = row_stride("k", &k.as_ref(), hkv)?;
                require_disjoint_views(("q", &args.q.as_ref()), ("k", &k.as_ref()))?;
                ks
            }
            (k, _) => {
                let expected =
                    if hkv > 0 { format!("[T, Hkv, D] = [{t}, {hkv}, {d}]") } else { "none (kv_heads = 0)".into() };
                return Err(Error::Shape {
                    tensor: "k",
                    expected,
                    actual: k.as_ref().map(|k| k.shape().to_vec()).unwrap_or_default(),
                });
            }
        };
        self.check_table(&args.cos_sin)?;
        // q, k and the error word are written: nothing they are read with may overlap them
        // (an absent k or table is an empty span; fixed arrays: run allocates nothing).
        let error = ("error", args.error.byte_span());
        let outs = [("q", args.q.byte_span()), ("k", args.k.as_ref().map_or((0, 0), |k| k.byte_span()))];
        for out in outs {
            require_disjoint(out, error)?;
        }
        let table = ("cos_sin", args.cos_sin.map_or((0, 0), |t| t.byte_span()));
        for out in outs.into_iter().chain([error]) {
            require_disjoint(out, ("positions", args.positions.byte_span()))?;
            require_disjoint(out, table)?;
        }
        Ok(RopeParams {
            q: args.q.ptr(),
            k: args.k.as_ref().map_or(0, |k| k.ptr()),
            positions: args.positions.ptr(),
            cos_sin: args.cos_sin.map_or(0, |x| x.ptr()),
            error: args.error.ptr(),
            q_stride,
            k_stride,
            tokens: t as i32,
            heads: h as i32,
            kv_heads: hkv as i32,
            head_dim: d as i32,
            rotary_dim: self.rotary_dim as i32,
            rotary_offset: self.rotary_offset as i32,
            max_position: self.max_position as i32,
            scale: freqs.scale,
            inv_freq: freqs.inv_freq,
        })
    }

    /// `cos_sin` against the mode: `[max_position, R]` f32, contiguous and 16-byte aligned in
    /// table mode, absent otherwise (also `attention.rope_paged`'s check).
    pub(crate) fn check_table(&self, cos_sin: &Option<TensorRef<'_>>) -> Result<()> {
        match (cos_sin, self.cos_sin) {
            (Some(tab), CosSin::Table) => {
                tab.expect("cos_sin", "[max_position, R]", DType::F32, &[self.max_position, self.rotary_dim])?;
                crate::paging::require_contiguous("cos_sin", tab)?;
                tab.require_aligned("cos_sin", 16)?;
            }
            (None, CosSin::Computed) => {}
            (tab, mode) => {
                let expected = if mode == CosSin::Table {
                    format!("[max_position, R] = [{}, {}] (table mode)", self.max_position, self.rotary_dim)
                } else {
                    "none (cos/sin computed in the kernel)".into()
                };
                return Err(Error::Shape {
                    tensor: "cos_sin",
                    expected,
                    actual: tab.map(|x| x.shape().to_vec()).unwrap_or_default(),
                });
            }
        }
        Ok(())
    }

    /// The kernel symbol, e.g. `b12x_rope_bf16_neox_table`.
    pub fn symbol(&self) -> String {
        let style = match self.style {
            RopeStyle::Neox => "neox",
            RopeStyle::Gptj => "gptj",
        };
        let table = if self.cos_sin == CosSin::Table { "_table" } else { "" };
        format!("b12x_rope_{}_{style}{table}", self.dtype.name())
    }
}

/// What the kernel's parameters carry of the frequencies ([`Query::frequencies`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frequencies {
    /// The `R / 2` frequencies, zero-padded.
    pub inv_freq: [f32; MAX_PAIRS],
    /// The factor on cos and sin.
    pub scale: f32,
}

/// A validated query bound to a device.
#[derive(Clone, Debug)]
pub struct Plan {
    query: Query,
    freqs: Frequencies,
    device: Arc<Device>,
    buckets: Vec<Bucket>,
    slot: PlanSlot,
    pdl: bool,
}

/// Validates `query`. Allocates, compiles and launches nothing.
pub fn plan(query: &Query, device: &Arc<Device>) -> Result<Plan> {
    query.validate()?;
    Ok(Plan {
        query: query.clone(),
        freqs: query.frequencies(),
        device: device.clone(),
        buckets: vec![Bucket { lo: 1, hi: query.max_tokens }],
        slot: PlanSlot::default(),
        pdl: false,
    })
}

impl Plan {
    /// Launches every call of this plan with programmatic dependent launch (PDL) when `pdl`.
    /// The kernel waits (`griddepcontrol.wait`) for the work before it before touching
    /// anything, then lets a PDL-launched next kernel start, so in a stream or a captured graph
    /// of PDL launches (e.g. `gemm.bf16_gemv` with `Query::pdl`) its launch overlaps the
    /// previous kernel's tail. Results are the same either way; the tuning race times plain
    /// launches.
    pub fn with_pdl(mut self, pdl: bool) -> Self {
        self.pdl = pdl;
        self
    }
    /// Whether calls launch with PDL ([`Plan::with_pdl`]).
    pub fn pdl(&self) -> bool {
        self.pdl
    }
    pub fn query(&self) -> &Query {
        &self.query
    }
    /// The op needs no scratch.
    pub fn scratch_layout(&self) -> ScratchLayout {
        ScratchLayout::new()
    }
    /// The table of [`CosSin::Table`], `[max_position, R]` f32 on the host (upload it once and
    /// pass it as `Args::cos_sin`): row `pos` = `cos` of the `R / 2` pairs, then their `sin`
    /// ([`reference::table`]). Computing it costs `max_position · R / 2` f64 sin/cos pairs.
    pub fn cos_sin_table(&self) -> Vec<f32> {
        let q = &self.query;
        reference::table(q.max_position, q.rotary_dim, &self.freqs.inv_freq[..q.rotary_dim / 2])
    }
}

/// The tensors of one call.
#[derive(Debug)]
pub struct Args<'a> {
    /// `[T, H, D]`, rotated in place.
    pub q: TensorMut<'a>,
    /// `[T, Hkv, D]`, rotated in place; `Some` exactly when the query has `kv_heads > 0`.
    pub k: Option<TensorMut<'a>>,
    /// `[T]` i32: each row's position (untrusted: outside `[0, max_position)` is a fault).
    pub positions: TensorRef<'a>,
    /// `[max_position, R]` f32, exactly in table mode.
    pub cos_sin: Option<TensorRef<'a>>,
    /// `[1]` i32 fault bits.
    pub error: TensorMut<'a>,
}

/// Rotates `args.q` (and `args.k`) in place on `stream`. Every check happens before the launch;
/// no allocation, no synchronization. `T = 0` launches nothing.
pub fn run(plan: &Plan, args: Args<'_>, scratch: Scratch<'_>, stream: &Arc<CudaStream>) -> Result<()> {
    let params = plan.query.kernel_params_with(&args, &plan.freqs)?;
    plan.scratch_layout().bind(&scratch)?;
    plan.device.check_stream(stream)?;
    if params.tokens == 0 {
        return Ok(());
    }
    let selected = resolve(plan, 0, stream)?;
    launch(&selected, &params, stream, plan.pdl)
}

fn launch(selected: &Selected, p: &RopeParams, stream: &CudaStream, pdl: bool) -> Result<()> {
    let kernel = selected.kernels.first().ok_or_else(|| Error::UnknownConfig {
        op: OP,
        bucket: String::new(),
        config: selected.config.clone(),
    })?;
    let threads = p.tokens as usize * (p.heads + p.kv_heads) as usize * p.rotary_dim as usize / 8;
    let dims =
        LaunchDims { grid: (threads.div_ceil(THREADS) as u32, 1, 1), block: (THREADS as u32, 1, 1), smem_bytes: 0 };
    // SAFETY: RopeParams mirrors the kernel's struct (asserted on both sides) and passed
    // `Query::kernel_params` (or describes the race's own buffer); positions are bounded in the
    // kernel before any table access.
    unsafe { kernel.launch_ex(stream, dims, p, LaunchOpts { pdl, cluster_x: 0 }) }
}

impl OpPlan for Plan {
    fn op(&self) -> &'static str {
        OP
    }
    fn query_key(&self) -> String {
        let q = &self.query;
        format!(
            "H={} Hkv={} D={} R={} off={} style={:?} base={} yarn={:?} dtype={} max_tokens={} max_position={} cos_sin={:?}",
            q.heads,
            q.kv_heads,
            q.head_dim,
            q.rotary_dim,
            q.rotary_offset,
            q.style,
            q.base,
            q.yarn,
            q.dtype,
            q.max_tokens,
            q.max_position,
            q.cos_sin
        )
    }
    fn device(&self) -> &Arc<Device> {
        &self.device
    }
    fn module(&self) -> &'static KernelModule {
        &crate::ROPE_MODULE
    }
    fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    fn candidates(&self, _bucket: usize) -> Vec<String> {
        vec![CONFIG.into()]
    }
    fn symbols(&self, _bucket: usize, config_index: usize) -> Vec<String> {
        if config_index == 0 {
            vec![self.query.symbol()]
        } else {
            Vec::new()
        }
    }
    fn slot(&self) -> &PlanSlot {
        &self.slot
    }
    fn bench_case(&self, _bucket: usize) -> Result<Box<dyn BenchCase + '_>> {
        // One config: never raced; this case (one row at position 0) is for tools that time
        // every op.
        let q = &self.query;
        let row = (q.heads + q.kv_heads) * q.head_dim * q.dtype.size_bytes();
        let table = if q.cos_sin == CosSin::Table { q.rotary_dim * 4 } else { 16 };
        // row, positions, table row, error.
        let race = RaceBuffer::new(&self.device, &[row, 4, table, 4])?;
        let params = RopeParams {
            q: race.ptrs[0],
            k: if q.kv_heads > 0 { race.ptrs[0] + (q.heads * q.head_dim * q.dtype.size_bytes()) as u64 } else { 0 },
            positions: race.ptrs[1],
            cos_sin: if q.cos_sin == CosSin::Table { race.ptrs[2] } else { 0 },
            error: race.ptrs[3],
            q_stride: (row / q.dtype.size_bytes()) as i64,
            k_stride: (row / q.dtype.size_bytes()) as i64,
            tokens: 1,
            heads: q.heads as i32,
            kv_heads: q.kv_heads as i32,
            head_dim: q.head_dim as i32,
            rotary_dim: q.rotary_dim as i32,
            rotary_offset: q.rotary_offset as i32,
            max_position: 1,
            scale: self.freqs.scale,
            inv_freq: self.freqs.inv_freq,
        };
        Ok(Box::new(RaceCase { params, _buffer: race }))
    }
}

/// What a timing tool launches.
struct RaceCase {
    params: RopeParams,
    _buffer: RaceBuffer,
}

impl BenchCase for RaceCase {
    fn launch(&mut self, selected: &Selected, stream: &CudaStream) -> Result<()> {
        launch(selected, &self.params, stream, false)
    }
}
