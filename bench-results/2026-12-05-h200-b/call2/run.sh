#!/bin/bash
# Call 2 (prepared in sessions 43-44, not yet run): moe.fused_moe decode experiments against HEAD,
# one job. Bundles from build.sh: bundle_base (HEAD), bundle_pf (prefetch.patch: FC1 prefetches
# FC2's touched weights to L2), bundle_ew (early.patch: FC2 asks for its first ring of weights
# before its PDL wait). Steps, each archived at once:
#  1. correctness of both patches: gpu_fused_moe packed trials (tiny / routing / bad ids / graph
#     replay with new routing / allocation / logits / the four model shapes at T 1, 2, 5, 8);
#  2. bundle_ew under memcheck and racecheck (reduced profile; its PDL ordering changed);
#  3. quick bench base / pf / ew, twice, in one job (the decision: medians per row);
#  4. if time is left, the full bench of the best-looking variant is call 3's job (HEAD).
R=$OUT/r; mkdir -p $R; S=$PWD/bench/sanitize_parallel.sh; ROOT=$PWD
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
PK='packed::(tiny|routing|bad|graph|alloc|logits|models::.*::t(1|2|5|8)$)'
for v in pf ew; do
  (cd $ROOT/.gpu/bundle_$v/bin && B12X_COMMIT=$(cat ../COMMIT 2>/dev/null) bash $S ./gpu_fused_moe none $R/fm_$v 12 50 "$PK") > $R/fm_$v.txt 2>&1
  echo "fused_moe packed $v: $(tail -1 $R/fm_$v.txt) t=$SECONDS" >> $R/summary.txt; save
done
cd $ROOT/.gpu/bundle_ew/bin
[ $SECONDS -lt 200 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_fused_moe memcheck $R/ew_mc 16 40 'packed::(tiny|graph|bad)' > $R/ew_memcheck.txt 2>&1
echo "ew memcheck: $(tail -1 $R/ew_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 280 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_fused_moe racecheck $R/ew_rc 16 40 'packed::(tiny::(w4a16_nvfp4|w4a8_mx)_silu::t(1|8)$|graph|bad_ids)' > $R/ew_racecheck.txt 2>&1
echo "ew racecheck: $(tail -1 $R/ew_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
for round in 1 2; do
  for b in base pf ew; do
    [ $SECONDS -lt 540 ] || break
    (cd $ROOT/.gpu/bundle_$b/bin && B12X_BENCH_QUICK=1 B12X_BENCH_OUT=$R/bq_${b}_$round timeout 60 ./bench_fused_moe > $R/bq_${b}_$round.txt 2>&1)
    echo "bench quick $b round $round rc=$? t=$SECONDS" >> $R/summary.txt
    grep "^fused_moe/" $R/bq_${b}_$round.txt | sed "s/^/$b /" >> $R/bench_ab.txt
    save
  done
done
cat $R/summary.txt; cut -c1-110 $R/bench_ab.txt | sort -k2,2 -s
cd $OUT && tar czf r.tgz r && rm -rf r
