#!/bin/bash
# Session 24 call 1: two rows per CTA (r4) against v4/v8/p*, caps 64 and 72; bit-exact check + timing.
set -u
R=$OUT/r; mkdir -p $R
cd bench/proto
for cap in 64 72; do
  nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -DPROTO_CAP_R4=$cap -o /tmp/rq_rows$cap rmsnorm_quant_rows_proto.cu > $R/build$cap.log 2>&1 &
done
wait
nvidia-smi --query-gpu=name,clocks.max.mem,clocks.max.sm --format=csv > $R/gpu.txt
/tmp/rq_rows64 all > $R/cap64.txt 2>&1; echo "rc $?" >> $R/cap64.txt
/tmp/rq_rows72 time > $R/cap72.txt 2>&1; echo "rc $?" >> $R/cap72.txt
/tmp/rq_rows64 time > $R/cap64b.txt 2>&1
cat $R/cap64.txt $R/cap72.txt
