#!/bin/bash
# Session 34, proto call: the wgmma kernels with three A-register buffers (two steps' MMAs in
# flight) against the library's two, per format, on the four prefill shapes (plain grid, no split
# tail; each wgmma kernel checked against the mma.sync tiled kernel of its format).
R=$OUT/r; mkdir -p $R
cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -I../../b12x-core/include -o /tmp/t bsgemm_tile_proto.cu > $R/build.txt 2>&1
echo "build rc=$? t=$SECONDS" | tee -a $R/summary.txt
timeout 400 /tmp/t > $R/proto.txt 2>&1
echo "proto rc=$? t=$SECONDS" | tee -a $R/summary.txt
grep -E "wg_" $R/proto.txt | cut -c1-150
cd $OUT && tar czf r.tgz r && rm -rf r
