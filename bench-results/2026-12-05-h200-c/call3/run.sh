#!/bin/bash
# Session 46, call 3 (issue 7): the grouped GEMV on the decode route (stable grouping; call 1's
# build on the tiled path's atomic grouping was not bitwise reproducible). gpu_fused_moe's whole
# suite (small trials, then the model shapes), memcheck and racecheck (reduced profile) on the
# small packed trials of both grouped paths, then the bench at T 64, 256, 512 (default and the
# other grouped path) with the time left.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_fused_moe none $R/fm 12 60 'tiny|routing|bad|graph|alloc|logits' > $R/fm_small.txt 2>&1
echo "fused_moe small: $(tail -1 $R/fm_small.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe none $R/fmm 10 150 'models' > $R/fm_models.txt 2>&1
echo "fused_moe models: $(tail -1 $R/fm_models.txt) t=$SECONDS" >> $R/summary.txt; save
export B12X_TEST_PROFILE=reduced
bash $S ./gpu_fused_moe memcheck $R/mc 16 40 '^packed.*(t17|t40|t64|graph)' > $R/fm_memcheck.txt 2>&1
echo "fused_moe memcheck: $(tail -1 $R/fm_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe racecheck $R/rc 16 20 '^packed(_tile)?::(bad_ids_masked::t40|graph_replay.*t40|routing::shared_pct50::t64)' > $R/fm_racecheck.txt 2>&1
echo "fused_moe racecheck: $(tail -1 $R/fm_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
unset B12X_TEST_PROFILE
left=$((580 - SECONDS))
if [ $left -gt 40 ]; then
  B12X_MOE_TOKENS=64,256,512 B12X_BENCH_OUT=$R/bench timeout $((left - 5)) ./bench_fused_moe > $R/bench.txt 2>&1
  echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/summary.txt
grep -h "FAIL\|fail" $R/fm/none.txt $R/fmm/none.txt $R/mc/memcheck.txt $R/rc/racecheck.txt 2>/dev/null | head -30
for f in $R/fm/*fail*.log $R/fmm/*fail*.log $R/mc/*fail*.log $R/rc/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -60
[ -f $R/bench/fused_moe.md ] && grep -E "/T[0-9]" $R/bench/fused_moe.md | grep -v read_probe | cut -d'|' -f2-8
cd $OUT && tar czf r.tgz r && rm -rf r
