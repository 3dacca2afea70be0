#!/bin/bash
# Session 38, call 1 (issue 6): the L2-prefetch prototype (bench/proto/l2_prefetch_proto.cu:
# does warming W into L2 during a latency-bound 64-CTA kernel speed up the GEMV after it?) and
# the configs the layer's session picks at B = 1 (the bench now prints them).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
(cd bench/proto && nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I../../b12x-core/include \
  -o /tmp/l2p l2_prefetch_proto.cu 2>&1 | grep -v Wno-dep; timeout 200 /tmp/l2p) > $R/proto.txt 2>&1
echo "proto rc=$? t=$SECONDS" >> $R/summary.txt; save
cd $B/bin
B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=bf16_pdl/ B12X_BENCH_OUT=$R/bench timeout 200 ./bench_decoder_layer > $R/bench_layer.txt 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt $R/proto.txt; grep -E "gemm|paged| -> " $R/bench_layer.txt | cut -c1-200 | head -30
grep -E "/step|linears|op/" $R/bench_layer.txt | cut -c1-90
cd $OUT && tar czf r.tgz r && rm -rf r
