#!/bin/bash
# Session 23, call 4: where the ~2.4 us after the ring of an attention.paged decode call go, with
# the warp merge split by hooks 10-11 (bench/proto/paged_trace_proto.cu, built here): the tree
# as is (d41c8ab) and with session 22's unroll.patch (the pushed finish unrolled over the splits)
# applied to a copy; decode 8 x 2k and 8 x 8k, one launch per graph replay, L2 flushed.
R=$OUT/r; mkdir -p $R; ROOT=$PWD
save() { (cd $OUT && tar czf r.tgz r); }
rm -rf /tmp/tree_u && mkdir -p /tmp/tree_u && cp -r b12x-core b12x-attention bench /tmp/tree_u/
(cd /tmp/tree_u && patch -p1 < $ROOT/bench-results/2026-12-01-h200-l/paged-finish-unroll/unroll.patch) > $R/patch.log 2>&1
echo "patch rc=$? t=$SECONDS" >> $R/summary.txt
(cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace paged_trace_proto.cu > $R/build.log 2>&1; echo "build base rc=$? t=$SECONDS" >> $R/summary.txt) &
(cd /tmp/tree_u/bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace_u paged_trace_proto.cu > $R/build_u.log 2>&1; echo "build unroll rc=$? t=$SECONDS" >> $R/summary.txt) &
wait; save
for ctx in 2048 8192; do
  for v in ptrace ptrace_u; do
    timeout 90 /tmp/$v 8 $ctx > $R/${v}_$ctx.txt 2>&1; echo "$v $ctx rc=$? t=$SECONDS" >> $R/summary.txt; save
  done
done
cat $R/summary.txt; head -60 $R/ptrace_2048.txt
rm -rf $R
