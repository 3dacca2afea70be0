#!/bin/bash
# Session 33, call 5: the split model with a per-part cost (7168^2 x M 2048: two ways again, M 8192:
# three) and the W4A8 native trials with valid x groups. Full gpu_blockscaled_gemv profile, the
# prefill bench (M 64, 256, 2048, 8192) with the races logged, memcheck (reduced) and racecheck on
# the native trials.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 120 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
mkdir -p $R/bench
B12X_PRINT_COMPILE_PROGRESS=1 B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=prefill B12X_PEER_JSON=$ROOT/bench-results/2026-12-02-h200-e/call2/peers.json B12X_BENCH_OUT=$R/bench timeout 240 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench prefill rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 70 'native' > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 110 'Mxfp4::native' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
grep -v "passed=1 RACECHECK SUMMARY: 0 hazards" $R/san/racecheck.txt | head
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard" $f | head -6; }; done 2>/dev/null | head -40
grep -A1 -E "N=7168 K=7168 .*bucket (1025-2048|4097-8192) " $R/bench/bench.log | sed -e 's/x_quant=None out=bf16 bias=none max_rows=8192//' | cut -c1-190
grep -hE "^\| (blockscaled)" $R/bench/*.md | grep -v "@fp8" | cut -d'|' -f2,3,4,7,10,11 | head -40
cd $OUT && tar czf r.tgz r && rm -rf r
