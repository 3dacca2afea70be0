#!/bin/bash
# Batches the split/merge rule changed without measurement: B = 4 (BF16 6 splits in clusters, was 8
# through scratch), B = 16 (BF16 2 in clusters, was 2 through scratch; E4M3 3 in clusters, was 4).
R=$OUT/r; mkdir -p $R
cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=paged_decode
b() { local n=$1; shift
  env "$@" B12X_BENCH_OUT=$R/$n timeout 100 ./bench_paged > $R/$n.log 2>&1; echo "== $n rc=$? ($*)"
  grep -E "^paged_decode" $R/$n.log | cut -c1-110; }
b default B12X_PAGED_BATCHES=4,16
b b4_old B12X_PAGED_BATCHES=4 B12X_PAGED_CLUSTER=0 B12X_PAGED_SPLIT_CAP=8
b b16_old_bf16 B12X_PAGED_BATCHES=16 B12X_PAGED_CLUSTER=0 B12X_PAGED_SPLIT_CAP=2
b b16_old_e4m3 B12X_PAGED_BATCHES=16 B12X_PAGED_CLUSTER=0 B12X_PAGED_SPLIT_CAP=4
cd $OUT && tar czf r.tgz r
