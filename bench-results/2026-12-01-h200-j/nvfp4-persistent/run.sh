#!/bin/bash
# Session 20, call 9: quantization.nvfp4's persistent configs (branch wip/nvfp4-persistent,
# c53b1fe; .gpu/bundle: cargo xtask gpu-bundle --packages b12x-core,b12x-quant pruned to
# gpu_nvfp4 + bench_nvfp4; .gpu/base: main 5fabd0a's bench_nvfp4). gpu_nvfp4, memcheck on the
# reduced profile, then M = 8192 A/B
# base/new/new/base and M = 32768 new/base. From the repo root; steps skipped past 160 s.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; ROOT=$PWD
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_COMMIT=$(cat $B/COMMIT)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
cd $B/bin
ok() { [ $SECONDS -lt 160 ] || { echo "skipped $1 at ${SECONDS}s" >> $R/rc.txt; return 1; }; }
timeout 60 ./gpu_nvfp4 --test-threads 1 > $R/nvfp4_tests.log 2>&1; echo "nvfp4 tests rc=$? ${SECONDS}s" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 40 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_nvfp4 --test-threads 1 > $R/nvfp4_memcheck.log 2>&1; echo "nvfp4 memcheck rc=$? ${SECONDS}s" >> $R/rc.txt
ab() { ok "ab $1 $3" && { B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1-$3 B12X_BENCH_FILTER=$3 timeout 40 $2 >> $R/ab-$3.log 2>&1; echo "=== $1 rc=$? ${SECONDS}s" >> $R/ab-$3.log; }; }
BASE=$ROOT/.gpu/base/bench_nvfp4
ab base $BASE M8192; ab new ./bench_nvfp4 M8192; ab new ./bench_nvfp4 M8192; ab base $BASE M8192
ab new ./bench_nvfp4 M32768; ab base $BASE M32768
echo "total ${SECONDS}s" >> $R/rc.txt
rm -rf $R/cache-*; cd $OUT && tar czf r.tgz r && rm -rf r
