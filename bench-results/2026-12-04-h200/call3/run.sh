#!/bin/bash
# Session 34, call 3 (bundle 21181ec): the f32 x scales as w8a8f32 instances of the tiled and
# wgmma kernels (no runtime branch in the bf16-x kernels). Full gpu_blockscaled_gemv profile,
# memcheck and racecheck (reduced) on the f32-scale trials, the block-FP8 prefill rows (bf16 x
# and pre-quantized x with f32 scales; M 64, 256, 2048, 8192).
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 120 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 60 'f32_scales|pre_blockfp8_f32' > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
for F in prefill_w8a16_fp8block prefill_w8a8f32; do
  mkdir -p $R/bench_$F
  B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=$F B12X_PEER_JSON=$ROOT/bench-results/2026-12-02-h200-e/call2/peers.json B12X_BENCH_OUT=$R/bench_$F timeout 150 ./bench_blockscaled_gemv > $R/bench_$F/bench.log 2>&1
  echo "bench $F rc=$? t=$SECONDS" >> $R/summary.txt; save
done
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 150 'f32_scales|awkward_n1000_bias::.*pre_blockfp8_f32|padded_rows::.*pre_blockfp8_f32|special_x.*pre_blockfp8_f32' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
grep -v "passed=1" $R/san/memcheck.txt | head; grep -v "passed=1 RACECHECK SUMMARY: 0 hazards" $R/san/racecheck.txt | head
for f in $R/full/*fail*.log $R/san/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard" $f | head -6; }; done 2>/dev/null | head -40
grep -h -A1 -E "bucket (1025-2048|4097-8192) " $R/bench_*/bench.log | grep race | cut -c1-200
grep -hE "^\| (blockscaled)" $R/bench_*/*.md | grep -v "@fp8" | cut -d'|' -f2,3,4,7,10,11
cd $OUT && tar czf r.tgz r && rm -rf r
