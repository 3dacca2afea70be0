#!/bin/bash
# Session 13, call c: t*_u8 flat quantizer configs (850a013) — suites (every config on the small
# shapes), memcheck, benches at M = 32768 and 8192.
R=$OUT/r; mkdir -p $R
export B12X_ALLOW_PARTIAL_ARCHS=1
cat .gpu/bundle/COMMIT > $R/commit.txt
S=$(date +%s)
el() { echo "t=$(( $(date +%s) - S ))s"; }
cd .gpu/bundle/bin
for t in gpu_nvfp4 gpu_mx gpu_fp8_block; do
  timeout 200 ./$t --test-threads 1 > $R/$t.log 2>&1; echo "$t rc=$? $(grep 'test result' $R/$t.log) $(el)"
  grep -E "FAILED|panicked" $R/$t.log | head -5
done
for b in nvfp4 mx fp8_block; do for f in M32768 M8192; do
  B12X_PRINT_COMPILE_PROGRESS=1 B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_${b}_${f} B12X_BENCH_SAMPLES=30 timeout 90 ./bench_$b > $R/bench_${b}_${f}.log 2>&1; echo "$b $f rc=$? $(el)"
  grep -E "^(nvfp4|mx|fp8_block)" $R/bench_${b}_${f}.log | cut -c1-120
done; done
for t in gpu_nvfp4 gpu_mx gpu_fp8_block; do
  B12X_TEST_PROFILE=reduced timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 ./$t --test-threads 1 > $R/memcheck_$t.log 2>&1
  echo "memcheck $t rc=$? $(grep -E 'ERROR SUMMARY|test result' $R/memcheck_$t.log | tr '\n' ' ') $(el)"
done
cd $OUT && tar czf r.tgz r
