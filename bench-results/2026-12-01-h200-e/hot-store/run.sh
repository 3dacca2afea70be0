#!/bin/bash
# Session 15, call 9 (bundle of .gpu/bundle/COMMIT): the store of y run after every stage (its
# code hot at the end). gpu_bf16_gemv, memcheck (reduced), A/B against bench_bf16_gemv_top
# (4969dc3) on 264 MB (top, hot, hot, top) and 7168x4096 (top, hot). From the repo root.
R=$OUT/r; mkdir -p $R; cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20
timeout 90 ./gpu_bf16_gemv --test-threads 1 > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 70 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 > $R/memcheck.log 2>&1; echo "memcheck rc=$?" >> $R/rc.txt
run() { # label bin filter
  export B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1 B12X_BENCH_FILTER=$3
  echo "=== $3 $1" >> $R/ab.log; timeout 30 $2 >> $R/ab.log 2>&1; echo "rc=$?" >> $R/ab.log
}
run top ./bench_bf16_gemv_top N18432
run hot ./bench_bf16_gemv N18432
run hot ./bench_bf16_gemv N18432
run top ./bench_bf16_gemv_top N18432
run top ./bench_bf16_gemv_top N7168_K4096
run hot ./bench_bf16_gemv N7168_K4096
cd $OUT && rm -rf r/cache-* r/bo-* && tar czf r.tgz r && rm -rf r
