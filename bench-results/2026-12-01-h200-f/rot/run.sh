#!/bin/bash
# Session 16, call 3: read_sched_proto with contiguous stretches started at a per-CTA rotation
# (contig-rot r1/r7/r13), next to contig and inter in the same run. From the repo root.
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/sched read_sched_proto.cu > $R/build.txt 2>&1
/tmp/sched > $R/read-schedules.txt 2>&1
cd $OUT && tar czf r.tgz r
