#!/bin/bash
# Session 28, call 1: pre-quantized activation inputs (dequantization pre-pass, epilogue tensor
# scale), the fixed linears, the shared scale-table helper (PTX of every entry point changed) —
# full gpu_blockscaled_gemv profile, memcheck (reduced), racecheck on small trials (pre-quantized,
# linears, tiled ring wrap / split-K replay), the bench: NVFP4 decode + W4A4 (pre-quantized NVFP4
# x) decode, every prefill row (regression check after the PTX change) with call-2 peers.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
PEERS=$ROOT/bench-results/2026-12-02-h200-e/call2/peers.json
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 120 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
mkdir -p $R/bench $R/bench-decode
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=prefill B12X_PEER_JSON=$PEERS B12X_BENCH_OUT=$R/bench timeout 170 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench prefill rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_QUICK=1 B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=_nvfp4/M1 B12X_PEER_JSON=$ROOT/bench-results/2026-12-02-h200-e/call1/peers.json B12X_BENCH_OUT=$R/bench-decode timeout 120 ./bench_blockscaled_gemv > $R/bench-decode/bench.log 2>&1
echo "bench decode rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 70 > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 50 'awkward_n129|tiny_1x32|qwen3_30b_expert|tiled|pre_|linear::tensor_fp8_129|linear::prepared' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound" $f | head -6; }; done 2>/dev/null | head -40
grep -hE "^\| (blockscaled)" $R/bench/*.md $R/bench-decode/*.md | grep -v "@fp8" | cut -d'|' -f2,3,4,7,10,11 | head -60
cd $OUT && tar czf r.tgz r && rm -rf r
