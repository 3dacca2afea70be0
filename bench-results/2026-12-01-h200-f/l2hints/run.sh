#!/bin/bash
# Session 16, call 1: L2 cache hints on rmsnorm's streams (bench/proto/rmsnorm_l2_proto.cu) and
# the read-schedule study (bench/proto/read_sched_proto.cu) re-run under the project's current
# flush. Both built on the device with its nvcc. From the repo root; output in $OUT/r.
R=$OUT/r; mkdir -p $R
cd bench/proto
nvidia-smi --query-gpu=name,clocks.max.mem,clocks.max.sm --format=csv > $R/gpu.txt
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/rms_l2 rmsnorm_l2_proto.cu > $R/build.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/sched read_sched_proto.cu >> $R/build.txt 2>&1
/tmp/rms_l2 > $R/rmsnorm-l2.txt 2>&1
/tmp/sched > $R/read-schedules.txt 2>&1
cd $OUT && tar czf r.tgz r
