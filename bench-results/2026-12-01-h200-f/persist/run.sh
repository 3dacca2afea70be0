#!/bin/bash
# Session 16, call 2: a persistent rmsnorm (bench/proto/rmsnorm_l2_proto.cu `persist`: grid = SMs
# x CTAs per SM, the next row's loads in flight during this row's reduction, w loaded once per
# CTA) against the library's v2, built on the device with its nvcc. From the repo root; output in $OUT/r.
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/rms_l2 rmsnorm_l2_proto.cu > $R/build.txt 2>&1
/tmp/rms_l2 persist > $R/rmsnorm-persist.txt 2>&1
cd $OUT && tar czf r.tgz r
