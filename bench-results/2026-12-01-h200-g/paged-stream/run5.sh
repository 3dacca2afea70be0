#!/bin/bash
# Session 17, call 8: the Q tile's global loads issued before the first KV blocks' page ids
# (fetch_q in the working tree's paged.cu) against HEAD's kernel (paged_head.cu), both through
# paged_trace_proto.cu, base / new / new / base at 8 x 2k, base / new at 8 x 8k. One job.
# paged_head.cu was `git show 3d42236:b12x-attention/kernels/paged.cu`, copied next to this script
# for the call (not kept: it is that commit's kernel).
R=$OUT/r; mkdir -p $R; ROOT=$PWD
mkdir -p /tmp/base && cp -r b12x-attention b12x-core bench /tmp/base/ && cp $ROOT/bench-results/2026-12-01-h200-g/paged-stream/paged_head.cu /tmp/base/b12x-attention/kernels/paged.cu
(cd /tmp/base/bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace_base paged_trace_proto.cu) > $R/build5.log 2>&1; echo "build base rc=$?" >> $R/rc5.txt
(cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace_new paged_trace_proto.cu) >> $R/build5.log 2>&1; echo "build new rc=$?" >> $R/rc5.txt
for v in base new new base; do echo "=== $v 8 2048" >> $R/ab5.txt; timeout 60 /tmp/ptrace_$v 8 2048 >> $R/ab5.txt 2>&1; done
for v in base new; do echo "=== $v 8 8192" >> $R/ab5.txt; timeout 60 /tmp/ptrace_$v 8 8192 >> $R/ab5.txt 2>&1; done
echo done >> $R/rc5.txt
