#!/bin/bash
# Session 23, call 1: the fused E4M3 outputs and the MX / block-FP8 quantizers with the bf16x2
# power-of-two scaling and the HMNMX2 block amax (working tree on 5c82005, .gpu/bundle) against
# 5c82005 (.gpu/base): the touched ops' GPU suites, memcheck + racecheck (reduced, parallel
# processes), then A/B benches alternated new/base/new/base in one job.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; BASE=$PWD/.gpu/base; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
for t in gpu_rmsnorm_quant gpu_mx gpu_fp8_block; do
  (B12X_CACHE_DIR=/tmp/c-$t timeout 200 ./$t --test-threads 1 > $R/$t.log 2>&1; echo "$t rc=$? $(grep -c '\.\.\. ok' $R/$t.log) ok $(grep -c FAILED $R/$t.log) failed t=$SECONDS" >> $R/summary.txt) &
done
wait; save
for tool in memcheck racecheck; do
  for t in gpu_rmsnorm_quant gpu_mx gpu_fp8_block; do
    (B12X_TEST_PROFILE=reduced bash $S ./$t $tool $R/san_$t 6 45 > $R/san_${t}_$tool.txt 2>&1
     echo "$tool $t: $(tail -1 $R/san_${t}_$tool.txt) t=$SECONDS" >> $R/summary.txt) &
  done
  wait; save
done
bench() { # label dir bin filter
  mkdir -p $R/$1
  (cd $2 && B12X_CACHE_DIR=/tmp/c-$1 B12X_BENCH_SAMPLES=30 B12X_BENCH_FILTER=$4 B12X_BENCH_OUT=$R/$1 timeout 100 ./$3 > $R/$1/bench.log 2>&1)
  echo "$1 rc=$? t=$SECONDS" >> $R/summary.txt; save
}
for i in 1 2; do
  bench rq_new$i $B/bin bench_rmsnorm_quant _; bench rq_base$i $BASE/bin bench_rmsnorm_quant _
done
for i in 1 2; do
  [ $SECONDS -lt 420 ] && bench mx_new$i $B/bin bench_mx M8192
  [ $SECONDS -lt 440 ] && bench mx_base$i $BASE/bin bench_mx M8192
done
[ $SECONDS -lt 470 ] && bench fb_new $B/bin bench_fp8_block M8192
[ $SECONDS -lt 500 ] && bench fb_base $BASE/bin bench_fp8_block M8192
cat $R/summary.txt
