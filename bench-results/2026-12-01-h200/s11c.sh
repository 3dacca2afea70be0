#!/bin/bash
R=$OUT/r; mkdir -p $R
P=$PWD/.gpu/scripts/peers_s11.json
cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_PEER_JSON=$P B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=B8_
b() { # name env...
  local n=$1; shift
  env "$@" B12X_BENCH_OUT=$R/$n timeout 100 ./bench_paged > $R/$n.log 2>&1; echo "== $n rc=$? ($*)"
  grep -E "^paged_decode" $R/$n.log | cut -c1-100
}
for cs in "2 3" "3 3" "2 2" "3 2" "4 2"; do set -- $cs
  b bf16_cap$1_s$2 B12X_BENCH_FILTER=B8_ctx B12X_PAGED_CLUSTER=1 B12X_PAGED_SPLIT_CAP=$1 B12X_PAGED_STAGES=$2
done
b default_scratch B12X_PAGED_CLUSTER=0
for c in 6 8; do b cap$c B12X_BENCH_FILTER=B8_ctx B12X_PAGED_CLUSTER=1 B12X_PAGED_SPLIT_CAP=$c B12X_PAGED_STAGES=2; done
cd $OUT && tar czf r.tgz r
