#!/bin/bash
# Session 17, call 5: paged_stream_proto.cu again after its occupancy query was fixed (call 4's
# query ran before the > 48 KB shared-memory opt-in, returned 0 and skipped every BF16 stream row).
R=$OUT/r; mkdir -p $R; cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/pstream paged_stream_proto.cu > $R/build2.log 2>&1; echo "build pstream rc=$?" >> $R/rc2.txt
timeout 300 /tmp/pstream > $R/stream2.txt 2>&1; echo "pstream rc=$?" >> $R/rc2.txt
