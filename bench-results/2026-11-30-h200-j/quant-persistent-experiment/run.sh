#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
cd bin
for t in gpu_mx gpu_nvfp4 gpu_fp8_block; do
  timeout 200 ./$t > $R/$t.log 2>&1; echo "$t rc=$? $(grep 'test result' $R/$t.log)"
done
for b in bench_mx bench_nvfp4 bench_fp8_block; do
  B12X_BENCH_OUT=$R/bench B12X_BENCH_SAMPLES=30 timeout 150 ./$b > $R/$b.log 2>&1; echo "$b rc=$?"
  grep -E "M8192|M4096|ceiling" $R/$b.log | cut -c1-160
done
B12X_BENCH_FILTER=8192 B12X_BENCH_OUT=$R/bench B12X_BENCH_SAMPLES=30 timeout 100 ./bench_rmsnorm_quant > $R/bench_rmsnorm_quant.log 2>&1; echo "rq rc=$?"
grep -E "^(rmsnorm|read_probe|unfused)|ceiling" $R/bench_rmsnorm_quant.log | cut -c1-160
cd $OUT && tar czf r.tgz r
