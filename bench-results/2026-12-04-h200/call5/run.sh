#!/bin/bash
# Session 34, call 5 (bundle 21181ec, as call 3): the sanitizer profile over the whole suite:
# memcheck (reduced profile, every trial) and racecheck on the tiled / wgmma / split-tail trials of
# the small shapes (every weight format, bf16 and f32-scaled x; configs pinned).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 70 > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 150 'awkward_n1000_bias|padded_rows|graph_replay' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v "passed=1" $R/san/memcheck.txt | head; grep -v "passed=1 RACECHECK SUMMARY: 0 hazards" $R/san/racecheck.txt | head -12
cd $OUT && tar czf r.tgz r && rm -rf r
