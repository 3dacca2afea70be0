#!/bin/bash
# Session 52, call 2: the split-norm bad-input trial (fixed: overlapping reads are legal; the test
# now overlaps what the call writes), the layer's norm2 and rope_qkv trials (libtest filters are
# substrings: one run each), then the B = 1 x 4k A/B alternating and a sweep of the O and gate/up
# configs inside the rq_n2 step.
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
timeout 60 ./gpu_bf16_gemv split_norm_bad > $R/split_bad.txt 2>&1
echo "gpu_bf16_gemv split_norm_bad rc=$? t=$SECONDS: $(grep 'test result' $R/split_bad.txt)" >> $R/summary.txt; save
timeout 90 ./gpu_decoder_layer norm2 > $R/layer_norm2.txt 2>&1
echo "layer norm2 rc=$? t=$SECONDS: $(grep 'test result' $R/layer_norm2.txt)" >> $R/summary.txt; save
timeout 90 ./gpu_decoder_layer rope_qkv > $R/layer_rq.txt 2>&1
echo "layer rope_qkv rc=$? t=$SECONDS: $(grep 'test result' $R/layer_rq.txt)" >> $R/summary.txt; save
i=0
for v in bf16_pdl_gs/ bf16_pdl_gs_rq/ bf16_pdl_gs_rq_n2/ bf16_pdl_gs_f1_rq_n2/ bf16_pdl_gs_rq/ bf16_pdl_gs_rq_n2/ bf16_pdl_gs_f1_rq_n2/ bf16_pdl_gs/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 430 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
[ $SECONDS -lt 470 ] && B12X_LAYER_SWEEP=2,3 B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=bf16_pdl_gs_rq_n2/ B12X_BENCH_OUT=$R/sweep timeout 110 ./bench_decoder_layer > $R/sweep.txt 2>&1
echo "sweep rc=$? t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 560 ] && bash $S ./gpu_bf16_gemv memcheck $R/mc 2 570 'split_norm_bad' > $R/split_memcheck.txt 2>&1
echo "split bad memcheck: $(tail -1 $R/split_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt $R/gpu.txt
grep -E "FAIL|panicked|expected" $R/split_bad.txt | head
grep -E "^test |1-cos|FAIL|panicked" $R/layer_norm2.txt $R/layer_rq.txt | cut -c1-220 | head -30
for f in $R/bench_*.txt; do echo "$(basename $f) $(grep -E '/step ' $f | awk '{print $2, $5}') x4 $(grep -E '/step_x4 ' $f | awk '{print $2, $5}') lin $(grep -E '/linears_only ' $f | awk '{print $2}') gu: $(grep -E 'N=24576' $f | sed 's/.*bucket 1 -> //' | cut -c1-45)"; done
grep -E "sweep of plan| us  " $R/sweep.txt | cut -c40- | head -40
cd $OUT && tar czf r.tgz r && rm -rf r
