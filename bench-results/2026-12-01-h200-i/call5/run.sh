#!/bin/bash
# Session 19, call 5 (from the repo root): norm.rmsnorm_quant before and after session 19's
# shared row function (ptxas reordered 17-24 of the fused entry points' SASS; same instructions).
# bench_rmsnorm_quant_old: b9f6a1d, bench_rmsnorm_quant: a588f93 (norm code as f8ea2e3); both
# `cargo build --profile bundle -p b12x-norm --bench rmsnorm_quant` with B12X_CUDA_ARCHS=sm_90a.
# Quick set (T in {1, 8192}), old / new / new / old in this one job.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
i=0
for v in old new new old; do
  i=$((i+1)); bin=./bench_rmsnorm_quant; [ $v = old ] && bin=./bench_rmsnorm_quant_old
  B12X_BENCH_QUICK=1 B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache$i B12X_BENCH_OUT=$R/bo$i timeout 110 $bin > $R/run${i}_$v.log 2>&1; echo "run $i $v rc=$?" >> $R/rc.txt
done
rm -rf $R/cache* $R/bo*; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r && rm -rf r  # only the archive comes back (the return caps the file count)
