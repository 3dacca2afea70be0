#!/bin/bash
# Session 38, call 9 (issue 6): racecheck on the kernels whose order changed this session
# (rope_kv_append's early PDL reads; rope.cuh / kv_append.cuh shared by rope and kv_append),
# with the suites once more (plain) at the final kernel code.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_rope_kv_append racecheck $R/rka 16 40 'decode|faults|graph|pdl' > $R/rka_racecheck.txt 2>&1
echo "rope_kv_append racecheck: $(tail -1 $R/rka_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_rope racecheck $R/rope 16 30 > $R/rope_racecheck.txt 2>&1
echo "rope racecheck: $(tail -1 $R/rope_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_kv_append racecheck $R/kva 16 40 > $R/kva_racecheck.txt 2>&1
echo "kv_append racecheck: $(tail -1 $R/kva_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_rope memcheck $R/rope 16 30 > $R/rope_memcheck.txt 2>&1
echo "rope memcheck: $(tail -1 $R/rope_memcheck.txt) t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
for f in $R/*/racecheck.txt $R/*/memcheck.txt; do grep -v "passed=1" $f | head -6; done 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
