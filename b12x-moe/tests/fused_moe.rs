//! CPU tests of `moe.fused_moe`'s oracle (`fused_moe::reference`): the activations against hand
//! values; structured experts that expose the layout (gate rows before up rows, FC2 `[Hd, I]`,
//! the routing weight before FC2); an independent straight per-token loop on random FP4
//! experts for every recipe; slot order, masking of bad ids, experts without tokens; the
//! recipes' activation quantization; the shape's typed errors and the model presets.

mod common;

use b12x_core::half::bf16;
use b12x_core::Error;
use b12x_moe::fused_moe::reference::{act_operand, activate, expert, fused_moe, ActScales, ExpertMatrix, Experts};
use b12x_moe::fused_moe::{Activation, Fp4, Recipe, Shape, FAULT_EXPERT_ID};
use b12x_quant::codec::e2m1_decode;
use rand::{Rng, SeedableRng};
use rstest::rstest;

fn tiny(activation: Activation, recipe: Recipe) -> Shape {
    Shape { experts: 4, top_k: 2, hidden: 64, inter: 32, activation, recipe }
}

#[test]
fn activations_match_hand_values() {
    let silu = |g: f64| g / (1.0 + (-g).exp());
    let act = Activation::Silu { limit: Some(10.0) };
    // g clamped to 10 from above, u to [-10, 10].
    let want = (silu(10.0) as f32) * -10.0;
    assert!((activate(act, 20.0, -20.0) - want).abs() <= 1e-5 * want.abs());
    // g below the limit is not clamped from below.
    let want = silu(-20.0) as f32 * 3.0;
    assert!((activate(act, -20.0, 3.0) - want).abs() <= 1e-5 * want.abs());
    let oai = Activation::SwigluOai { limit: 7.0 };
    assert_eq!(activate(oai, 0.0, 5.0), 0.0);
    assert_eq!(activate(oai, 3.0, -1.0), 0.0);
    // (u + 1) · g · σ(1.702 g) with g = min(9, 7) = 7, u = clamp(-9) = -7.
    let want = (-6.0 * 7.0 / (1.0 + (-1.702f64 * 7.0).exp())) as f32;
    assert!((activate(oai, 9.0, -9.0) - want).abs() <= 1e-5 * want.abs());
    assert_eq!(activate(Activation::Relu2, -3.0, 100.0), 0.0);
    assert_eq!(activate(Activation::Relu2, 3.0, 100.0), 9.0);
    assert!(activate(Activation::Silu { limit: Some(10.0) }, f32::NAN, 1.0).is_nan());
}

/// An MXFP4 matrix `[rows, K]` from E2M1 codes (scale 1: UE8M0 code 127).
fn mxfp4_of(rows: usize, k: usize, code: impl Fn(usize, usize) -> u8) -> ExpertMatrix {
    let codes: Vec<u8> = (0..rows * k).map(|i| code(i / k, i % k)).collect();
    let packed = b12x_quant::codec::pack_e2m1(&codes);
    ExpertMatrix::Mxfp4(b12x_quant::block::Mx {
        element: b12x_quant::codec::Element::E2M1,
        rows,
        k,
        codes: packed,
        scales: vec![127; rows * k / 32],
    })
}

/// Structured experts: x = ones. Expert e's gate row j sums to (j % 4 + 1) · 0.5, its up row j
/// to e + 1; FC2 copies h (Hd = 2·I: output o takes h[o % I] with weight 1). A swapped gate/up
/// half, a transposed FC2 or the routing weight applied elsewhere changes y.
#[test]
fn structured_experts_expose_the_layout() {
    let shape = Shape {
        experts: 3,
        top_k: 2,
        hidden: 64,
        inter: 32,
        activation: Activation::Silu { limit: None },
        recipe: Recipe::W4a16(Fp4::Mxfp4),
    };
    let (hd, i) = (64, 32);
    // E2M1 codes: 1 = 0.5, 2 = 1.0, 0 = 0.
    let fc1: Vec<ExpertMatrix> = (0..3)
        .map(|e| {
            mxfp4_of(2 * i, hd, |r, c| {
                if r < i {
                    // gate row r: (r % 4 + 1) entries of 0.5
                    u8::from(c < r % 4 + 1)
                } else {
                    // up row: e + 1 entries of 1.0
                    if c < e + 1 {
                        2
                    } else {
                        0
                    }
                }
            })
        })
        .collect();
    let fc2: Vec<ExpertMatrix> = (0..3).map(|_| mxfp4_of(hd, i, |o, j| if j == o % i { 2 } else { 0 })).collect();
    let experts = Experts { fc1, fc2 };
    assert_eq!(e2m1_decode(1), 0.5);
    let x = vec![bf16::ONE; 2 * hd];
    let ids = [2, 0, 1, 9];
    let w = [0.75f32, 0.25, 1.0, 0.5];
    let out = fused_moe(&shape, &experts, &x, &ids, &w, None).unwrap();
    assert_eq!(out.faults, FAULT_EXPERT_ID);
    let y_e = |e: usize, wt: f32, o: usize| {
        let g = ((o % i) % 4 + 1) as f32 * 0.5;
        let u = (e + 1) as f32;
        bf16::from_f32(wt * b12x_core::testing::silu_mul(g, u, None)).to_f32()
    };
    for o in 0..hd {
        let want0 = bf16::from_f32(y_e(2, 0.75, o) + y_e(0, 0.25, o));
        let want1 = bf16::from_f32(y_e(1, 1.0, o));
        assert_eq!((out.y[o], out.y[hd + o]), (want0, want1), "output {o}");
    }
}

/// A straight per-token loop written independently of the oracle's expert grouping: dequantize
/// the expert, FC1 rows as f64 sums, the rounding points of the module docs.
fn naive(
    shape: &Shape,
    experts: &Experts,
    x: &[bf16],
    ids: &[i32],
    w: &[f32],
    scales: Option<&ActScales>,
) -> Vec<bf16> {
    let (hd, i, k) = (shape.hidden, shape.inter, shape.top_k);
    let mut y = Vec::new();
    for (t, xt) in x.chunks(hd).enumerate() {
        let mut acc = vec![0.0f32; hd];
        for s in 0..k {
            let e = ids[t * k + s];
            if e < 0 || e as usize >= shape.experts {
                continue;
            }
            let e = e as usize;
            let w1 = experts.fc1[e].dequantize();
            let w2 = experts.fc2[e].dequantize();
            let xs = act_operand(shape.recipe, xt, scales.map(|a| a.fc1[e])).unwrap();
            let mut h = vec![bf16::ZERO; i];
            for (j, hj) in h.iter_mut().enumerate() {
                let dot = |r: usize| {
                    let mut s = 0.0f64;
                    for c in 0..hd {
                        s += f64::from(xs[c]) * f64::from(w1[r * hd + c]);
                    }
                    bf16::from_f32(s as f32).to_f32()
                };
                let g = dot(j);
                let u = if shape.activation.gated() { dot(i + j) } else { 0.0 };
                *hj = bf16::from_f32(w[t * k + s] * activate(shape.activation, g, u));
            }
            let hs = act_operand(shape.recipe, &h, scales.map(|a| a.fc2[e])).unwrap();
            for (o, a) in acc.iter_mut().enumerate() {
                let mut s = 0.0f64;
                for j in 0..i {
                    s += f64::from(hs[j]) * f64::from(w2[o * i + j]);
                }
                *a += bf16::from_f32(s as f32).to_f32();
            }
        }
        y.extend(acc.iter().map(|&v| bf16::from_f32(v)));
    }
    y
}

fn random_case(shape: &Shape, t: usize, seed: u64) -> (Experts, Vec<bf16>, Vec<i32>, Vec<f32>, ActScales) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (e, hd, i, k) = (shape.experts, shape.hidden, shape.inter, shape.top_k);
    let fc1: Vec<f32> = (0..e * shape.fc1_rows() * hd).map(|_| rng.random_range(-0.2f32..0.2)).collect();
    let fc2: Vec<f32> = (0..e * hd * i).map(|_| rng.random_range(-0.2f32..0.2)).collect();
    let experts = Experts::quantize(shape, &fc1, &fc2).unwrap();
    let x: Vec<bf16> = (0..t * hd).map(|_| bf16::from_f32(rng.random_range(-2.0f32..2.0))).collect();
    // Distinct experts per token (as routing gives), weights in (0, 1].
    let mut ids = Vec::new();
    for _ in 0..t {
        let mut pick: Vec<i32> = (0..e as i32).collect();
        for s in 0..k {
            let j = rng.random_range(s..e);
            pick.swap(s, j);
        }
        ids.extend(&pick[..k]);
    }
    let w: Vec<f32> = (0..t * k).map(|_| rng.random_range(0.05f32..1.0)).collect();
    let scales = ActScales {
        fc1: (0..e).map(|_| 2688.0 / rng.random_range(1.5f32..2.0)).collect(),
        fc2: (0..e).map(|_| 2688.0 / rng.random_range(0.5f32..4.0)).collect(),
    };
    (experts, x, ids, w, scales)
}

#[rstest]
#[case::w4a16_nvfp4_silu(tiny(Activation::Silu { limit: None }, Recipe::W4a16(Fp4::Nvfp4)))]
#[case::w4a16_mxfp4_swiglu_oai(tiny(Activation::SwigluOai { limit: 7.0 }, Recipe::W4a16(Fp4::Mxfp4)))]
#[case::w4a8_mx_silu_limit(tiny(Activation::Silu { limit: Some(10.0) }, Recipe::W4a8Mx))]
#[case::nvfp4_relu2(tiny(Activation::Relu2, Recipe::Nvfp4))]
#[case::nvfp4_silu(tiny(Activation::Silu { limit: Some(1.0) }, Recipe::Nvfp4))]
fn oracle_equals_a_straight_loop(#[case] shape: Shape) {
    shape.validate().unwrap();
    let (experts, x, ids, w, scales) = random_case(&shape, 5, 11);
    let out = fused_moe(&shape, &experts, &x, &ids, &w, Some(&scales)).unwrap();
    assert_eq!(out.faults, 0);
    assert_eq!(out.y, naive(&shape, &experts, &x, &ids, &w, Some(&scales)));
    assert!(out.y.iter().any(|v| v.to_f32() != 0.0), "all-zero output: the case tests nothing");
}

/// Quantizing the activations changes the result (the recipes are not W4A16 in disguise), and
/// what FC1 sees is b12x-quant's quantize-then-dequantize of x.
#[test]
fn recipes_quantize_x_and_h() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
    let x: Vec<bf16> = (0..64).map(|_| bf16::from_f32(rng.random_range(-3.0f32..3.0))).collect();
    let f: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
    assert_eq!(act_operand(Recipe::W4a16(Fp4::Nvfp4), &x, None).unwrap(), f);
    let mx = act_operand(Recipe::W4a8Mx, &x, None).unwrap();
    let want = b12x_quant::block::dequantize_mx(
        &b12x_quant::block::quantize_mx(&f, 1, 64, b12x_quant::codec::Element::E4M3, Default::default()).unwrap(),
    );
    assert_eq!(mx, want);
    assert_ne!(mx, f);
    let nv = act_operand(Recipe::Nvfp4, &x, Some(896.0)).unwrap();
    assert_ne!(nv, f);
    assert!(act_operand(Recipe::Nvfp4, &x, None).is_err(), "NVFP4 needs the activation scales");
    let shape = tiny(Activation::Silu { limit: None }, Recipe::W4a8Mx);
    let (experts, x, ids, w, _) = random_case(&shape, 3, 4);
    let a = fused_moe(&shape, &experts, &x, &ids, &w, None).unwrap();
    let b = fused_moe(&Shape { recipe: Recipe::W4a16(Fp4::Mxfp4), ..shape }, &experts, &x, &ids, &w, None).unwrap();
    assert_ne!(a.y, b.y);
}

/// The routing weight multiplies before FC2: a power-of-two weight scales y exactly (W4A16:
/// h and every product scale by 2 without rounding), weight 0 gives 0; and the slots are summed
/// in order, so swapping a token's two slots may change only the last bit.
#[test]
fn routing_weight_and_slot_order() {
    let shape = Shape { top_k: 1, ..tiny(Activation::Silu { limit: None }, Recipe::W4a16(Fp4::Mxfp4)) };
    let (experts, x, ids, w, _) = random_case(&shape, 4, 8);
    let a = fused_moe(&shape, &experts, &x, &ids, &w, None).unwrap();
    let w2: Vec<f32> = w.iter().map(|v| v * 2.0).collect();
    let b = fused_moe(&shape, &experts, &x, &ids, &w2, None).unwrap();
    for (p, q) in a.y.iter().zip(&b.y) {
        assert_eq!(p.to_f32() * 2.0, q.to_f32());
    }
    let z = fused_moe(&shape, &experts, &x, &ids, &vec![0.0; w.len()], None).unwrap();
    assert!(z.y.iter().all(|v| v.to_f32() == 0.0));
    // Two slots swapped: equal up to one bf16 ulp (f32 sums of two bf16 values in either order
    // are equal; three or more may differ in rounding).
    let shape = tiny(Activation::Silu { limit: None }, Recipe::W4a16(Fp4::Mxfp4));
    let (experts, x, ids, w, _) = random_case(&shape, 4, 9);
    let a = fused_moe(&shape, &experts, &x, &ids, &w, None).unwrap();
    let sw = |v: &[i32]| v.chunks(2).flat_map(|c| [c[1], c[0]]).collect::<Vec<_>>();
    let swf = |v: &[f32]| v.chunks(2).flat_map(|c| [c[1], c[0]]).collect::<Vec<_>>();
    let b = fused_moe(&shape, &experts, &x, &sw(&ids), &swf(&w), None).unwrap();
    assert_eq!(a.y, b.y);
}

/// Bad ids are skipped and reported; an expert no token picked is never touched; an id equal to
/// E (one past the end) and negative ids both count as bad.
#[test]
fn bad_ids_are_masked() {
    let shape = tiny(Activation::Silu { limit: Some(10.0) }, Recipe::W4a16(Fp4::Nvfp4));
    let (experts, x, _, w, _) = random_case(&shape, 3, 6);
    let good = [0, 1, 1, 0, 0, 1];
    let bad = [0, 4, -1, 0, 0, 1];
    let a = fused_moe(&shape, &experts, &x, &good, &w, None).unwrap();
    let b = fused_moe(&shape, &experts, &x, &bad, &w, None).unwrap();
    assert_eq!((a.faults, b.faults), (0, FAULT_EXPERT_ID));
    let hd = shape.hidden;
    // Token 2 is unchanged; token 0 has only slot 0; token 1 only slot 1 (expert 0).
    assert_eq!(a.y[2 * hd..], b.y[2 * hd..]);
    let only = |id: i32, wt: f32, tok: usize| {
        let one = Shape { top_k: 1, ..shape };
        fused_moe(&one, &experts, &x[tok * hd..][..hd], &[id], &[wt], None).unwrap().y
    };
    assert_eq!(&b.y[..hd], &only(0, w[0], 0)[..]);
    assert_eq!(&b.y[hd..2 * hd], &only(0, w[3], 1)[..]);
    // Experts 2 and 3 receive no token: replacing them with garbage changes nothing.
    let mut other = experts.clone();
    other.fc2[3] = other.fc2[0].clone();
    other.fc1[2] = other.fc1[1].clone();
    assert_eq!(fused_moe(&shape, &other, &x, &good, &w, None).unwrap(), a);
}

/// `expert` alone is the layer with k = 1 and weight 1.
#[test]
fn expert_is_the_single_slot_layer() {
    let shape = Shape { top_k: 1, ..tiny(Activation::SwigluOai { limit: 7.0 }, Recipe::W4a16(Fp4::Mxfp4)) };
    let (experts, x, _, _, _) = random_case(&shape, 1, 12);
    let y = expert(&shape, &experts.fc1[3].dequantize(), &experts.fc2[3].dequantize(), &x, 1.0, None).unwrap();
    assert_eq!(fused_moe(&shape, &experts, &x, &[3], &[1.0], None).unwrap().y, y);
}

#[test]
fn experts_check_names_the_mismatch() {
    let shape = tiny(Activation::Silu { limit: None }, Recipe::W4a16(Fp4::Nvfp4));
    let (experts, ..) = random_case(&shape, 1, 1);
    experts.check(&shape).unwrap();
    let mx = Shape { recipe: Recipe::W4a16(Fp4::Mxfp4), ..shape };
    assert!(experts.check(&mx).unwrap_err().contains("fc1[0]"));
    let relu = Shape { activation: Activation::Relu2, ..shape };
    assert!(experts.check(&relu).unwrap_err().contains("fc1[0]"), "gated FC1 has 2·I rows");
    let fewer = Shape { experts: 3, ..shape };
    assert!(experts.check(&fewer).unwrap_err().contains("4 experts"));
}

#[rstest]
#[case::deepseek_v4_flash_tp2(Shape::deepseek_v4_flash_tp2())]
#[case::deepseek_v41_flash_tp4(Shape::deepseek_v41_flash_tp4())]
#[case::qwen3_30b_a3b(Shape::qwen3_30b_a3b())]
#[case::gpt_oss_120b(Shape::gpt_oss_120b())]
fn presets_validate(#[case] s: Shape) {
    s.validate().unwrap();
    assert_eq!(s.fc1_rows(), 2 * s.inter);
}

#[rstest]
#[case::hidden_not_block(Shape { hidden: 48, ..tiny(Activation::Relu2, Recipe::W4a8Mx) }, "hidden")]
#[case::inter_not_block_nvfp4(Shape { inter: 24, ..tiny(Activation::Relu2, Recipe::Nvfp4) }, "inter")]
#[case::inter_zero(Shape { inter: 0, ..tiny(Activation::Relu2, Recipe::Nvfp4) }, "inter")]
#[case::k_above_e(Shape { top_k: 5, ..tiny(Activation::Relu2, Recipe::Nvfp4) }, "top_k")]
#[case::no_experts(Shape { experts: 0, ..tiny(Activation::Relu2, Recipe::Nvfp4) }, "experts")]
#[case::limit_zero(tiny(Activation::Silu { limit: Some(0.0) }, Recipe::Nvfp4), "activation")]
#[case::limit_nan(tiny(Activation::SwigluOai { limit: f32::NAN }, Recipe::Nvfp4), "activation")]
fn bad_shapes_are_typed_errors(#[case] s: Shape, #[case] field: &str) {
    match s.validate() {
        Err(Error::InvalidQuery { op: "moe.fused_moe", field: f, .. }) => assert_eq!(f, field),
        other => panic!("want InvalidQuery({field}), got {other:?}"),
    }
}

/// NVFP4 with 16-wide blocks accepts K = 48 (a multiple of 16, not of 32); MX does not.
#[test]
fn block_sizes_follow_the_recipe() {
    let nv = Shape { hidden: 48, inter: 16, ..tiny(Activation::Relu2, Recipe::W4a16(Fp4::Nvfp4)) };
    nv.validate().unwrap();
    assert!(Shape { recipe: Recipe::W4a16(Fp4::Mxfp4), ..nv }.validate().is_err());
}

// ---- the op's host side: arguments, parameters, built kernels ----------------------------------

use b12x_core::{DType, TensorRef};
use b12x_moe::fused_moe::{
    ActScaleArgs, Args, ExpertWeights, FusedMoeParams, Query, RouterArgs, Routing, WeightArgs, WeightLayout,
};
use b12x_moe::route_topk::{Router, ScoreFn};
use common::{view, view_mut};

/// Arguments for `t` tokens of `s`, every tensor at its own address (1 GiB apart).
fn op_args(s: &Shape, t: usize) -> Args<'static> {
    let (e, k, hd, i, r1, b) = (s.experts, s.top_k, s.hidden, s.inter, s.fc1_rows(), s.recipe.weights().block());
    let nv = s.recipe.weights() == Fp4::Nvfp4;
    let at = |n: u64| n << 30;
    Args {
        x: view(at(1), &[t, hd], DType::BF16),
        routing: Routing::TopK { ids: view(at(2), &[t, k], DType::I32), weights: view(at(3), &[t, k], DType::F32) },
        experts: ExpertWeights::RowMajor(WeightArgs {
            w1_codes: view(at(4), &[e, r1, hd / 2], DType::U8),
            w1_scales: view(at(5), &[e, r1, hd / b], DType::U8),
            w1_enc: nv.then(|| view(at(6), &[e], DType::F32)),
            w2_codes: view(at(7), &[e, hd, i / 2], DType::U8),
            w2_scales: view(at(8), &[e, hd, i / b], DType::U8),
            w2_enc: nv.then(|| view(at(9), &[e], DType::F32)),
        }),
        act_scales: (s.recipe == Recipe::Nvfp4)
            .then(|| ActScaleArgs { fc1: view(at(12), &[e], DType::F32), fc2: view(at(13), &[e], DType::F32) }),
        y: view_mut(at(10), &[t, hd], DType::BF16),
        error: view_mut(at(11), &[1], DType::I32),
    }
}

/// The row-major weights of `a` (op_args builds them so).
fn rm<'b, 'a>(a: &'b mut Args<'a>) -> &'b mut WeightArgs<'a> {
    match &mut a.experts {
        ExpertWeights::RowMajor(w) => w,
        ExpertWeights::Packed(_) => unreachable!("op_args builds row-major weights"),
    }
}

#[test]
fn params_struct_mirrors_the_kernel() {
    assert_eq!(std::mem::size_of::<FusedMoeParams>(), 168);
}

#[test]
fn args_fill_the_params() {
    let q = Query { shape: Shape::qwen3_30b_a3b(), max_tokens: 16, layout: WeightLayout::RowMajor, router: None };
    let p = q.kernel_params(&op_args(&q.shape, 5)).unwrap();
    assert_eq!((p.tokens, p.top_k, p.experts, p.hidden, p.inter), (5, 8, 128, 2048, 768));
    assert_eq!((p.x, p.w1_enc, p.w2_enc, p.y, p.error), (1 << 30, 6 << 30, 9 << 30, 10 << 30, 11 << 30));
    assert_eq!((p.ldx, p.ldy, p.limit, p.h, p.y_pairs), (2048, 2048, f32::INFINITY, 0, 0));
    let q = Query { shape: Shape::gpt_oss_120b(), max_tokens: 1, layout: WeightLayout::RowMajor, router: None };
    let p = q.kernel_params(&op_args(&q.shape, 1)).unwrap();
    assert_eq!((p.w1_enc, p.w2_enc, p.limit), (0, 0, 7.0));
    assert_eq!(
        q.symbols(),
        [
            "b12x_fused_moe_simple_fc1_w4a16_mxfp4_oai",
            "b12x_fused_moe_simple_fc2_w4a16_mxfp4",
            "b12x_fused_moe_combine"
        ]
    );
    // Scratch: h [T·k, I] and y_pairs [T·k, Hd] bf16 (regions aligned by the layout).
    let l = q.scratch_layout();
    let sizes: Vec<(&str, usize)> = l.regions().iter().map(|r| (r.name, r.bytes)).collect();
    assert_eq!(sizes, [("h", 4 * 2880 * 2), ("y_pairs", 4 * 2880 * 2)]);
}

#[test]
fn bad_args_are_typed_errors() {
    let nv = Query { shape: Shape::qwen3_30b_a3b(), max_tokens: 4, layout: WeightLayout::RowMajor, router: None };
    let mx = Query { shape: Shape::gpt_oss_120b(), max_tokens: 4, layout: WeightLayout::RowMajor, router: None };
    let fails = |q: &Query, a: Args<'static>| q.kernel_params(&a).unwrap_err();
    assert!(matches!(fails(&nv, op_args(&nv.shape, 5)), Error::Capacity { got: 5, capacity: 4, .. }));
    let mut a = op_args(&nv.shape, 2);
    rm(&mut a).w2_enc = None;
    assert!(matches!(fails(&nv, a), Error::Shape { tensor: "w2_enc", .. }));
    let mut a = op_args(&mx.shape, 2);
    rm(&mut a).w1_enc = Some(view(6 << 30, &[128], DType::F32));
    assert!(matches!(fails(&mx, a), Error::Shape { tensor: "w1_enc", .. }));
    let mut a = op_args(&nv.shape, 2);
    // The MXFP4 scale count (K/32) for an NVFP4 shape (K/16).
    rm(&mut a).w1_scales = view(5 << 30, &[128, 1536, 2048 / 32], DType::U8);
    assert!(matches!(fails(&nv, a), Error::Shape { tensor: "w1_scales", .. }));
    let mut a = op_args(&nv.shape, 2);
    a.routing = Routing::TopK { ids: view(2 << 30, &[2, 8], DType::F32), weights: view(3 << 30, &[2, 8], DType::F32) };
    assert!(matches!(fails(&nv, a), Error::DType { tensor: "ids", .. }));
    // Logits on a query without a router, and the other way round.
    let mut a = op_args(&nv.shape, 2);
    a.routing = Routing::Logits(RouterArgs {
        logits: view(2 << 30, &[2, 128], DType::F32),
        bias: None,
        token_ids: None,
        tid2eid: None,
    });
    assert!(matches!(fails(&nv, a), Error::Shape { tensor: "routing", .. }));
    let routed = Query { router: Some(Router::qwen3_moe(128, 8)), ..nv };
    assert!(matches!(fails(&routed, op_args(&nv.shape, 2)), Error::Shape { tensor: "routing", .. }));
    let mut a = op_args(&nv.shape, 2);
    // SAFETY: never dereferenced.
    rm(&mut a).w2_codes =
        unsafe { TensorRef::from_raw(7 << 30, &[128, 2048, 384], &[2048 * 400, 400, 1], DType::U8) }.unwrap();
    assert!(matches!(fails(&nv, a), Error::Stride { tensor: "w2_codes", .. }));
    let mut a = op_args(&nv.shape, 2);
    a.y = view_mut(1 << 30, &[2, 2048], DType::BF16);
    assert!(matches!(fails(&nv, a), Error::Aliasing { .. }));
    let mut a = op_args(&nv.shape, 2);
    a.error = view_mut(10 << 30, &[1], DType::I32);
    assert!(matches!(fails(&nv, a), Error::Aliasing { .. }));
    // The NVFP4 recipe needs its activation scales, the others take none.
    let nvr = Query {
        shape: Shape { recipe: Recipe::Nvfp4, ..Shape::qwen3_30b_a3b() },
        max_tokens: 4,
        layout: WeightLayout::RowMajor,
        router: None,
    };
    let p = nvr.kernel_params(&op_args(&nvr.shape, 2)).unwrap();
    assert_eq!((p.a1_enc, p.a2_enc), (12 << 30, 13 << 30));
    let mut a = op_args(&nvr.shape, 2);
    a.act_scales = None;
    assert!(matches!(fails(&nvr, a), Error::Shape { tensor: "act_scales", .. }));
    let mut a = op_args(&nv.shape, 2);
    a.act_scales =
        Some(ActScaleArgs { fc1: view(12 << 30, &[128], DType::F32), fc2: view(13 << 30, &[128], DType::F32) });
    assert!(matches!(fails(&nv, a), Error::Shape { tensor: "act_scales", .. }));
    let mut a = op_args(&nvr.shape, 2);
    a.act_scales =
        Some(ActScaleArgs { fc1: view(12 << 30, &[127], DType::F32), fc2: view(13 << 30, &[128], DType::F32) });
    assert!(matches!(fails(&nvr, a), Error::Shape { tensor: "act_scales.fc1", .. }));
    let mut a = op_args(&nvr.shape, 2);
    a.y = view_mut(13 << 30, &[2, 2048], DType::BF16);
    assert!(matches!(fails(&nvr, a), Error::Aliasing { .. }));
    let w4a8 =
        Query { shape: Shape::deepseek_v4_flash_tp2(), max_tokens: 4, layout: WeightLayout::RowMajor, router: None };
    assert_eq!(w4a8.kernel_params(&op_args(&w4a8.shape, 3)).unwrap().a1_enc, 0);
    // Queries the simple path does not serve.
    for (q, field) in [
        (
            Query {
                shape: Shape { hidden: 8192 + 32, ..Shape::gpt_oss_120b() },
                max_tokens: 4,
                layout: WeightLayout::RowMajor,
                router: None,
            },
            "hidden",
        ),
        (Query { max_tokens: 0, ..nv }, "max_tokens"),
        (Query { max_tokens: 8192, ..nv }, "max_tokens"),
    ] {
        match q.validate() {
            Err(Error::InvalidQuery { field: f, .. }) => assert_eq!(f, field),
            other => panic!("want InvalidQuery({field}), got {other:?}"),
        }
    }
}

#[test]
fn every_symbol_is_built_for_every_arch_without_spills() {
    let mut symbols = Vec::new();
    for recipe in [Recipe::W4a16(Fp4::Nvfp4), Recipe::W4a16(Fp4::Mxfp4), Recipe::W4a8Mx, Recipe::Nvfp4] {
        for act in [Activation::Silu { limit: None }, Activation::SwigluOai { limit: 7.0 }, Activation::Relu2] {
            symbols.extend(
                Query { shape: tiny(act, recipe), max_tokens: 1, layout: WeightLayout::RowMajor, router: None }
                    .symbols(),
            );
        }
    }
    symbols.sort();
    symbols.dedup();
    // 12 FC1 (4 recipes x 3 activations) + 4 FC2 + the combine.
    assert_eq!(symbols.len(), 17);
    b12x_core::testing::check_manifest(b12x_moe::KERNEL_MANIFEST, &symbols).unwrap();
}

/// Validated on the H200 (sm_90a: suite and sanitizers); the SM120 archs are compiled only.
#[test]
fn op_is_registered_validated_on_sm90_only() {
    let info = b12x_core::list_ops().into_iter().find(|o| o.name == "moe.fused_moe").expect("registered");
    assert_eq!(info.krate, "b12x-moe");
    for (arch, v) in info.archs {
        let validated = matches!(v, b12x_core::Validation::Validated);
        assert_eq!(validated, *arch == "sm_90a", "{arch}: {v:?}");
    }
    assert_eq!(info.archs.len(), 3);
}

/// The suites' random experts match their shape, and stacking concatenates them in expert
/// order with the per-expert byte count the bench divides by.
#[rstest]
#[case::nvfp4(tiny(Activation::Silu { limit: None }, Recipe::Nvfp4))]
#[case::mxfp4_relu2(tiny(Activation::Relu2, Recipe::W4a8Mx))]
fn random_experts_stack_in_order(#[case] s: Shape) {
    let x = Experts::random(&s, 3);
    x.check(&s).unwrap();
    assert_ne!(x, Experts::random(&s, 4), "the seed matters");
    let (w1, w2) = x.stacked();
    let b = s.recipe.weights().block();
    let nv = s.recipe.weights() == Fp4::Nvfp4;
    let per1 = s.fc1_rows() * s.hidden / 2 + s.fc1_rows() * s.hidden / b + if nv { 4 } else { 0 };
    assert_eq!(
        (w1.expert_bytes, w1.codes.len(), w1.enc.len()),
        (per1, s.experts * s.fc1_rows() * s.hidden / 2, s.experts)
    );
    assert_eq!(w2.scales.len(), s.experts * s.hidden * s.inter / b);
    match (&x.fc2[2], nv) {
        (ExpertMatrix::Nvfp4(q), true) => {
            assert_eq!((&w2.codes[2 * q.codes.len()..][..q.codes.len()], w2.enc[2]), (&q.codes[..], q.enc))
        }
        (ExpertMatrix::Mxfp4(q), false) => {
            assert_eq!(&w2.scales[2 * q.scales.len()..][..q.scales.len()], &q.scales[..])
        }
        _ => panic!("wrong format"),
    }
}

// ---- the decode path's host side: packed experts, grouping, the kernels' index math ------------

use b12x_gemm::blockscaled::pack::sm90_unpermute_word;
use b12x_moe::fused_moe::packed::{self, group, group_tail, max_slots, source_row, PackedExpertsHost};
use b12x_moe::fused_moe::{
    MoeActParams, MoeGemvParams, MoeGroupParams, MoeRouteParams, MoeRowsParams, MoeTileParams, GROUPED_ABOVE, MAX_PAIRS,
};
use b12x_quant::codec::{ue4m3_decode, ue8m0_decode};
use b12x_quant::layout::swizzled_offset;

/// The gate/up interleave and the padding map packed rows one-to-one onto the matrix's rows.
#[rstest]
#[case::gated(2 * 32, true)]
#[case::gated_pad(2 * 576, true)]
#[case::plain(96, false)]
fn packed_rows_are_a_permutation(#[case] rows: usize, #[case] interleave: bool) {
    let padded = rows.div_ceil(packed::ROW_BLOCK) * packed::ROW_BLOCK;
    let mut seen = vec![false; rows];
    for r in 0..padded {
        if let Some(src) = source_row(r, rows, interleave) {
            assert!(!seen[src], "row {src} twice");
            seen[src] = true;
            if interleave {
                // MMA rows g and g + 8 of a 16-row slab: gate j and up j, j = slab · 8 + g.
                let j = 8 * (r / 16) + r % 8;
                assert_eq!(src, if r % 16 < 8 { j } else { rows / 2 + j });
            }
        }
    }
    assert!(seen.iter().all(|&s| s));
}

/// Packing is exactly invertible and pads to whole 128-row blocks per expert.
#[rstest]
#[case::nvfp4_silu(Shape { inter: 96, ..tiny(Activation::Silu { limit: None }, Recipe::W4a16(Fp4::Nvfp4)) })]
#[case::mxfp4_oai(Shape { hidden: 96, ..tiny(Activation::SwigluOai { limit: 7.0 }, Recipe::W4a8Mx) })]
#[case::mxfp4_relu2(tiny(Activation::Relu2, Recipe::W4a16(Fp4::Mxfp4)))]
fn packing_round_trips(#[case] s: Shape) {
    let x = Experts::random(&s, 5);
    let p = packed::pack_host(&s, &x).unwrap();
    assert_eq!(p.fc1.unpack(), x.fc1);
    assert_eq!(p.fc2.unpack(), x.fc2);
    let rbs1 = s.fc1_rows().div_ceil(128);
    assert_eq!((p.fc1.rbs, p.fc1.interleaved, p.fc2.interleaved), (rbs1, s.activation.gated(), false));
    assert_eq!(p.fc1.codes.len(), s.experts * rbs1 * 128 * s.hidden / 2);
    let tiles = (s.hidden / s.recipe.weights().block()).div_ceil(4);
    assert_eq!(p.fc1.scales.len(), s.experts * rbs1 * tiles * 512);
    // Experts::random's MXFP4 scale bytes 118..=124: offset 0, BF16 field e + 126.
    if s.recipe.weights() == Fp4::Mxfp4 {
        assert_eq!(p.fc1.kernel_scales().unwrap(), (126, 1.0));
    } else {
        assert_eq!(p.fc1.kernel_scales().unwrap(), (0, 128.0));
    }
    // Experts of another shape are refused.
    let other = Shape { inter: 2 * s.inter, ..s };
    assert!(matches!(packed::pack_host(&other, &x), Err(Error::InvalidQuery { field: "experts", .. })));
}

/// MXFP4 scale bytes spanning more binades than BF16 holds are refused (gemm.blockscaled's rule).
#[test]
fn mxfp4_scale_range_is_checked() {
    let s = tiny(Activation::Silu { limit: None }, Recipe::W4a16(Fp4::Mxfp4));
    let mut x = Experts::random(&s, 6);
    let mx = |x: &mut Experts| match &mut x.fc2[1] {
        ExpertMatrix::Mxfp4(q) => q.clone(),
        _ => panic!("mxfp4"),
    };
    let mut q = mx(&mut x);
    q.scales[0] = 0; // 2^-127 next to 2^-3: 124 binades, fine
    q.codes[0] = 0x11;
    x.fc2[1] = ExpertMatrix::Mxfp4(q.clone());
    packed::pack_host(&s, &x).unwrap();
    q.scales[1] = 254; // 2^127: c = 126, then 0 - 126 < -5
    q.codes[16] = 0x11;
    x.fc2[1] = ExpertMatrix::Mxfp4(q);
    assert!(matches!(packed::pack_host(&s, &x), Err(Error::InvalidQuery { field: "experts", .. })));
}

/// The grouping oracle: stable rows per expert, slots of at most R rows, bad ids dropped.
#[test]
fn grouping_is_stable_and_bounded() {
    let ids = [3, 1, 9, 1, 3, 1, -1, 1, 1];
    let g = group(&ids, 8, 3, 2);
    // Valid pairs by expert: 1 → pairs 1, 3, 5, 7, 8; 3 → 0, 4. (9 and -1 are outside [0, 8).)
    assert_eq!(g.pair_row, [5, 0, -1, 1, 6, 2, -1, 3, 4]);
    assert_eq!(g.row_token, [0, 1, 1, 2, 2, 0, 1]);
    assert_eq!(g.row_expert, [1, 1, 1, 1, 1, 3, 3]);
    assert_eq!(g.slots, [[1, 0, 2, 0], [1, 2, 2, 0], [1, 4, 1, 0], [3, 5, 2, 0]]);
    assert!(g.fault);
    assert!(!group(&[0, 1], 2, 2, 8).fault);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    for _ in 0..200 {
        let (e, k, r) = (rng.random_range(1..40), rng.random_range(1..9), [8, 16][rng.random_range(0..2)]);
        let t = rng.random_range(0..70);
        let ids: Vec<i32> = (0..t * k).map(|_| rng.random_range(-2..e as i32 + 2)).collect();
        let g = group(&ids, e, k, r);
        assert!(g.slots.len() <= max_slots(e, t * k, r), "{e} {k} {r} {t}");
        let mut next = 0;
        for s in &g.slots {
            assert!(s[2] >= 1 && s[2] as usize <= r && s[1] == next);
            next += s[2];
            assert!((0..s[2]).all(|i| g.row_expert[(s[1] + i) as usize] == s[0]));
        }
        assert_eq!(next as usize, g.row_token.len());
    }
}

/// Tail slots (SM90's 128-row wgmma tile with the 64-row one): an expert's last `c mod R` rows
/// form a tail slot when at most the tail's rows, else one more R-row slot; every row is in
/// exactly one slot of its expert, in order, and the rest of the grouping is `group`'s.
#[test]
fn tail_slots_take_an_experts_short_remainder() {
    // Expert 0: 5 rows, expert 2: 3 rows, expert 3: 1 row (R = 4, tail rows 2): expert 0 → a
    // full slot and a tail of 1; expert 2 → a slot of 3 (3 > 2); expert 3 → a tail of 1.
    let ids = [0, 2, 0, 0, 2, 3, 0, 2, 0, 1, 1, 1, 1];
    let g = group_tail(&ids, 4, 1, 4, 2);
    assert_eq!(g.slots, [[0, 0, 4, 0], [1, 5, 4, 0], [2, 9, 3, 0]]);
    assert_eq!(g.tail_slots, [[0, 4, 1, 0], [3, 12, 1, 0]]);
    let plain = group(&ids, 4, 1, 4);
    assert_eq!((&g.pair_row, &g.row_token, &g.row_expert), (&plain.pair_row, &plain.row_token, &plain.row_expert));
    assert!(plain.tail_slots.is_empty());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    for _ in 0..300 {
        let (e, k) = (rng.random_range(1..40), rng.random_range(1..9));
        let (r, tr) = [(128, 64), (8, 4), (4, 3), (16, 0)][rng.random_range(0..4)];
        let t = rng.random_range(0..200);
        let ids: Vec<i32> = (0..t * k).map(|_| rng.random_range(-2..e as i32 + 2)).collect();
        let g = group_tail(&ids, e, k, r, tr);
        let plain = group(&ids, e, k, r);
        assert_eq!(g.pair_row, plain.pair_row);
        assert!(g.slots.len() <= max_slots(e, t * k, r) && g.tail_slots.len() <= e);
        assert!(g.tail_slots.iter().all(|s| s[2] >= 1 && s[2] as usize <= tr));
        assert!(g.tail_slots.windows(2).all(|w| w[0][0] < w[1][0]), "one tail per expert, ascending");
        let mut all: Vec<[i32; 4]> = g.slots.iter().chain(&g.tail_slots).copied().collect();
        all.sort_by_key(|s| s[1]);
        let mut next = 0;
        for s in &all {
            assert!(s[2] >= 1 && s[2] as usize <= r && s[1] == next);
            next += s[2];
            assert!((0..s[2]).all(|i| g.row_expert[(s[1] + i) as usize] == s[0]));
        }
        assert_eq!(next as usize, g.row_token.len());
        // A tail holds an expert's last rows, short of R and at most the tail's rows; a full
        // slot's remainder above them stays an R-row slot.
        for s in &g.tail_slots {
            let rows = g.row_expert.iter().filter(|&&x| x == s[0]).count() as i32;
            assert_eq!(s[2], rows % r as i32);
            assert_eq!(s[1] + s[2], g.row_expert.iter().rposition(|&x| x == s[0]).unwrap() as i32 + 1);
        }
        if tr == 0 {
            assert_eq!(g, plain);
        }
    }
}

/// The decode FC1's own slots (`moe_local_slots`' counting form) equal the route's scan, for any
/// ids up to `EARLY_PAIRS` pairs: shared, distinct, repeated in a token, outside `[0, E)`.
#[test]
fn local_slots_equal_the_route_s() {
    assert_eq!(
        packed::local_slots(&[3, 1, 9, 1, 3, 1, -1, 1, 1], 8, 2),
        group(&[3, 1, 9, 1, 3, 1, -1, 1, 1], 8, 3, 2).slots
    );
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    for _ in 0..500 {
        let (e, r) = (rng.random_range(1..300), [8, 16][rng.random_range(0..2)]);
        let p = rng.random_range(0..=b12x_moe::fused_moe::EARLY_PAIRS);
        let spread = [2, 8, e as i32 + 2][rng.random_range(0..3)];
        let ids: Vec<i32> = (0..p).map(|_| rng.random_range(-2..spread.min(e as i32 + 2))).collect();
        let want = group(&ids, e, 1, r).slots;
        assert_eq!(packed::local_slots(&ids, e, r), want, "E {e} R {r} ids {ids:?}");
        assert!(want.len() <= max_slots(e, p, r) && max_slots(e, p, r) <= 72, "kMoeEarlySlots");
    }
}

/// One packed weight element: expert e's packed row r, column c (the kernels' view of the
/// layout: bit-permuted words, swizzled scales), times 1 / enc for NVFP4.
fn packed_at(m: &packed::PackedMatrixHost, e: usize, r: usize, c: usize) -> f64 {
    let (k, padded) = (m.k, m.rbs * 128);
    let row = e * padded + r;
    let word_at = row * k / 2 + (c / 8) * 4;
    let word = u32::from_le_bytes(m.codes[word_at..word_at + 4].try_into().unwrap());
    let code = ((sm90_unpermute_word(word) >> (4 * (c % 8))) & 0xF) as u8;
    let b = m.format.block();
    let per = m.scales.len() / m.experts();
    let sc = m.scales[e * per + swizzled_offset(r, c / b, k / b)];
    let v = f64::from(b12x_quant::codec::e2m1_decode(code));
    match m.format {
        Fp4::Nvfp4 => v * f64::from(ue4m3_decode(sc)) / f64::from(m.enc[e]),
        Fp4::Mxfp4 => v * f64::from(ue8m0_decode(sc)),
    }
}

/// The decode path on the CPU, with the kernels' indexing: the route's grouping, FC1 over each
/// slot's packed row blocks with the epilogue's row → (gate j, up j) map, FC2 over h's rows,
/// the combine through pair_row. Equal to the oracle within its comparison rule: the packed
/// layout, the interleave and the index math are what this checks.
fn emulate(s: &Shape, p: &PackedExpertsHost, x: &[bf16], ids: &[i32], w: &[f32], act: &ActScales) -> Vec<bf16> {
    let (k, hd, i) = (s.top_k, s.hidden, s.inter);
    let t = ids.len() / k;
    let g = group(ids, s.experts, k, if t <= 8 { 8 } else { 16 });
    let rows = g.row_token.len();
    let enc = |e: usize| (s.recipe == Recipe::Nvfp4).then(|| (act.fc1[e], act.fc2[e]));
    let mut h = vec![bf16::ZERO; rows * i];
    let mut y_rows = vec![bf16::ZERO; rows * hd];
    for sl in &g.slots {
        let e = sl[0] as usize;
        for row in sl[1] as usize..(sl[1] + sl[2]) as usize {
            let tok = g.row_token[row] as usize;
            let pair = g.pair_row.iter().position(|&r| r == row as i32).unwrap();
            let xh = act_operand(s.recipe, &x[tok * hd..][..hd], enc(e).map(|v| v.0)).unwrap();
            let dot = |r: usize| -> f32 {
                (xh.iter().enumerate().map(|(c, &v)| f64::from(v) * packed_at(&p.fc1, e, r, c)).sum::<f64>()) as f32
            };
            for local in (0..p.fc1.rbs * 128).step_by(16) {
                for gg in 0..8 {
                    let (lo, hi) =
                        (bf16::from_f32(dot(local + gg)).to_f32(), bf16::from_f32(dot(local + gg + 8)).to_f32());
                    if s.activation.gated() {
                        let j = local / 2 + gg;
                        if j < i {
                            h[row * i + j] = bf16::from_f32(w[pair] * activate(s.activation, lo, hi));
                        }
                    } else {
                        for (r, v) in [(local + gg, lo), (local + gg + 8, hi)] {
                            if r < i {
                                h[row * i + r] = bf16::from_f32(w[pair] * activate(s.activation, v, 0.0));
                            }
                        }
                    }
                }
            }
            let hh = act_operand(s.recipe, &h[row * i..][..i], enc(e).map(|v| v.1)).unwrap();
            for o in 0..hd {
                let v: f64 = hh.iter().enumerate().map(|(c, &v)| f64::from(v) * packed_at(&p.fc2, e, o, c)).sum();
                y_rows[row * hd + o] = bf16::from_f32(v as f32);
            }
        }
    }
    let mut y = Vec::with_capacity(t * hd);
    for tok in 0..t {
        for o in 0..hd {
            let acc: f32 = (0..k)
                .filter_map(|j| {
                    let r = g.pair_row[tok * k + j];
                    (r >= 0).then(|| y_rows[r as usize * hd + o].to_f32())
                })
                .sum();
            y.push(bf16::from_f32(acc));
        }
    }
    y
}

#[rstest]
#[case::nvfp4_silu(tiny(Activation::Silu { limit: Some(1.0) }, Recipe::W4a16(Fp4::Nvfp4)), 3)]
#[case::mxfp4_oai(Shape { inter: 96, ..tiny(Activation::SwigluOai { limit: 7.0 }, Recipe::W4a16(Fp4::Mxfp4)) }, 9)]
#[case::w4a8_relu2(tiny(Activation::Relu2, Recipe::W4a8Mx), 5)]
#[case::nvfp4_nvfp4(tiny(Activation::Silu { limit: None }, Recipe::Nvfp4), 2)]
fn decode_emulation_matches_the_oracle(#[case] s: Shape, #[case] t: usize) {
    let x = Experts::random(&s, 8);
    let p = packed::pack_host(&s, &x).unwrap();
    let act = ActScales::random(s.experts, 4);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(t as u64);
    let xs: Vec<bf16> = (0..t * s.hidden).map(|_| bf16::from_f32(rng.random_range(-2.0f32..2.0))).collect();
    let mut ids: Vec<i32> = (0..t * s.top_k).map(|_| rng.random_range(0..s.experts as i32)).collect();
    ids[0] = s.experts as i32; // masked
    let w: Vec<f32> = (0..t * s.top_k).map(|_| rng.random_range(0.05f32..1.0)).collect();
    let want = fused_moe(&s, &x, &xs, &ids, &w, Some(&act)).unwrap();
    let got = emulate(&s, &p, &xs, &ids, &w, &act);
    for (tok, (g, o)) in got.chunks(s.hidden).zip(want.y.chunks(s.hidden)).enumerate() {
        let (g, o): (Vec<f64>, Vec<f64>) =
            (g.iter().map(|v| v.to_f64()).collect(), o.iter().map(|v| v.to_f64()).collect());
        let cos = b12x_core::testing::cosine_diff(&g, &o);
        assert!(cos <= 2e-4, "token {tok}: 1 − cos {cos:.3e}");
    }
}

/// Swapping the interleave's halves (a layout bug) is caught by the emulation: the check above
/// can fail.
#[test]
fn decode_emulation_detects_a_layout_bug() {
    let s = tiny(Activation::Silu { limit: None }, Recipe::W4a16(Fp4::Nvfp4));
    let x = Experts::random(&s, 8);
    let mut p = packed::pack_host(&s, &x).unwrap();
    // Swap the gate and up halves of every slab of expert 0... of every expert.
    let cb = s.hidden / 2;
    for blk in 0..p.fc1.codes.len() / (16 * cb) {
        let slab = &mut p.fc1.codes[blk * 16 * cb..][..16 * cb];
        let (a, b) = slab.split_at_mut(8 * cb);
        a.swap_with_slice(b);
    }
    let act = ActScales::random(s.experts, 4);
    let xs: Vec<bf16> = (0..s.hidden).map(|c| bf16::from_f32((c % 7) as f32 / 4.0 - 0.7)).collect();
    let ids: Vec<i32> = (0..s.top_k as i32).collect();
    let w = vec![0.5f32; s.top_k];
    let want = fused_moe(&s, &x, &xs, &ids, &w, Some(&act)).unwrap();
    let got = emulate(&s, &p, &xs, &ids, &w, &act);
    let (g, o): (Vec<f64>, Vec<f64>) =
        (got.iter().map(|v| v.to_f64()).collect(), want.y.iter().map(|v| v.to_f64()).collect());
    assert!(b12x_core::testing::cosine_diff(&g, &o) > 1e-2);
}

#[test]
fn decode_params_mirror_the_kernels() {
    assert_eq!(std::mem::size_of::<MoeRouteParams>(), 136);
    assert_eq!(std::mem::size_of::<MoeGemvParams>(), 384);
    assert_eq!(std::mem::align_of::<MoeGemvParams>(), 64);
    assert_eq!(std::mem::size_of::<MoeRowsParams>(), 88);
    assert_eq!(std::mem::size_of::<MoeGroupParams>(), 176);
    assert_eq!(std::mem::size_of::<MoeTileParams>(), 200);
    assert_eq!(std::mem::size_of::<MoeActParams>(), 80);
}

/// What the packed layout serves: Hd, I multiples of 32, T·k ≤ MAX_PAIRS; every model
/// preset fits.
#[test]
fn decode_queries_are_validated() {
    let packed = WeightLayout::Packed;
    for sh in
        [Shape::deepseek_v4_flash_tp2(), Shape::deepseek_v41_flash_tp4(), Shape::qwen3_30b_a3b(), Shape::gpt_oss_120b()]
    {
        Query { shape: sh, max_tokens: MAX_PAIRS / sh.top_k, layout: packed, router: None }.validate().unwrap();
        let q = Query { shape: sh, max_tokens: MAX_PAIRS / sh.top_k + 1, layout: packed, router: None };
        assert!(matches!(q.validate(), Err(Error::InvalidQuery { field: "max_tokens", .. })));
    }
    let nv48 = Shape { hidden: 48, inter: 16, ..tiny(Activation::Relu2, Recipe::W4a16(Fp4::Nvfp4)) };
    let q = Query { shape: nv48, max_tokens: 1, layout: packed, router: None };
    assert!(matches!(q.validate(), Err(Error::InvalidQuery { field: "hidden", .. })));
    // The row-major path serves it.
    Query { layout: WeightLayout::RowMajor, ..q }.validate().unwrap();
}

#[test]
fn decode_symbols_are_built_for_every_arch_without_spills() {
    use b12x_gemm::blockscaled::gemv::{TileConfig, WgConfig};
    use b12x_moe::fused_moe::TileKernel;
    let mut symbols = Vec::new();
    for recipe in [Recipe::W4a16(Fp4::Nvfp4), Recipe::W4a16(Fp4::Mxfp4)] {
        for nt in [1, 2] {
            let q = Query {
                shape: tiny(Activation::Relu2, recipe),
                max_tokens: 1,
                layout: WeightLayout::Packed,
                router: None,
            };
            symbols.extend(q.decode_symbols(nt));
        }
    }
    // The router entry points the op launches first when its query routes logits.
    for score in [ScoreFn::Softmax, ScoreFn::Sigmoid, ScoreFn::SqrtSoftplus] {
        let router = Router { score, ..Router::qwen3_moe(4, 2) };
        let q = Query {
            shape: tiny(Activation::Relu2, Recipe::W4a16(Fp4::Nvfp4)),
            max_tokens: 1,
            layout: WeightLayout::Packed,
            router: Some(router),
        };
        symbols.extend(q.decode_symbols(1));
        symbols.extend(Query { layout: WeightLayout::RowMajor, ..q }.symbols());
    }
    for recipe in [Recipe::W4a16(Fp4::Nvfp4), Recipe::W4a16(Fp4::Mxfp4)] {
        let q = Query {
            shape: tiny(Activation::Relu2, recipe),
            max_tokens: GROUPED_ABOVE + 1,
            layout: WeightLayout::Packed,
            router: None,
        };
        for tile in [
            TileKernel::Mma(TileConfig { w8: false, wm: 2, wn: 8, stages: 6, splits: 1 }),
            TileKernel::Wgmma(WgConfig { w8: false, wn: 8, stages: 2, tail: false }),
            TileKernel::Wgmma64 { stages: 4 },
            TileKernel::Wgmma32 { stages: 4 },
        ] {
            symbols.extend(q.grouped_symbols(&tile, None, false));
            // FC1 with the activation in its epilogue: the wgmma tiles' `_act` kernels, last.
            let fused = q.grouped_symbols(&tile, None, true);
            match tile.act_symbol(if recipe.weights() == Fp4::Nvfp4 { "nvfp4" } else { "mxfp4" }) {
                Some(a) => assert_eq!(
                    (&fused[..fused.len() - 1], fused.last()),
                    (&q.grouped_symbols(&tile, None, false)[..], Some(&a))
                ),
                None => assert_eq!(fused, q.grouped_symbols(&tile, None, false)),
            }
            symbols.extend(fused);
        }
        // SM90's 128-row wgmma tile with its tail slots on the 64-row one: the same kernels,
        // the tail's last.
        let wg = TileKernel::Wgmma(WgConfig { w8: false, wn: 8, stages: 4, tail: false });
        let wg64 = TileKernel::Wgmma64 { stages: 4 };
        let f = if recipe.weights() == Fp4::Nvfp4 { "nvfp4" } else { "mxfp4" };
        let with_tail = q.grouped_symbols(&wg, Some(&wg64), false);
        assert_eq!(with_tail[..with_tail.len() - 1], q.grouped_symbols(&wg, None, false)[..]);
        assert_eq!(with_tail.last(), Some(&wg64.symbol(f)));
        // Fused: then the two `_act` kernels, the tile's and the tail's.
        let fused = q.grouped_symbols(&wg, Some(&wg64), true);
        assert_eq!(fused[..with_tail.len()], with_tail[..]);
        assert_eq!(fused[with_tail.len()..], [wg.act_symbol(f).unwrap(), wg64.act_symbol(f).unwrap()]);
    }
    symbols.sort();
    symbols.dedup();
    // route, 4 GEMVs, quant_rows, combine_rows, 3 routers; the simple path's FC1 / FC2 / combine
    // for W4A16 NVFP4 with ReLU²; the grouped path's 5 grouping kernels, 2 mma.sync tiles, 12
    // wgmma tiles (128-, 64- and 32-row, each also as `_act`; a trapping body off SM90) and
    // act_rows (the grouped GEMV runs the decode path's).
    assert_eq!(symbols.len(), 33);
    b12x_core::testing::check_manifest(b12x_moe::KERNEL_MANIFEST, &symbols).unwrap();
    // Each path's kernels are in the unit its plan loads (FUSED_MOE_DECODE_MODULE /
    // FUSED_MOE_MODULE).
    let m: serde_json::Value = serde_json::from_str(b12x_moe::KERNEL_MANIFEST).unwrap();
    let has = |unit: &str, sym: &str| m["units"][unit]["kernels"].get(sym).is_some();
    for sym in &symbols {
        let unit =
            if sym.contains("simple") || sym == "b12x_fused_moe_combine" { "fused_moe" } else { "fused_moe_decode" };
        assert!(has(unit, sym), "{sym} is not in {unit}.cu");
    }
    assert!(has("fused_moe", "b12x_fused_moe_route_topk_softmax"));
}

/// A packed plan's buckets: decode up to 8 and 16 tokens, the grouped GEMV up to `gemv_up_to`,
/// the tiled path beyond, each only where the capacity reaches; the default `gemv_up_to` keeps an
/// expert's expected rows (T·k / E) at most GEMV_ROWS_PER_EXPERT.
#[test]
fn packed_buckets_choose_the_path() {
    use b12x_moe::fused_moe::{
        packed_buckets, Path, Query, WeightLayout, GEMV_ROWS_PER_EXPERT, GEMV_ROWS_PER_EXPERT_WG64,
        WG32_ROWS_PER_EXPERT,
    };
    let spans = |max: usize, up: usize| {
        let (b, p) = packed_buckets(max, up, &[]);
        b.iter().zip(p).map(|(b, p)| (b.lo, b.hi, p)).collect::<Vec<_>>()
    };
    let split = |max: usize, up: usize, from: usize| {
        let (b, p) = packed_buckets(max, up, &[from]);
        b.iter().zip(p).map(|(b, p)| (b.lo, b.hi, p)).collect::<Vec<_>>()
    };
    let splits = |max: usize, up: usize, starts: &[usize]| {
        let (b, p) = packed_buckets(max, up, starts);
        b.iter().zip(p).map(|(b, p)| (b.lo, b.hi, p)).collect::<Vec<_>>()
    };
    use Path::{Decode, GroupedGemv, GroupedTile};
    assert_eq!(spans(5, 1365), [(1, 5, Decode)]);
    assert_eq!(spans(16, 1365), [(1, 8, Decode), (9, 16, Decode)]);
    assert_eq!(spans(100, 1365), [(1, 8, Decode), (9, 16, Decode), (17, 100, GroupedGemv)]);
    assert_eq!(
        spans(4096, 1365),
        [(1, 8, Decode), (9, 16, Decode), (17, 1365, GroupedGemv), (1366, 4096, GroupedTile)]
    );
    // At or below GROUPED_ABOVE: no grouped GEMV (the layout before session 46).
    for up in [0, 8, GROUPED_ABOVE] {
        assert_eq!(spans(4096, up), [(1, 8, Decode), (9, 16, Decode), (17, 4096, GroupedTile)]);
    }
    assert_eq!(spans(4096, usize::MAX), [(1, 8, Decode), (9, 16, Decode), (17, 4096, GroupedGemv)]);
    assert_eq!(spans(1366, 1365).last(), Some(&(1366, 1366, GroupedTile)));
    // SM90's two tiled buckets (the 64-row wgmma tile below the split, the 128-row one from it),
    // only where the split
    // falls strictly inside the tiled range.
    assert_eq!(
        split(4096, 256, 1024),
        [(1, 8, Decode), (9, 16, Decode), (17, 256, GroupedGemv), (257, 1023, GroupedTile), (1024, 4096, GroupedTile)]
    );
    assert_eq!(split(4096, 256, 4096)[3..], [(257, 4095, GroupedTile), (4096, 4096, GroupedTile)]);
    for from in [0, 17, 257, 4097, usize::MAX] {
        assert_eq!(split(4096, 256, from)[3..], [(257, 4096, GroupedTile)], "split at {from}");
    }
    assert_eq!(split(100, 16, 64)[2..], [(17, 63, GroupedTile), (64, 100, GroupedTile)]);
    // SM90's three tiled buckets (the 32-, 64- and 128-row wgmma tiles), each start only where it
    // falls strictly inside the tiled range and after the previous bucket's first T.
    assert_eq!(
        splits(4096, 341, &[683, 2731])[3..],
        [(342, 682, GroupedTile), (683, 2730, GroupedTile), (2731, 4096, GroupedTile)]
    );
    assert_eq!(splits(4096, 341, &[342, 2731])[3..], [(342, 2730, GroupedTile), (2731, 4096, GroupedTile)]);
    assert_eq!(splits(1000, 341, &[683, 2731])[3..], [(342, 682, GroupedTile), (683, 1000, GroupedTile)]);
    assert_eq!(splits(600, 341, &[683, 2731])[3..], [(342, 600, GroupedTile)]);
    let q = |shape: Shape| Query { shape, max_tokens: 4096, layout: WeightLayout::Packed, router: None };
    assert_eq!(GEMV_ROWS_PER_EXPERT, 16);
    assert_eq!(q(Shape::deepseek_v4_flash_tp2()).gemv_up_to(), 682);
    assert_eq!(q(Shape::gpt_oss_120b()).gemv_up_to(), 512);
    assert_eq!(q(Shape::qwen3_30b_a3b()).gemv_up_to(), 256);
    assert_eq!(q(Shape::deepseek_v41_flash_tp4()).gemv_up_to(), 1024);
    // SM90's bound, where the 64-row wgmma tile takes the tiled T below `wgmma_from`.
    assert_eq!(GEMV_ROWS_PER_EXPERT_WG64, 8);
    assert_eq!(q(Shape::deepseek_v4_flash_tp2()).gemv_up_to_wg64(), 341);
    assert_eq!(q(Shape::gpt_oss_120b()).gemv_up_to_wg64(), 256);
    assert_eq!(q(Shape::qwen3_30b_a3b()).gemv_up_to_wg64(), 128);
    assert_eq!(q(Shape::deepseek_v41_flash_tp4()).gemv_up_to_wg64(), 512);
    // SM90's 32-row wgmma tile while T · k / E ≤ 16 (above the grouped GEMV's 8).
    assert_eq!(WG32_ROWS_PER_EXPERT, 16);
    assert_eq!(q(Shape::deepseek_v4_flash_tp2()).wg32_up_to(), 682);
    assert_eq!(q(Shape::gpt_oss_120b()).wg32_up_to(), 512);
    assert_eq!(q(Shape::qwen3_30b_a3b()).wg32_up_to(), 256);
    assert_eq!(q(Shape::deepseek_v41_flash_tp4()).wg32_up_to(), 1024);
    // SM90's wgmma tile from T · k / E ≥ 64 (rounded up).
    assert_eq!(b12x_moe::fused_moe::WGMMA_ROWS_PER_EXPERT, 64);
    assert_eq!(q(Shape::deepseek_v4_flash_tp2()).wgmma_from(), 2731);
    assert_eq!(q(Shape::gpt_oss_120b()).wgmma_from(), 2048);
    assert_eq!(q(Shape::qwen3_30b_a3b()).wgmma_from(), 1024);
    assert_eq!(q(Shape::deepseek_v41_flash_tp4()).wgmma_from(), 4096);
}

/// The decode FC kernels' code size stays within 10% of its measured size (SASS instructions of
/// the pinned CUDA 13.0 build, without the end padding; session 45's head: sm_90a / sm_120a and
/// sm_121a; ~110–190 of them are FC1's own grouping, `moe_local_slots`, out of line after the
/// body). Session 43 measured the same body 0–12% slower at +19% instructions (the slot cache)
/// and up to 2× slower at +280% (producer-side quantization inlined into every staging row):
/// see `src/fused_moe/README.md`. Growing it on purpose means updating these numbers together
/// with the GPU measurement that justifies it.
#[test]
fn decode_kernels_stay_within_their_code_size() {
    const MEASURED: &[(&str, usize, usize)] =
        &[("mxfp4_nt1", 4087, 4434), ("mxfp4_nt2", 5753, 6068), ("nvfp4_nt1", 4191, 4518), ("nvfp4_nt2", 5856, 6161)];
    let budget = |arch: &str, name: &str| {
        let row = MEASURED.iter().find(|(k, _, _)| name == format!("b12x_fused_moe_decode_gemv_{k}"));
        row.map_or(0, |&(_, sm90, sm120)| (if arch == "sm_90a" { sm90 } else { sm120 }) * 11 / 10)
    };
    b12x_core::testing::check_sass_size(
        b12x_moe::FUSED_MOE_DECODE_FATBIN,
        b12x_moe::KERNEL_MANIFEST,
        "b12x_fused_moe_decode_gemv_",
        4,
        budget,
    )
    .unwrap();
}

/// A router must route the shape's E and k; the router symbol comes first in both paths.
#[test]
fn routers_are_checked_and_launched_first() {
    let sh = Shape::deepseek_v4_flash_tp2();
    let ok = Query {
        shape: sh,
        max_tokens: 8,
        layout: WeightLayout::Packed,
        router: Some(Router::deepseek_v4(256, 6, None)),
    };
    ok.validate().unwrap();
    assert_eq!(ok.decode_symbols(1)[0], "b12x_fused_moe_route_topk_sqrtsoftplus");
    assert_eq!(Query { layout: WeightLayout::RowMajor, ..ok }.symbols()[0], "b12x_fused_moe_route_topk_sqrtsoftplus");
    assert_eq!(Query { router: None, ..ok }.decode_symbols(1)[0], "b12x_fused_moe_route");
    for r in [Router::deepseek_v4(128, 6, None), Router::deepseek_v4(256, 8, None)] {
        let q = Query { router: Some(r), ..ok };
        assert!(matches!(q.validate(), Err(Error::InvalidQuery { field: "router", .. })), "{r:?}");
    }
}

/// The grouped path's activation kernel reads FC1's output in the packed row order: gate j at
/// column 16 (j / 8) + j % 8 and up j 8 further (`act_rows`), the inverse of the interleave.
#[test]
fn grouped_activation_reads_the_interleave() {
    for i in [32usize, 96, 576] {
        for j in 0..i {
            let gate = 16 * (j / 8) + j % 8;
            assert_eq!(source_row(gate, 2 * i, true), Some(j));
            assert_eq!(source_row(gate + 8, 2 * i, true), Some(i + j));
        }
    }
}

/// SM90's wgmma tiles read x̂ / h in each 32-k group's fragment order (`kperm`,
/// `kernels/fused_moe_decode.cu`): `moe_store_group` stores bf16 pair 4 V + t of a group from
/// pair 4 t + V of the row, and a lane t of the tile takes its A registers for k16 step 2c + h2
/// from word t of group c (8 consecutive k) — pair<2 h2> for MMA slots (2t, 2t + 1), pair<2 h2 + 1>
/// for (2t + 8, 2t + 9) — times the block scale at byte 2 (c & 1) + t / 2 of scale word c / 2
/// (NVFP4) or byte c (MXFP4). Emulated per MMA slot with integers: the group's two steps sum to
/// its k-order dot product, scales included; x in k order (no permutation) does not.
#[test]
fn wgmma_fragment_order_keeps_the_dot_product() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(60);
    for nvfp4 in [false, true] {
        // One 128-k tile: 16 weight rows (a warp's g / g + 8 rows), scales per 16-k block.
        let w: Vec<Vec<i64>> = (0..16).map(|_| (0..128).map(|_| rng.random_range(-6..=6)).collect()).collect();
        let sc: Vec<Vec<i64>> = (0..16).map(|_| (0..8).map(|_| rng.random_range(1..=9)).collect()).collect();
        let x: Vec<i64> = (0..128).map(|_| rng.random_range(-9..=9)).collect();
        // The weight's block of k: NVFP4 16-k blocks; MXFP4 32-k blocks (entry 2 (k / 32)).
        let block = |k: usize| if nvfp4 { k / 16 } else { k / 32 * 2 };
        let stored = |pos: usize, kperm: bool| {
            let (group, pair, half) = (pos / 32 * 32, pos % 32 / 2, pos % 2);
            let src = if kperm { 4 * (pair % 4) + pair / 4 } else { pair };
            x[group + 2 * src + half]
        };
        for kperm in [true, false] {
            let mut mismatches = 0;
            for c in 0..4 {
                for (r, (wr, sr)) in w.iter().zip(&sc).enumerate() {
                    let want: i64 = (32 * c..32 * c + 32).map(|k| wr[k] * sr[block(k)] * x[k]).sum();
                    let mut got = 0;
                    for h2 in 0..2 {
                        for slot in 0..16 {
                            let (t, e, q) = (slot % 8 / 2, slot % 2, 2 * h2 + slot / 8);
                            let k = 32 * c + 8 * t + 2 * q + e;
                            let b = if nvfp4 {
                                let (word, byte) = (c >> 1, (16 * (c & 1) + 8 * (t >> 1)) / 8);
                                4 * word + byte
                            } else {
                                2 * c
                            };
                            got += wr[k] * sr[b] * stored(32 * c + 16 * h2 + slot, kperm);
                        }
                    }
                    if kperm {
                        assert_eq!(got, want, "row {r}, group {c}, nvfp4 {nvfp4}");
                    } else if got != want {
                        mismatches += 1;
                    }
                }
            }
            assert!(kperm || mismatches > 0, "x in k order must not match the fragment order");
        }
    }
}

/// FC1's fused activation epilogue (SM90's wgmma tiles, `moe_act_epilogue` in
/// `kernels/fused_moe_decode.cu`): warp wl of warpgroup wgi in N tile nt holds FC1 rows r + g and
/// r + 8 + g (r = 256 nt + 64 wgi + 16 wl), lane (g, t) tokens 8 jt + 2t + b; after the lane ^ 4
/// exchange the even lane stores token 2t's pair, the odd lane token 2t + 1's, at element
/// 32 (r / 64) + 2 (4 (g / 2) + (r / 16) % 4) of the token's h row. Emulated over a slot's whole
/// (token, j) set: the lane's rows are the gate and the up row of one j, and every word the
/// activation kernel stores (`moe_store_group`: word 4 (a % 4) + a / 4 of group G holds pair a of
/// the group's k order) is stored exactly once, with that pair's two j.
#[test]
fn fused_activation_epilogue_stores_the_activation_kernels_words() {
    use std::collections::HashMap;
    for inter in [32usize, 96, 768, 2880] {
        let (n, rows) = (2 * inter, 32usize);
        let mut stored: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
        for nt in 0..n.div_ceil(256) {
            for (wgi, wl) in (0..4).flat_map(|a| (0..4).map(move |b| (a, b))) {
                let r = 256 * nt + 64 * wgi + 16 * wl;
                if r >= n {
                    continue;
                }
                for lane in 0..32 {
                    let (g, t, odd) = (lane / 4, lane % 4, lane / 4 % 2 == 1);
                    let j = source_row(r + g, n, true).unwrap();
                    assert_eq!(source_row(r + 8 + g, n, true), Some(inter + j), "up row of j {j}");
                    let other = source_row(r + (g ^ 1), n, true).unwrap();
                    for jt in 0..rows / 8 {
                        let tok = 8 * jt + 2 * t + usize::from(odd);
                        let pair = if odd { (other, j) } else { (j, other) };
                        let elem = 32 * (r / 64) + 2 * (4 * (g / 2) + (r / 16) % 4);
                        assert!(stored.insert((tok, elem), pair).is_none(), "inter {inter}: ({tok}, {elem}) twice");
                    }
                }
            }
        }
        for tok in 0..rows {
            for group in 0..inter / 32 {
                for pos in 0..16 {
                    let a = 4 * (pos % 4) + pos / 4;
                    let want = (32 * group + 2 * a, 32 * group + 2 * a + 1);
                    assert_eq!(stored.remove(&(tok, 32 * group + 2 * pos)), Some(want), "inter {inter}, token {tok}");
                }
            }
        }
        assert!(stored.is_empty(), "inter {inter}: {} words outside h", stored.len());
    }
}
