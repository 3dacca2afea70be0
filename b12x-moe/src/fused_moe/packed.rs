//! Packed experts: the layout the decode path's kernels read (`kernels/fused_moe_decode.cu`),
//! made once at load time from b12x-quant's row-major matrices ([`Experts`]).
//!
//! Per matrix kind (FC1, FC2), every expert's matrix is
//!
//! 1. **row-permuted** (FC1 of a gated activation only): within each 16 rows, the 8 gate rows
//!    `8s .. 8s + 7` and then the matching up rows `I + 8s .. I + 8s + 7`, so that one lane of the
//!    decode kernel finishes gate j and up j together and stores `h` directly;
//! 2. **padded** with zero rows to whole 128-row blocks (`rbs` blocks per expert);
//! 3. packed by `gemm.blockscaled`'s [`pack_host`](b12x_gemm::blockscaled::pack::pack_host)
//!    (layout v3: E2M1 words bit-permuted for the SM90 dequantization, scales in swizzled 128×4
//!    tiles), and the experts are stacked: codes `[E · rbs · 128, K/2]`, scale tiles
//!    `[E · rbs][⌈K/B/4⌉][512]`, so expert e's row block b is block `e · rbs + b` of one matrix
//!    (one TMA descriptor serves every expert).
//!
//! NVFP4 keeps each expert's encode scale (`enc [E]`, applied in the kernels' epilogue); MXFP4
//! weights carry the range of their live scale bytes over every expert, from which the plan
//! picks the exponent offset that keeps the BF16 dequantization exact (as `gemm.blockscaled`
//! does for one weight).

use super::reference::{ExpertMatrix, Experts};
use super::{Fp4, Shape, OP};
use b12x_core::cudarc::driver::{CudaSlice, CudaStream};
use b12x_core::{Error, Result};
use b12x_gemm::blockscaled::{pack, Weight};
use b12x_quant::block::{Mx, Nvfp4};
use b12x_quant::codec::Element;
use std::sync::Arc;

/// Rows per block of the packed matrices (the decode kernel's unit of rows).
pub const ROW_BLOCK: usize = 128;

/// The source row of packed row `r` of one expert's matrix with `rows` rows, `None` for a padding
/// row. `interleave`: the gate/up interleave of a gated FC1 (`rows = 2 I`, I a multiple of 8).
pub fn source_row(r: usize, rows: usize, interleave: bool) -> Option<usize> {
    if !interleave {
        return (r < rows).then_some(r);
    }
    let i = rows / 2;
    let j = 8 * (r / 16) + r % 8;
    (j < i).then_some(if r % 16 < 8 { j } else { i + j })
}

/// One matrix kind of every expert, packed on the host (the module docs' layout).
#[derive(Clone, Debug, PartialEq)]
pub struct PackedMatrixHost {
    pub format: Fp4,
    /// Rows of one expert's matrix before padding, and K.
    pub rows: usize,
    pub k: usize,
    /// 128-row blocks per expert.
    pub rbs: usize,
    /// Whether the rows carry the gate/up interleave.
    pub interleaved: bool,
    /// `[E · rbs · 128, K/2]` bytes, layout v3.
    pub codes: Vec<u8>,
    /// `[E · rbs][⌈K/B/4⌉][512]` bytes.
    pub scales: Vec<u8>,
    /// `[E]`: NVFP4 encode scales (1 for MXFP4).
    pub enc: Vec<f32>,
    /// The smallest and largest scale byte (MXFP4: over blocks holding a non-zero code, as
    /// `gemm.blockscaled`'s `scale_bytes`; NVFP4: over every block).
    pub scale_bytes: (u8, u8),
}

impl PackedMatrixHost {
    /// Packs every expert's matrix of one kind (`interleave`: the gated FC1's row order).
    pub fn pack(ms: &[ExpertMatrix], interleave: bool) -> Result<PackedMatrixHost> {
        let first = ms.first().ok_or_else(|| bad("experts", "no experts".into()))?;
        let ((rows, k), format) = (first.shape(), first.format());
        if interleave && rows % 16 != 0 {
            return Err(bad("fc1", format!("the gate/up interleave needs 2·I a multiple of 16, got {rows} rows")));
        }
        let rbs = rows.div_ceil(ROW_BLOCK);
        let padded = rbs * ROW_BLOCK;
        let mut out = PackedMatrixHost {
            format,
            rows,
            k,
            rbs,
            interleaved: interleave,
            codes: Vec::new(),
            scales: Vec::new(),
            enc: Vec::new(),
            scale_bytes: (u8::MAX, 0),
        };
        let mut any_live = false;
        for (e, m) in ms.iter().enumerate() {
            if m.shape() != (rows, k) || m.format() != format {
                return Err(bad(
                    "experts",
                    format!("expert {e} is {:?} {:?}, expert 0 {format:?} {:?}", m.format(), m.shape(), (rows, k)),
                ));
            }
            let (codes, scales, block) = match m {
                ExpertMatrix::Nvfp4(q) => (&q.codes, &q.scales, 16),
                ExpertMatrix::Mxfp4(q) => (&q.codes, &q.scales, 32),
            };
            let (cb, sb) = (k / 2, k / block);
            let mut pc = vec![0u8; padded * cb];
            let mut ps = vec![0u8; padded * sb];
            for r in 0..padded {
                if let Some(src) = source_row(r, rows, interleave) {
                    pc[r * cb..][..cb].copy_from_slice(&codes[src * cb..][..cb]);
                    ps[r * sb..][..sb].copy_from_slice(&scales[src * sb..][..sb]);
                }
            }
            let (w, range) = match m {
                ExpertMatrix::Nvfp4(q) => {
                    let range = (*q.scales.iter().min().unwrap_or(&0), *q.scales.iter().max().unwrap_or(&0));
                    (Weight::Nvfp4(Nvfp4 { rows: padded, k, codes: pc, scales: ps, enc: q.enc }), Some(range))
                }
                ExpertMatrix::Mxfp4(_) => {
                    let q = Mx { element: Element::E2M1, rows: padded, k, codes: pc, scales: ps };
                    let range = pack::mx_live_scale_range(&q);
                    // (127, 127) is the "no live block" answer: it must not narrow the range.
                    let live = q.codes.iter().any(|&c| c & 0x77 != 0);
                    (Weight::Mx(q), live.then_some(range))
                }
            };
            if let Some((lo, hi)) = range {
                any_live = true;
                out.scale_bytes = (out.scale_bytes.0.min(lo), out.scale_bytes.1.max(hi));
            }
            let p = pack::pack_host(&w)?;
            out.codes.extend_from_slice(&p.codes);
            out.scales.extend_from_slice(&p.scales);
            out.enc.push(p.global);
        }
        if !any_live {
            out.scale_bytes = (127, 127);
        }
        Ok(out)
    }

    /// Experts in the layout.
    pub fn experts(&self) -> usize {
        self.enc.len()
    }

    /// The row-major matrices it was packed from (exact inverse of [`PackedMatrixHost::pack`]).
    pub fn unpack(&self) -> Vec<ExpertMatrix> {
        let padded = self.rbs * ROW_BLOCK;
        let (codes_per, scales_per) = (self.codes.len() / self.experts(), self.scales.len() / self.experts());
        (0..self.experts())
            .map(|e| {
                let format = match self.format {
                    Fp4::Nvfp4 => pack::WeightFormat::Nvfp4,
                    Fp4::Mxfp4 => pack::WeightFormat::Mxfp4,
                };
                let ph = pack::PackedHost {
                    format,
                    n: padded,
                    k: self.k,
                    codes: self.codes[e * codes_per..][..codes_per].to_vec(),
                    scales: self.scales[e * scales_per..][..scales_per].to_vec(),
                    global: self.enc[e],
                };
                let (codes, scales, enc) = match pack::unpack_host(&ph) {
                    Weight::Nvfp4(q) => (q.codes, q.scales, Some(q.enc)),
                    Weight::Mx(q) => (q.codes, q.scales, None),
                    _ => unreachable!("FP4 formats unpack to FP4"),
                };
                let block = self.format.block();
                let (cb, sb) = (self.k / 2, self.k / block);
                let mut oc = vec![0u8; self.rows * cb];
                let mut os = vec![0u8; self.rows * sb];
                for r in 0..padded {
                    if let Some(src) = source_row(r, self.rows, self.interleaved) {
                        oc[src * cb..][..cb].copy_from_slice(&codes[r * cb..][..cb]);
                        os[src * sb..][..sb].copy_from_slice(&scales[r * sb..][..sb]);
                    }
                }
                match enc {
                    Some(enc) => ExpertMatrix::Nvfp4(Nvfp4 { rows: self.rows, k: self.k, codes: oc, scales: os, enc }),
                    None => ExpertMatrix::Mxfp4(Mx {
                        element: Element::E2M1,
                        rows: self.rows,
                        k: self.k,
                        codes: oc,
                        scales: os,
                    }),
                }
            })
            .collect()
    }

    /// `(scale_bias, out_scale)` of the decode kernel: the BF16 exponent field of scale byte c is
    /// `c + scale_bias` and the epilogue multiplies by `out_scale` (NVFP4: 2^7, the 1 / enc of
    /// each expert separately; MXFP4: 2^c with c chosen so that the largest scale stays finite),
    /// or an error when the scale bytes span more binades than BF16 holds exactly.
    pub fn kernel_scales(&self) -> Result<(i32, f32)> {
        match self.format {
            Fp4::Nvfp4 => Ok((0, 128.0)),
            Fp4::Mxfp4 => {
                // gemm.blockscaled's rule (gemv.rs): E2M1's smallest code 0.5 keeps products
                // ≥ 2^-133 while e - c ≥ -5; the field e + 126 - c ≤ 254 while e - c ≤ 128.
                let (lo, hi) = (i32::from(self.scale_bytes.0), i32::from(self.scale_bytes.1));
                let c = (hi - 128).max(0);
                if lo - c < -5 {
                    let reason = format!(
                        "MXFP4 scale bytes span {lo}..={hi}: more binades than the BF16 path holds exactly (133 at most)"
                    );
                    return Err(Error::InvalidQuery { op: OP, field: "experts", reason });
                }
                Ok((126 - c, 2f32.powi(c)))
            }
        }
    }
}

fn bad(field: &'static str, reason: String) -> Error {
    Error::InvalidQuery { op: OP, field, reason }
}

/// Every expert's FC1 and FC2, packed on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedExpertsHost {
    pub shape: Shape,
    pub fc1: PackedMatrixHost,
    pub fc2: PackedMatrixHost,
}

/// Packs `experts` (which must match `shape`) into the decode path's layout: typed errors for
/// mismatched experts or values `pack_weight` refuses (NaN scales), nothing kept.
pub fn pack_host(shape: &Shape, experts: &Experts) -> Result<PackedExpertsHost> {
    shape.validate()?;
    experts.check(shape).map_err(|reason| bad("experts", reason))?;
    let fc1 = PackedMatrixHost::pack(&experts.fc1, shape.activation.gated())?;
    let fc2 = PackedMatrixHost::pack(&experts.fc2, false)?;
    fc1.kernel_scales()?;
    fc2.kernel_scales()?;
    Ok(PackedExpertsHost { shape: *shape, fc1, fc2 })
}

/// One packed matrix kind on the device.
#[derive(Debug)]
pub struct PackedMatrix {
    pub format: Fp4,
    pub rows: usize,
    pub k: usize,
    pub rbs: usize,
    pub interleaved: bool,
    pub codes: CudaSlice<u8>,
    pub scales: CudaSlice<u8>,
    pub enc: CudaSlice<f32>,
    /// From [`PackedMatrixHost::kernel_scales`].
    pub scale_bias: i32,
    pub out_scale: f32,
}

/// Packed experts owned on the device (what `fused_moe::run` takes for a
/// [`WeightLayout::Packed`](super::WeightLayout::Packed) plan); dropping it frees them.
#[derive(Debug)]
pub struct PackedExperts {
    pub shape: Shape,
    pub fc1: PackedMatrix,
    pub fc2: PackedMatrix,
}

impl PackedExperts {
    /// Uploads `host` on `stream` (synchronously: a load-time step, never inside a graph).
    pub fn upload(host: &PackedExpertsHost, stream: &Arc<CudaStream>) -> Result<PackedExperts> {
        let up = |m: &PackedMatrixHost| -> Result<PackedMatrix> {
            let (scale_bias, out_scale) = m.kernel_scales()?;
            Ok(PackedMatrix {
                format: m.format,
                rows: m.rows,
                k: m.k,
                rbs: m.rbs,
                interleaved: m.interleaved,
                codes: stream.clone_htod(&m.codes)?,
                scales: stream.clone_htod(&m.scales)?,
                enc: stream.clone_htod(&m.enc)?,
                scale_bias,
                out_scale,
            })
        };
        let out = PackedExperts { shape: host.shape, fc1: up(&host.fc1)?, fc2: up(&host.fc2)? };
        stream.synchronize()?;
        Ok(out)
    }

    /// Packs `experts` ([`pack_host`]) and uploads them.
    pub fn new(shape: &Shape, experts: &Experts, stream: &Arc<CudaStream>) -> Result<PackedExperts> {
        PackedExperts::upload(&pack_host(shape, experts)?, stream)
    }
}

/// The decode path's grouping of a call's pairs, as its route kernel writes it (the GPU suite
/// compares the scratch with this): pairs with an id in `[0, E)` sorted stably by expert into
/// rows; each expert's rows in runs of at most `slot_rows` (one slot each). With tail slots
/// ([`group_tail`]) an expert's last `c mod R` rows, when at most the tail's rows, form a tail
/// slot instead (SM90's 128-row wgmma tile: `moe_group_scan`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grouping {
    /// `{expert, first row, rows, 0}` per slot, experts ascending.
    pub slots: Vec<[i32; 4]>,
    /// The tail slots, `{expert, first row, rows, 0}`, experts ascending (empty without them).
    pub tail_slots: Vec<[i32; 4]>,
    /// Per pair its row, -1 for an id outside `[0, E)`.
    pub pair_row: Vec<i32>,
    /// Per row its token and expert.
    pub row_token: Vec<i32>,
    pub row_expert: Vec<i32>,
    /// Whether some id was outside `[0, E)`.
    pub fault: bool,
}

/// Groups `ids [T, k]` (the decode path's route kernel, on the CPU).
pub fn group(ids: &[i32], experts: usize, top_k: usize, slot_rows: usize) -> Grouping {
    group_tail(ids, experts, top_k, slot_rows, 0)
}

/// [`group`] with tail slots of `tail_rows` (0: none): an expert of `c` rows has `c / R` full
/// slots, then its last `c mod R` rows in a tail slot when `0 < c mod R ≤ tail_rows`, else in
/// one more slot (the grouped path's scan kernel, on the CPU).
pub fn group_tail(ids: &[i32], experts: usize, top_k: usize, slot_rows: usize, tail_rows: usize) -> Grouping {
    let valid = |e: i32| e >= 0 && (e as usize) < experts;
    let mut order: Vec<usize> = (0..ids.len()).filter(|&p| valid(ids[p])).collect();
    order.sort_by_key(|&p| ids[p]); // stable: pair order within an expert
    let mut g = Grouping {
        slots: Vec::new(),
        tail_slots: Vec::new(),
        pair_row: vec![-1; ids.len()],
        row_token: Vec::with_capacity(order.len()),
        row_expert: Vec::with_capacity(order.len()),
        fault: ids.iter().any(|&e| !valid(e)),
    };
    for (row, &p) in order.iter().enumerate() {
        g.pair_row[p] = row as i32;
        g.row_token.push((p / top_k) as i32);
        g.row_expert.push(ids[p]);
    }
    let mut r = 0;
    while r < order.len() {
        let e = ids[order[r]];
        let end = r + order[r..].iter().take_while(|&&p| ids[p] == e).count();
        let mut s = r;
        while s < end {
            let n = slot_rows.min(end - s);
            let slots = if n < slot_rows && n <= tail_rows { &mut g.tail_slots } else { &mut g.slots };
            slots.push([e, s as i32, n as i32, 0]);
            s += n;
        }
        r = end;
    }
    g
}

/// The slots of [`group`] the way each decode FC1 CTA computes them from `ids` when it streams
/// weights before the route finishes (`moe_local_slots`, `P ≤ EARLY_PAIRS`): pair p counts the
/// valid pairs with a smaller expert (its expert's first row) and with its expert (the count);
/// the expert's first pair writes `⌈count / R⌉` slots after those of the smaller experts. Equal
/// to `group(ids, ..).slots` for any ids (the test `local_slots_equal_the_route_s`).
pub fn local_slots(ids: &[i32], experts: usize, slot_rows: usize) -> Vec<[i32; 4]> {
    let r = slot_rows as i32;
    let e: Vec<i32> = ids.iter().map(|&i| if i >= 0 && (i as usize) < experts { i } else { -1 }).collect();
    let valid = || e.iter().copied().enumerate().filter(|&(_, f)| f >= 0);
    let mut nslots = vec![0; e.len()];
    let mut mine = Vec::new();
    for (p, &ep) in e.iter().enumerate() {
        if ep < 0 {
            continue;
        }
        let below = valid().filter(|&(_, f)| f < ep).count() as i32;
        let count = valid().filter(|&(_, f)| f == ep).count() as i32;
        let first = !valid().any(|(j, f)| f == ep && j < p);
        if first {
            nslots[p] = (count + r - 1) / r;
            mine.push((p, ep, below, count));
        }
    }
    let n: i32 = nslots.iter().sum();
    let mut slots = vec![[0; 4]; n as usize];
    for (_, ep, below, count) in mine {
        let before: i32 = e.iter().zip(&nslots).filter(|&(&f, _)| f < ep).map(|(_, &c)| c).sum();
        for m in 0..(count + r - 1) / r {
            slots[(before + m) as usize] = [ep, below + m * r, r.min(count - m * r), 0];
        }
    }
    slots
}

/// The most slots a call with `pairs` pairs can have: `min(E, P) + ⌊P / R⌋`.
pub fn max_slots(experts: usize, pairs: usize, slot_rows: usize) -> usize {
    experts.min(pairs) + pairs / slot_rows
}
