#!/bin/bash
# Session 53, call 3 (commit e77e3da; bundle: cargo xtask gpu-bundle --targets
# gpu_decoder_layer,bench_decoder_layer, xz into .gpu/bz): the layer's fast_decode trials (every
# format, B = 1, 8, 64), then FoldNorms::FirstScale against the
# session-52 best in one job (B = 1 x 4k, alternating; on an H200 these are the numbers),
# and the gate/up configs pinned in turn inside the FirstScale step (is the single-layer step's
# extra time in the gate/up stage a config choice?), and the FirstScale step with its weights
# uploaded after a 1000 MB spacer (is it where the weights land?). Bench binary of commit b6ef438 (the spacer).
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
timeout 120 ./gpu_decoder_layer fast_decode > $R/layer_fast.txt 2>&1
echo "layer fast_decode rc=$? t=$SECONDS: $(grep 'test result' $R/layer_fast.txt)" >> $R/summary.txt; save
i=0
for v in bf16_pdl_gs_rq_n2/ bf16_pdl_gs_s1_rq_n2/ bf16_pdl_gs_rq_n2/ bf16_pdl_gs_s1_rq_n2/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
B12X_LAYER_SPACER_MB=1000 B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=bf16_pdl_gs_s1_rq_n2/ B12X_BENCH_OUT=$R/bench_spacer_s1_5 timeout 50 ./bench_decoder_layer > $R/bench_spacer_s1_5.txt 2>&1
echo "bench spacer_s1_5 rc=$? t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 240 ] && B12X_LAYER_SWEEP=3 B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=bf16_pdl_gs_s1_rq_n2/ B12X_BENCH_OUT=$R/sweep timeout 60 ./bench_decoder_layer > $R/sweep.txt 2>&1
echo "sweep rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt $R/gpu.txt
grep -E "^test |FAIL|panicked" $R/layer_fast.txt | cut -c1-160 | head -12
grep -E "sweep of plan| us  " $R/sweep.txt | cut -c50- | head -12
for f in $R/bench_*.txt; do echo "$(basename $f) $(grep -E '/step ' $f | awk '{print $2, $6}') x4 $(grep -E '/step_x4 ' $f | awk '{print $2, $6}') lin $(grep -E '/linears_only ' $f | awk '{print $2}')"; grep -E "prefix/" $f | awk '{printf "%s %s; ", $1, $2} END {print ""}' | sed -E 's/decoder_layer\/[a-z0-9_]+\/B1_ctx4096\/prefix\///g'; done
cd $OUT && tar czf r.tgz r && rm -rf r
