#!/bin/bash
# Session 15, call 6 (bundle of the commit in .gpu/bundle/COMMIT): the consumers' L2 prefetch of
# the first round's W lines (plain launches). gpu_bf16_gemv, memcheck (reduced), A/B against
# bench_bf16_gemv_top (4969dc3), then peers + the full bf16_gemv bench. From the repo root.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_COMMIT=$(cat $B/COMMIT)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
timeout 120 ./gpu_bf16_gemv --test-threads 1 > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 > $R/memcheck.log 2>&1; echo "memcheck rc=$?" >> $R/rc.txt
run() { # label bin filter
  export B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1 B12X_BENCH_FILTER=$3
  echo "=== $3 $1" >> $R/ab.log; timeout 60 $2 >> $R/ab.log 2>&1; echo "rc=$?" >> $R/ab.log
}
run top ./bench_bf16_gemv_top N18432
run pf ./bench_bf16_gemv N18432
run pf ./bench_bf16_gemv N18432
run top ./bench_bf16_gemv_top N18432
run top ./bench_bf16_gemv_top N7168_K4096
run pf ./bench_bf16_gemv N7168_K4096
unset B12X_BENCH_FILTER
timeout 90 python3 $B/peers.py $R/peers.json --only bf16_gemv > $R/peers.log 2>&1; echo "peers rc=$?" >> $R/rc.txt
B12X_CACHE_DIR=$R/cache-final B12X_BENCH_OUT=$R/final B12X_PEER_JSON=$R/peers.json timeout 170 ./bench_bf16_gemv > $R/bench.log 2>&1; echo "bench rc=$?" >> $R/rc.txt
cd $OUT && rm -rf r/cache-* && tar czf r.tgz r && rm -rf r
