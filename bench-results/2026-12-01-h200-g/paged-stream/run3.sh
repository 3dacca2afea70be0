#!/bin/bash
# Session 17, call 6: where the read-only split probe's CTA time goes (PS_TRACE_ONLY=1: entry ->
# first block landed -> ring drained, S = 3 and 6), next to the library kernel's phases
# (paged_trace_proto.cu) at the same shapes, in one job. From the repo root.
R=$OUT/r; mkdir -p $R; cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/pstream paged_stream_proto.cu > $R/build3.log 2>&1; echo "build pstream rc=$?" >> $R/rc3.txt
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace paged_trace_proto.cu >> $R/build3.log 2>&1; echo "build ptrace rc=$?" >> $R/rc3.txt
PS_TRACE_ONLY=1 timeout 200 /tmp/pstream > $R/probe_trace.txt 2>&1; echo "pstream trace rc=$?" >> $R/rc3.txt
for s in "8 2048" "8 8192"; do timeout 60 /tmp/ptrace $s >> $R/library3.txt 2>&1; echo "ptrace $s rc=$?" >> $R/rc3.txt; done
