#!/bin/bash
# Session 34, call 6 (bundle of the test refactor: `refused` / `untouched` helpers): the trials
# that use them, plain and under memcheck.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
F='bad_inputs|prepared_only|scale_range_refused'
bash $S ./gpu_blockscaled_gemv none $R/full 8 60 "$F" > $R/none.txt 2>&1
echo "none: $(tail -1 $R/none.txt) t=$SECONDS" >> $R/summary.txt
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 8 60 "$F" > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt; cat $R/full/none.txt; grep -v "passed=1" $R/san/memcheck.txt | head
cd $OUT && tar czf r.tgz r && rm -rf r
