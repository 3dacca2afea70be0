#!/bin/bash
# Session 36, call 2 (issue 6), after call 1's test fixes (rope's computed-mode tolerance, the
# layer's page-crossing request): gpu_rope plain + memcheck + racecheck, gpu_decoder_layer plain
# (full profile: B 1/8/64, every format, PDL) + memcheck (reduced), the example, the rope bench.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_rope none $R/rope 16 60 > $R/rope_none.txt 2>&1
echo "rope none: $(tail -1 $R/rope_none.txt) t=$SECONDS" >> $R/summary.txt
B12X_TEST_PROFILE=reduced bash $S ./gpu_rope memcheck $R/rope 16 60 > $R/rope_memcheck.txt 2>&1
echo "rope memcheck: $(tail -1 $R/rope_memcheck.txt) t=$SECONDS" >> $R/summary.txt
B12X_TEST_PROFILE=reduced bash $S ./gpu_rope racecheck $R/rope 16 40 > $R/rope_racecheck.txt 2>&1
echo "rope racecheck: $(tail -1 $R/rope_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_decoder_layer none $R/layer 6 120 > $R/layer_none.txt 2>&1
echo "layer none: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_decoder_layer memcheck $R/layer 8 60 > $R/layer_memcheck.txt 2>&1
echo "layer memcheck: $(tail -1 $R/layer_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
timeout 100 ./example_decoder_layer > $R/example.txt 2>&1; echo "example rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_BENCH_OUT=$R/bench timeout 90 ./bench_rope > $R/bench_rope.txt 2>&1; echo "bench rope rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt; tail -3 $R/example.txt
for f in $R/*/none.txt $R/*/memcheck.txt $R/*/racecheck.txt; do grep -v "passed=1" $f | head -8; done 2>/dev/null
grep -h "differ from\|1-cos" $R/rope/none_*.log $R/layer/*.log 2>/dev/null | head -5
for f in $R/*/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard|differ|got|changed" $f | head -6; }; done 2>/dev/null | head -40
grep -E "rope/" $R/bench_rope.txt | head -20
cd $OUT && tar czf r.tgz r && rm -rf r
