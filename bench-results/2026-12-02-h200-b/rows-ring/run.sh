#!/bin/bash
# Session 24 call 3: persistent CTAs with a 2- or 3-row ring of bulk copies in shared memory
# (s2 / s3 entry points of bench/proto/rmsnorm_quant_rows_proto.cu, w in shared memory too) against
# the library's v4 / v8 / v4r2; bit-exact check against v4, then timing (two runs).
set -u
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/rq_ring rmsnorm_quant_rows_proto.cu > $R/build.log 2>&1 || { cat $R/build.log; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.mem,clocks.max.sm --format=csv > $R/gpu.txt
/tmp/rq_ring all > $R/run1.txt 2>&1; echo "rc $?" >> $R/run1.txt
/tmp/rq_ring time > $R/run2.txt 2>&1; echo "rc $?" >> $R/run2.txt
cat $R/run1.txt | grep -v "^ *$" | head -5; grep MISMATCH $R/run1.txt | head
