#!/bin/bash
# Session 12, call e: pipelined rmsnorm / rmsnorm_quant — GPU suites, benches (race scores printed).
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
nvidia-smi > $R/nvidia-smi.log 2>&1
S=$(date +%s)
cd bin
for t in gpu_rmsnorm gpu_rmsnorm_quant gpu_session; do
  [ -x ./$t ] || continue
  timeout 200 ./$t --test-threads 1 > $R/$t.log 2>&1; echo "$t rc=$? $(grep 'test result' $R/$t.log) t=$(( $(date +%s) - S ))s"
  grep -E "FAILED|failed|Error" $R/$t.log | head -10
done
cd ..
timeout 90 python3 peers.py $R/peers.json --quick --only rms > $R/peers.log 2>&1; echo "peers rc=$? t=$(( $(date +%s) - S ))s"
cd bin
B12X_PRINT_COMPILE_PROGRESS=1 B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench B12X_BENCH_SAMPLES=30 timeout 150 ./bench_rmsnorm > $R/bench_rmsnorm.log 2>&1; echo "bench_rmsnorm rc=$? t=$(( $(date +%s) - S ))s"
grep -E "^(rmsnorm|read_probe)|ceiling" $R/bench_rmsnorm.log | cut -c1-140
B12X_PRINT_COMPILE_PROGRESS=1 B12X_BENCH_OUT=$R/bench B12X_BENCH_SAMPLES=30 timeout 200 ./bench_rmsnorm_quant > $R/bench_rmsnorm_quant.log 2>&1; echo "bench_rmsnorm_quant rc=$? t=$(( $(date +%s) - S ))s"
grep -E "^(rmsnorm|read_probe|unfused)|ceiling" $R/bench_rmsnorm_quant.log | cut -c1-140
cd $OUT && tar czf r.tgz r
