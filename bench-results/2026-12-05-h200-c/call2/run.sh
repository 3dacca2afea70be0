#!/bin/bash
# Session 46, call 2 (issue 7): memcheck and racecheck (reduced profile) on the packed trials that
# take the grouped GEMV and the tiled path at small T, then a finer sweep of the bench's grouped
# rows (T 128, 256, 1024, 2048) with the time left.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
export B12X_TEST_PROFILE=reduced
bash $S ./gpu_fused_moe memcheck $R/mc 16 60 '^packed.*(t17|t40|t64|graph)' > $R/fm_memcheck.txt 2>&1
echo "fused_moe memcheck: $(tail -1 $R/fm_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe racecheck $R/rc 16 40 '^packed(_tile)?::(bad_ids_masked::t40|graph_replay.*t40|routing::shared_pct50::t64)' > $R/fm_racecheck.txt 2>&1
echo "fused_moe racecheck: $(tail -1 $R/fm_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
unset B12X_TEST_PROFILE
left=$((575 - SECONDS))
if [ $left -gt 40 ]; then
  B12X_MOE_TOKENS=${TOKENS:-128,256,1024,2048} B12X_BENCH_OUT=$R/bench timeout $((left - 10)) ./bench_fused_moe > $R/bench.txt 2>&1
  echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/summary.txt
grep -h "FAIL\|fail" $R/mc/memcheck.txt $R/rc/racecheck.txt 2>/dev/null | head -30
for f in $R/mc/*fail*.log $R/rc/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -8 $f; }; done 2>/dev/null | head -60
[ -f $R/bench/fused_moe.md ] && grep -E "/T[0-9]" $R/bench/fused_moe.md | cut -d'|' -f2-8
cd $OUT && tar czf r.tgz r && rm -rf r
