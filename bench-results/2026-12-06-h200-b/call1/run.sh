#!/bin/bash
# Session 51, call 1: the B = 1 x 4k BF16 step on the H200 with every landed option and their
# combinations, alternating (fold_norms First, fuse_rope_attention, warm_o_proj 30%), then the
# layer trials of those options. Bundle: gpu-bundle --targets bench_decoder_layer,gpu_decoder_layer (xz).
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
i=0
for v in bf16_pdl_gs/ bf16_pdl_gs_f1/ bf16_pdl_gs_ra/ bf16_pdl_gs_f1_ra/ bf16_pdl_gs_wo/ bf16_pdl_gs_f1_wo/ bf16_pdl_gs_f1_ra_wo/ bf16_pdl_gs/ bf16_pdl_gs_f1/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 330 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
# bench_decoder_layer_p: the same build with bench-results/2026-12-06-h200-a/rope_paged_cos_sin_after_prefill.patch
for v in bf16_pdl_gs_ra/ bf16_pdl_gs_f1_ra/; do
  i=$((i+1)); t=p_$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 400 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer_p > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
for t in qwen3_8b::bf16_gate_up_silu_pdl_fold_norms_first::b1 qwen3_8b::bf16_gate_up_silu_pdl_first_rope_attention::b1 qwen3_8b::bf16_gate_up_silu_pdl_rope_attention::b1; do
  [ $SECONDS -lt 470 ] && timeout 60 ./gpu_decoder_layer --exact $t >> $R/layer.txt 2>&1
  echo "layer $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt $R/gpu.txt
for f in $R/bench_*.txt; do echo "== $(basename $f)"; grep -E "/(step|step_x4|linears_only|linears_attention|op/attention|without/[a-z]+) |prefix/" $f | sed "s|decoder_layer/bf16[a-z0-9_]*/B1_ctx4096/||" | cut -c1-42; done
grep -E "test result|FAIL|panicked" $R/layer.txt | head
cd $OUT && tar czf r.tgz r && rm -rf r
