#!/bin/bash
# Session 19, call 6 (from the repo root): why PDL costs 20% at 32 x 2k BF16 (x8 table). Guess:
# with 2-stage rings 3 CTAs fit per SM, so the next call's 256 CTAs are placed partly beside the
# running grid (140 free slots) and partly where its CTAs exit, unevenly. With 3-stage rings
# (107.6 KB, 2 per SM: 8 free slots) the next call can only take the slots this call leaves.
# x8 rows of B = 32 x 2k, PDL off / on / on / off, with the plan's 2 stages and with 3.
# Bundle of `cargo xtask gpu-bundle --packages b12x-core,b12x-attention` at COMMIT.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
for st in 2 3; do
  i=0
  for pdl in 0 1 1 0; do
    i=$((i+1))
    B12X_PAGED_STAGES=$st B12X_PAGED_PDL=$pdl B12X_PAGED_BATCHES=32 B12X_BENCH_FILTER=_x8/B32_ctx2048 B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo timeout 60 ./bench_paged > $R/s${st}_run${i}_pdl$pdl.log 2>&1; echo "stages $st run $i pdl=$pdl rc=$?" >> $R/rc.txt
  done
done
rm -rf $R/cache $R/bo*; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r && rm -rf r  # only the archive comes back (the return caps the file count)
