#!/bin/bash
# Session 20, call 6: the TMA gemv change that landed (the row block's flush decided before the
# wait, the bias loaded when a row block starts, the store of y with one predicated STG per
# element; no per-box barriers), working tree on top of 20d0f2c. .gpu/bundle: cargo xtask
# gpu-bundle --packages b12x-core,b12x-gemm; .gpu/base: 20d0f2c's bench_bf16_gemv (base) and
# call 5's (v3: the CTA's last unit on one barrier per box). gpu_bf16_gemv, memcheck, racecheck
# (graph replay), A/B base/new/v3/new/base on 264 MB and both 58 MB shapes, the PyTorch peers
# and the whole gemv bench with them. From the repo root; steps skipped past 520 s.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; ROOT=$PWD
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=30 B12X_COMMIT=$(cat $B/COMMIT)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
cd $B/bin
ok() { [ $SECONDS -lt 520 ] || { echo "skipped $1 at ${SECONDS}s" >> $R/rc.txt; return 1; }; }
timeout 150 ./gpu_bf16_gemv --test-threads 1 > $R/gemv_tests.log 2>&1; echo "gemv tests rc=$?" >> $R/rc.txt
export B12X_TEST_PROFILE=reduced
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 > $R/gemv_memcheck.log 2>&1; echo "gemv memcheck rc=$?" >> $R/rc.txt
timeout 80 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 graph_replay_equals_eager > $R/gemv_racecheck.log 2>&1; echo "gemv racecheck rc=$?" >> $R/rc.txt
unset B12X_TEST_PROFILE
ab() { ok "ab $1 $4" && { B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1-$3 B12X_BENCH_FILTER=$4 timeout 60 $2 >> $R/ab-$3.log 2>&1; echo "=== $1 rc=$?" >> $R/ab-$3.log; }; }
BASE=$ROOT/.gpu/base/bench_bf16_gemv; V3=$ROOT/.gpu/base/bench_bf16_gemv_v3
for f in N18432 N7168_K4096 N4096_K7168; do ab base $BASE $f $f; ab new ./bench_bf16_gemv $f $f; ab v3 $V3 $f $f; ab new ./bench_bf16_gemv $f $f; ab base $BASE $f $f; done
ok peers && { timeout 120 python3 $ROOT/bench/peers.py $R/peers.json --quick --only bf16_gemv > $R/peers.log 2>&1; echo "peers rc=$?" >> $R/rc.txt; }
ok bench && { B12X_CACHE_DIR=$R/cache-full B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 150 ./bench_bf16_gemv > $R/bench.log 2>&1; echo "bench rc=$?" >> $R/rc.txt; }
echo "total ${SECONDS}s" >> $R/rc.txt
rm -rf $R/cache-*; cd $OUT && tar czf r.tgz r && rm -rf r
