#!/bin/bash
# Session 13, call a: quant instruction trims (2f9c451) — GPU suites, benches new vs old (b2aeb77)
# in one job, sanitizers on the touched kernels; gemv_wgmma_proto with x multicast.
R=$OUT/r; mkdir -p $R
export B12X_ALLOW_PARTIAL_ARCHS=1
cat .gpu/bundle/COMMIT > $R/commit.txt; cat .gpu/old/COMMIT >> $R/commit.txt
S=$(date +%s)
el() { echo "t=$(( $(date +%s) - S ))s"; }
cd .gpu/bundle/bin
for t in gpu_nvfp4 gpu_fp8_block gpu_rmsnorm_quant gpu_rmsnorm; do
  timeout 150 ./$t --test-threads 1 > $R/$t.log 2>&1; echo "$t rc=$? $(grep 'test result' $R/$t.log) $(el)"
  grep -E "FAILED|panicked" $R/$t.log | head -5
done
for f in T32768 T8192; do
  for v in new old; do
    B=./bench_rmsnorm_quant; [ $v = old ] && B=../../old/bench_rmsnorm_quant
    B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_rq_${f}_$v B12X_BENCH_SAMPLES=30 timeout 100 $B > $R/bench_rq_${f}_$v.log 2>&1; echo "rq $f $v rc=$? $(el)"
    grep -E "^rmsnorm_quant" $R/bench_rq_${f}_$v.log | cut -c1-110
  done
done
for b in nvfp4 fp8_block; do for f in M32768 M8192; do
  for v in new old; do
    B=./bench_$b; [ $v = old ] && B=../../old/bench_$b
    B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_${b}_${f}_$v B12X_BENCH_SAMPLES=30 timeout 60 $B > $R/bench_${b}_${f}_$v.log 2>&1; echo "$b $f $v rc=$? $(el)"
    grep -E "^(nvfp4|fp8_block)/" $R/bench_${b}_${f}_$v.log | cut -c1-110
  done
done; done
for t in gpu_nvfp4 gpu_fp8_block gpu_rmsnorm_quant; do
  B12X_TEST_PROFILE=reduced timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 ./$t --test-threads 1 > $R/memcheck_$t.log 2>&1
  echo "memcheck $t rc=$? $(grep -E 'ERROR SUMMARY|test result' $R/memcheck_$t.log | tr '\n' ' ') $(el)"
done
for t in gpu_rmsnorm_quant gpu_nvfp4; do
  B12X_TEST_PROFILE=reduced timeout 60 compute-sanitizer --tool racecheck --error-exitcode 1 ./$t --test-threads 1 > $R/racecheck_$t.log 2>&1
  echo "racecheck $t rc=$? $(grep -E 'RACECHECK SUMMARY|test result' $R/racecheck_$t.log | tr '\n' ' ') $(el)"
done
cd ../../../bench/proto
nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I../../b12x-core/include -o /tmp/wgmma gemv_wgmma_proto.cu -lcublas > $R/wgmma_build.txt 2>&1; echo "wgmma build rc=$? $(el)"
timeout 100 /tmp/wgmma > $R/wgmma.txt 2>&1; echo "wgmma rc=$? $(el)"
cd $OUT && tar czf r.tgz r
