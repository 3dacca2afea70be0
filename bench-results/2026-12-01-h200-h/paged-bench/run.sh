#!/bin/bash
# Session 18, call 5: the attention.paged decode bench (every B x ctx, BF16 and E4M3) at
# cb3a30e with PyTorch SDPA in the same job (bench/peers.py --only paged_decode), then racecheck
# on merge_paths::gpt_oss_window127_sinks (8-row tiles, group 8, D 64, sinks, window: the pushed
# merge at caps 2-8 against scratch). Bundle of `cargo xtask gpu-bundle --packages
# b12x-core,b12x-attention,b12x-norm`. From the repo root.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
timeout 150 python3 bench/peers.py $R/peers_paged.json --only paged_decode > $R/peers_paged.log 2>&1; echo "peers rc=$?" >> $R/rc.txt
cd $B/bin && B12X_PEER_JSON=$R/peers_paged.json B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo timeout 240 ./bench_paged > $R/bench_paged.log 2>&1; echo "bench paged rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 120 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged --test-threads 1 merge_paths::gpt_oss > $R/paged_racecheck_gptoss.log 2>&1; echo "racecheck merge_paths::gpt_oss rc=$?" >> $R/rc.txt
rm -rf $R/cache; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r
