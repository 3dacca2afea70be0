#!/bin/bash
# Session 19, call 8 (from the repo root): PDL plans now take their ring depth by the placement
# rule (Query::pdl_default_stages). The PDL GPU trial, then the x8 rows of B = 32 with PDL
# off and on (plan defaults: no stage or split override), off / on / on / off. Bundle of
# `cargo xtask gpu-bundle --packages b12x-core,b12x-attention` at COMMIT.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
timeout 60 ./gpu_paged --test-threads 1 pdl > $R/gpu_paged_pdl.log 2>&1; echo "gpu_paged pdl rc=$? $(grep -a 'test result' $R/gpu_paged_pdl.log)" >> $R/rc.txt
i=0
for pdl in 0 1 1 0; do
  i=$((i+1))
  B12X_PAGED_PDL=$pdl B12X_PAGED_BATCHES=32 B12X_BENCH_FILTER=_x8/B32 B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo$i timeout 45 ./bench_paged > $R/bench_paged_x8_run${i}_pdl$pdl.log 2>&1; echo "bench x8 run $i pdl=$pdl rc=$?" >> $R/rc.txt
done
rm -rf $R/cache $R/bo*; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r && rm -rf r  # only the archive comes back (the return caps the file count)
