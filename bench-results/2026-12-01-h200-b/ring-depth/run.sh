#!/bin/bash
# Session 12, call c: gemv L2-prefetch prototype.
mkdir -p $OUT/r
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/place gemv_place_proto.cu -lcublas > $OUT/r/build.txt 2>&1
timeout 300 /tmp/place > $OUT/r/place.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
