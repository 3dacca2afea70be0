#!/bin/bash
# Session 18, call 4: compute-sanitizer on attention.paged at cb3a30e (the pushed cluster merge,
# the BF16 split rule): memcheck over the whole reduced gpu_paged suite, racecheck over its
# merge_paths (every cap 2-8, cluster against scratch) and eight_row_tiles trials. Then the
# rmsnorm bench with its new x8 table (../rmsnorm-x8/) and the PyTorch peers of the same job.
# Bundle of `cargo xtask gpu-bundle --packages b12x-core,b12x-attention,b12x-norm`. From the repo root.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
B12X_TEST_PROFILE=reduced timeout 170 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_paged --test-threads 1 > $R/paged_memcheck.log 2>&1; echo "memcheck whole reduced rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 150 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged --test-threads 1 merge_paths > $R/paged_racecheck_merge.log 2>&1; echo "racecheck merge_paths rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 100 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged --test-threads 1 eight_row_tiles > $R/paged_racecheck_n8.log 2>&1; echo "racecheck eight_row_tiles rc=$?" >> $R/rc.txt
cd $ROOT && timeout 100 python3 bench/peers.py $R/peers_rmsnorm.json --only rmsnorm > $R/peers_rmsnorm.log 2>&1; echo "peers rc=$?" >> $R/rc.txt
cd $B/bin && B12X_PEER_JSON=$R/peers_rmsnorm.json B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo timeout 150 ./bench_rmsnorm > $R/bench_rmsnorm.log 2>&1; echo "bench rmsnorm rc=$?" >> $R/rc.txt
rm -rf $R/cache; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r
