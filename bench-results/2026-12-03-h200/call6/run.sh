#!/bin/bash
# Session 33, call 6: the split rule fitted to calls 3-5 (one sub-wave of splits up to half-full
# last waves, three ways up to 2/3): full gpu_blockscaled_gemv profile (the tail configs at the
# small cases' new split counts against the oracle) and the prefill bench (M 64, 256, 2048, 8192).
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 120 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
mkdir -p $R/bench
B12X_PRINT_COMPILE_PROGRESS=1 B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=prefill B12X_PEER_JSON=$ROOT/bench-results/2026-12-02-h200-e/call2/peers.json B12X_BENCH_OUT=$R/bench timeout 240 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench prefill rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard" $f | head -6; }; done 2>/dev/null | head -40
grep -A1 -E "(N=7168 K=7168 .*bucket (1025-2048|4097-8192)|N=18432 K=7168 .*bucket 129-256) " $R/bench/bench.log | sed -e 's/x_quant=None out=bf16 bias=none max_rows=8192//' | cut -c1-190
grep -hE "^\| (blockscaled)" $R/bench/*.md | grep -v "@fp8" | cut -d'|' -f2,3,4,7,10,11 | head -40
cd $OUT && tar czf r.tgz r && rm -rf r
