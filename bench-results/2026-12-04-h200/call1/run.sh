#!/bin/bash
# Session 34, call 1: block FP8 1 x 128 activations with f32 scales x block-FP8 weights. Full
# gpu_blockscaled_gemv profile (the new pre_blockfp8_f32 trials pin every decode, tiled and wgmma
# config), memcheck (reduced) on the f32-scale trials, the block-FP8 bench rows (bf16 x, x
# quantized in the call, pre-quantized with f32 scales; decode M 1 / 16, prefill M 2048 / 8192).
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 120 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 60 'f32_scales|pre_blockfp8_f32' > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
mkdir -p $R/bench
B12X_PRINT_COMPILE_PROGRESS=1 B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_QUICK=1 B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=fp8block128 B12X_PEER_JSON=$ROOT/bench-results/2026-12-02-h200-e/call2/peers.json B12X_BENCH_OUT=$R/bench timeout 320 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
grep -v "passed=1" $R/san/memcheck.txt | head
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard" $f | head -6; }; done 2>/dev/null | head -40
grep -A1 -E "BlockFp8.*bucket (1025-2048|4097-8192) " $R/bench/bench.log | cut -c1-200 | head -20
grep -hE "^\| (blockscaled|read_probe)" $R/bench/*.md | grep -v "@fp8\|@scaled" | cut -d'|' -f2,3,4,7,8,10,11 | head -60
cd $OUT && tar czf r.tgz r && rm -rf r
