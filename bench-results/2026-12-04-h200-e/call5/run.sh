#!/bin/bash
# Session 38, call 5 (issue 6): for the PDL step at B = 1, every candidate config of the o_proj,
# qkv and down projections timed inside the step (B12X_LAYER_SWEEP; call 4's sweep stopped on
# the still-frozen session).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
B12X_LAYER_SWEEP=2,1,4 B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=bf16_pdl/ B12X_BENCH_OUT=$R/bench_bf16_pdl timeout 500 ./bench_decoder_layer > $R/bench_bf16_pdl.txt 2>&1
echo "bench bf16_pdl + sweep rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt
grep -E "/step" $R/bench_bf16_pdl.txt | cut -c1-100
grep -h "sweep\| us  " $R/bench_bf16_pdl.txt; tail -2 $R/bench_bf16_pdl.txt
cd $OUT && tar czf r.tgz r && rm -rf r
