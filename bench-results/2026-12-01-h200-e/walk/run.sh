#!/bin/bash
# Session 15, call 2: the stream-K walk order (a CTA's shared row blocks first) and the 144-row
# TMA variants (rt3 cw3: one wave of 128 CTAs on 18432 rows). gpu_bf16_gemv, memcheck (reduced),
# then bench A/B against bench_bf16_gemv_base (ed3d502, kernel = main before this change).
R=$OUT/r; mkdir -p $R; cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
timeout 170 ./gpu_bf16_gemv --test-threads 1 > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 110 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 > $R/memcheck.log 2>&1; echo "memcheck rc=$?" >> $R/rc.txt
run() { # label bin filter [sweep]
  export B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1 B12X_BENCH_FILTER=$3 B12X_BENCH_SWEEP=${4:-0}
  echo "=== $3 $1 sweep=${4:-0}" >> $R/bench.log; timeout 150 $2 >> $R/bench.log 2>&1; echo "rc=$?" >> $R/bench.log
}
run new ./bench_bf16_gemv N18432 6
run base ./bench_bf16_gemv_base N18432
run new ./bench_bf16_gemv N18432
run base ./bench_bf16_gemv_base N4096_K7168
run new ./bench_bf16_gemv N4096_K7168
cd $OUT && tar czf r.tgz r && rm -rf r
