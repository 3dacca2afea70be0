#!/bin/bash
# Session 12, call a: gemv placement/rotation prototype + paged trace prototype.
set -x
mkdir -p $OUT/r
cd bench/proto
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm --format=csv > $OUT/r/smi.txt 2>&1
( nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/place gemv_place_proto.cu -lcublas 2>&1 || \
  nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -DNO_CUBLAS -o /tmp/place gemv_place_proto.cu ) > $OUT/r/build.txt 2>&1 &
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace paged_trace_proto.cu > $OUT/r/build_ptrace.txt 2>&1
wait
timeout 240 /tmp/place > $OUT/r/place.txt 2>&1
for bc in "8 2048" "8 8192" "32 2048" "4 2048"; do timeout 60 /tmp/ptrace $bc >> $OUT/r/ptrace.txt 2>&1; done
cd $OUT && tar czf r.tgz r && rm -rf r
