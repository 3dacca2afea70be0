#!/bin/bash
# Session 15, call 8: bench/proto/gemv_wgmma_proto.cu (session 12's nvjet-like wgmma kernel with
# and without x multicast, against cuBLAS and the library's TMA kernel) re-timed under the
# project's new flush (proto_common.cuh since session 15). From the repo root.
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
cd bench/proto && nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I../../b12x-core/include -o /tmp/wgmma gemv_wgmma_proto.cu -lcublas > $R/build.txt 2>&1
timeout 200 /tmp/wgmma > $R/wgmma.txt 2>&1; echo "rc=$?" >> $R/wgmma.txt
cd $OUT && tar czf r.tgz r && rm -rf r
