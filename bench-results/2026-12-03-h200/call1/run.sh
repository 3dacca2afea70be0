#!/bin/bash
# Session 31, call 1: the decode kernels with the stage-0-first stagger (kStaggerNs; PTX of every
# b12x_bsgemv_* kernel changed) — full gpu_blockscaled_gemv profile, peers (cuBLAS BF16 on the
# W4A16 shapes, torch._scaled_mm FP8 at M = 16) in the same call, the decode bench (M 1 and 16
# every format and shape, then M 4), memcheck (reduced), racecheck on the decode trials.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 150 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
timeout 120 python3 $ROOT/bench/peers.py $R/peers.json --quick --only blockscaled > $R/peers.log 2>&1
echo "peers rc=$? t=$SECONDS" >> $R/summary.txt
mkdir -p $R/bench $R/bench-m4
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_QUICK=1 B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=blockscaled_w B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 200 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench decode M1/M16 rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=/M4_N B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench-m4 timeout 120 ./bench_blockscaled_gemv > $R/bench-m4/bench.log 2>&1
echo "bench decode M4 rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 80 > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 60 'ring_wraps|awkward_n129|awkward_n1000|padded_rows|stream_k|tiny_1x32|qwen3_30b_q' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
grep -v "passed=1 RACECHECK SUMMARY: 0 hazards" $R/san/racecheck.txt 2>/dev/null | head
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard" $f | head -6; }; done 2>/dev/null | head -40
grep -hE "^\| blockscaled_w" $R/bench/*.md $R/bench-m4/*.md | grep -E "N18432_K7168|N36864|N7168_K18432" | cut -d'|' -f2,3,7,8,10,11 | head -80
cd $OUT && tar czf r.tgz r && rm -rf r
