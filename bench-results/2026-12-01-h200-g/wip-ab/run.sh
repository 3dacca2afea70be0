#!/bin/bash
# Session 17, call 1: validates wip/gemv-early-box and wip/mx-dense together (bundle built from their
# merge, wip/combined; .gpu/base holds main fefcdc2's bench_bf16_gemv and bench_mx).
# gemv: gpu_bf16_gemv, memcheck, racecheck (graph replay), 264 MB A/B base/new/new/base.
# mx: gpu_mx (padded_rows = strided path), memcheck, M8192 A/B base/new/new/base.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=30 B12X_COMMIT=$(cat $B/COMMIT)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
timeout 120 ./gpu_bf16_gemv --test-threads 1 > $R/gemv_tests.log 2>&1; echo "gemv tests rc=$?" >> $R/rc.txt
timeout 120 ./gpu_mx --test-threads 1 > $R/mx_tests.log 2>&1; echo "mx tests rc=$?" >> $R/rc.txt
ab() { B12X_CACHE_DIR=$R/cache-$1 B12X_BENCH_OUT=$R/bo-$1-$3 B12X_BENCH_FILTER=$4 timeout 90 $2 >> $R/ab-$3.log 2>&1; echo "=== $1 rc=$?" >> $R/ab-$3.log; }
ab base ../../base/bench_bf16_gemv gemv N18432; ab new ./bench_bf16_gemv gemv N18432; ab new ./bench_bf16_gemv gemv N18432; ab base ../../base/bench_bf16_gemv gemv N18432
ab base ../../base/bench_mx mx M8192; ab new ./bench_mx mx M8192; ab new ./bench_mx mx M8192; ab base ../../base/bench_mx mx M8192
export B12X_TEST_PROFILE=reduced
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 > $R/gemv_memcheck.log 2>&1; echo "gemv memcheck rc=$?" >> $R/rc.txt
timeout 80 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 graph_replay_equals_eager > $R/gemv_racecheck.log 2>&1; echo "gemv racecheck rc=$?" >> $R/rc.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_mx --test-threads 1 > $R/mx_memcheck.log 2>&1; echo "mx memcheck rc=$?" >> $R/rc.txt
rm -rf $R/cache-*; cd $OUT && tar czf r.tgz r
