#!/bin/bash
# Call 2 (session 47, issue 6): attention.paged's register block (8-warp decode tiles: the
# warp's block STAGES in registers, the ring's first STAGES blocks before Q).
# Bundle: cargo xtask gpu-bundle --targets gpu_paged,bench_paged,gpu_decoder_layer,bench_decoder_layer
# plus bench_decoder_layer_base built from 4b72174 (without the change); bench_paged left out (size).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt
i=0
for run in base:bf16_pdl_gs/ new:bf16_pdl_gs/ new:bf16_pdl_gs_er/ base:bf16_pdl_gs_er/ base:bf16_pdl_gs/ new:bf16_pdl_gs/; do
  i=$((i+1)); w=${run%%:*}; v=${run#*:}; t=${w}_${v%/}_$i
  bin=./bench_decoder_layer; [ $w = base ] && bin=./bench_decoder_layer_base
  [ $SECONDS -lt 200 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 45 $bin > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
bash $S ./gpu_paged none $R/paged 12 90 > $R/paged_none.txt 2>&1
echo "paged none: $(tail -1 $R/paged_none.txt) t=$SECONDS" >> $R/summary.txt; save
# (gpu_decoder_layer left out of this bundle: size)
echo "layer none: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
export B12X_TEST_PROFILE=reduced
[ $SECONDS -lt 500 ] && bash $S ./gpu_paged memcheck $R/pm 16 20 'wide_w8|pdl' > $R/paged_memcheck.txt 2>&1
echo "paged memcheck: $(tail -1 $R/paged_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 530 ] && bash $S ./gpu_paged racecheck $R/pr 16 10 'wide_w8' > $R/paged_racecheck.txt 2>&1
echo "paged racecheck: $(tail -1 $R/paged_racecheck.txt) t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
for f in $R/bench_*.txt; do echo "== $f"; grep -E "/(step|step_x4|op/attention) |prefix/(3|4|5)" $f | cut -c1-90; done
grep -h "FAIL\|fail" $R/*_none.txt | head
cd $OUT && tar czf r.tgz r && rm -rf r
