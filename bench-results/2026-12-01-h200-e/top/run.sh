#!/bin/bash
# Session 15, call 3 (bundle of 4969dc3): the first TMA ring sent from the top of the kernel.
# gpu_bf16_gemv, memcheck (reduced), A/B against bench_bf16_gemv_walk (call 2's build: walk
# order + rt3, ring sent after the CTA barrier), then the peers and the full bf16_gemv bench
# (the numbers reported for issue 2), then racecheck on the graph-replay trial. From the repo root.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_COMMIT=$(cat $B/COMMIT)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
timeout 150 ./gpu_bf16_gemv --test-threads 1 > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 > $R/memcheck.log 2>&1; echo "memcheck rc=$?" >> $R/rc.txt
run() { # label bin filter
  export B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1 B12X_BENCH_FILTER=$3
  echo "=== $3 $1" >> $R/ab.log; timeout 60 $2 >> $R/ab.log 2>&1; echo "rc=$?" >> $R/ab.log
}
run walk ./bench_bf16_gemv_walk N18432
run top ./bench_bf16_gemv N18432
run top ./bench_bf16_gemv N18432
run walk ./bench_bf16_gemv_walk N18432
unset B12X_BENCH_FILTER
timeout 120 python3 $B/peers.py $R/peers.json --only bf16_gemv > $R/peers.log 2>&1; echo "peers rc=$?" >> $R/rc.txt
B12X_CACHE_DIR=$R/cache-final B12X_BENCH_OUT=$R/final B12X_PEER_JSON=$R/peers.json timeout 200 ./bench_bf16_gemv > $R/bench.log 2>&1; echo "bench rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 60 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 graph_replay_equals_eager > $R/racecheck.log 2>&1; echo "racecheck rc=$?" >> $R/rc.txt
cd $OUT && tar czf r.tgz r && rm -rf r
