#!/bin/bash
# Session 16, call 6 (bundle of main at COMMIT): where the 264 MB gap is, all in one call: the
# library bench on 18432x7168 (its read-probe row included), then bench/proto's lsu_stream
# (registers / cp.async / bulk copies) and read_sched (2-D TMA streams, 64- and 144-row boxes),
# then the library bench again. From the repo root; output in $OUT/r.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=30 B12X_COMMIT=$(cat $B/COMMIT)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
(cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/lsu lsu_stream_proto.cu > $R/build.txt 2>&1 && \
  nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/sched read_sched_proto.cu >> $R/build.txt 2>&1)
bench() { B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo-$1 B12X_BENCH_FILTER=N18432 timeout 90 $B/bin/bench_bf16_gemv > $R/bench-$1.log 2>&1; echo "bench $1 rc=$?" >> $R/rc.txt; }
bench 1
/tmp/lsu > $R/lsu-stream.txt 2>&1
/tmp/sched > $R/read-schedules.txt 2>&1
bench 2
cd $OUT && tar czf r.tgz r
