#!/bin/bash
# Session 37, call 5 (issue 6): gpu_rope_kv_append after its two test fixes (plain, memcheck,
# racecheck on decode/faults/graph); rmsnorm and silu_and_mul suites after their plans gained
# with_pdl (Rust launch path); memcheck on the layer's B = 1 trials (plain and PDL, reduced
# profile, one at a time); the layer bench, every format.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_rope_kv_append none $R/rka 16 40 > $R/rka_none.txt 2>&1
echo "rope_kv_append none: $(tail -1 $R/rka_none.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_rope_kv_append memcheck $R/rka 16 60 > $R/rka_memcheck.txt 2>&1
echo "rope_kv_append memcheck: $(tail -1 $R/rka_memcheck.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_rope_kv_append racecheck $R/rka 16 60 'decode|faults|graph' > $R/rka_racecheck.txt 2>&1
echo "rope_kv_append racecheck: $(tail -1 $R/rka_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
for t in rmsnorm silu_and_mul; do
  bash $S ./gpu_$t none $R/$t 16 40 > $R/${t}_none.txt 2>&1
  echo "$t none: $(tail -1 $R/${t}_none.txt) t=$SECONDS" >> $R/summary.txt
done; save
B12X_BENCH_OUT=$R/bench timeout 200 ./bench_decoder_layer > $R/bench_layer.txt 2>&1; echo "bench layer rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_decoder_layer memcheck $R/layer 1 100 'bf16::b1|bf16_pdl::b1|nvfp4::b1' > $R/layer_memcheck.txt 2>&1
echo "layer memcheck b1 (serial): $(tail -1 $R/layer_memcheck.txt) t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
grep -E "/step|linears_only|linears_attention|sum_of_ops" $R/bench_layer.txt | grep -E "B1_|B8_" | cut -c1-80
for f in $R/*/none.txt $R/*/memcheck.txt $R/*/racecheck.txt; do grep -v "passed=1" $f | head -6; done 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
