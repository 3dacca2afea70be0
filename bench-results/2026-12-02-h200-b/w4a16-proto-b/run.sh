#!/bin/bash
# Session 24, call 7: the W4A16 prototype with variant B (tokens as the MMA's M, x fragments reused
# by RT 8-row weight tiles per warp) beside call 6's swap-AB kernel; then ncu (--set full) of one
# launch of each at 18432 x 7168, M = 1.
set -u
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/w4a16 w4a16_gemv_proto.cu -lcublas > $R/build.log 2>&1 || { cat $R/build.log; exit 1; }
timeout 300 /tmp/w4a16 > $R/run.txt 2>&1; echo "rc $?" >> $R/run.txt
timeout 200 ncu --set full --clock-control none --kernel-name regex:w4a16_nvfp4 --launch-count 2 /tmp/w4a16 ncu > $R/ncu.txt 2>&1
grep -E "w4a16_nvfp4|^\s+(Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|Registers Per Thread|Executed Instructions|Warp Cycles Per Issued Instruction|L1/TEX Hit Rate|Theoretical Occupancy) " $R/ncu.txt | sed 's/  */ /g' > $R/ncu-digest.txt
cat $R/run.txt $R/ncu-digest.txt
