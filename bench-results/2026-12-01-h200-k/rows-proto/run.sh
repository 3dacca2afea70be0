#!/bin/bash
# Session 21, call 2: the persistent fused norm -> quantize entry points (p2/p4/p8) against v2/v4/v8:
# bit-for-bit check, then graph-replay times (bench/proto/rmsnorm_quant_rows_proto.cu).
R=$OUT/r; mkdir -p $R
cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/rq_rows rmsnorm_quant_rows_proto.cu > $R/build.txt 2>&1
echo "build rc=$?" >> $R/build.txt
/tmp/rq_rows all > $R/rows.txt 2>&1; echo "rc=$?" >> $R/rows.txt
cat $R/rows.txt
cd $OUT && tar czf r.tgz r && rm -rf r
