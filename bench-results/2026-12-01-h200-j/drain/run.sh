#!/bin/bash
# Session 20, calls 1-2: where the TMA gemv's last ~1.2 µs per CTA go (last stage in -> exit), 264 MB M = 8; call 2 in SM cycles
# (bench/proto/gemv_drain_proto.cu, built on the device with its nvcc). From the repo root.
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/drain gemv_drain_proto.cu > $R/build.txt 2>&1
timeout 200 /tmp/drain > $R/drain.txt 2>&1; echo "rc=$?" >> $R/drain.txt
cd $OUT && tar czf r.tgz r && rm -rf r
