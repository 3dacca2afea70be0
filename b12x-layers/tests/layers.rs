//! CPU tests of b12x-layers: the host page allocator, the reference layer's pieces and rules.

use b12x_core::half::bf16;
use b12x_layers::dense::{Batch, Config, HostWeights, WeightFormat};
use b12x_layers::reference::{cosine_diff, linear, Layer, RequestKv};

fn tiny() -> Config {
    Config {
        hidden: 64,
        heads: 4,
        kv_heads: 2,
        head_dim: 64,
        intermediate: 96,
        rope_theta: 1e4,
        eps: 1e-6,
        page_size: 16,
    }
}

#[test]
fn pages_are_allocated_when_a_page_fills() {
    let mut b = Batch::new(&[15, 16, 1], 16, 3, 8, 1).unwrap();
    assert_eq!(b.pages.iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 1, 1]);
    b.advance().unwrap();
    assert_eq!(b.lens, vec![16, 17, 2]);
    assert_eq!(b.pages.iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 2, 1]);
    let t = b.page_table();
    assert_eq!(t.len(), 9);
    assert_eq!(t[2], -1);
    assert_eq!(&t[3..5], &b.pages[1][..]);
    // Pages are distinct across requests.
    let mut all: Vec<i32> = b.pages.concat();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 4);
    // Out of page-table room: a typed error.
    let mut full = Batch::new(&[32], 16, 2, 8, 1).unwrap();
    assert!(full.advance().is_err());
    // A failed advance changes nothing: request 0 would fit, request 1's table is full.
    let mut two = Batch::new(&[16, 32], 16, 2, 8, 1).unwrap();
    let before = (two.lens.clone(), two.pages.clone());
    assert!(two.advance().is_err());
    assert_eq!((two.lens.clone(), two.pages.clone()), before);
    assert!(Batch::new(&[100], 16, 2, 8, 1).is_err());
    assert_eq!(Batch::new(&[10, 20], 16, 2, 8, 1).unwrap().kv_bytes(&tiny()), 30 * 2 * 64 * 4);
}

#[test]
fn linear_is_x_times_w_transposed() {
    let x = [1.0f32, 2.0, 3.0, -1.0, 0.5, 0.25];
    let w = [1.0f32, 0.0, 1.0, 2.0, 2.0, 2.0];
    assert_eq!(linear(&x, 2, &w, 2, 3), vec![4.0, 12.0, -0.75, -0.5]);
    assert!(cosine_diff(&[1.0, 2.0], &[2.0, 4.0]).abs() < 1e-12);
    assert!((cosine_diff(&[1.0, 0.0], &[0.0, 1.0]) - 1.0).abs() < 1e-12);
}

#[test]
fn quantized_weights_compute_with_their_dequantized_values() {
    let cfg = tiny();
    for format in WeightFormat::ALL {
        let w = HostWeights::random(&cfg, format, 3).unwrap();
        for (l, (n, k)) in w.linears.iter().zip(cfg.linear_shapes()) {
            assert_eq!((l.n, l.k, l.values.len()), (n, k, n * k));
            match &l.quantized {
                None => assert!(l.values.iter().all(|&v| bf16::from_f32(v).to_f32() == v)),
                Some(q) => assert_eq!(q.dequantize(), l.values),
            }
        }
        // The bytes the bench counts are exactly what pack_weight stores.
        for (l, (n, k)) in w.linears.iter().zip(cfg.linear_shapes()) {
            let stored = match &l.quantized {
                None => 2 * n * k,
                Some(q) => {
                    let p = b12x_gemm::blockscaled::pack::pack_host(q).unwrap();
                    p.codes.len() + p.scales.len()
                }
            };
            assert_eq!(format.weight_bytes(n, k), stored, "{format:?} {n}x{k}");
        }
    }
}

#[test]
fn reference_step_adds_the_residual_and_grows_the_cache() {
    let cfg = tiny();
    let mut w = HostWeights::random(&cfg, WeightFormat::Bf16, 5).unwrap();
    // With W_o = 0 the attention adds nothing: residual_out = round(x + residual).
    w.linears[1].values.iter_mut().for_each(|v| *v = 0.0);
    let row = cfg.kv_heads * cfg.head_dim;
    let kv = vec![
        RequestKv { k: vec![0.25; 3 * row], v: vec![0.5; 3 * row] },
        RequestKv { k: vec![-0.25; 17 * row], v: vec![1.0; 17 * row] },
    ];
    let mut layer = Layer::new(&cfg, &w, kv);
    let x: Vec<f32> = (0..2 * cfg.hidden).map(|i| (i % 7) as f32 * 0.125).collect();
    let mut res: Vec<f32> = (0..2 * cfg.hidden).map(|i| (i % 5) as f32 * -0.25).collect();
    let want: Vec<f32> = x.iter().zip(&res).map(|(a, b)| bf16::from_f32(a + b).to_f32()).collect();
    let y = layer.step(&x, &mut res);
    assert_eq!(res, want);
    assert_eq!(y.len(), 2 * cfg.hidden);
    assert!(y.iter().all(|v| v.is_finite()) && y.iter().any(|&v| v != 0.0));
    assert_eq!((layer.kv[0].k.len(), layer.kv[1].v.len()), (4 * row, 18 * row));
}

#[test]
fn warm_weight_reads_the_last_rows_rounded_up() {
    use b12x_layers::dense::WarmWeight;
    assert_eq!(WarmWeight::DEFAULT.rows(4096), 1229);
    assert_eq!(WarmWeight { percent: 100, ctas: 0 }.rows(4096), 4096);
    assert_eq!(WarmWeight { percent: 1, ctas: 0 }.rows(50), 1);
    assert_eq!(WarmWeight { percent: 50, ctas: 0 }.rows(3), 2);
}

#[test]
fn fast_decode_options_pass_their_checks() {
    use b12x_layers::dense::{FoldNorms, LayerOptions};
    for format in WeightFormat::ALL {
        for b in [1, 2, 7, 8, 9, 16, 64, 128] {
            let o = LayerOptions::fast_decode(format, b);
            o.check(format, b).unwrap_or_else(|e| panic!("{} B={b}: {e}", format.name()));
            let bf16 = format == WeightFormat::Bf16;
            assert!(o.pdl);
            assert_eq!(o.gate_up_silu, bf16, "{} B={b}", format.name());
            assert_eq!((o.rope_in_qkv, o.norm2_in_o_proj), (bf16 && b <= 8, bf16 && b <= 8), "{} B={b}", format.name());
            assert_eq!(o.fold_norms, FoldNorms::None);
        }
    }
}

#[test]
fn option_checks_name_the_option() {
    use b12x_core::Error;
    use b12x_layers::dense::{FoldNorms, LayerOptions};
    let field = |o: LayerOptions, f: WeightFormat, b: usize| match o.check(f, b) {
        Err(Error::InvalidQuery { field, .. }) => field,
        other => panic!("{o:?} {} B={b}: expected InvalidQuery, got {other:?}", f.name()),
    };
    let d = LayerOptions::default();
    for f in WeightFormat::ALL {
        assert!(d.check(f, 256).is_ok());
    }
    assert_eq!(field(LayerOptions { gate_up_silu: true, ..d }, WeightFormat::Nvfp4, 1), "gate_up_silu");
    assert_eq!(field(LayerOptions { gate_up_silu: true, fuse_silu: true, ..d }, WeightFormat::Bf16, 1), "gate_up_silu");
    assert_eq!(field(LayerOptions { rope_in_qkv: true, ..d }, WeightFormat::Bf16, 9), "rope_in_qkv");
    assert_eq!(field(LayerOptions { norm2_in_o_proj: true, ..d }, WeightFormat::BlockFp8, 1), "norm2_in_o_proj");
    for fold in [FoldNorms::First, FoldNorms::FirstScale, FoldNorms::Both] {
        assert_eq!(field(LayerOptions { fold_norms: fold, ..d }, WeightFormat::Bf16, 9), "fold_norms");
        assert!(LayerOptions { fold_norms: fold, ..d }.check(WeightFormat::Bf16, 8).is_ok());
    }
    let both = LayerOptions { fold_norms: FoldNorms::Both, norm2_in_o_proj: true, ..d };
    assert_eq!(field(both, WeightFormat::Bf16, 1), "norm2_in_o_proj");
    assert_eq!(field(LayerOptions { fuse_silu: true, ..d }, WeightFormat::Nvfp4, 1), "fuse_silu");
}
