#!/bin/bash
# Session 21, call 5: the session's final kernels (HEAD of this folder's commit): GPU suites of the
# touched ops + sanitizers, an A/B of the quantization.nvfp4 u4 register cap (base a99c45e,
# .gpu/base), then the project's full benches of quantization.nvfp4, norm.rmsnorm_quant and
# quantization.fp8_block (the rows the README quotes).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; BASE=$PWD/.gpu/base
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
for t in gpu_nvfp4 gpu_rmsnorm_quant gpu_fp8_block; do
  B12X_CACHE_DIR=/tmp/c-test timeout 200 ./$t --test-threads 1 > $R/$t.log 2>&1; echo "$t rc=$? $(grep -c '\.\.\. ok' $R/$t.log) ok t=$SECONDS" >> $R/summary.txt
done
for tool in memcheck racecheck; do
  B12X_CACHE_DIR=/tmp/c-san B12X_TEST_PROFILE=reduced timeout 200 compute-sanitizer --tool $tool --error-exitcode 1 ./gpu_nvfp4 --test-threads 1 > $R/${tool}_gpu_nvfp4.log 2>&1
  echo "$tool gpu_nvfp4 rc=$? $(grep 'ERROR SUMMARY\|RACECHECK SUMMARY' $R/${tool}_gpu_nvfp4.log | tail -1) t=$SECONDS" >> $R/summary.txt
done
cat $R/summary.txt
bench() { # label dir bin filter
  mkdir -p $R/$1
  (cd $2 && B12X_CACHE_DIR=/tmp/c-$1 B12X_BENCH_SAMPLES=30 B12X_BENCH_FILTER=$4 B12X_BENCH_OUT=$R/$1 timeout 150 ./$3 > $R/$1/bench.log 2>&1)
  echo "$1 rc=$? t=$SECONDS" >> $R/summary.txt
}
bench base1 $BASE bench_nvfp4 M8192; bench new1 $B/bin bench_nvfp4 M8192
bench new2 $B/bin bench_nvfp4 M8192; bench base2 $BASE bench_nvfp4 M8192
[ $SECONDS -lt 300 ] && bench nvfp4 $B/bin bench_nvfp4 _
[ $SECONDS -lt 340 ] && bench rmsnorm_quant $B/bin bench_rmsnorm_quant _
[ $SECONDS -lt 420 ] && bench fp8_block $B/bin bench_fp8_block _
cat $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
