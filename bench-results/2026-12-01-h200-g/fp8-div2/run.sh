#!/bin/bash
# Session 17, call 3: the two-instruction block FP8 division with one branch per lane around all
# of its vectors (block_fp8_f32_codes), after call 2 (fp8-div/) measured the branch-per-vector form
# 3-5% slower. Bundle of `cargo xtask gpu-bundle --packages b12x-core,b12x-quant,b12x-norm` at
# COMMIT (-dirty: the working tree); .gpu/base as in call 2 (90972b1). Suites (full, memcheck
# reduced), the A/Bs base/new/new/base, then ncu (bench/ncu_quant.sh) of the fused v4 kernel at
# T = 32768, D = 4096, base and new. From the repo root.
ROOT=$PWD; R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_COMMIT=$(cat $B/COMMIT)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
timeout 120 ./gpu_fp8_block --test-threads 1 > $R/fp8_block_tests.log 2>&1; echo "fp8_block tests rc=$?" >> $R/rc.txt
timeout 150 ./gpu_rmsnorm_quant --test-threads 1 > $R/rmsnorm_quant_tests.log 2>&1; echo "rmsnorm_quant tests rc=$?" >> $R/rc.txt
ab() { # label bin name filter
  B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1-$3 B12X_BENCH_FILTER=$4 timeout 100 $2 >> $R/ab-$3.log 2>&1; echo "=== $1 rc=$?" >> $R/ab-$3.log
}
for l in base new new base; do b=./bench_rmsnorm_quant; [ $l = base ] && b=../../base/bench_rmsnorm_quant; ab $l $b rq rmsnorm_quant_fp8b128f32; done
for l in base new new base; do b=./bench_fp8_block; [ $l = base ] && b=../../base/bench_fp8_block; ab $l $b fp8b M8192_K7168_g128_f32; done
export B12X_TEST_PROFILE=reduced
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_fp8_block --test-threads 1 > $R/fp8_block_memcheck.log 2>&1; echo "fp8_block memcheck rc=$?" >> $R/rc.txt
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_rmsnorm_quant --test-threads 1 > $R/rmsnorm_quant_memcheck.log 2>&1; echo "rmsnorm_quant memcheck rc=$?" >> $R/rc.txt
unset B12X_TEST_PROFILE
S=bench_rmsnorm_quant:rmsnorm_quant_fp8b128f32/T32768_D4096:b12x_rmsnorm_fp8b128f32_v4_bf16
B12X_CACHE_DIR=$R/cache-ncu-new timeout 100 bash $ROOT/bench/ncu_quant.sh $B/bin $R/ncu-new $S > /dev/null 2>&1; echo "ncu new rc=$?" >> $R/rc.txt
B12X_CACHE_DIR=$R/cache-ncu-base timeout 100 bash $ROOT/bench/ncu_quant.sh $ROOT/.gpu/base $R/ncu-base $S > /dev/null 2>&1; echo "ncu base rc=$?" >> $R/rc.txt
rm -rf $R/cache-*; cd $OUT && tar czf r.tgz r
