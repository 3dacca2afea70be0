#!/bin/bash
# Session 50, call 1 (commit dcf8a15): FoldNorms::First on a GPU for the first time, then the
# B = 1 bench _pdl_gs / _pdl_gs_f1 / _pdl_gs_fn in turn, twice, in one job.
# Bundle: cargo xtask gpu-bundle --targets gpu_bf16_gemv,gpu_decoder_layer,bench_decoder_layer.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt
timeout 90 ./gpu_bf16_gemv addnorm > $R/gemv_addnorm.txt 2>&1
echo "gpu_bf16_gemv addnorm rc=$? t=$SECONDS: $(grep 'test result' $R/gemv_addnorm.txt)" >> $R/summary.txt; save
bash $S ./gpu_decoder_layer none $R/layer 3 90 'fold_norms' > $R/layer_none.txt 2>&1
echo "layer fold_norms: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
for v in bf16_pdl_gs/ bf16_pdl_gs_f1/ bf16_pdl_gs_fn/ bf16_pdl_gs/ bf16_pdl_gs_f1/ bf16_pdl_gs_fn/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 330 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 60 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt $R/gpu.txt
for f in $R/bench_*.txt; do echo "== $(basename $f)"; grep -E "/(step|step_x4|linears_only|op/qkv_proj|op/gate_up_proj|without/rope|without/norms) |prefix/" $f | sed "s|decoder_layer/bf16[a-z0-9_]*/B1_ctx4096/||" | cut -c1-42; done
cd $OUT && tar czf r.tgz r && rm -rf r
