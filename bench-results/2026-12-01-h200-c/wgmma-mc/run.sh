#!/bin/bash
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I../../b12x-core/include -o /tmp/wgmma gemv_wgmma_proto.cu -lcublas > $R/wgmma_build.txt 2>&1; echo "build rc=$?"
timeout 200 /tmp/wgmma > $R/wgmma.txt 2>&1; echo "run rc=$?"
cat $R/wgmma.txt
cd $OUT && tar czf r.tgz r
