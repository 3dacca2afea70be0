#!/bin/bash
# Session 16, call 12 (bundle of b12x-core,b12x-quant at COMMIT + the working tree: nvfp4's
# dense-rows path): gpu_nvfp4 (with the new padded_rows trials: the strided path), memcheck
# (reduced) and racecheck (padded_rows) on gpu_nvfp4, then the bench A/B against call 11's
# binary (486ae39, carried as .gpu/base/bench_nvfp4): base, new, new, base. From the repo root.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_COMMIT=$(cat $B/COMMIT)
timeout 150 ./gpu_nvfp4 --test-threads 1 > $R/gpu_nvfp4.log 2>&1; echo "gpu_nvfp4 rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_nvfp4 --test-threads 1 > $R/memcheck_nvfp4.log 2>&1; echo "memcheck nvfp4 rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 120 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_nvfp4 --test-threads 1 padded > $R/racecheck_nvfp4.log 2>&1; echo "racecheck nvfp4 rc=$?" >> $R/rc.txt
ab() { # label bin
  B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1 B12X_BENCH_FILTER=given timeout 120 $2 >> $R/ab.log 2>&1; echo "=== $1 rc=$?" >> $R/ab.log
}
ab base ../../base/bench_nvfp4
ab new ./bench_nvfp4
ab new ./bench_nvfp4
ab base ../../base/bench_nvfp4
cd $OUT && tar czf r.tgz r
