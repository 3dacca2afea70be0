#!/bin/bash
R=$OUT/r; mkdir -p $R
P=$PWD/.gpu/scripts/peers_s11.json
(cd .gpu/scripts && nvcc -std=c++17 -O3 -arch=sm_90a -o /tmp/cocc cluster_occupancy.cu && /tmp/cocc) > $R/cluster_occupancy.txt 2>&1
cat $R/cluster_occupancy.txt
cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_PEER_JSON=$P B12X_BENCH_SAMPLES=20
b() { # name env...
  local n=$1; shift
  env "$@" B12X_BENCH_OUT=$R/$n timeout 120 ./bench_paged > $R/$n.log 2>&1; echo "== $n rc=$? ($*)"
  grep -E "^paged_decode" $R/$n.log | cut -c1-150
}
b b8_c1 B12X_BENCH_FILTER=B8_ctx2048 B12X_PAGED_CLUSTER=1
b b8_c0 B12X_BENCH_FILTER=B8_ctx2048 B12X_PAGED_CLUSTER=0
b b8_cap2_c1 B12X_BENCH_FILTER=B8_ctx2048 B12X_PAGED_CLUSTER=1 B12X_PAGED_SPLIT_CAP=2
b b8_cap2_c0 B12X_BENCH_FILTER=B8_ctx2048 B12X_PAGED_CLUSTER=0 B12X_PAGED_SPLIT_CAP=2
b b128_c1 B12X_BENCH_FILTER=B128_ctx2048 B12X_PAGED_CLUSTER=1
b b128_c0 B12X_BENCH_FILTER=B128_ctx2048 B12X_PAGED_CLUSTER=0
b b128_8k_c1 B12X_BENCH_FILTER=B128_ctx8192 B12X_PAGED_CLUSTER=1
b b128_8k_c0 B12X_BENCH_FILTER=B128_ctx8192 B12X_PAGED_CLUSTER=0
cd $OUT && tar czf r.tgz r
