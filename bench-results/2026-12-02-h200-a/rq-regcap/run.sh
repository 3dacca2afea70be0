#!/bin/bash
# Session 23, call 2: norm.rmsnorm_quant's plain v4 forms capped at 48 registers (__maxnreg__,
# working tree on 1979236, .gpu/bundle) against 1979236 (.gpu/base): gpu_rmsnorm_quant, its
# memcheck + racecheck (reduced, 16 processes each), the racecheck trials call 1 did not reach
# for gpu_mx / gpu_fp8_block (1979236's binaries), then the bench alternated new/base twice.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; BASE=$PWD/.gpu/base; S=$PWD/bench/sanitize_parallel.sh; H=$PWD/bench-results/2026-12-02-h200-a/rq-regcap
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
B12X_CACHE_DIR=/tmp/c-t timeout 100 ./gpu_rmsnorm_quant --test-threads 1 > $R/gpu_rmsnorm_quant.log 2>&1
echo "gpu_rmsnorm_quant rc=$? $(grep -c '\.\.\. ok' $R/gpu_rmsnorm_quant.log) ok t=$SECONDS" >> $R/summary.txt
for tool in memcheck racecheck; do
  B12X_TEST_PROFILE=reduced bash $S ./gpu_rmsnorm_quant $tool $R/san_rq 16 60 > $R/san_rq_$tool.txt 2>&1
  echo "$tool gpu_rmsnorm_quant: $(tail -1 $R/san_rq_$tool.txt) t=$SECONDS" >> $R/summary.txt; save
done
for t in gpu_mx gpu_fp8_block; do
  B12X_TEST_PROFILE=reduced bash $S $BASE/bin/$t racecheck $R/san_rest_$t 16 60 "$(cat $H/skipped_$t.re)" > $R/san_rest_$t.txt 2>&1
  echo "racecheck rest of $t: $(tail -1 $R/san_rest_$t.txt) t=$SECONDS" >> $R/summary.txt; save
done
bench() { # label dir bin filter
  mkdir -p $R/$1
  (cd $2 && B12X_CACHE_DIR=/tmp/c-$1 B12X_BENCH_SAMPLES=30 B12X_BENCH_FILTER=$4 B12X_BENCH_OUT=$R/$1 timeout 100 ./$3 > $R/$1/bench.log 2>&1)
  echo "$1 rc=$? t=$SECONDS" >> $R/summary.txt; save
}
for i in 1 2; do
  bench rq_new$i $B/bin bench_rmsnorm_quant _; bench rq_base$i $BASE/bin bench_rmsnorm_quant _
done
cat $R/summary.txt
rm -rf $R
