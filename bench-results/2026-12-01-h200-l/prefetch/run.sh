#!/bin/bash
# Session 22, call 1: the L2 prefetch one wave ahead (branch wip/nvfp4-prefetch rebased on main
# 39d6062) in quantization.nvfp4's dense path and in the fused norm.rmsnorm_quant outputs, against
# main. new = .gpu/bundle/bin (suites + benches built on the rebased branch, sm_90a), base =
# .gpu/base (main's benches). Built with
#   B12X_CUDA_ARCHS=sm_90a B12X_ALLOW_PARTIAL_ARCHS=1 cargo build --profile bundle \
#     -p b12x-quant --test gpu_nvfp4 --bench nvfp4 ; -p b12x-norm --test gpu_rmsnorm_quant --bench rmsnorm_quant
# Carry [".gpu/bundle", ".gpu/base"]. Results archived after every step.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; BASE=$PWD/.gpu/base
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
for t in gpu_nvfp4 gpu_rmsnorm_quant; do
  B12X_CACHE_DIR=/tmp/c-t timeout 100 ./$t --test-threads 1 > $R/$t.log 2>&1; echo "$t rc=$? $(grep -c '\.\.\. ok' $R/$t.log) ok t=$SECONDS" >> $R/summary.txt
  B12X_CACHE_DIR=/tmp/c-s B12X_TEST_PROFILE=reduced timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 ./$t --test-threads 1 > $R/memcheck_$t.log 2>&1
  echo "memcheck $t rc=$? $(grep 'ERROR SUMMARY' $R/memcheck_$t.log | tail -1) t=$SECONDS" >> $R/summary.txt
done
save
bench() { # label dir bin filter
  mkdir -p $R/$1
  (cd $2 && B12X_CACHE_DIR=/tmp/c-$1 B12X_BENCH_SAMPLES=30 B12X_BENCH_FILTER=$4 B12X_BENCH_OUT=$R/$1 timeout 60 ./$3 > $R/$1/bench.log 2>&1)
  echo "$1 rc=$? t=$SECONDS" >> $R/summary.txt; save
}
for who in base new new base; do
  d=$BASE; [ $who = new ] && d=$B/bin
  [ $SECONDS -gt 380 ] && break
  bench ${who}_nvfp4_8k_$SECONDS $d bench_nvfp4 M8192
  bench ${who}_rq_8k_$SECONDS $d bench_rmsnorm_quant T8192
done
for who in base new; do
  d=$BASE; [ $who = new ] && d=$B/bin
  [ $SECONDS -gt 470 ] && break
  bench ${who}_nvfp4_32k_$SECONDS $d bench_nvfp4 M32768
  bench ${who}_rq_32k_$SECONDS $d bench_rmsnorm_quant T32768
done
cat $R/summary.txt
