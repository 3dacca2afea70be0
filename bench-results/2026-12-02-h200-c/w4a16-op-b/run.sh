#!/bin/bash
# Session 25, call 3: gemm.blockscaled W4A16 with the stage released after its MMAs, two accumulator chains and kb = 1|2 configs (.gpu/bundle):
# gpu_blockscaled_gemv (full profile), the bench with its cuBLAS BF16 peer (bench/peers.py),
# memcheck + racecheck (reduced, 16 processes), ncu of the NVFP4 kernel at 18432 x 7168, M = 1.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
(python3 $ROOT/bench/peers.py $R/peers.json --quick --only blockscaled_w4a16 > $R/peers.log 2>&1; echo "peers rc=$?" >> $R/summary.txt) &
cd $B/bin
B12X_CACHE_DIR=/tmp/c-t timeout 240 ./gpu_blockscaled_gemv --test-threads 1 > $R/gpu_blockscaled_gemv.log 2>&1
echo "gpu_blockscaled_gemv rc=$? $(grep -c '\.\.\. ok' $R/gpu_blockscaled_gemv.log) ok t=$SECONDS" >> $R/summary.txt; save
wait
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=30 B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 200 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
for tool in memcheck racecheck; do
  B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv $tool $R/san 16 60 > $R/san_$tool.txt 2>&1
  echo "$tool: $(tail -1 $R/san_$tool.txt) t=$SECONDS" >> $R/summary.txt; save
done
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=3 B12X_BENCH_FILTER=blockscaled_w4a16_nvfp4/M1_N18432_K7168 timeout 100 ncu --clock-control none \
  --set full \
  --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum -k regex:b12x_bsgemv -c 1 ./bench_blockscaled_gemv > $R/ncu.txt 2>&1
echo "ncu rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt; grep -E 'FAILED|panicked|Error' $R/gpu_blockscaled_gemv.log | head -20
grep -E "^\|" $R/bench/*.md 2>/dev/null | head -70
cd $OUT && tar czf r.tgz r && rm -rf r
