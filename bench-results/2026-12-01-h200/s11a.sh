#!/bin/bash
# Session 11: paged decode with the cluster merge of split partials.
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
S=$(date +%s)
(cd bin && timeout 170 ./gpu_paged > $R/gpu_paged.log 2>&1; echo "gpu_paged rc=$? $(grep 'test result' $R/gpu_paged.log) t=$(( $(date +%s) - S ))s")
grep -E "FAILED|failed|Error" $R/gpu_paged.log | head -20
timeout 120 python3 peers.py $R/peers.json --only paged_decode > $R/peers.log 2>&1; echo "peers rc=$? t=$(( $(date +%s) - S ))s"
cd bin
B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench_cluster B12X_BENCH_SAMPLES=20 timeout 150 ./bench_paged > $R/bench_cluster.log 2>&1; echo "bench cluster rc=$? t=$(( $(date +%s) - S ))s"
grep -E "paged_decode|ceiling" $R/bench_cluster.log | cut -c1-150
B12X_PAGED_CLUSTER=0 B12X_BENCH_FILTER=B8_ B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench_scratch B12X_BENCH_SAMPLES=20 timeout 100 ./bench_paged > $R/bench_scratch.log 2>&1; echo "bench scratch rc=$? t=$(( $(date +%s) - S ))s"
grep -E "paged_decode|ceiling" $R/bench_scratch.log | cut -c1-150
cd $OUT && tar czf r.tgz r
