#!/bin/bash
# Session 22, call 5: where the pushed split merge's finish (~2 µs per CTA in session 17's trace)
# goes. bench/proto/paged_trace_proto.cu (built here with the device's nvcc) now also stamps the
# SM clock inside the finish of attention.paged's 8-row cluster merge (hooks 7-9 in paged.cu, no-ops
# in the library): max of m over the splits, the weighted sum over the splits, the division, the
# stores. Decode 8 x 2k and 8 x 8k (the plan's default configs and others), cold and with
# PT_WARM_KEYS=768 (the same kernel, merge code included, runs just before on other data).
R=$OUT/r; mkdir -p $R
save() { (cd $OUT && tar czf r.tgz r); }
(cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace paged_trace_proto.cu) > $R/build.log 2>&1
echo "build rc=$? t=$SECONDS" >> $R/summary.txt; save
for ctx in 2048 8192; do
  timeout 90 /tmp/ptrace 8 $ctx > $R/cold_$ctx.txt 2>&1; echo "cold $ctx rc=$? t=$SECONDS" >> $R/summary.txt; save
  PT_WARM=1 PT_WARM_KEYS=768 timeout 90 /tmp/ptrace 8 $ctx > $R/warm_$ctx.txt 2>&1; echo "warm $ctx rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt; cat $R/cold_2048.txt | head -40
