#!/bin/bash
# Session 23, call 6: gpu_rmsnorm_quant with the new w_extremes trials (w scaled per 32-element
# group from 2^-131 to 2^116 in bf16, 2^-20 to 2^8 in f16: huge, tiny and subnormal y blocks),
# the whole suite plain, then memcheck + racecheck (reduced, parallel processes).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
B12X_CACHE_DIR=/tmp/c-t timeout 100 ./gpu_rmsnorm_quant --test-threads 1 > $R/gpu_rmsnorm_quant.log 2>&1
echo "gpu_rmsnorm_quant rc=$? $(grep -c '\.\.\. ok' $R/gpu_rmsnorm_quant.log) ok t=$SECONDS" >> $R/summary.txt
for tool in memcheck racecheck; do
  B12X_TEST_PROFILE=reduced bash $S ./gpu_rmsnorm_quant $tool $R/san 16 60 > $R/san_$tool.txt 2>&1
  echo "$tool: $(tail -1 $R/san_$tool.txt) t=$SECONDS" >> $R/summary.txt
done
cat $R/summary.txt; grep -E 'w_extremes|FAILED|fail' $R/gpu_rmsnorm_quant.log | head -20
cd $OUT && tar czf r.tgz r && rm -rf r
