#!/bin/bash
# Session 12, call g: rmsnorm_quant row-base stores (rmsnorm.cu) — its suites and bench; memcheck
# (reduced profile) of every kernel touched this session (common.cuh's bf16 unpack, rmsnorm.cu).
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
S=$(date +%s)
cd bin
for t in gpu_rmsnorm_quant gpu_rmsnorm; do
  timeout 120 ./$t --test-threads 1 > $R/$t.log 2>&1; echo "$t rc=$? $(grep 'test result' $R/$t.log) t=$(( $(date +%s) - S ))s"
  grep -E "FAILED|failed|Error" $R/$t.log | head -5
done
for f in T32768 T8192; do
  B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_$f B12X_BENCH_SAMPLES=30 timeout 100 ./bench_rmsnorm_quant > $R/bench_rmsnorm_quant_$f.log 2>&1; echo "bench $f rc=$? t=$(( $(date +%s) - S ))s"
  grep -E "^(rmsnorm|read_probe)" $R/bench_rmsnorm_quant_$f.log | cut -c1-120
done
for t in gpu_rmsnorm_quant gpu_rmsnorm gpu_nvfp4 gpu_mx gpu_fp8_block gpu_kv_append gpu_bf16_gemv; do
  B12X_TEST_PROFILE=reduced timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 ./$t --test-threads 1 > $R/memcheck_$t.log 2>&1
  echo "memcheck $t rc=$? $(grep -E 'ERROR SUMMARY|test result' $R/memcheck_$t.log | tr '\n' ' ') t=$(( $(date +%s) - S ))s"
done
B12X_TEST_PROFILE=reduced timeout 60 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_rmsnorm_quant --test-threads 1 > $R/racecheck_gpu_rmsnorm_quant.log 2>&1
echo "racecheck gpu_rmsnorm_quant rc=$? $(grep -E 'RACECHECK SUMMARY|test result' $R/racecheck_gpu_rmsnorm_quant.log | tr '\n' ' ') t=$(( $(date +%s) - S ))s"
cd $OUT && tar czf r.tgz r
