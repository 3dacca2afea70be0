#!/bin/bash
# Session 33, call 4: (1) the split tail with its split count chosen by the sub-wave model (up to
# 8 ways, at most two CTAs per SM; 7168^2 x M 2048: 5 ways instead of 2) and (2) the SM120 native
# W4A8 kernels (MXFP4 weight x E4M3/UE8M0 x; their emulated build here) and the E2M1 x E4M3 probe.
# Full gpu_blockscaled_gemv profile (every non-large case pins every candidate: tail configs at
# M 100 .. 1000 now split up to 8 ways; the new native_mxf4 trials), gpu_bsmma_probe (portable
# path), the prefill bench (M 64, 256, 2048, 8192) with the races logged, memcheck (reduced, and the
# probe), racecheck on the M = 100 / 200 trials.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 120 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
./gpu_bsmma_probe > $R/probe.txt 2>&1; echo "probe rc=$? $(tail -1 $R/probe.txt)" >> $R/summary.txt
compute-sanitizer --tool memcheck ./gpu_bsmma_probe > $R/probe_memcheck.txt 2>&1; echo "probe memcheck rc=$? $(grep 'ERROR SUMMARY' $R/probe_memcheck.txt | tail -1)" >> $R/summary.txt
mkdir -p $R/bench
B12X_PRINT_COMPILE_PROGRESS=1 B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=prefill B12X_PEER_JSON=$ROOT/bench-results/2026-12-02-h200-e/call2/peers.json B12X_BENCH_OUT=$R/bench timeout 240 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench prefill rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 70 > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 130 'awkward_n1000|padded_rows' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
grep -v "passed=1 RACECHECK SUMMARY: 0 hazards" $R/san/racecheck.txt | head
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard" $f | head -6; }; done 2>/dev/null | head -40
grep -hE "^\| (blockscaled)" $R/bench/*.md | grep -v "@fp8" | cut -d'|' -f2,3,4,7,10,11 | head -40
grep -E "b12x: .*bucket|race \(" $R/bench/bench.log | cut -c1-400 | head -40
cd $OUT && tar czf r.tgz r && rm -rf r
