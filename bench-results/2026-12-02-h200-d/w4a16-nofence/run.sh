#!/bin/bash
# Session 26, call 2: gemm.blockscaled W4A16 with the stage release as a plain per-lane arrive (no
# fence.proxy.async): gpu_blockscaled_gemv (full), racecheck on the ring-wrapping and stream-K
# trials, the NVFP4 bench rows (no peers: call 1 has them), and ncu with per-SASS-instruction stall
# samples (source page) of the tuned kernel at 18432 x 7168, M = 1.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
B12X_CACHE_DIR=/tmp/c-t timeout 150 ./gpu_blockscaled_gemv --test-threads 1 > $R/gpu_blockscaled_gemv.log 2>&1
echo "gpu_blockscaled_gemv rc=$? $(grep -c '\.\.\. ok' $R/gpu_blockscaled_gemv.log) ok t=$SECONDS" >> $R/summary.txt; save
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=30 B12X_BENCH_FILTER=nvfp4 B12X_BENCH_OUT=$R/bench timeout 100 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=nvfp4/M1_N18432_K7168 timeout 120 ncu --clock-control none -k regex:bsgemv --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters --section InstructionStats --import-source no -o $R/rep ./bench_blockscaled_gemv > $R/ncu_run.txt 2>&1
echo "ncu rc=$? t=$SECONDS" >> $R/summary.txt
ncu --import $R/rep.ncu-rep --print-details all > $R/ncu.txt 2>&1
ncu --import $R/rep.ncu-rep --page source --csv --print-source sass > $R/ncu_sass.csv 2>&1
echo "ncu pages rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 90 'ring_wraps|stream|split|dsv4' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -E 'FAILED|panicked' $R/gpu_blockscaled_gemv.log | head -10
grep -E "^\| (blockscaled|read)" $R/bench/*.md | cut -d'|' -f2,3,4,8 | head -30
grep -E "Issue Slots Busy|No Eligible|Eligible Warps|Stall (Long|Membar|Math|Wait)|Duration|DRAM Through" $R/ncu.txt | head -20
head -c 600 $R/ncu_sass.csv
cd $OUT && tar czf r.tgz r && rm -rf r
