#!/bin/bash
# Session 14, call 1: bf16_gemv (TMA kernel) and F.linear timed by one harness in one process.
set -x
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm --format=csv > $R/gpu.txt
nvcc --version | tail -2 >> $R/gpu.txt
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $R/gpu.txt
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -shared -Xcompiler -fPIC -I../../b12x-core/include -o /tmp/libgemv_ext.so gemv_torch_ext.cu > $R/build.txt 2>&1
timeout 400 python3 gemv_cross_harness.py /tmp/libgemv_ext.so > $R/cross.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
