#!/bin/bash
# Session 37, call 7: gpu_silu_and_mul's new unprepared_and_pdl_plans trial (+ memcheck);
# gpu_rope_kv_append whole suite under racecheck; gpu_kv_append after its disjointness checks
# became one loop (plain).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
bash $S ./gpu_silu_and_mul none $R/silu 16 20 'unprepared|graph|bad_inputs|allocates' > $R/silu_none.txt 2>&1
echo "silu_and_mul none: $(tail -1 $R/silu_none.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_silu_and_mul memcheck $R/silu 16 30 'unprepared' > $R/silu_memcheck.txt 2>&1
echo "silu_and_mul memcheck: $(tail -1 $R/silu_memcheck.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_rope_kv_append racecheck $R/rka 16 60 > $R/rka_racecheck.txt 2>&1
echo "rope_kv_append racecheck: $(tail -1 $R/rka_racecheck.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_kv_append none $R/kv_append 16 40 > $R/kv_append_none.txt 2>&1
echo "kv_append none: $(tail -1 $R/kv_append_none.txt) t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
for f in $R/*/none.txt $R/*/memcheck.txt $R/*/racecheck.txt; do grep -v "passed=1" $f | head -6; done 2>/dev/null
for f in $R/*/*fail*.log; do echo "== $f"; grep -E "Error|error|panicked|differs|want|changed|expected" $f | head -4; done 2>/dev/null | head -30
cd $OUT && tar czf r.tgz r && rm -rf r
