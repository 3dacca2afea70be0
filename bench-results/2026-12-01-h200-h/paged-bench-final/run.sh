#!/bin/bash
# Session 18, call 8: the attention.paged decode bench at COMMIT (every B x ctx, BF16 and E4M3)
# with PyTorch SDPA in the same job (bench/peers.py --only paged_decode). Bundle of `cargo xtask
# gpu-bundle --packages b12x-core,b12x-attention`, pruned to bench_paged. From the repo root.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
timeout 100 python3 bench/peers.py $R/peers_paged.json --only paged_decode > $R/peers_paged.log 2>&1; echo "peers rc=$?" >> $R/rc.txt
cd $B/bin && B12X_PEER_JSON=$R/peers_paged.json B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo timeout 110 ./bench_paged > $R/bench_paged.log 2>&1; echo "bench paged rc=$?" >> $R/rc.txt
rm -rf $R/cache; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r
