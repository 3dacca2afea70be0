#!/bin/bash
# Session 26, call 4: gemm.blockscaled W8A16 after the block-FP8 scale copies were bounded to boxes
# inside K (call 3's memcheck: 16-byte reads past the scales with 32 x 32 tiles, K = 32 / 96 /
# 1056 / 1312 at KB = 2). The reduced-profile suite plainly (16 processes: every non-large trial,
# graph replay, allocations, bad inputs; the large ones passed in call 3), memcheck (all), and
# racecheck on the FP8 trials.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT) B12X_TEST_PROFILE=reduced
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
for tool in none memcheck; do
  bash $S ./gpu_blockscaled_gemv $tool $R/san 16 60 > $R/san_$tool.txt 2>&1
  echo "$tool: $(tail -1 $R/san_$tool.txt) t=$SECONDS" >> $R/summary.txt; save
done
bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 70 'Mxfp8|BlockFp8|TensorFp8' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -hv "rc=0 passed=1 ERROR SUMMARY: 0 errors\|rc=0 passed=1 *[0-9]*s$" $R/san/*.txt | head -20
cd $OUT && tar czf r.tgz r && rm -rf r
