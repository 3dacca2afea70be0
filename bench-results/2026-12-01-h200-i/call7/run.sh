#!/bin/bash
# Session 19, call 7 (from the repo root): E4M3 at 8 x 2k in the x8 table (decode graph) with
# PDL, against the split cap and ring depth: does a grid that fits beside the running one (fewer
# splits) beat the plan's 6 splits? BF16 8 x 2k with PDL once for the ratio. Bundle of
# `cargo xtask gpu-bundle --packages b12x-core,b12x-attention` at COMMIT.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
run() {  # name, env...
  local name=$1; shift
  env "$@" B12X_PAGED_BATCHES=8 B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo timeout 60 ./bench_paged > $R/$name.log 2>&1; echo "$name rc=$?" >> $R/rc.txt
}
run bf16_pdl1 B12X_PAGED_PDL=1 B12X_BENCH_FILTER=_x8/B8_ctx2048
for rep in 1 2; do
  for cap in 6 4 3; do
    for st in 2 3; do
      run e4m3_cap${cap}_s${st}_pdl1_r$rep B12X_PAGED_PDL=1 B12X_PAGED_SPLIT_CAP=$cap B12X_PAGED_STAGES=$st B12X_BENCH_FILTER=_x8/B8_ctx2048_e4m3
    done
  done
done
run e4m3_default_pdl0 B12X_PAGED_PDL=0 B12X_BENCH_FILTER=_x8/B8_ctx2048_e4m3
rm -rf $R/cache $R/bo*; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r && rm -rf r  # only the archive comes back (the return caps the file count)
