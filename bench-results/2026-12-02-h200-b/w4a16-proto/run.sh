#!/bin/bash
# Session 24, call 6: the W4A16 (NVFP4 weight, BF16 activations) decode GEMV prototype
# (bench/proto/w4a16_gemv_proto.cu) against its f32 reference, cuBLAS BF16 on the dequantized
# weight and the read probe of the same bytes; ncu of one shape after.
set -u
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/w4a16 w4a16_gemv_proto.cu -lcublas > $R/build.log 2>&1 || { cat $R/build.log; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.mem,clocks.max.sm --format=csv > $R/gpu.txt
timeout 240 /tmp/w4a16 > $R/run.txt 2>&1; echo "rc $?" >> $R/run.txt
cat $R/run.txt
