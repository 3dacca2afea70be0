#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
cd bin
for t in gpu_mx gpu_fp8_block; do timeout 150 ./$t > $R/$t.log 2>&1; echo "$t rc=$? $(grep 'test result' $R/$t.log)"; done
for t in gpu_mx gpu_fp8_block; do for tool in memcheck racecheck; do
  B12X_TEST_PROFILE=reduced timeout 120 compute-sanitizer --tool $tool --error-exitcode 1 ./$t --test-threads 1 > $R/san_${t}_$tool.log 2>&1; echo "$t $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $R/san_${t}_$tool.log | tr '\n' ' ')"
done; done
for b in bench_mx bench_fp8_block; do
  B12X_BENCH_OUT=$R/bench B12X_BENCH_SAMPLES=30 timeout 170 ./$b > $R/$b.log 2>&1; echo "$b rc=$?"
  grep -E "M(8192|32768)|ceiling" $R/$b.log | cut -c1-120
done
cd $OUT && tar czf r.tgz r
