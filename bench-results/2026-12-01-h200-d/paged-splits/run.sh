#!/bin/bash
# Session 14: attention.paged split caps and merges under the new flush (the plan's rule was fitted
# under the old one), at the shapes still short of the targets. Bundle of ed3d502, repo root.
R=$OUT/r; mkdir -p $R
cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20
b() { local n=$1 f=$2; shift 2
  env "$@" B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/$n timeout 60 ./bench_paged > $R/$n.log 2>&1
  echo "== $n rc=$? ($*)"; grep -E "^paged_decode" $R/$n.log | cut -c1-150; }
b b8k_default paged_decode/B8_ctx8192
b b8k_c2 paged_decode/B8_ctx8192 B12X_PAGED_SPLIT_CAP=2 B12X_PAGED_CLUSTER=1
b b8k_c4 paged_decode/B8_ctx8192 B12X_PAGED_SPLIT_CAP=4 B12X_PAGED_CLUSTER=1
b b8k_s4 paged_decode/B8_ctx8192 B12X_PAGED_SPLIT_CAP=4 B12X_PAGED_CLUSTER=0
b b8k_s6 paged_decode/B8_ctx8192 B12X_PAGED_SPLIT_CAP=6 B12X_PAGED_CLUSTER=0
b b32_default paged_decode/B32_ctx2048
b b32_c2 paged_decode/B32_ctx2048 B12X_PAGED_SPLIT_CAP=2 B12X_PAGED_CLUSTER=1
b b32_s2 paged_decode/B32_ctx2048 B12X_PAGED_SPLIT_CAP=2 B12X_PAGED_CLUSTER=0
b b32_st3 paged_decode/B32_ctx2048 B12X_PAGED_STAGES=3
b b2k_default paged_decode/B8_ctx2048
b b2k_c2 paged_decode/B8_ctx2048 B12X_PAGED_SPLIT_CAP=2 B12X_PAGED_CLUSTER=1
b b2k_c4 paged_decode/B8_ctx2048 B12X_PAGED_SPLIT_CAP=4 B12X_PAGED_CLUSTER=1
b b2k_s6 paged_decode/B8_ctx2048 B12X_PAGED_SPLIT_CAP=6 B12X_PAGED_CLUSTER=0
