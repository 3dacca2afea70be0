#!/bin/bash
# Session 12, call f: bf16 unpack as one shift/mask per value (common.cuh) — every affected GPU
# suite, the quantizer / norm benches at the large shapes, ncu of three issue-bound kernels.
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
S=$(date +%s)
cd bin
for t in gpu_rmsnorm gpu_rmsnorm_quant gpu_mx gpu_nvfp4 gpu_fp8_block gpu_kv_append gpu_bf16_gemv; do
  [ -x ./$t ] || { echo "$t missing"; continue; }
  timeout 150 ./$t --test-threads 1 > $R/$t.log 2>&1; echo "$t rc=$? $(grep 'test result' $R/$t.log) t=$(( $(date +%s) - S ))s"
  grep -E "FAILED|failed|Error" $R/$t.log | head -5
done
P=../../../bench-results/2026-12-01-h200-b/rmsnorm-pipelined/peers.json
B12X_PEER_JSON=$P B12X_BENCH_OUT=$R/bench B12X_BENCH_SAMPLES=30 timeout 100 ./bench_rmsnorm > $R/bench_rmsnorm.log 2>&1; echo "bench_rmsnorm rc=$? t=$(( $(date +%s) - S ))s"
grep -E "^(rmsnorm)" $R/bench_rmsnorm.log | cut -c1-140
for b in bench_rmsnorm_quant:T32768 bench_nvfp4:M32768 bench_mx:M32768 bench_fp8_block:M32768; do
  bin=${b%%:*}; f=${b##*:}
  B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_$bin B12X_BENCH_SAMPLES=30 timeout 150 ./$bin > $R/$bin.log 2>&1; echo "$bin rc=$? t=$(( $(date +%s) - S ))s"
  grep -E "^(rmsnorm|read_probe|nvfp4|mxfp|fp8)" $R/$bin.log | cut -c1-120
done
export B12X_AUTOTUNE=0 B12X_CACHE_DIR=/tmp/ncu-cache
B12X_BENCH_FILTER=rmsnorm_quant_mxfp8/T32768_D7168 timeout 120 ncu --clock-control none --set full -k regex:'b12x_rmsnorm_mxfp8_v4_bf16$' -c 1 ./bench_rmsnorm_quant > $R/ncu_rq_mxfp8.txt 2>&1; echo "ncu1 rc=$? t=$(( $(date +%s) - S ))s"
B12X_BENCH_FILTER=rmsnorm/T32768_D7168 timeout 100 ncu --clock-control none --set full -k regex:'b12x_rmsnorm_v4_bf16$' -c 1 ./bench_rmsnorm > $R/ncu_rmsnorm.txt 2>&1; echo "ncu2 rc=$? t=$(( $(date +%s) - S ))s"
B12X_BENCH_FILTER=M32768_K7168 timeout 100 ncu --clock-control none --set full -k regex:'b12x_nvfp4_t' -c 1 ./bench_nvfp4 > $R/ncu_nvfp4.txt 2>&1; echo "ncu3 rc=$? t=$(( $(date +%s) - S ))s"
cd $OUT && tar czf r.tgz r
