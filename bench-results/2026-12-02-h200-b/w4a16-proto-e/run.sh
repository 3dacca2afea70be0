#!/bin/bash
# Session 24, call 10: the W4A16 prototype's variant C with the scale table replicated per lane
# (CR: 32 copies, so the lanes' lookups of random codes never conflict in a bank); ncu of C and CR
# (18432 x 7168, M = 1) with the stall reasons.
set -u
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/w4a16 w4a16_gemv_proto.cu -lcublas > $R/build.log 2>&1 || { cat $R/build.log; exit 1; }
timeout 300 /tmp/w4a16 > $R/run.txt 2>&1; echo "rc $?" >> $R/run.txt
timeout 200 ncu --set full --clock-control none --kernel-name regex:w4a16_nvfp4 --launch-count 2 /tmp/w4a16 ncu > $R/ncu.txt 2>&1
grep -E "w4a16_nvfp4|^\s+(Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|Executed Instructions|Warp Cycles Per Issued Instruction|Shared Memory Throughput|L1/TEX Hit Rate) " $R/ncu.txt | sed 's/  */ /g' > $R/ncu-digest.txt
grep -iE "stall|bank" $R/ncu.txt | sed 's/  */ /g' | head -40 >> $R/ncu-digest.txt
grep -E "read probe|mt1_w8|C_mt1_w8|CR|cublas" $R/run.txt | grep -v " 16 " ; cat $R/ncu-digest.txt
