#!/bin/bash
# Session 16, call 4: GEMV-shaped streaming reads through registers, cp.async and bulk copies
# (bench/proto/lsu_stream_proto.cu), contiguous stretches vs interleaved pieces, next to the
# project's read probe. Built on the device with its nvcc. From the repo root; output in $OUT/r.
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/lsu lsu_stream_proto.cu > $R/build.txt 2>&1
/tmp/lsu > $R/lsu-stream.txt 2>&1
cd $OUT && tar czf r.tgz r
