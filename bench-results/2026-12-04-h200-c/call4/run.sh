#!/bin/bash
# Session 36, call 4 (issue 6): the small ops release a PDL-launched next kernel at their start
# (rmsnorm plain/fused-add, rope, kv_append, silu_and_mul); LayerOptions::attention_splits.
# Suites of every touched kernel plain + memcheck (reduced), the layer's PDL / 8-split trials,
# then the layer bench (one job: plain, PDL, PDL + 8 splits).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
for t in rmsnorm kv_append rope silu_and_mul; do
  bash $S ./gpu_$t none $R/$t 16 60 > $R/${t}_none.txt 2>&1
  echo "$t none: $(tail -1 $R/${t}_none.txt) t=$SECONDS" >> $R/summary.txt
done; save
bash $S ./gpu_decoder_layer none $R/layer 6 100 'pdl' > $R/layer_none.txt 2>&1
echo "layer none (pdl trials): $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
for t in rmsnorm kv_append rope silu_and_mul; do
  B12X_TEST_PROFILE=reduced bash $S ./gpu_$t memcheck $R/$t 16 60 > $R/${t}_memcheck.txt 2>&1
  echo "$t memcheck: $(tail -1 $R/${t}_memcheck.txt) t=$SECONDS" >> $R/summary.txt
done; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_decoder_layer memcheck $R/layer 8 40 'pdl' > $R/layer_memcheck.txt 2>&1
echo "layer memcheck (pdl trials): $(tail -1 $R/layer_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_BENCH_OUT=$R/bench timeout 200 ./bench_decoder_layer > $R/bench_layer.txt 2>&1; echo "bench layer rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
grep -E "/step|sum_of_ops" $R/bench_layer.txt | cut -c1-80
for f in $R/*/none.txt $R/*/memcheck.txt; do grep -v "passed=1" $f | grep -v "(in parallel)" | head -5; done 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
