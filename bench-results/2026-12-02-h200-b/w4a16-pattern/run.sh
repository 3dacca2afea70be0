#!/bin/bash
# Session 24, call 14: does the prototype's access pattern (16 rows x 64 bytes per warp and 128-k
# chunk) read at the ceiling by itself? Load-only probes of that pattern and of whole-row spans.
set -u
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/w4a16 w4a16_gemv_proto.cu -lcublas > $R/build.log 2>&1 || { cat $R/build.log; exit 1; }
timeout 200 /tmp/w4a16 > $R/run.txt 2>&1; echo "rc $?" >> $R/run.txt
grep -E "read probe|P_|D_w|C_mt1_w8" $R/run.txt | grep -v " 16 \| 4 "
