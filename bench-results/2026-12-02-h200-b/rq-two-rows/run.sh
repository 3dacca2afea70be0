#!/bin/bash
# Session 24, call 2: norm.rmsnorm_quant's two-rows-per-CTA configs (v4r2; working tree on
# 33a3c3b-to-be, .gpu/bundle) against 31bb2cc (.gpu/base): gpu_rmsnorm_quant and gpu_rmsnorm, the
# first's memcheck + racecheck (reduced, 16 processes each), then the bench alternated new/base
# twice.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; BASE=$PWD/.gpu/base; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.mem,clocks.max.sm --format=csv > $R/gpu.txt
for t in gpu_rmsnorm_quant gpu_rmsnorm; do
  B12X_CACHE_DIR=/tmp/c-t timeout 100 ./$t --test-threads 1 > $R/$t.log 2>&1
  echo "$t rc=$? $(grep -c '\.\.\. ok' $R/$t.log) ok $(grep -c FAILED $R/$t.log) failed t=$SECONDS" >> $R/summary.txt
done
for tool in memcheck racecheck; do
  B12X_TEST_PROFILE=reduced bash $S ./gpu_rmsnorm_quant $tool $R/san_rq 16 60 > $R/san_rq_$tool.txt 2>&1
  echo "$tool gpu_rmsnorm_quant: $(tail -1 $R/san_rq_$tool.txt) t=$SECONDS" >> $R/summary.txt; save
done
bench() { # label dir
  mkdir -p $R/$1
  (cd $2 && B12X_CACHE_DIR=/tmp/c-$1 B12X_BENCH_SAMPLES=30 B12X_BENCH_OUT=$R/$1 timeout 60 ./bench_rmsnorm_quant > $R/$1/bench.log 2>&1)
  echo "$1 rc=$? t=$SECONDS" >> $R/summary.txt; save
}
for i in 1 2; do
  bench rq_new$i $B/bin; bench rq_base$i $BASE/bin
done
cat $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
