#!/bin/bash
# Session 25, call 5: gemm.blockscaled W4A16 with x read word by word (72 registers: three CTAs per
# SM for M <= 8): gpu_blockscaled_gemv (full profile), the
# bench with its cuBLAS BF16 peer (bench/peers.py), memcheck + racecheck of both suites (reduced,
# 16 processes), ncu --set full of the NVFP4 kernel at 18432 x 7168, M = 1.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
(python3 $ROOT/bench/peers.py $R/peers.json --quick --only blockscaled_w4a16 > $R/peers.log 2>&1; echo "peers rc=$?" >> $R/summary.txt) &
cd $B/bin
for t in gpu_blockscaled_gemv; do
  B12X_CACHE_DIR=/tmp/c-t timeout 240 ./$t --test-threads 1 > $R/$t.log 2>&1
  echo "$t rc=$? $(grep -c '\.\.\. ok' $R/$t.log) ok t=$SECONDS" >> $R/summary.txt; save
done
wait
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=30 B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 200 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
for tool in memcheck racecheck; do
  for t in gpu_blockscaled_gemv; do
    B12X_TEST_PROFILE=reduced bash $S ./$t $tool $R/san_$t 16 60 > $R/san_${t}_$tool.txt 2>&1
    echo "$tool: $(tail -1 $R/san_${t}_$tool.txt) t=$SECONDS" >> $R/summary.txt; save
  done
done
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=3 B12X_BENCH_FILTER=blockscaled_w4a16_nvfp4/M1_N18432_K7168 timeout 100 ncu --clock-control none \
  --set full --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum -k regex:b12x_bsgemv -c 1 ./bench_blockscaled_gemv > $R/ncu.txt 2>&1
echo "ncu rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt; grep -E 'FAILED|panicked' $R/gpu_blockscaled_*.log | head -20
grep -E "^\| (blockscaled|read)" $R/bench/*.md | cut -d'|' -f2,3,4,7,8,10,11 | head -60
cd $OUT && tar czf r.tgz r && rm -rf r
