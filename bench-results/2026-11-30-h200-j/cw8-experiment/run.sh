#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
nvidia-smi > $R/nvidia-smi.log 2>&1
(cd bin && timeout 120 ./gpu_paged eight_row_tiles) > $R/paged_n8.log 2>&1; tail -3 $R/paged_n8.log
(cd bin && timeout 240 ./gpu_bf16_gemv) > $R/gpu_gemv.log 2>&1; tail -3 $R/gpu_gemv.log
timeout 200 python3 peers.py $R/peers.json --only bf16_gemv/M > $R/peers.log 2>&1; tail -1 $R/peers.log
for f in M16_N7168_K4096 M8_N18432 M16_N18432; do
  B12X_PEER_JSON=$R/peers.json B12X_BENCH_SWEEP=10 B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/b_$f timeout 150 ./bin/bench_bf16_gemv > $R/bench_$f.log 2>&1
  grep -E "^(bf16|sweep|read)|race \(" $R/bench_$f.log | cut -c1-250
done
cd $OUT && tar czf r.tgz r
