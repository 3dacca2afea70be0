#!/bin/bash
# Session 19, call 2 (from the repo root): norm.rmsnorm with the several-rows configs (v2r4, v4r2)
# and rmsnorm_quant (whose SASS the shared row function reordered on 17-24 entry points): the
# full GPU suites, memcheck and racecheck on the reduced ones, then the rmsnorm bench (with its
# new read_probe / copy_probe rows) and the PyTorch peers of the same job. Bundle of
# `cargo xtask gpu-bundle --packages b12x-core,b12x-norm,b12x-attention` at COMMIT.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
for t in gpu_rmsnorm gpu_rmsnorm_quant gpu_session; do
  timeout 120 ./$t --test-threads 1 > $R/$t.log 2>&1; echo "$t rc=$? $(grep -a 'test result' $R/$t.log)" >> $R/rc.txt
done
for t in gpu_rmsnorm gpu_rmsnorm_quant; do
  B12X_TEST_PROFILE=reduced timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 ./$t --test-threads 1 > $R/${t}_memcheck.log 2>&1; echo "$t memcheck rc=$? $(grep -a 'ERROR SUMMARY' $R/${t}_memcheck.log | tail -1)" >> $R/rc.txt
done
B12X_TEST_PROFILE=reduced timeout 120 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_rmsnorm --test-threads 1 > $R/gpu_rmsnorm_racecheck.log 2>&1; echo "gpu_rmsnorm racecheck rc=$? $(grep -a 'RACECHECK SUMMARY' $R/gpu_rmsnorm_racecheck.log | tail -1)" >> $R/rc.txt
cd $ROOT && timeout 100 python3 bench/peers.py $R/peers_rmsnorm.json --only rmsnorm > $R/peers_rmsnorm.log 2>&1; echo "peers rc=$?" >> $R/rc.txt
cd $B/bin && B12X_PEER_JSON=$R/peers_rmsnorm.json B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo timeout 150 ./bench_rmsnorm > $R/bench_rmsnorm.log 2>&1; echo "bench rmsnorm rc=$?" >> $R/rc.txt
rm -rf $R/cache; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r
