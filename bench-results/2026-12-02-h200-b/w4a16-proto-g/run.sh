#!/bin/bash
# Session 24, call 13: the W4A16 prototype's variant E (D's math fed from a per-warp cp.async ring
# of S chunks in shared memory: S - 1 chunks in flight per warp); ncu of C and E (w4, s8).
set -u
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/w4a16 w4a16_gemv_proto.cu -lcublas > $R/build.log 2>&1 || { cat $R/build.log; exit 1; }
timeout 300 /tmp/w4a16 > $R/run.txt 2>&1; echo "rc $?" >> $R/run.txt
timeout 120 ncu --set full --clock-control none --kernel-name regex:w4a16_nvfp4 --launch-count 2 /tmp/w4a16 ncu > $R/ncu.txt 2>&1
grep -E "w4a16_nvfp4|^\s+(Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|Executed Instructions) " $R/ncu.txt | sed 's/  */ /g' > $R/ncu-digest.txt
grep -E "read probe|C_mt1_w8|D_w|E_|cublas|FAIL" $R/run.txt | grep -v " 16 "; cat $R/ncu-digest.txt
