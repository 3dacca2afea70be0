#!/bin/bash
# Session 29, call 1: the SM90 wgmma prefill kernels (every weight format; Candidate::Wgmma listed
# first on SM90 for buckets above 64 rows) — full gpu_blockscaled_gemv profile (every non-large
# case pins every candidate, so the wgmma configs run against the oracle wherever M > 64),
# memcheck (reduced), racecheck on tiled trials, the prefill bench against session 27's peers
# (same GPU model), ncu of the NVFP4 wgmma kernel.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 150 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=prefill B12X_PEER_JSON=$ROOT/bench-results/2026-12-02-h200-e/call2/peers.json B12X_BENCH_OUT=$R/bench timeout 240 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench prefill rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 80 > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 60 'awkward_n129|awkward_n1000|padded_rows|tiled' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=5 B12X_BENCH_FILTER=prefill_w4a16_nvfp4/M2048_N18432 timeout 100 ncu --clock-control none -k regex:bsgemm_wg --launch-skip 2 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis ./bench_blockscaled_gemv > $R/ncu.txt 2>&1
echo "ncu rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
grep -v "passed=1 RACECHECK SUMMARY: 0 hazards" $R/san/racecheck.txt | head
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard" $f | head -6; }; done 2>/dev/null | head -40
grep -hE "^\| (blockscaled)" $R/bench/*.md | grep -v "@fp8" | cut -d'|' -f2,3,4,7,10,11 | head -60
grep -E "Duration|Issue Slots Busy|Eligible Warps|Active Warps Per|Warp Cycles Per Issued|Registers Per|Tensor" $R/ncu.txt | head -12
cd $OUT && tar czf r.tgz r && rm -rf r
