#!/bin/bash
# Session 18, call 6: where B = 32 x 2k (256 MB, one split, no merge: 86% of the ceiling) spends
# its time: paged_trace_proto.cu (working tree = cb3a30e's kernel) with PT_UNSPLIT=1: BF16 at 1
# split with 2- and 3-stage rings, and 2 splits in clusters of 2; twice. From the repo root.
R=$OUT/r; mkdir -p $R
(cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace_new paged_trace_proto.cu) > $R/build.log 2>&1; echo "build rc=$?" >> $R/rc.txt
for i in 1 2; do echo "=== run $i: 32 2048" >> $R/b32.txt; PT_UNSPLIT=1 timeout 60 /tmp/ptrace_new 32 2048 >> $R/b32.txt 2>&1; done
echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r
