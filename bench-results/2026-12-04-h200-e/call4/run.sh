#!/bin/bash
# Session 38, call 4 (issue 6): the layer bench at B = 1 with the new steady-state row (four
# layers' steps in one graph, time / 4) and, for the PDL step, every candidate config of the
# qkv, o_proj and down projections timed inside the step (B12X_LAYER_SWEEP).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
for f in bf16/ bf16_pdl_r6/; do
  n=${f%/}
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_$n timeout 120 ./bench_decoder_layer > $R/bench_$n.txt 2>&1
  echo "bench $n rc=$? t=$SECONDS" >> $R/summary.txt; save
done
B12X_LAYER_SWEEP=2,1,4 B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=bf16_pdl/ B12X_BENCH_OUT=$R/bench_bf16_pdl timeout 400 ./bench_decoder_layer > $R/bench_bf16_pdl.txt 2>&1
echo "bench bf16_pdl + sweep rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt
for n in bf16 bf16_pdl bf16_pdl_r6; do grep -E "/step|linears|prefix" $R/bench_$n/decoder_layer.md | awk -F'|' '{print $2, $4, $8}'; done
grep -h "sweep\| us  " $R/bench_bf16_pdl.txt
cd $OUT && tar czf r.tgz r && rm -rf r
