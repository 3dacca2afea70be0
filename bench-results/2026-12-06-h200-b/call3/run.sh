#!/bin/bash
# Session 51, call 3 (the call-2 bundle, commit 483e5cc): the rope epilogue's suite and the layer's
# rope_qkv trials, then the B = 1 x 4k A/B (_pdl_gs, _pdl_gs_rq, _pdl_gs_f1, _pdl_gs_f1_rq, twice
# for the first two) and B12X_LAYER_SWEEP=1 (every QKV config inside the step) for _rq and _f1_rq.
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
timeout 120 ./gpu_qkv_rope > $R/qkv_rope.txt 2>&1
echo "gpu_qkv_rope rc=$? t=$SECONDS: $(grep 'test result' $R/qkv_rope.txt)" >> $R/summary.txt; save
timeout 150 ./gpu_decoder_layer rope_qkv > $R/layer.txt 2>&1
echo "layer rope_qkv rc=$? t=$SECONDS: $(grep 'test result' $R/layer.txt)" >> $R/summary.txt; save
i=0
for v in bf16_pdl_gs/ bf16_pdl_gs_rq/ bf16_pdl_gs_f1/ bf16_pdl_gs_f1_rq/ bf16_pdl_gs/ bf16_pdl_gs_rq/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 250 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
for v in bf16_pdl_gs_rq/ bf16_pdl_gs_f1_rq/; do
  t=sweep_$(echo ${v%/} | tr '/' '_')
  [ $SECONDS -lt 320 ] && B12X_LAYER_SWEEP=1 B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 60 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt $R/gpu.txt
grep -E "FAIL|panicked" $R/qkv_rope.txt $R/layer.txt | head
for f in $R/bench_*.txt; do echo "== $(basename $f)"; grep -E "/(step|step_x4|without/[a-z]+) |prefix/[12]_|sweep|  [0-9.]+ us  " $f | sed "s|decoder_layer/bf16[a-z0-9_]*/B1_ctx4096||" | cut -c1-110; done
cd $OUT && tar czf r.tgz r && rm -rf r
