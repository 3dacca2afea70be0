#!/bin/bash
# Session 28, call 3: the native kernels' second weight kind (UE8M0 block FP8) and x quantized in
# the call for them (the quantization pre-pass staging codes and scale tiles) — full
# gpu_blockscaled_gemv profile, memcheck (reduced), racecheck on the new native trials; also the
# review mend sharing the tiled kernels' loaders (PTX changed), and a quick prefill bench.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 120 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 70 > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 40 'native_(Block|Mxfp8|quant)' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_QUICK=1 B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=prefill_w4a16_nvfp4 B12X_PEER_JSON=$ROOT/bench-results/2026-12-02-h200-e/call2/peers.json B12X_BENCH_OUT=$R/bench timeout 60 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench prefill rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
grep -v "passed=1 RACECHECK SUMMARY: 0 hazards" $R/san/racecheck.txt | head
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound" $f | head -6; }; done 2>/dev/null | head -40
grep -hE "^\| (blockscaled)" $R/bench/*.md | grep -v "@fp8" | cut -d'|' -f2,3,4,7,10,11 | head
cd $OUT && tar czf r.tgz r && rm -rf r
