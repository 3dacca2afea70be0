#!/bin/bash
# Session 24, call 12: the W4A16 prototype's variant D (variant C with a tight loop: pointers
# advanced per chunk, two register buffers in an unrolled loop) and DA (D with the bit placement
# as funnel shifts: SHF on the ALU pipe instead of IMAD.SHL on the FMA pipe); ncu of C, D, DA.
set -u
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/w4a16 w4a16_gemv_proto.cu -lcublas > $R/build.log 2>&1 || { cat $R/build.log; exit 1; }
timeout 300 /tmp/w4a16 > $R/run.txt 2>&1; echo "rc $?" >> $R/run.txt
timeout 200 ncu --set full --clock-control none --kernel-name regex:w4a16_nvfp4 --launch-count 3 /tmp/w4a16 ncu > $R/ncu.txt 2>&1
grep -E "w4a16_nvfp4|^\s+(Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|Executed Instructions) " $R/ncu.txt | sed 's/  */ /g' > $R/ncu-digest.txt
grep -E "read probe|C_mt1_w8|D_|DA_|cublas" $R/run.txt | grep -v " 16 "; cat $R/ncu-digest.txt
