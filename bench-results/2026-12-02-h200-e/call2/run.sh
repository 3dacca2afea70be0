#!/bin/bash
# Session 27, call 2: gemm.blockscaled's tiled kernels (M > 16) — the full gpu_blockscaled_gemv
# profile in 16 processes (every trial, the M list), memcheck (reduced) on every trial,
# racecheck on small tiled trials, the prefill bench rows with their peers (cuBLAS BF16, cuBLASLt FP8).
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
(python3 $ROOT/bench/peers.py $R/peers.json --quick --only blockscaled_prefill > $R/peers.log 2>&1; echo "peers rc=$?" >> $R/summary.txt) &
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 120 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 80 > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
wait
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=prefill B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 200 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 60 'awkward_n129|tiny_1x32|qwen3_30b_expert|tiled' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound" $f | head -6; }; done 2>/dev/null | head -60
grep -E "^\| (blockscaled|read)" $R/bench/*.md | cut -d'|' -f2,3,4,7,10,11 | head -80
tail -5 $R/bench/bench.log
cd $OUT && tar czf r.tgz r && rm -rf r
