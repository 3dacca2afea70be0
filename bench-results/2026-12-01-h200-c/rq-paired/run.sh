#!/bin/bash
# Session 13, call d: paired quantization of norm.rmsnorm_quant (mend of 7df97fc) — suites, sanitizers,
# bench new vs old (9f4e690) in one job.
R=$OUT/r; mkdir -p $R
export B12X_ALLOW_PARTIAL_ARCHS=1
cat .gpu/bundle/COMMIT > $R/commit.txt; cat .gpu/old/COMMIT >> $R/commit.txt
S=$(date +%s)
el() { echo "t=$(( $(date +%s) - S ))s"; }
cd .gpu/bundle/bin
for t in gpu_rmsnorm_quant gpu_rmsnorm; do
  timeout 100 ./$t --test-threads 1 > $R/$t.log 2>&1; echo "$t rc=$? $(grep 'test result' $R/$t.log) $(el)"
  grep -E "FAILED|panicked" $R/$t.log | head -5
done
for f in T32768 T8192; do for v in new old; do
  B=./bench_rmsnorm_quant; [ $v = old ] && B=../../old/bench_rmsnorm_quant
  B12X_PRINT_COMPILE_PROGRESS=1 B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_rq_${f}_$v B12X_BENCH_SAMPLES=30 timeout 80 $B > $R/bench_rq_${f}_$v.log 2>&1; echo "rq $f $v rc=$? $(el)"
  grep -E "^rmsnorm_quant" $R/bench_rq_${f}_$v.log | cut -c1-110
done; done
B12X_TEST_PROFILE=reduced timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_rmsnorm_quant --test-threads 1 > $R/memcheck_gpu_rmsnorm_quant.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|test result' $R/memcheck_gpu_rmsnorm_quant.log | tr '\n' ' ') $(el)"
B12X_TEST_PROFILE=reduced timeout 60 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_rmsnorm_quant --test-threads 1 > $R/racecheck_gpu_rmsnorm_quant.log 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|test result' $R/racecheck_gpu_rmsnorm_quant.log | tr '\n' ' ') $(el)"
cd $OUT && tar czf r.tgz r
