#!/bin/bash
# Session 26, call 3: gemm.blockscaled W8A16 (MXFP8, block FP8 128/32 tiles f32/UE8M0, per-tensor
# FP8) next to W4A16: gpu_blockscaled_gemv (full) + gpu_blockscaled_pack, the W8A16 bench rows
# with the cuBLAS BF16 peer (and the W4A16 rows at M = 1, 16 after the kernel's restructuring), memcheck (reduced, all trials) and racecheck (reduced, the FP8 trials).
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
(python3 $ROOT/bench/peers.py $R/peers.json --quick --only blockscaled_w4a16 > $R/peers.log 2>&1; echo "peers rc=$?" >> $R/summary.txt) &
cd $B/bin
B12X_CACHE_DIR=/tmp/c-t timeout 240 ./gpu_blockscaled_gemv --test-threads 1 > $R/gpu_blockscaled_gemv.log 2>&1
echo "gpu_blockscaled_gemv rc=$? $(grep -c '\.\.\. ok' $R/gpu_blockscaled_gemv.log) ok t=$SECONDS" >> $R/summary.txt
B12X_CACHE_DIR=/tmp/c-t timeout 60 ./gpu_blockscaled_pack --test-threads 1 > $R/gpu_blockscaled_pack.log 2>&1
echo "gpu_blockscaled_pack rc=$? $(grep -c '\.\.\. ok' $R/gpu_blockscaled_pack.log) ok t=$SECONDS" >> $R/summary.txt; save
wait
mkdir -p $R/bench
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=30 B12X_BENCH_FILTER=w8a16 B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 150 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 60 > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 40 'Mxfp8|BlockFp8|TensorFp8' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
mkdir -p $R/bench-w4
B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_QUICK=1 B12X_BENCH_SAMPLES=30 B12X_BENCH_FILTER=w4a16 B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench-w4 timeout 100 ./bench_blockscaled_gemv > $R/bench-w4/bench.log 2>&1
echo "bench w4a16 rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -E 'FAILED|panicked|failed' $R/gpu_blockscaled_gemv.log | head -20
grep -E "^\| (blockscaled|read)" $R/bench/*.md $R/bench-w4/*.md | cut -d'|' -f2,3,4,8,11 | head -90
cd $OUT && tar czf r.tgz r && rm -rf r
