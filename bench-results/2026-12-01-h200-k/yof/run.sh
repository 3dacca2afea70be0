#!/bin/bash
# Session 21, call 4: the fused outputs' y without the per-vector `i < nvec` branch (y_of; w zeroed
# past the row end). gpu_rmsnorm_quant + memcheck + racecheck, then the rmsnorm_quant bench, base
# (a99c45e, .gpu/b3) against new (.gpu/bundle), base/new/new/base in one call.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; BASE=$PWD/.gpu/b3/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
B12X_CACHE_DIR=/tmp/c-test timeout 200 ./gpu_rmsnorm_quant --test-threads 1 > $R/gpu_rmsnorm_quant.log 2>&1; echo "gpu_rmsnorm_quant rc=$? $(grep -c '\.\.\. ok' $R/gpu_rmsnorm_quant.log) ok" >> $R/summary.txt
for tool in memcheck racecheck; do
  B12X_CACHE_DIR=/tmp/c-san B12X_TEST_PROFILE=reduced timeout 200 compute-sanitizer --tool $tool --error-exitcode 1 ./gpu_rmsnorm_quant --test-threads 1 > $R/${tool}_gpu_rmsnorm_quant.log 2>&1
  echo "$tool rc=$? $(grep 'ERROR SUMMARY\|RACECHECK SUMMARY' $R/${tool}_gpu_rmsnorm_quant.log | tail -1)" >> $R/summary.txt
done
cat $R/summary.txt
bench() { # label dir
  mkdir -p $R/$1
  (cd $2 && B12X_CACHE_DIR=/tmp/c-$1 B12X_BENCH_SAMPLES=30 B12X_BENCH_FILTER=quant_ B12X_BENCH_OUT=$R/$1 timeout 200 ./bench_rmsnorm_quant > $R/$1/bench.log 2>&1)
  echo "$1 rc=$? t=$SECONDS" >> $R/summary.txt
}
bench base1 $BASE; bench new1 $B/bin
[ $SECONDS -lt 330 ] && bench new2 $B/bin
[ $SECONDS -lt 420 ] && bench base2 $BASE
cat $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
