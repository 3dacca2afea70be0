#!/bin/bash
# Session 17, call 2: block FP8's two-instruction division (div_by_block_scale). Bundle of
# `cargo xtask gpu-bundle --packages b12x-core,b12x-quant,b12x-norm` at COMMIT (-dirty: the
# working tree); .gpu/base holds the same build of 90972b1 (bench_fp8_block, bench_rmsnorm_quant).
# gpu_fp8_block and gpu_rmsnorm_quant (full, then memcheck reduced), then the A/Bs base/new/new/base:
# the f32-scale rows of both benches (UE8M0 rows as a control in the flat bench). From the repo root.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_COMMIT=$(cat $B/COMMIT)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
timeout 120 ./gpu_fp8_block --test-threads 1 > $R/fp8_block_tests.log 2>&1; echo "fp8_block tests rc=$?" >> $R/rc.txt
timeout 150 ./gpu_rmsnorm_quant --test-threads 1 > $R/rmsnorm_quant_tests.log 2>&1; echo "rmsnorm_quant tests rc=$?" >> $R/rc.txt
ab() { # label bin name filter
  B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1-$3 B12X_BENCH_FILTER=$4 timeout 100 $2 >> $R/ab-$3.log 2>&1; echo "=== $1 rc=$?" >> $R/ab-$3.log
}
for l in base new new base; do b=./bench_rmsnorm_quant; [ $l = base ] && b=../../base/bench_rmsnorm_quant; ab $l $b rq rmsnorm_quant_fp8b128f32; done
for l in base new new base; do b=./bench_fp8_block; [ $l = base ] && b=../../base/bench_fp8_block; ab $l $b fp8b M8192_K7168; done
for l in base new; do b=./bench_fp8_block; [ $l = base ] && b=../../base/bench_fp8_block; ab $l $b fp8b32k M32768_K7168_g128_f32; done
export B12X_TEST_PROFILE=reduced
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_fp8_block --test-threads 1 > $R/fp8_block_memcheck.log 2>&1; echo "fp8_block memcheck rc=$?" >> $R/rc.txt
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_rmsnorm_quant --test-threads 1 > $R/rmsnorm_quant_memcheck.log 2>&1; echo "rmsnorm_quant memcheck rc=$?" >> $R/rc.txt
rm -rf $R/cache-*; cd $OUT && tar czf r.tgz r
