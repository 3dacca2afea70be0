#!/bin/bash
# Session 22, call 2: the new attention.kv_append bench (b12x-attention/benches/kv_append.rs) with
# its PyTorch peers (bench/peers.py --only kv_append) in the same job. .gpu/bundle/bin/bench_kv_append
# was built with B12X_CUDA_ARCHS=sm_90a cargo build --profile bundle -p b12x-attention --bench kv_append.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
timeout 200 python3 bench/peers.py $R/peers.json --only kv_append > $R/peers.log 2>&1; echo "peers rc=$? t=$SECONDS" >> $R/summary.txt; save
(cd $B/bin && B12X_CACHE_DIR=/tmp/c-ka B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R timeout 200 ./bench_kv_append > $R/bench.log 2>&1)
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; cat $R/bench.log | tail -20
rm -rf $R
