#!/bin/bash
# Call 2 (prepared in sessions 43-45): moe.fused_moe decode experiments against HEAD, one job.
# Bundles (build.sh, then build_lf.sh): bundle_base (HEAD), bundle_pf (prefetch.patch: FC1
# prefetches FC2's touched weights to L2), bundle_ew (early.patch: FC2 asks for its first ring of
# weights before its PDL wait), bundle_lf (lf.patch = early.patch + FC1 computes the route's slots
# itself from ids and streams its first ring before its wait, at T k <= 64). Steps, each archived
# at once:
#  1. correctness of lf (it contains ew's FC2): gpu_fused_moe packed trials (tiny / routing / bad
#     ids / graph replay with new routing / allocation / logits / the model shapes at T 1, 8, 16), then under memcheck and racecheck (reduced profile; its PDL ordering changed);
#  2. quick bench base / pf / ew / lf, twice, in one job (the decision: medians per row);
#  3. ew's and pf's packed trials if time is left.
R=$OUT/r; mkdir -p $R; S=$PWD/bench/sanitize_parallel.sh; ROOT=$PWD
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
PK='packed::(tiny|routing|bad|graph|alloc|logits|models::.*::t(1|2|5|8|16)$)'
packed() {  # VARIANT
  (cd $ROOT/.gpu/bundle_$1/bin && B12X_COMMIT=$(cat ../COMMIT 2>/dev/null) bash $S ./gpu_fused_moe none $R/fm_$1 12 50 "$PK") > $R/fm_$1.txt 2>&1
  echo "fused_moe packed $1: $(tail -1 $R/fm_$1.txt) t=$SECONDS" >> $R/summary.txt; save
}
packed lf
cd $ROOT/.gpu/bundle_lf/bin
B12X_TEST_PROFILE=reduced bash $S ./gpu_fused_moe memcheck $R/lf_mc 16 40 'packed::(tiny|graph|bad|routing)' > $R/lf_memcheck.txt 2>&1
echo "lf memcheck: $(tail -1 $R/lf_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_fused_moe racecheck $R/lf_rc 16 40 'packed::(tiny::(w4a16_nvfp4|w4a8_mx)_silu::t(1|8)$|graph|bad_ids)' > $R/lf_racecheck.txt 2>&1
echo "lf racecheck: $(tail -1 $R/lf_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
for round in 1 2; do
  for b in base pf ew lf; do
    [ $SECONDS -lt 500 ] || break
    (cd $ROOT/.gpu/bundle_$b/bin && B12X_BENCH_QUICK=1 B12X_BENCH_OUT=$R/bq_${b}_$round timeout 60 ./bench_fused_moe > $R/bq_${b}_$round.txt 2>&1)
    echo "bench quick $b round $round rc=$? t=$SECONDS" >> $R/summary.txt
    grep "^fused_moe/" $R/bq_${b}_$round.txt | sed "s/^/$b /" >> $R/bench_ab.txt
    save
  done
done
[ $SECONDS -lt 470 ] && packed ew
[ $SECONDS -lt 500 ] && packed pf
cat $R/summary.txt; cut -c1-110 $R/bench_ab.txt | sort -k2,2 -s
cd $OUT && tar czf r.tgz r && rm -rf r
