#!/bin/bash
# Session 15, calls 4 and 5 (phase.txt of call 4 kept as phase-call4.txt): per-CTA phases of the 264 MB TMA configs against the read probe
# (bench/proto/gemv_phase_proto.cu, built on the device with its nvcc). From the repo root.
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/phase gemv_phase_proto.cu > $R/build.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90a -DEARLY_PF -I../../b12x-core/include -o /tmp/phase_pf gemv_phase_proto.cu >> $R/build.txt 2>&1
for v in phase phase_pf; do echo "=== $v" >> $R/phase.txt; timeout 150 /tmp/$v >> $R/phase.txt 2>&1; echo "rc=$?" >> $R/phase.txt; done
cd $OUT && tar czf r.tgz r && rm -rf r
