#!/bin/bash
set -x
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
nvcc --version | tail -2 >> $R/gpu.txt
cd bench/proto
nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I../../b12x-core/include -o /tmp/wgmma gemv_wgmma_proto.cu -lcublas > $R/wgmma_build.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace paged_trace_proto.cu > $R/ptrace_build.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90a -DPT_PREFETCH=1 -I../../b12x-core/include -o /tmp/ptrace_pf paged_trace_proto.cu >> $R/ptrace_build.txt 2>&1
timeout 120 /tmp/wgmma > $R/wgmma.txt 2>&1
for i in 1 2; do timeout 60 /tmp/ptrace > $R/ptrace_default_$i.txt 2>&1; timeout 60 /tmp/ptrace_pf > $R/ptrace_prefetch_$i.txt 2>&1; done
cd ../..
timeout 200 python3 bench/peers.py $R/peers_m16.json --only N7168_K4096 > $R/peers.txt 2>&1
timeout 200 python3 bench/peers.py $R/peers_18k.json --only N18432 >> $R/peers.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
