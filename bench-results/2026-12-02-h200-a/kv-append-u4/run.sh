#!/bin/bash
# Session 23, call 7: attention.kv_append with the _u4 entry points (four chunks per thread for
# appends of >= 2^20 chunks; working tree on f819bb8, .gpu/bundle) against f819bb8 (.gpu/base):
# gpu_kv_append (new large_append_u4 trials), memcheck + racecheck (reduced, 16 processes), then
# the bench alternated new/base twice.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; BASE=$PWD/.gpu/base; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
B12X_CACHE_DIR=/tmp/c-t timeout 120 ./gpu_kv_append --test-threads 1 > $R/gpu_kv_append.log 2>&1
echo "gpu_kv_append rc=$? $(grep -c '\.\.\. ok' $R/gpu_kv_append.log) ok t=$SECONDS" >> $R/summary.txt; save
for tool in memcheck racecheck; do
  B12X_TEST_PROFILE=reduced bash $S ./gpu_kv_append $tool $R/san 16 60 > $R/san_$tool.txt 2>&1
  echo "$tool: $(tail -1 $R/san_$tool.txt) t=$SECONDS" >> $R/summary.txt; save
done
bench() { # label dir
  mkdir -p $R/$1
  (cd $2 && B12X_CACHE_DIR=/tmp/c-$1 B12X_BENCH_SAMPLES=30 B12X_BENCH_OUT=$R/$1 timeout 60 ./bench_kv_append > $R/$1/bench.log 2>&1)
  echo "$1 rc=$? t=$SECONDS" >> $R/summary.txt; save
}
bench new1 $B/bin; bench base1 $BASE/bin; bench new2 $B/bin; bench base2 $BASE/bin
cat $R/summary.txt; grep -E 'FAILED|panicked' $R/gpu_kv_append.log | head
cd $OUT && tar czf r.tgz r && rm -rf r
