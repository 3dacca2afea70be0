#!/bin/bash
# Session 24, call 9: the W4A16 prototype's variant C with two chunks of prefetch per warp (pf2)
# and K split over 2-4 CTAs (ks2 / ks4: more, shorter CTAs; their sums added atomically into y,
# zeroed by a memset inside the timed graph).
set -u
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/w4a16 w4a16_gemv_proto.cu -lcublas > $R/build.log 2>&1 || { cat $R/build.log; exit 1; }
timeout 300 /tmp/w4a16 > $R/run.txt 2>&1; echo "rc $?" >> $R/run.txt
grep -E "read probe|mt1_w8|C_|cublas" $R/run.txt | grep -v " 16 "
