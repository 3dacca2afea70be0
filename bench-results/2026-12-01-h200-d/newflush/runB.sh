#!/bin/bash
# Session 14, call B: the quantizer and attention benches under the new L2 flush, with the
# attention peers (SDPA) of the same job.
R=$OUT/r; mkdir -p $R/t
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_STEP_TIMEOUT=420
timeout 200 python3 .gpu/bundle/peers.py $R/t/peers.json --only paged_decode > $R/t/peers.log 2>&1
export B12X_PEER_JSON=$R/t/peers.json B12X_BENCH_OUT=$R/t/bench-results
cd .gpu/bundle/bin
for b in bench_nvfp4 bench_mx bench_fp8_block bench_paged; do
  [ -x ./$b ] || continue
  echo "=== $b" >> $R/t/bench.log
  timeout 400 ./$b >> $R/t/bench.log 2>&1; echo "rc=$? $b" >> $R/t/bench.log
done
cd $R/t && tar czf $OUT/r.tgz .
