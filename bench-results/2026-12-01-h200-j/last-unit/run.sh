#!/bin/bash
# Session 20, call 5: the TMA gemv's shorter drain as landed (the CTA's last unit on one barrier
# per 64-k box, the other units on one per stage; the row block's flush decided before the wait;
# the bias loaded when a row block starts; the store of y with one predicated STG per element),
# working tree on top of 20d0f2c. .gpu/bundle: cargo xtask gpu-bundle --packages
# b12x-core,b12x-gemm (new); .gpu/base: 20d0f2c's bench_bf16_gemv. gpu_bf16_gemv, memcheck,
# racecheck (graph replay), 264 MB and 58 MB A/B base/new/new/base, the PyTorch peers and the
# whole gemv bench (new, with peers), then the drain split of the new kernel
# (bench/proto/gemv_drain_proto.cu). From the repo root; steps skipped past 540 s.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; ROOT=$PWD
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=30 B12X_COMMIT=$(cat $B/COMMIT)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
(cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/drain gemv_drain_proto.cu > $R/build.txt 2>&1) &
cd $B/bin
ok() { [ $SECONDS -lt 540 ] || { echo "skipped $1 at ${SECONDS}s" >> $R/rc.txt; return 1; }; }
timeout 150 ./gpu_bf16_gemv --test-threads 1 > $R/gemv_tests.log 2>&1; echo "gemv tests rc=$?" >> $R/rc.txt
export B12X_TEST_PROFILE=reduced
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 > $R/gemv_memcheck.log 2>&1; echo "gemv memcheck rc=$?" >> $R/rc.txt
timeout 80 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 graph_replay_equals_eager > $R/gemv_racecheck.log 2>&1; echo "gemv racecheck rc=$?" >> $R/rc.txt
unset B12X_TEST_PROFILE
ab() { ok "ab $1 $4" && { B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1-$3 B12X_BENCH_FILTER=$4 timeout 60 $2 >> $R/ab-$3.log 2>&1; echo "=== $1 rc=$?" >> $R/ab-$3.log; }; }
ab base $ROOT/.gpu/base/bench_bf16_gemv gemv N18432; ab new ./bench_bf16_gemv gemv N18432; ab new ./bench_bf16_gemv gemv N18432; ab base $ROOT/.gpu/base/bench_bf16_gemv gemv N18432
for f in N7168_K4096 N4096_K7168; do ab base $ROOT/.gpu/base/bench_bf16_gemv g58 $f; ab new ./bench_bf16_gemv g58 $f; ab new ./bench_bf16_gemv g58 $f; ab base $ROOT/.gpu/base/bench_bf16_gemv g58 $f; done
ok peers && { timeout 120 python3 $ROOT/bench/peers.py $R/peers.json --quick --only bf16_gemv > $R/peers.log 2>&1; echo "peers rc=$?" >> $R/rc.txt; }
ok bench && { B12X_CACHE_DIR=$R/cache-full B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 150 ./bench_bf16_gemv > $R/bench.log 2>&1; echo "bench rc=$?" >> $R/rc.txt; }
wait
ok drain && { timeout 90 /tmp/drain > $R/drain.txt 2>&1; echo "drain rc=$?" >> $R/rc.txt; }
echo "total ${SECONDS}s" >> $R/rc.txt
rm -rf $R/cache-*; cd $OUT && tar czf r.tgz r && rm -rf r
