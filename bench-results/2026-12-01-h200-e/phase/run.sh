#!/bin/bash
# Session 15, call 4: per-CTA phases of the 264 MB TMA configs against the read probe
# (bench/proto/gemv_phase_proto.cu, built on the device with its nvcc). From the repo root.
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/phase gemv_phase_proto.cu > $R/build.txt 2>&1
timeout 300 /tmp/phase > $R/phase.txt 2>&1; echo "rc=$?" >> $R/phase.txt
cd $OUT && tar czf r.tgz r && rm -rf r
