#!/bin/bash
# Session 21, call 7: gpu_rmsnorm_quant with the new NVFP4 trials at saturating and subnormal
# block scales (the encoder's general path in the fused kernel), + memcheck and racecheck.
R=$OUT/r; mkdir -p $R; cd .gpu/t
export B12X_ALLOW_PARTIAL_ARCHS=1
B12X_CACHE_DIR=/tmp/c1 timeout 100 ./gpu_rmsnorm_quant --test-threads 1 > $R/gpu_rmsnorm_quant.log 2>&1; echo "suite rc=$? $(grep -c '\.\.\. ok' $R/gpu_rmsnorm_quant.log) ok" >> $R/summary.txt
for tool in memcheck racecheck; do
  B12X_CACHE_DIR=/tmp/c2 B12X_TEST_PROFILE=reduced timeout 100 compute-sanitizer --tool $tool --error-exitcode 1 ./gpu_rmsnorm_quant --test-threads 1 > $R/$tool.log 2>&1
  echo "$tool rc=$? $(grep 'ERROR SUMMARY\|RACECHECK SUMMARY' $R/$tool.log | tail -1)" >> $R/summary.txt
done
cat $R/summary.txt; grep "enc_" $R/gpu_rmsnorm_quant.log
cd $OUT && tar czf r.tgz r && rm -rf r
