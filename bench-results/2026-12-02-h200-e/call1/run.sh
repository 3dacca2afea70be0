#!/bin/bash
# Session 27, call 1: validates session 26's unrun work — gemm.blockscaled's fused activation
# quantization (x_* trials, zero_blocks_f32), the FloatBuf test refactor (gpu_blockscaled_gemv,
# gpu_bf16_gemv) — plain + memcheck (reduced, 16 processes), racecheck on the new and FP4 trials,
# the full blockscaled bench with its peers (cuBLAS BF16, torch._scaled_mm), ncu of W8A16 MXFP8.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
(python3 $ROOT/bench/peers.py $R/peers.json --quick --only blockscaled > $R/peers.log 2>&1; echo "peers rc=$?" >> $R/summary.txt) &
cd $B/bin
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv none $R/san 16 60 > $R/san_none.txt 2>&1
echo "none: $(tail -1 $R/san_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_CACHE_DIR=/tmp/c-t timeout 60 ./gpu_blockscaled_pack --test-threads 1 > $R/gpu_blockscaled_pack.log 2>&1
echo "gpu_blockscaled_pack rc=$? $(grep -c '\.\.\. ok' $R/gpu_blockscaled_pack.log) ok t=$SECONDS" >> $R/summary.txt
B12X_TEST_PROFILE=reduced bash $S ./gpu_bf16_gemv none $R/san_bf16 16 60 > $R/san_bf16_none.txt 2>&1
echo "bf16 none: $(tail -1 $R/san_bf16_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 60 > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
wait
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=30 B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 150 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 100 'x_|zero_blocks|::Nvfp4|::Mxfp4$' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=w8a16_mxfp8/M1_N18432_K7168 timeout 90 ncu --clock-control none -k regex:bsgemv --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters --section InstructionStats --import-source no -o $R/rep ./bench_blockscaled_gemv > $R/ncu_run.txt 2>&1
echo "ncu rc=$? t=$SECONDS" >> $R/summary.txt
ncu --import $R/rep.ncu-rep --print-details all > $R/ncu.txt 2>&1
ncu --import $R/rep.ncu-rep --page source --csv --print-source sass > $R/ncu_sass.csv 2>&1
echo "ncu pages rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt; grep -hE 'FAILED|panicked|failed' $R/san/*fail*.log $R/san_bf16/*fail*.log 2>/dev/null | head -20
grep -E "^\| (blockscaled|read)" $R/bench/*.md | cut -d'|' -f2,3,4,8,11 | head -80
grep -E "Issue Slots Busy|No Eligible|Eligible Warps|Active Warps Per|Duration|DRAM Through" $R/ncu.txt | head -20
cd $OUT && tar czf r.tgz r && rm -rf r
