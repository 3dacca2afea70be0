//! CPU tests of `moe.route_topk`'s oracle (`route_topk::reference`): scores against hand
//! values, the selection order (ties, NaN), the bias's role, renormalization and the route
//! scale, hash routing with bad entries, gpt-oss's softmax-after-top-k equivalence, the
//! tolerance rule for kernels' selections, and the query's typed errors.

mod common;

use b12x_core::Error;
use b12x_moe::route_topk::reference::{check_selection, keys, route, route_hash, scores, top_k, weights};
use b12x_moe::route_topk::{Router, ScoreFn, Selection, FAULT_EXPERT_ID, FAULT_TOKEN_ID};
use rand::{Rng, SeedableRng};
use rstest::rstest;

#[test]
fn scores_match_hand_values() {
    let s = scores(ScoreFn::Sigmoid, &[0.0, f32::NEG_INFINITY, f32::INFINITY]);
    assert_eq!(s, vec![0.5, 0.0, 1.0]);
    let s = scores(ScoreFn::SqrtSoftplus, &[0.0, 30.0, f32::NEG_INFINITY, -100.0]);
    assert_eq!(s[0], (2f64.ln().sqrt()) as f32);
    // Above PyTorch's threshold softplus is z itself.
    assert_eq!(s[1], 30f32.sqrt());
    assert_eq!(s[2], 0.0);
    assert!(s[3] > 0.0 && s[3] < 1e-21, "sqrt(softplus(-100)) = sqrt(e^-100) ≈ 1.9e-22, got {}", s[3]);
    let s = scores(ScoreFn::Softmax, &[0.0, 0.0, 0.0, 0.0]);
    assert_eq!(s, vec![0.25; 4]);
    let s = scores(ScoreFn::Softmax, &[1.0, 2.0, 3.0]);
    let e = [(-2f64).exp(), (-1f64).exp(), 1.0];
    let sum: f64 = e.iter().sum();
    assert_eq!(s, e.iter().map(|v| (v / sum) as f32).collect::<Vec<_>>());
    // Softmax is shift-invariant: a large common offset changes nothing (max subtracted).
    assert_eq!(scores(ScoreFn::Softmax, &[1001.0, 1002.0, 1003.0]), s);
    // A NaN logit poisons the whole softmax row, one sigmoid.
    assert!(scores(ScoreFn::Softmax, &[1.0, f32::NAN]).iter().all(|v| v.is_nan()));
    let s = scores(ScoreFn::Sigmoid, &[1.0, f32::NAN]);
    assert!(!s[0].is_nan() && s[1].is_nan());
}

#[rstest]
#[case::ties_to_lower_id(&[1.0, 3.0, 3.0, 2.0], 3, &[1, 2, 3])]
#[case::all_equal(&[0.5, 0.5, 0.5, 0.5], 2, &[0, 1])]
#[case::nan_last(&[f32::NAN, -1.0, f32::NAN, -2.0], 4, &[1, 3, 0, 2])]
#[case::negative_zero_ties_zero(&[-0.0, 0.0, -1.0], 2, &[0, 1])]
#[case::infinities(&[f32::NEG_INFINITY, 1.0, f32::INFINITY], 3, &[2, 1, 0])]
fn top_k_order(#[case] keys: &[f32], #[case] k: usize, #[case] want: &[usize]) {
    assert_eq!(top_k(keys, k), want);
}

/// The bias moves experts into the selection, but their weights are the unbiased scores.
#[test]
fn bias_affects_selection_only() {
    let q = Router { selection: Selection::TopK { bias: true }, ..Router::deepseek_v4(4, 2, None) };
    let logits = [2.0f32, 1.0, 0.0, -1.0];
    let bias = [0.0f32, 0.0, 5.0, 0.0];
    let r = route(&q, &logits, Some(&bias));
    assert_eq!(r.ids, vec![2, 0]);
    let s = scores(q.score, &logits);
    let sum = f64::from(s[2]) + f64::from(s[0]);
    let want: Vec<f32> = [s[2], s[0]].iter().map(|&v| (f64::from(v) / sum) as f32 * 2.5).collect();
    assert_eq!(r.weights, want);
    // Without the bias: the two largest scores.
    assert_eq!(route(&q, &logits, None).ids, vec![0, 1]);
}

#[rstest]
#[case::deepseek_v4(Router::deepseek_v4(256, 6, None), 2.5)]
#[case::qwen3(Router::qwen3_moe(128, 8), 1.0)]
#[case::sigmoid_unnormalized(Router { score: ScoreFn::Sigmoid, renormalize: false, route_scale: 1.0, ..Router::deepseek_v4(64, 4, None) }, f32::NAN)]
fn weights_sum_to_the_route_scale(#[case] q: Router, #[case] want_sum: f32) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let t = 16;
    let logits: Vec<f32> = (0..t * q.experts).map(|_| rng.random_range(-4.0f32..4.0)).collect();
    let bias: Vec<f32> = (0..q.experts).map(|_| rng.random_range(-0.5f32..0.5)).collect();
    let with_bias = matches!(q.selection, Selection::TopK { bias: true });
    let r = route(&q, &logits, with_bias.then_some(&bias[..]));
    assert_eq!((r.ids.len(), r.weights.len(), r.faults), (t * q.top_k, t * q.top_k, 0));
    for tok in 0..t {
        let row = &logits[tok * q.experts..][..q.experts];
        let ids = &r.ids[tok * q.top_k..][..q.top_k];
        let w = &r.weights[tok * q.top_k..][..q.top_k];
        // The selection is the top-k of the keys, distinct and in order.
        let s = scores(q.score, row);
        let k = keys(&s, with_bias.then_some(&bias[..]));
        check_selection(&k, ids, 0.0).unwrap();
        let sum: f64 = w.iter().map(|&v| f64::from(v)).sum();
        if want_sum.is_nan() {
            // Unnormalized: each weight is its sigmoid score.
            for (&e, &wv) in ids.iter().zip(w) {
                assert_eq!(wv, s[e as usize]);
            }
        } else {
            assert!((sum - f64::from(want_sum)).abs() <= 1e-6 * f64::from(want_sum), "token {tok}: Σw = {sum}");
        }
    }
}

/// gpt-oss picks the top-k logits and softmaxes over those k: the same ids and, within an f32
/// rounding, the same weights as softmax over E then renormalization.
#[test]
fn gpt_oss_softmax_after_top_k_is_the_same() {
    let q = Router::gpt_oss(128, 4);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let logits: Vec<f32> = (0..8 * 128).map(|_| rng.random_range(-6.0f32..6.0)).collect();
    let r = route(&q, &logits, None);
    for (tok, row) in logits.chunks(128).enumerate() {
        let sel = top_k(row, 4);
        assert_eq!(sel.iter().map(|&i| i as i32).collect::<Vec<_>>(), &r.ids[tok * 4..][..4]);
        let m = f64::from(row[sel[0]]);
        let e: Vec<f64> = sel.iter().map(|&i| (f64::from(row[i]) - m).exp()).collect();
        let sum: f64 = e.iter().sum();
        for (j, v) in e.iter().enumerate() {
            let want = (v / sum) as f32;
            let got = r.weights[tok * 4 + j];
            assert!((got - want).abs() <= 2.0 * f32::EPSILON * want, "token {tok} slot {j}: {got} vs {want}");
        }
    }
}

/// Hash routing: ids from the table in table order, weights from the scores; a bad table entry
/// masks its slot (and leaves the renormalization to the others), a bad token id all k.
#[test]
fn hash_routing_masks_bad_entries() {
    let q = Router::deepseek_v4(8, 3, Some(4));
    let tid2eid = [7, 0, 3, /* row 1 */ 1, 9, 2, /* row 2 */ -1, -2, 8, /* row 3 */ 5, 5, 4];
    let logits: Vec<f32> = (0..5 * 8).map(|i| (i % 8) as f32 * 0.25 - 1.0).collect();
    let r = route_hash(&q, &logits, &[0, 1, 2, 4, 3], &tid2eid);
    assert_eq!(r.ids, vec![7, 0, 3, 1, -1, 2, -1, -1, -1, -1, -1, -1, 5, 5, 4]);
    assert_eq!(r.faults, FAULT_EXPERT_ID | FAULT_TOKEN_ID);
    let s = scores(q.score, &logits[..8]);
    assert_eq!(&r.weights[..3], &weights(&q, &s, &[7, 0, 3])[..]);
    // Token 1: slot 1 masked, the other two renormalized to 2.5 between them.
    assert_eq!(r.weights[4], 0.0);
    let w = &r.weights[3..6];
    assert!((f64::from(w[0]) + f64::from(w[2]) - 2.5).abs() < 1e-6);
    assert_eq!(w[0] / w[2], {
        let s = scores(q.score, &logits[8..16]);
        (f64::from(s[1]) / f64::from(s[2])) as f32
    });
    // Tokens 2 and 3 (every slot masked): weights 0, no division by zero.
    assert!(r.weights[6..12].iter().all(|&v| v == 0.0));
    // A repeated table entry is taken as given (two slots of expert 5).
    assert_eq!(r.weights[12], r.weights[13]);
    let clean = route_hash(&q, &logits[..8], &[3], &tid2eid);
    assert_eq!(clean.faults, 0);
}

#[test]
fn check_selection_accepts_only_near_ties() {
    let keys = [0.9f32, 0.5, 0.5000001, 0.1, 0.49];
    // The oracle: [0, 2, 1].
    check_selection(&keys, &[0, 2, 1], 0.0).unwrap();
    assert!(check_selection(&keys, &[0, 1, 2], 0.0).is_err(), "swapped near-tie with tol 0");
    check_selection(&keys, &[0, 1, 2], 1e-6).unwrap();
    // Across the k-th key: 4 (0.49) for 1 (0.5) within 0.02, not within 1e-6.
    check_selection(&keys, &[0, 2, 4], 0.02).unwrap();
    assert!(check_selection(&keys, &[0, 2, 4], 1e-6).is_err());
    assert!(check_selection(&keys, &[0, 2, 2], 1.0).is_err(), "duplicate");
    assert!(check_selection(&keys, &[0, 2, 5], 1.0).is_err(), "id past E");
    assert!(check_selection(&keys, &[3, 2, 1], 0.1).is_err(), "0.1 for 0.9");
    // Infinite keys match themselves (inf − inf is NaN; the H200 run of session 42 tripped on it).
    let inf = [1.0f32, f32::INFINITY, 0.5, f32::NEG_INFINITY];
    check_selection(&inf, &[1, 0], 0.0).unwrap();
    assert!(check_selection(&inf, &[0, 1], 0.0).is_err());
}

#[rstest]
#[case::no_experts(Router { experts: 0, ..Router::qwen3_moe(8, 2) }, "experts")]
#[case::too_many_experts(Router { experts: 5000, ..Router::qwen3_moe(8, 2) }, "experts")]
#[case::k_zero(Router::qwen3_moe(8, 0), "top_k")]
#[case::k_above_e(Router::qwen3_moe(4, 5), "top_k")]
#[case::k_above_max(Router::qwen3_moe(256, 33), "top_k")]
#[case::scale_zero(Router { route_scale: 0.0, ..Router::qwen3_moe(8, 2) }, "route_scale")]
#[case::scale_nan(Router { route_scale: f32::NAN, ..Router::qwen3_moe(8, 2) }, "route_scale")]
#[case::empty_table(Router::deepseek_v4(8, 2, Some(0)), "selection")]
fn bad_queries_are_typed_errors(#[case] q: Router, #[case] field: &str) {
    match q.validate() {
        Err(Error::InvalidQuery { op: "moe.route_topk", field: f, .. }) => assert_eq!(f, field),
        other => panic!("want InvalidQuery({field}), got {other:?}"),
    }
}

#[rstest]
#[case::deepseek_v4(Router::deepseek_v4(384, 6, None))]
#[case::deepseek_v4_hash(Router::deepseek_v4(256, 6, Some(129280)))]
#[case::qwen3_30b_a3b(Router::qwen3_moe(128, 8))]
#[case::gpt_oss_120b(Router::gpt_oss(128, 4))]
fn presets_validate(#[case] q: Router) {
    q.validate().unwrap();
}

// ---- the op's host side: arguments, parameters, built kernels ----------------------------------

use b12x_core::{DType, TensorRef};
use b12x_moe::route_topk::{Args, Query as OpQuery, RouteTopkParams, FLAG_BIAS, FLAG_HASH, FLAG_RENORMALIZE};
use common::{view, view_mut};

/// Arguments for `t` tokens of `r`, every tensor at its own address.
fn op_args(r: &Router, t: usize) -> Args<'static> {
    let (e, k) = (r.experts, r.top_k);
    let hash = match r.selection {
        Selection::Hash { vocab } => Some(vocab),
        Selection::TopK { .. } => None,
    };
    Args {
        logits: view(0x1000_0000, &[t, e], DType::F32),
        bias: matches!(r.selection, Selection::TopK { bias: true }).then(|| view(0x2000_0000, &[e], DType::F32)),
        token_ids: hash.map(|_| view(0x3000_0000, &[t], DType::I32)),
        tid2eid: hash.map(|v| view(0x4000_0000, &[v, k], DType::I32)),
        ids: view_mut(0x5000_0000, &[t, k], DType::I32),
        weights: view_mut(0x6000_0000, &[t, k], DType::F32),
        error: view_mut(0x7000_0000, &[1], DType::I32),
    }
}

#[test]
fn params_struct_mirrors_the_kernel() {
    assert_eq!(std::mem::size_of::<RouteTopkParams>(), 104);
}

#[test]
fn args_fill_the_params() {
    let q = OpQuery { router: Router::deepseek_v4(256, 6, None), max_tokens: 64 };
    let p = q.kernel_params(&op_args(&q.router, 5)).unwrap();
    assert_eq!((p.tokens, p.experts, p.top_k, p.logits_stride, p.ids_stride, p.weights_stride), (5, 256, 6, 256, 6, 6));
    assert_eq!(
        (p.logits, p.bias, p.ids, p.weights, p.error),
        (0x1000_0000, 0x2000_0000, 0x5000_0000, 0x6000_0000, 0x7000_0000)
    );
    assert_eq!((p.flags, p.route_scale, p.token_ids, p.tid2eid), (FLAG_RENORMALIZE | FLAG_BIAS, 2.5, 0, 0));
    let q = OpQuery { router: Router::deepseek_v4(256, 6, Some(100)), max_tokens: 64 };
    let p = q.kernel_params(&op_args(&q.router, 5)).unwrap();
    assert_eq!(
        (p.flags, p.vocab, p.bias, p.token_ids, p.tid2eid),
        (FLAG_RENORMALIZE | FLAG_HASH, 100, 0, 0x3000_0000, 0x4000_0000)
    );
    let q = OpQuery { router: Router { renormalize: false, ..Router::qwen3_moe(128, 8) }, max_tokens: 1 };
    assert_eq!(q.kernel_params(&op_args(&q.router, 1)).unwrap().flags, 0);
    // T = 0 is a valid (empty) call.
    assert_eq!(q.kernel_params(&op_args(&q.router, 0)).unwrap().tokens, 0);
    assert_eq!(q.symbol(), "b12x_route_topk_softmax");
}

#[test]
fn bad_args_are_typed_errors() {
    let biased = OpQuery { router: Router::deepseek_v4(256, 6, None), max_tokens: 8 };
    let hashed = OpQuery { router: Router::deepseek_v4(256, 6, Some(100)), max_tokens: 8 };
    let plain = OpQuery { router: Router::qwen3_moe(128, 8), max_tokens: 8 };
    let fails = |q: &OpQuery, a: Args<'static>| q.kernel_params(&a).unwrap_err();
    assert!(matches!(fails(&biased, op_args(&biased.router, 9)), Error::Capacity { got: 9, capacity: 8, .. }));
    let mut a = op_args(&biased.router, 2);
    a.bias = None;
    assert!(matches!(fails(&biased, a), Error::Shape { tensor: "bias", .. }));
    let mut a = op_args(&plain.router, 2);
    a.bias = Some(view(0x2000_0000, &[128], DType::F32));
    assert!(matches!(fails(&plain, a), Error::Shape { tensor: "bias", .. }));
    let mut a = op_args(&biased.router, 2);
    a.bias = Some(view(0x2000_0000, &[255], DType::F32));
    assert!(matches!(fails(&biased, a), Error::Shape { tensor: "bias", .. }));
    let mut a = op_args(&hashed.router, 2);
    a.tid2eid = None;
    assert!(matches!(fails(&hashed, a), Error::Shape { tensor: "tid2eid", .. }));
    let mut a = op_args(&hashed.router, 2);
    a.tid2eid = Some(view(0x4000_0000, &[99, 6], DType::I32));
    assert!(matches!(fails(&hashed, a), Error::Shape { tensor: "tid2eid", .. }));
    let mut a = op_args(&hashed.router, 2);
    a.token_ids = Some(view(0x3000_0000, &[2], DType::F32));
    assert!(matches!(fails(&hashed, a), Error::DType { tensor: "token_ids", .. }));
    let mut a = op_args(&biased.router, 2);
    a.token_ids = Some(view(0x3000_0000, &[2], DType::I32));
    assert!(matches!(fails(&biased, a), Error::Shape { tensor: "token_ids", .. }));
    let mut a = op_args(&plain.router, 2);
    a.ids = view_mut(0x5000_0000, &[2, 8], DType::F32);
    assert!(matches!(fails(&plain, a), Error::DType { tensor: "ids", .. }));
    let mut a = op_args(&plain.router, 2);
    a.weights = view_mut(0x6000_0000, &[2, 7], DType::F32);
    assert!(matches!(fails(&plain, a), Error::Shape { tensor: "weights", .. }));
    let mut a = op_args(&plain.router, 2);
    a.logits = view(0x1000_0000, &[2, 64], DType::F32);
    assert!(matches!(fails(&plain, a), Error::Shape { tensor: "logits", .. }));
    // Outputs over an input or over each other.
    let mut a = op_args(&plain.router, 2);
    a.weights = view_mut(0x1000_0000, &[2, 8], DType::F32);
    assert!(matches!(fails(&plain, a), Error::Aliasing { .. }));
    let mut a = op_args(&plain.router, 2);
    a.error = view_mut(0x5000_0004, &[1], DType::I32);
    assert!(matches!(fails(&plain, a), Error::Aliasing { .. }));
    let mut a = op_args(&hashed.router, 2);
    a.ids = view_mut(0x4000_0000, &[2, 6], DType::I32);
    assert!(matches!(fails(&hashed, a), Error::Aliasing { .. }));
    // A strided hash table.
    let mut a = op_args(&hashed.router, 2);
    // SAFETY: never dereferenced.
    a.tid2eid = Some(unsafe { TensorRef::from_raw(0x4000_0000, &[100, 6], &[8, 1], DType::I32) }.unwrap());
    assert!(matches!(fails(&hashed, a), Error::Stride { tensor: "tid2eid", .. }));
    assert!(matches!(
        OpQuery { max_tokens: 0, ..plain }.validate(),
        Err(Error::InvalidQuery { field: "max_tokens", .. })
    ));
}

#[test]
fn every_symbol_is_built_for_every_arch_without_spills() {
    let symbols: Vec<String> = [ScoreFn::Softmax, ScoreFn::Sigmoid, ScoreFn::SqrtSoftplus]
        .into_iter()
        .map(|score| OpQuery { router: Router { score, ..Router::qwen3_moe(8, 2) }, max_tokens: 1 }.symbol())
        .collect();
    b12x_core::testing::check_manifest(b12x_moe::KERNEL_MANIFEST, &symbols).unwrap();
}

/// Validated on the H200 (sm_90a: suite and memcheck); the SM120 archs are compiled only.
#[test]
fn op_is_registered_validated_on_sm90_only() {
    let info = b12x_core::list_ops().into_iter().find(|o| o.name == "moe.route_topk").expect("registered");
    assert_eq!(info.krate, "b12x-moe");
    for (arch, v) in info.archs {
        let validated = matches!(v, b12x_core::Validation::Validated);
        assert_eq!(validated, *arch == "sm_90a", "{arch}: {v:?}");
    }
    assert_eq!(info.archs.len(), 3);
}
