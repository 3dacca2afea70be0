#!/bin/bash
# Session 53, call 1 (commit 7b46498; bundle: cargo xtask gpu-bundle --targets bench_decoder_layer,gpu_decoder_layer,
# xz into .gpu/bz): the QKV (plan 1), gate/up (3) and down (4) configs pinned in turn inside the
# _pdl_gs_rq_n2 B = 1 x 4k step, then that step against _pdl_gs alternating.
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
B12X_LAYER_SWEEP=1,3,4 B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=bf16_pdl_gs_rq_n2/ B12X_BENCH_OUT=$R/sweep timeout 260 ./bench_decoder_layer > $R/sweep.txt 2>&1
echo "sweep rc=$? t=$SECONDS" >> $R/summary.txt; save
i=0
for v in bf16_pdl_gs_rq_n2/ bf16_pdl_gs/ bf16_pdl_gs_rq_n2/ bf16_pdl_gs/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 480 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt $R/gpu.txt
grep -E "sweep of plan| us  " $R/sweep.txt | cut -c40- | head -40
for f in $R/bench_*.txt; do echo "$(basename $f) $(grep -E '/step ' $f | awk '{print $2, $6}') x4 $(grep -E '/step_x4 ' $f | awk '{print $2, $6}')"; done
cd $OUT && tar czf r.tgz r && rm -rf r
