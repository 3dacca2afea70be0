#!/bin/bash
# Session 16, call 11 (bundle of b12x-core,b12x-quant,b12x-norm at COMMIT + the working tree's
# nvfp4 change: one branch per block): gpu_nvfp4, gpu_rmsnorm_quant (nvfp4_codes8 split into
# helpers), memcheck (reduced) on gpu_nvfp4, then the nvfp4 bench A/B against the previous
# binary (carried as .gpu/base/bench_nvfp4): base, new, new, base. From the repo root.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_COMMIT=$(cat $B/COMMIT)
timeout 150 ./gpu_nvfp4 --test-threads 1 > $R/gpu_nvfp4.log 2>&1; echo "gpu_nvfp4 rc=$?" >> $R/rc.txt
timeout 200 ./gpu_rmsnorm_quant --test-threads 1 > $R/gpu_rmsnorm_quant.log 2>&1; echo "gpu_rmsnorm_quant rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_nvfp4 --test-threads 1 > $R/memcheck_nvfp4.log 2>&1; echo "memcheck nvfp4 rc=$?" >> $R/rc.txt
ab() { # label bin
  B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1 B12X_BENCH_FILTER=given timeout 120 $2 >> $R/ab.log 2>&1; echo "=== $1 rc=$?" >> $R/ab.log
}
ab base ../../base/bench_nvfp4
ab new ./bench_nvfp4
ab new ./bench_nvfp4
ab base ../../base/bench_nvfp4
cd $OUT && tar czf r.tgz r
