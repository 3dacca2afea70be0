#!/bin/bash
# Session 23, call 3: the persistent fused norm -> quantize of bench/proto/rmsnorm_quant_rows_proto.cu
# (p2/p4/p8: rows c, c + grid, ...; the next row's loads in flight) with w kept packed in
# registers (session 21's widened it to f32, 81-128 registers) and register caps, against the
# library's one-row-per-CTA v2/v4/v8 (v4 at 48 registers since aac8ab2). Two builds: caps
# p2/p4/p8 = 56/64/96 and 64/72/96. check: p == v bit for bit; time: 30 graph replays each.
R=$OUT/r; mkdir -p $R
save() { (cd $OUT && tar czf r.tgz r); }
cd bench/proto
for caps in "56 64 96" "64 72 96"; do
  set -- $caps
  (nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -DPROTO_CAP_2=$1 -DPROTO_CAP_4=$2 -DPROTO_CAP_8=$3 \
     -o /tmp/rows_$2 rmsnorm_quant_rows_proto.cu > $R/build_$2.log 2>&1; echo "build cap4=$2 rc=$? t=$SECONDS" >> $R/summary.txt) &
done
wait; save
timeout 150 /tmp/rows_64 all > $R/cap64.txt 2>&1; echo "cap64 rc=$? t=$SECONDS" >> $R/summary.txt; save
timeout 100 /tmp/rows_72 time > $R/cap72.txt 2>&1; echo "cap72 rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -E 'check|7168' $R/cap64.txt | head -60
rm -rf $R
