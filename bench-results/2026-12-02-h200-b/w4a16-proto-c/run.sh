#!/bin/bash
# Session 24, call 8: the W4A16 prototype's variant C (the weight's nibbles interleaved so a
# bf16x2 pair sits 16 bits apart: two shifts and two LOP3s per pair instead of a byte extraction
# and two multiplies) beside the swap-AB kernel; then ncu of one launch of each (18432 x 7168, M = 1).
set -u
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/w4a16 w4a16_gemv_proto.cu -lcublas > $R/build.log 2>&1 || { cat $R/build.log; exit 1; }
timeout 300 /tmp/w4a16 > $R/run.txt 2>&1; echo "rc $?" >> $R/run.txt
timeout 200 ncu --set full --clock-control none --kernel-name regex:w4a16_nvfp4 --launch-count 2 /tmp/w4a16 ncu > $R/ncu.txt 2>&1
grep -E "w4a16_nvfp4|^\s+(Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|Executed Instructions|Warp Cycles Per Issued Instruction) " $R/ncu.txt | sed 's/  */ /g' > $R/ncu-digest.txt
cat $R/run.txt $R/ncu-digest.txt
