#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
nvidia-smi > $R/nvidia-smi.log 2>&1
cd bin
timeout 120 ./gpu_nvfp4 > $R/gpu_nvfp4.log 2>&1; echo "gpu_nvfp4 rc=$? $(grep 'test result' $R/gpu_nvfp4.log)"
for tool in memcheck racecheck; do
  B12X_TEST_PROFILE=reduced timeout 150 compute-sanitizer --tool $tool --error-exitcode 1 ./gpu_nvfp4 --test-threads 1 > $R/sanitizer_$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $R/sanitizer_$tool.log | tr '\n' ' ')"
done
for b in bench_mx bench_nvfp4; do
  B12X_BENCH_OUT=$R/bench B12X_BENCH_SAMPLES=30 timeout 170 ./$b > $R/$b.log 2>&1; echo "$b rc=$?"
  grep -E "M8192|M32768|ceiling" $R/$b.log | cut -c1-125
done
cd $OUT && tar czf r.tgz r
#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
cd bin
B12X_BENCH_OUT=$R/bench B12X_BENCH_SAMPLES=30 timeout 200 ./bench_fp8_block > $R/bench_fp8_block.log 2>&1; echo "fp8_block rc=$?"
grep -E "M8192|M32768|ceiling" $R/bench_fp8_block.log | cut -c1-125
for f in T8192 T32768; do
B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_rq_$f B12X_BENCH_SAMPLES=30 timeout 200 ./bench_rmsnorm_quant > $R/bench_rmsnorm_quant_$f.log 2>&1; echo "rq $f rc=$?"
grep -E "^(rmsnorm|read_probe|unfused)|ceiling" $R/bench_rmsnorm_quant_$f.log | cut -c1-125
done
cd $OUT && tar czf r.tgz r
