#!/bin/bash
# Session 37, call 8: benches/rope_kv_append.rs (the fused op vs rope then kv_append in one graph).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
B12X_BENCH_OUT=$R/bench timeout 120 ./bench_rope_kv_append > $R/bench_rope_kv_append.txt 2>&1; echo "bench rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt; grep rope_kv_append/ $R/bench_rope_kv_append.txt | cut -c1-100
cd $OUT && tar czf r.tgz r && rm -rf r
