#!/bin/bash
# Session 19, call 9 (from the repo root): the PDL placement rule on shapes it was not fitted
# to. Predictions, written before the run: B = 24 x 2k BF16 (192 single CTAs, 2-stage rings,
# 396 slots: the next grid fits beside the running one) gains from PDL; B = 16 BF16 (2 splits
# in clusters of 2, 3-stage rings, 256 CTAs in 264 slots: 8 free) gains at 2k and 8k; E4M3 at
# both B (4 CTAs/SM: 528 slots; B = 24: 192 single CTAs fit beside; B = 16: clusters) gains.
# x8 rows, plan defaults, PDL off / on / on / off. Bundle as call 8 (its code = 6d3cb7d).
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
i=0
for pdl in 0 1 1 0; do
  i=$((i+1))
  B12X_PAGED_PDL=$pdl B12X_PAGED_BATCHES=16,24 B12X_BENCH_FILTER=paged_decode_x8 B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo$i timeout 40 ./bench_paged > $R/bench_paged_x8_run${i}_pdl$pdl.log 2>&1; echo "bench x8 run $i pdl=$pdl rc=$?" >> $R/rc.txt
done
rm -rf $R/cache $R/bo*; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r && rm -rf r  # only the archive comes back (the return caps the file count)
