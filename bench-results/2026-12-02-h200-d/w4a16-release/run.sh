#!/bin/bash
# Session 26, call 1: gemm.blockscaled W4A16 with the per-lane stage release (every consumer lane
# arrives on the empty barrier): gpu_blockscaled_gemv (full profile) + gpu_blockscaled_pack, the
# bench with its cuBLAS BF16 peer, memcheck + racecheck (reduced, 16 processes), and ncu
# (WarpStateStats, SchedulerStats, SourceCounters) of the tuned kernel at 18432 x 7168, M = 1.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
(python3 $ROOT/bench/peers.py $R/peers.json --quick --only blockscaled_w4a16 > $R/peers.log 2>&1; echo "peers rc=$?" >> $R/summary.txt) &
cd $B/bin
B12X_CACHE_DIR=/tmp/c-t timeout 150 ./gpu_blockscaled_gemv --test-threads 1 > $R/gpu_blockscaled_gemv.log 2>&1
echo "gpu_blockscaled_gemv rc=$? $(grep -c '\.\.\. ok' $R/gpu_blockscaled_gemv.log) ok t=$SECONDS" >> $R/summary.txt
B12X_CACHE_DIR=/tmp/c-t timeout 60 ./gpu_blockscaled_pack --test-threads 1 > $R/gpu_blockscaled_pack.log 2>&1
echo "gpu_blockscaled_pack rc=$? $(grep -c '\.\.\. ok' $R/gpu_blockscaled_pack.log) ok t=$SECONDS" >> $R/summary.txt; save
wait
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=30 B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 100 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
# The bench above cached its tuned choices in /tmp/c-b: under ncu no candidate runs, launch 4 is a sample.
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=nvfp4/M1_N18432_K7168 timeout 120 ncu --clock-control none -k regex:bsgemv --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis_Tables --section InstructionStats \
  --print-details all ./bench_blockscaled_gemv > $R/ncu.txt 2>&1
echo "ncu rc=$? t=$SECONDS" >> $R/summary.txt; save
for tool in memcheck racecheck; do
  B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv $tool $R/san 16 90 > $R/san_$tool.txt 2>&1
  echo "$tool: $(tail -1 $R/san_$tool.txt) t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt; grep -E 'FAILED|panicked' $R/gpu_blockscaled_gemv.log | head -10
grep -E "^\| (blockscaled|read)" $R/bench/*.md | cut -d'|' -f2,3,4,8,11 | head -60
grep -E "Issue Slots Busy|No Eligible|Eligible Warps|Active Warps Per|Stall|Memory Throughput|DRAM Through|Registers Per|Achieved Occ|Duration" $R/ncu.txt | head -40
cd $OUT && tar czf r.tgz r && rm -rf r
