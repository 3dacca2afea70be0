#!/bin/bash
# Session 19, call 1 (from the repo root):
#  1. bench/proto/rmsnorm_l2_proto.cu `bound`: what any rmsnorm must at least do at T x D (read x,
#     write y, copy x -> y in three forms) next to the library's kernels (built here with the
#     device's nvcc from the working tree).
#  2. attention.paged decode: bench/peers.py --only paged_decode (SDPA, single and x8) and the
#     library bench (single and x8 tables) at B = 8, 32, bundle of
#     `cargo xtask gpu-bundle --packages b12x-core,b12x-attention` pruned to bench_paged.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
(cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/rms_l2 rmsnorm_l2_proto.cu) > $R/build.log 2>&1
timeout 150 /tmp/rms_l2 bound > $R/rmsnorm-bound.txt 2>&1; echo "rms bound rc=$?" >> $R/rc.txt
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
timeout 160 python3 bench/peers.py $R/peers_paged.json --only paged_decode > $R/peers_paged.log 2>&1; echo "peers rc=$?" >> $R/rc.txt
cd $B/bin && B12X_PAGED_BATCHES=8,32 B12X_PEER_JSON=$R/peers_paged.json B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo timeout 200 ./bench_paged > $R/bench_paged.log 2>&1; echo "bench paged rc=$?" >> $R/rc.txt
rm -rf $R/cache; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r
