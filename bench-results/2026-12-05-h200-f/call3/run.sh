#!/bin/bash
# Session 49, call 3 (call 2 trimmed to the device time left, ~4 min): the addnorm GEMV trials
# (plain), then the B = 1 bench _pdl_gs / _pdl_gs_fn / _pdl_gs_f1 in one job.
# Bundle: cargo xtask gpu-bundle --targets gpu_bf16_gemv,gpu_decoder_layer,bench_decoder_layer.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
timeout 60 ./gpu_bf16_gemv addnorm > $R/gemv_addnorm.txt 2>&1
echo "gpu_bf16_gemv addnorm rc=$? t=$SECONDS: $(grep 'test result' $R/gemv_addnorm.txt)" >> $R/summary.txt; save
for v in bf16_pdl_gs/ bf16_pdl_gs_fn/ bf16_pdl_gs_f1/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 120 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt $R/gpu.txt
for f in $R/bench_*.txt; do echo "== $(basename $f)"; grep -E "/(step|step_x4|op/qkv_proj|op/gate_up_proj) |prefix/" $f | sed "s|decoder_layer/bf16[a-z0-9_]*/B1_ctx4096/||" | cut -c1-42; grep -E -- "-> " $f | grep -E "N=6144|N=24576" | sed 's/.*bucket 1 -> //' | cut -c1-60; done
cd $OUT && tar czf r.tgz r && rm -rf r
