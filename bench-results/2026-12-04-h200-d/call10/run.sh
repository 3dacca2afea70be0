#!/bin/bash
# Session 37, call 10: the split rule's change at B = 2 (16 pairs: 8 splits in a cluster now,
# 16 through scratch before), x8 decode graphs with and without PDL; B = 1 plain as well.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT) B12X_BENCH_FILTER=_x8/ B12X_PAGED_BATCHES=1,2
cd $B/bin
for pdl in 0 1; do
  for v in "new::" "old:16:0"; do
    IFS=: read name cap cl <<< "$v"
    env B12X_PAGED_PDL=$pdl ${cap:+B12X_PAGED_SPLIT_CAP=$cap} ${cl:+B12X_PAGED_CLUSTER=$cl} B12X_BENCH_OUT=$R/paged_${name}_pdl$pdl timeout 60 ./bench_paged > $R/paged_${name}_pdl$pdl.txt 2>&1
    echo "paged $name pdl=$pdl rc=$? t=$SECONDS" >> $R/summary.txt
  done
done
cat $R/summary.txt
for f in $R/paged_*.txt; do echo "== $f"; grep -E "x8/B" $f | cut -c1-72; done
cd $OUT && tar czf r.tgz r && rm -rf r
