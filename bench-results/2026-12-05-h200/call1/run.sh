#!/bin/bash
# Session 42, call 1 (issue 7): the first GPU run of b12x-moe. moe.route_topk's suite, then
# moe.fused_moe's suite (simple and packed paths) in parallel processes — the small trials first,
# then the model shapes (GBs of random weights and the f64 oracle on the CPU each) — then the
# fused_moe bench (quick), then memcheck on the small trials with the time left.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_route_topk none $R/rt 8 60 > $R/rt_none.txt 2>&1
echo "route_topk none: $(tail -1 $R/rt_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe none $R/fm 12 120 'tiny|routing|bad|graph|alloc|logits' > $R/fm_small.txt 2>&1
echo "fused_moe small: $(tail -1 $R/fm_small.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe none $R/fmm 8 150 'models' > $R/fm_models.txt 2>&1
echo "fused_moe models: $(tail -1 $R/fm_models.txt) t=$SECONDS" >> $R/summary.txt; save
left=$((560 - SECONDS))
if [ $left -gt 60 ]; then
  B12X_BENCH_QUICK=1 B12X_BENCH_OUT=$R/bench timeout $((left - 20)) ./bench_fused_moe > $R/bench.txt 2>&1
  echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/summary.txt
grep -h "FAIL\|fail" $R/rt/none.txt $R/fm/none.txt $R/fmm/none.txt 2>/dev/null | head -40
for f in $R/fm/none_fail_*.log $R/fmm/none_fail_*.log $R/rt/none_fail_*.log; do [ -f $f ] && { echo "== $f"; tail -5 $f; }; done 2>/dev/null | head -80
[ -f $R/bench/fused_moe.md ] && cat $R/bench/fused_moe.md | head -40
cd $OUT && tar czf r.tgz r && rm -rf r
