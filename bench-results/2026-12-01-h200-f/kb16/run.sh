#!/bin/bash
# Session 16, call 8: 2-D TMA streams with longer row pieces per stage (kb8/kb16 on 16-64-row
# boxes, stream-K stretches) against bf16_gemv rt3's (144 rows, kb4 x 2), read_sched_proto `rt3`,
# twice. From the repo root; output in $OUT/r.
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/sched read_sched_proto.cu > $R/build.txt 2>&1
/tmp/sched rt3 > $R/rt3.txt 2>&1
/tmp/sched rt3 >> $R/rt3.txt 2>&1
cd $OUT && tar czf r.tgz r
