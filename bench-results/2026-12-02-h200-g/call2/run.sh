#!/bin/bash
# Session 29, call 2: after the review mend that stages ring slots through one helper
# (load_stage; sm_90a PTX of the tiled and wgmma kernels changed) — full gpu_blockscaled_gemv
# profile, memcheck (reduced), racecheck on two wgmma-covering trials, a quick NVFP4 / block-FP8
# prefill bench at M 2048 on 18432 x 7168 (unchanged expected).
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 150 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 80 > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 20 'awkward_n129_k96_f32::(Nvfp4|BlockFp8_32_F32|Mxfp8)$' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_QUICK=1 B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=M2048_N18432 B12X_PEER_JSON=$ROOT/bench-results/2026-12-02-h200-e/call2/peers.json B12X_BENCH_OUT=$R/bench timeout 60 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
cat $R/san/racecheck.txt | cut -c1-160
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard" $f | head -6; }; done 2>/dev/null | head -40
grep -hE "^\| (blockscaled_prefill)" $R/bench/*.md | grep -v "@fp8" | grep -E "M2048|M8192" | cut -d'|' -f2,3,4,7,10,11 | head -30
cd $OUT && tar czf r.tgz r && rm -rf r
