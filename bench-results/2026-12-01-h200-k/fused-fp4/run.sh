#!/bin/bash
# Session 21, call 3: NVFP4 blocks below 7 without clamp (nvfp4_codes8_below7, abs16 shared by
# the amax and the encoder, one add for the nibble magic) in quantization.nvfp4 and the fused
# norm.rmsnorm_quant NVFP4 output; rcp_rd_normal (block FP8 f32 scales) in quantization.fp8_block
# and the fused block FP8 output. GPU suites + memcheck, then same-call A/B benches: base (HEAD
# before the change, .gpu/base) and new, base/new/new/base.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/b3; BASE=$PWD/.gpu/base
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
for t in gpu_rmsnorm_quant gpu_nvfp4 gpu_fp8_block; do
  B12X_CACHE_DIR=/tmp/c-test timeout 300 ./$t --test-threads 1 > $R/$t.log 2>&1; echo "$t rc=$? $(grep -c '\.\.\. ok' $R/$t.log) ok" >> $R/summary.txt
done
for t in gpu_rmsnorm_quant gpu_nvfp4 gpu_fp8_block; do
  B12X_CACHE_DIR=/tmp/c-san B12X_TEST_PROFILE=reduced timeout 400 compute-sanitizer --tool memcheck --error-exitcode 1 ./$t --test-threads 1 > $R/memcheck_$t.log 2>&1
  echo "memcheck $t rc=$? $(grep 'ERROR SUMMARY' $R/memcheck_$t.log | tail -1)" >> $R/summary.txt
done
cat $R/summary.txt
bench() { # label dir bin filter
  mkdir -p $R/$1
  (cd $2 && B12X_CACHE_DIR=/tmp/c-$1 B12X_BENCH_SAMPLES=30 B12X_BENCH_FILTER=$4 B12X_BENCH_OUT=$R/$1 timeout 300 ./$3 > $R/$1/bench.log 2>&1)
  echo "$1 rc=$?" >> $R/summary.txt
}
for round in 1 2; do
  if [ $round = 1 ]; then order="base new"; else order="new base"; fi
  for who in $order; do
    d=$BASE; [ $who = new ] && d=$B/bin
    [ $SECONDS -gt 520 ] && break
    bench ${who}${round}_rq $d bench_rmsnorm_quant quant_
    bench ${who}${round}_nvfp4 $d bench_nvfp4 M8192
    bench ${who}${round}_nvfp4b $d bench_nvfp4 M32768
    bench ${who}${round}_fp8b $d bench_fp8_block M32768
  done
done
cat $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
