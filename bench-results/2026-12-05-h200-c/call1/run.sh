#!/bin/bash
# Session 46, call 1 (issue 7): the grouped GEMV (T 17 .. Query::gemv_up_to: the grouping kernels
# into 16-row slots + the decode GEMV). gpu_fused_moe's whole suite in parallel processes (small
# trials, then the model shapes), then the fused_moe bench over T 64, 512, 4096 with both grouped
# paths (the default and the other one forced). Sanitizers: call 2.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_fused_moe none $R/fm 12 100 'tiny|routing|bad|graph|alloc|logits' > $R/fm_small.txt 2>&1
echo "fused_moe small: $(tail -1 $R/fm_small.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe none $R/fmm 8 200 'models' > $R/fm_models.txt 2>&1
echo "fused_moe models: $(tail -1 $R/fm_models.txt) t=$SECONDS" >> $R/summary.txt; save
left=$((575 - SECONDS))
if [ $left -gt 40 ]; then
  B12X_MOE_TOKENS=64,512,4096 B12X_BENCH_OUT=$R/bench timeout $((left - 10)) ./bench_fused_moe > $R/bench.txt 2>&1
  echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/summary.txt
grep -h "FAIL\|fail" $R/fm/none.txt $R/fmm/none.txt $R/mc/memcheck.txt $R/rc/racecheck.txt 2>/dev/null | head -30
for f in $R/fm/none_fail_*.log $R/fmm/none_fail_*.log $R/mc/*fail*.log $R/rc/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -8 $f; }; done 2>/dev/null | head -80
[ -f $R/bench/fused_moe.md ] && grep -E "T64|T512|T4096" $R/bench/fused_moe.md | cut -d'|' -f2-8
cd $OUT && tar czf r.tgz r && rm -rf r
