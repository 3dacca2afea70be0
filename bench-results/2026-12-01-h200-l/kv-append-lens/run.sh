#!/bin/bash
# Session 22, call 4: attention.kv_append with seq_lens in shared memory beside cu_seqlens_q (new),
# against call 3's kernel (base = .gpu/base/bench_kv_append). new = .gpu/bundle/bin, built from the
# working tree with B12X_CUDA_ARCHS=sm_90a cargo build --profile bundle -p b12x-attention --bench
# kv_append --test gpu_kv_append). The GPU suite, memcheck and racecheck (reduced), then
# base / new / new / base benches with the
# PyTorch peers in the same job. Results archived after every step.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; BASE=$PWD/.gpu/base
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
B12X_CACHE_DIR=/tmp/c-t timeout 150 ./gpu_kv_append --test-threads 1 > $R/gpu_kv_append.log 2>&1
echo "gpu_kv_append rc=$? $(grep -c '\.\.\. ok' $R/gpu_kv_append.log) ok t=$SECONDS" >> $R/summary.txt; save
for tool in memcheck racecheck; do
  B12X_CACHE_DIR=/tmp/c-s B12X_TEST_PROFILE=reduced timeout 200 compute-sanitizer --tool $tool --error-exitcode 1 ./gpu_kv_append --test-threads 1 > $R/${tool}.log 2>&1
  echo "$tool rc=$? $(grep -c '\.\.\. ok' $R/${tool}.log) ok $(grep 'ERROR SUMMARY\|RACECHECK SUMMARY' $R/${tool}.log | tail -1) t=$SECONDS" >> $R/summary.txt; save
done
cd $OLDPWD
timeout 200 python3 bench/peers.py $R/peers.json --only kv_append > $R/peers.log 2>&1; echo "peers rc=$? t=$SECONDS" >> $R/summary.txt; save
for who in base new new base; do
  d=$BASE; [ $who = new ] && d=$B/bin
  mkdir -p $R/${who}_$SECONDS; o=$R/${who}_$SECONDS
  (cd $d && B12X_CACHE_DIR=/tmp/c-$who B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$o timeout 100 ./bench_kv_append > $o/bench.log 2>&1)
  echo "$who rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt
rm -rf $R
