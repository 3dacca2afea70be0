#!/bin/bash
# Session 25, call 7: gemm.blockscaled W4A16 with x staged in shared memory by the producer warp
# (cp.async in the consumers' read order; NT = 2 at 82 registers, two CTAs per SM):
# gpu_blockscaled_gemv (full profile), the bench with its cuBLAS BF16 peer, memcheck + racecheck
# (reduced, 16 processes).
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
(python3 $ROOT/bench/peers.py $R/peers.json --quick --only blockscaled_w4a16 > $R/peers.log 2>&1; echo "peers rc=$?" >> $R/summary.txt) &
cd $B/bin
B12X_CACHE_DIR=/tmp/c-t timeout 150 ./gpu_blockscaled_gemv --test-threads 1 > $R/gpu_blockscaled_gemv.log 2>&1
echo "gpu_blockscaled_gemv rc=$? $(grep -c '\.\.\. ok' $R/gpu_blockscaled_gemv.log) ok t=$SECONDS" >> $R/summary.txt; save
wait
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=30 B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 100 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
for tool in memcheck racecheck; do
  B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv $tool $R/san 16 40 > $R/san_$tool.txt 2>&1
  echo "$tool: $(tail -1 $R/san_$tool.txt) t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt; grep -E 'FAILED|panicked' $R/gpu_blockscaled_gemv.log | head -10
grep -E "^\| (blockscaled|read)" $R/bench/*.md | cut -d'|' -f2,3,4,8,11 | head -60
cd $OUT && tar czf r.tgz r && rm -rf r
