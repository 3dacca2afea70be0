#!/bin/bash
# Session 38, call 2 (issue 6): the L2-prefetch prototype again (+ L2 read-back checks), and the
# layer bench at B = 1 with the configs the session chose and the step's prefixes (first k ops).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
(cd bench/proto && nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I../../b12x-core/include \
  -o /tmp/l2p l2_prefetch_proto.cu 2>&1 | grep -v Wno-dep; PROTO_ATT_U=1 timeout 200 /tmp/l2p) > $R/proto.txt 2>&1
echo "proto rc=$? t=$SECONDS" >> $R/summary.txt; save
cd $B/bin
for f in bf16/ bf16_pdl/ bf16_pdl_r6/; do
  n=${f%/}
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_$n timeout 200 ./bench_decoder_layer > $R/bench_$n.txt 2>&1
  echo "bench $n rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt; grep -E "read|P -> gemv" $R/proto.txt
grep -h " -> " $R/bench_bf16_pdl.txt | cut -c1-220
for n in bf16 bf16_pdl bf16_pdl_r6; do grep -E "/step|linears|prefix|op/" $R/bench_$n/decoder_layer.md | awk -F'|' '{print $2, $4}'; done
cd $OUT && tar czf r.tgz r && rm -rf r
