#!/bin/bash
# Session 17, call 4: can a stream-K schedule read the decode cache at >= 90%? bench/proto/
# paged_stream_proto.cu (read-only probes of attention.paged's layout: the library's per-request
# splits against one wave of equal contiguous shares of the batch's blocks), and in the same job
# the library kernel's own times at the same shapes (bench/proto/paged_trace_proto.cu: its
# default and scratch configs). Built here with the device's nvcc. From the repo root.
R=$OUT/r; mkdir -p $R; cd bench/proto
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/pstream paged_stream_proto.cu > $R/build.log 2>&1; echo "build pstream rc=$?" >> $R/rc.txt
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace paged_trace_proto.cu >> $R/build.log 2>&1; echo "build ptrace rc=$?" >> $R/rc.txt
timeout 300 /tmp/pstream > $R/stream.txt 2>&1; echo "pstream rc=$?" >> $R/rc.txt
for s in "8 2048" "8 8192" "32 2048"; do timeout 60 /tmp/ptrace $s >> $R/library.txt 2>&1; echo "ptrace $s rc=$?" >> $R/rc.txt; done
cd $OUT && tar czf r.tgz r
