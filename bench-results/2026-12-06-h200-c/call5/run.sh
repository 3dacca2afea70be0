#!/bin/bash
# Session 52, call 5 (an H200 came in call 4): the call-2 bench binary (commit 9f64471 + the
# bad-input fix; the layer and kernels as at HEAD), B = 1 x 4k alternating on the H200.
R=$OUT/r; mkdir -p $R; export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
cd .gpu/bb
i=0
for v in bf16_pdl_gs/ bf16_pdl_gs_rq_n2/ bf16_pdl_gs_rq/ bf16_pdl_gs_n2/ bf16_pdl_gs_f1_rq_n2/ bf16_pdl_gs_rq_n2/ bf16_pdl_gs/ bf16_pdl_gs_rq/ bf16_pdl_gs_rq_n2/ bf16_pdl_gs_n2/ bf16_pdl_gs_f1_rq_n2/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 380 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/gpu.txt
for f in $R/bench_*.txt; do echo "$(basename $f) $(grep -E '/step ' $f | awk '{print $2, $6}') x4 $(grep -E '/step_x4 ' $f | awk '{print $2, $6}') lin $(grep -E '/linears_only ' $f | awk '{print $2}') $(grep 'read ceiling' $f | cut -c1-26)"; done
cd $OUT && tar czf r.tgz r && rm -rf r
