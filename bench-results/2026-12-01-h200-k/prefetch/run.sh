#!/bin/bash
# Session 21, call 8: quantization.nvfp4's dense path asks L2 for the input of the CTA one wave
# ahead (prefetch_wave_ahead). gpu_nvfp4 + memcheck, then A/B against 16d720a's bench (.gpu/pb):
# M = 8192 base/new/new/base, M = 32768 new/base.
R=$OUT/r; mkdir -p $R; export B12X_ALLOW_PARTIAL_ARCHS=1
cd .gpu/p
B12X_CACHE_DIR=/tmp/c1 timeout 100 ./gpu_nvfp4 --test-threads 1 > $R/gpu_nvfp4.log 2>&1; echo "suite rc=$? $(grep -c '\.\.\. ok' $R/gpu_nvfp4.log) ok t=$SECONDS" >> $R/summary.txt
B12X_CACHE_DIR=/tmp/c2 B12X_TEST_PROFILE=reduced timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_nvfp4 --test-threads 1 > $R/memcheck.log 2>&1
echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $R/memcheck.log | tail -1) t=$SECONDS" >> $R/summary.txt
cd ..
bench() { # label dir filter
  mkdir -p $R/$1
  (cd $2 && B12X_CACHE_DIR=/tmp/c-$1 B12X_BENCH_SAMPLES=30 B12X_BENCH_FILTER=$3 B12X_BENCH_OUT=$R/$1 timeout 60 ./bench_nvfp4 > $R/$1/bench.log 2>&1)
  echo "$1 rc=$? t=$SECONDS" >> $R/summary.txt
}
bench base1 pb M8192; bench new1 p M8192; bench new2 p M8192; bench base2 pb M8192
[ $SECONDS -lt 130 ] && bench new3 p M32768
[ $SECONDS -lt 150 ] && bench base3 pb M32768
cat $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
