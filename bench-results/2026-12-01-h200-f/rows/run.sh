#!/bin/bash
# Session 16, call 7: W streamed as 1-D bulk copies of row pieces (R rows x B bytes per stage,
# bench/proto/lsu_stream_proto.cu `rows`) against bf16_gemv rt3's 2-D box stream
# (bench/proto/read_sched_proto.cu `rt3`) and the read probe, one call. From the repo root.
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/lsu lsu_stream_proto.cu > $R/build.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/sched read_sched_proto.cu >> $R/build.txt 2>&1
/tmp/lsu rows > $R/rows.txt 2>&1
/tmp/sched rt3 > $R/rt3.txt 2>&1
/tmp/lsu rows >> $R/rows.txt 2>&1
cd $OUT && tar czf r.tgz r
