#!/bin/bash
# Session 17, call 7: is the kernel's extra start and finish time cold code? paged_trace_proto.cu
# at 8 x 2k and 8 x 8k, plain and with PT_WARM=1 (a 1-key launch of the same kernel on data of its
# own precedes each timed launch in the graph, so the code is in L2 and the data is not). One job.
R=$OUT/r; mkdir -p $R; cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace paged_trace_proto.cu > $R/build4.log 2>&1; echo "build ptrace rc=$?" >> $R/rc4.txt
for s in "8 2048" "8 8192"; do
  timeout 60 /tmp/ptrace $s >> $R/cold.txt 2>&1; echo "ptrace $s rc=$?" >> $R/rc4.txt
  PT_WARM=1 timeout 60 /tmp/ptrace $s >> $R/warm.txt 2>&1; echo "ptrace warm $s rc=$?" >> $R/rc4.txt
done
