#!/bin/bash
# Session 52, call 1: the split second add+RMSNorm (bf16_gemv YAct::ResidualRms / XAct::RmsScale,
# the layer's norm2_in_o_proj). gpu_bf16_gemv's split_norm trials plain, then under memcheck and
# racecheck; the layer's norm2 and rope_qkv trials; then the B = 1 x 4k A/B alternating.
# Bundle: gpu-bundle --targets gpu_bf16_gemv,gpu_qkv_rope,gpu_decoder_layer,bench_decoder_layer (xz).
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
timeout 150 ./gpu_bf16_gemv split_norm > $R/split.txt 2>&1
echo "gpu_bf16_gemv split_norm rc=$? t=$SECONDS: $(grep 'test result' $R/split.txt)" >> $R/summary.txt; save
timeout 30 ./gpu_qkv_rope > $R/qkv_rope.txt 2>&1
echo "gpu_qkv_rope rc=$? t=$SECONDS: $(grep 'test result' $R/qkv_rope.txt)" >> $R/summary.txt; save
timeout 120 ./gpu_decoder_layer 'norm2|rope_qkv' > $R/layer.txt 2>&1
echo "layer norm2|rope_qkv rc=$? t=$SECONDS: $(grep 'test result' $R/layer.txt)" >> $R/summary.txt; save
i=0
for v in bf16_pdl_gs_rq/ bf16_pdl_gs_rq_n2/ bf16_pdl_gs_f1_rq_n2/ bf16_pdl_gs_rq/ bf16_pdl_gs_rq_n2/ bf16_pdl_gs_f1_rq_n2/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 400 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
[ $SECONDS -lt 450 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_bf16_gemv memcheck $R/mc 8 500 'split_norm' > $R/split_memcheck.txt 2>&1
echo "split memcheck: $(tail -1 $R/split_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 510 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_bf16_gemv racecheck $R/rc 4 560 'split_norm.*m(1|8)' > $R/split_racecheck.txt 2>&1
echo "split racecheck: $(tail -1 $R/split_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt $R/gpu.txt
grep -E "^test |FAIL|panicked|Error" $R/split.txt | cut -c1-250 | head -30
grep -E "^test |1-cos|FAIL|panicked" $R/layer.txt | cut -c1-200 | head -30
for f in $R/bench_*.txt; do echo "== $(basename $f)"; grep -E "/(step|step_x4|linears_only) |prefix/|-> " $f | sed "s|decoder_layer/bf16[a-z0-9_]*/B1_ctx4096||" | cut -c1-150; done
cd $OUT && tar czf r.tgz r && rm -rf r
