#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
S=$(date +%s)
(cd bin && timeout 200 ./gpu_paged > $R/gpu_paged.log 2>&1; echo "gpu_paged rc=$? $(grep 'test result' $R/gpu_paged.log) t=$(( $(date +%s) - S ))s")
grep -E "FAILED|failed" $R/gpu_paged.log | head -20
timeout 100 python3 peers.py $R/peers.json --only paged_decode > $R/peers.log 2>&1; echo "peers rc=$? t=$(( $(date +%s) - S ))s"
cd bin
B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench B12X_BENCH_SAMPLES=20 timeout 200 ./bench_paged > $R/bench_paged.log 2>&1; echo "bench rc=$? t=$(( $(date +%s) - S ))s"
grep -E "paged_decode|ceiling|read_probe" $R/bench_paged.log | cut -c1-175
cd $OUT && tar czf r.tgz r
