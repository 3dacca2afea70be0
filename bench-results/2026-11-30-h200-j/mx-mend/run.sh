#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
cd bin
timeout 150 ./gpu_mx > $R/gpu_mx.log 2>&1; echo "gpu_mx rc=$? $(grep 'test result' $R/gpu_mx.log)"
for tool in memcheck racecheck; do B12X_TEST_PROFILE=reduced timeout 100 compute-sanitizer --tool $tool --error-exitcode 1 ./gpu_mx --test-threads 1 > $R/san_gpu_mx_$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san_gpu_mx_$tool.log)"; done
B12X_BENCH_OUT=$R/bench B12X_BENCH_SAMPLES=30 timeout 150 ./bench_mx > $R/bench_mx.log 2>&1; echo "bench rc=$?"
grep -E "M(8192|32768)|ceiling" $R/bench_mx.log | cut -c1-120
cd $OUT && tar czf r.tgz r
