#!/bin/bash
# Session 31, call 2: the walk order change (a CTA's shared first row block walked last; PTX of
# every b12x_bsgemv_* kernel changed): full gpu_blockscaled_gemv profile, the NVFP4 / MXFP8 /
# block-FP8 decode bench at M 1 and 16 against call 1's peers (same GPU, 20 minutes earlier),
# memcheck (reduced) if the device time allows.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 100 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_QUICK=1 B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=blockscaled_w B12X_PEER_JSON=$ROOT/bench-results/2026-12-03-h200/call1/peers.json B12X_BENCH_OUT=$R/bench timeout 100 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench decode M1/M16 rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 70 > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard" $f | head -6; }; done 2>/dev/null | head -40
grep -hE "^\| blockscaled_w" $R/bench/*.md | grep -E "N18432_K7168|N36864|N7168_K18432" | cut -d'|' -f2,4,8,11 | head -60
cd $OUT && tar czf r.tgz r && rm -rf r
