#!/bin/bash
# For the session that validates wip/mx-dense (not yet run). Build on this branch:
#   cargo xtask gpu-bundle --packages b12x-core,b12x-quant; keep bench_mx + gpu_mx in the bundle;
#   copy main's bench_mx (built before the rebase) to .gpu/base/bench_mx; carry .gpu/bundle, .gpu/base.
# Then: gpu_mx (padded_rows = the strided path), memcheck (reduced), the mx bench A/B
# (base, new, new, base). Move this folder under the session's bench-results date when run.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_COMMIT=$(cat $B/COMMIT)
timeout 150 ./gpu_mx --test-threads 1 > $R/gpu_mx.log 2>&1; echo "gpu_mx rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_mx --test-threads 1 > $R/memcheck_mx.log 2>&1; echo "memcheck mx rc=$?" >> $R/rc.txt
ab() { B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1 B12X_BENCH_FILTER=M8192 timeout 120 $2 >> $R/ab.log 2>&1; echo "=== $1 rc=$?" >> $R/ab.log; }
ab base ../../base/bench_mx; ab new ./bench_mx; ab new ./bench_mx; ab base ../../base/bench_mx
rm -rf $R/cache-*; cd $OUT && tar czf r.tgz r
