#!/bin/bash
# Session 20, call 7: the autotune race with 11 samples per round (was 5), a875ccc's kernels
# (.gpu/bundle: cargo xtask gpu-bundle --packages b12x-core,b12x-gemm of a875ccc + the race
# change). Does the 264 MB race stop picking the kb2 ring (~0.5 µs slower than kb4)? gemv bench
# on 264 MB three times and each 58 MB shape once, each with a fresh selection cache; wall time
# of each bench run. From the repo root.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=30 B12X_COMMIT=$(cat $B/COMMIT)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
cd $B/bin
run() { local t0=$SECONDS; B12X_CACHE_DIR=$R/cache-$2 B12X_BENCH_OUT=$R/bo-$2 B12X_BENCH_FILTER=$1 timeout 90 ./bench_bf16_gemv >> $R/bench-$1.log 2>&1; echo "=== $2 rc=$? wall $((SECONDS - t0))s" >> $R/bench-$1.log; }
run N18432 a; run N18432 b; run N18432 c; run N7168_K4096 d; run N4096_K7168 e
rm -rf $R/cache-*; cd $OUT && tar czf r.tgz r && rm -rf r
