#!/bin/bash
# Session 34, call 2 (bundle 81e8928, as call 1): control for call 1's block-FP8 prefill rows
# (334-348 TFLOP/s vs session 33's 376-392): every prefill row (all weight formats, M 2048 / 8192)
# and the GPU's clocks before and after, to tell a slower machine from a slower kernel.
R=$OUT/r; mkdir -p $R/bench; ROOT=$PWD; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active --format=csv > $R/smi.txt 2>&1
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_QUICK=1 B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=prefill_w B12X_PEER_JSON=$ROOT/bench-results/2026-12-02-h200-e/call2/peers.json B12X_BENCH_OUT=$R/bench timeout 300 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1 &
P=$!; sleep 40; nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv >> $R/smi.txt 2>&1; wait $P
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> $R/smi.txt 2>&1
cat $R/summary.txt $R/smi.txt
grep -A1 -E "bucket (1025-2048|4097-8192) " $R/bench/bench.log | grep race | cut -c1-220
grep -hE "^\| (blockscaled)" $R/bench/*.md | grep -v "@fp8" | cut -d'|' -f2,3,4,7,10,11
cd $OUT && tar czf r.tgz r && rm -rf r
