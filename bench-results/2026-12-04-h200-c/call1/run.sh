#!/bin/bash
# Session 36, call 1 (issue 6): the GPU suites of attention.rope, activation.silu_and_mul and the
# dense decoder layer (b12x-layers), plain, then compute-sanitizer memcheck (reduced profile) on
# all three and racecheck on rope and silu_and_mul; then the example itself (B = 8, every format).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt
bash $S ./gpu_rope none $R/rope 16 60 > $R/rope_none.txt 2>&1
echo "rope none: $(tail -1 $R/rope_none.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_silu_and_mul none $R/silu 16 90 > $R/silu_none.txt 2>&1
echo "silu none: $(tail -1 $R/silu_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_decoder_layer none $R/layer 4 150 > $R/layer_none.txt 2>&1
echo "layer none: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_rope memcheck $R/rope 16 60 > $R/rope_memcheck.txt 2>&1
echo "rope memcheck: $(tail -1 $R/rope_memcheck.txt) t=$SECONDS" >> $R/summary.txt
B12X_TEST_PROFILE=reduced bash $S ./gpu_silu_and_mul memcheck $R/silu 16 90 > $R/silu_memcheck.txt 2>&1
echo "silu memcheck: $(tail -1 $R/silu_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_rope racecheck $R/rope 16 40 '(t1$|t7|t64|bad_positions|partial|graph)' > $R/rope_racecheck.txt 2>&1
echo "rope racecheck: $(tail -1 $R/rope_racecheck.txt) t=$SECONDS" >> $R/summary.txt
B12X_TEST_PROFILE=reduced bash $S ./gpu_silu_and_mul racecheck $R/silu 16 40 '(t1_|t7_|graph|non_finite)' > $R/silu_racecheck.txt 2>&1
echo "silu racecheck: $(tail -1 $R/silu_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_decoder_layer memcheck $R/layer 6 60 > $R/layer_memcheck.txt 2>&1
echo "layer memcheck: $(tail -1 $R/layer_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
timeout 120 ./example_decoder_layer > $R/example.txt 2>&1; echo "example rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; cat $R/example.txt | tail -5
for f in $R/*/none.txt $R/*/memcheck.txt $R/*/racecheck.txt; do grep -v "passed=1" $f | head -8; done 2>/dev/null
for f in $R/*/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard|differ|got" $f | head -6; }; done 2>/dev/null | head -60
cd $OUT && tar czf r.tgz r && rm -rf r
