#!/bin/bash
# Session 51, call 2: gemm.bf16_gemv's rope + KV-append epilogue (YAct::RopeAppend) and the
# layer's rope_in_qkv. gpu_qkv_rope plain, then under memcheck and racecheck (8 processes),
# the layer's rope_qkv trials alone, then the B = 1 x 4k layer A/B. Sized for ~420 s.
# Bundle: gpu-bundle --targets gpu_qkv_rope,bench_decoder_layer,gpu_decoder_layer (xz).
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
timeout 120 ./gpu_qkv_rope > $R/qkv_rope.txt 2>&1
echo "gpu_qkv_rope rc=$? t=$SECONDS: $(grep 'test result' $R/qkv_rope.txt)" >> $R/summary.txt; save
timeout 150 ./gpu_decoder_layer rope_qkv > $R/layer.txt 2>&1
echo "layer rope_qkv rc=$? t=$SECONDS: $(grep 'test result' $R/layer.txt)" >> $R/summary.txt; save
i=0
for v in bf16_pdl_gs/ bf16_pdl_gs_rq/ bf16_pdl_gs_f1_rq/ bf16_pdl_gs/ bf16_pdl_gs_rq/ bf16_pdl_gs_f1_rq/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 330 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
[ $SECONDS -lt 380 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_qkv_rope memcheck $R/mc 8 400 . > $R/qkv_rope_memcheck.txt 2>&1
echo "qkv_rope memcheck: $(tail -1 $R/qkv_rope_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 420 ] && bash $S ./gpu_qkv_rope racecheck $R/rc 6 440 'm1|faults::m6|addnorm::m8' > $R/qkv_rope_racecheck.txt 2>&1
echo "qkv_rope racecheck: $(tail -1 $R/qkv_rope_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt $R/gpu.txt
grep -E "^test |FAIL|panicked|Error" $R/qkv_rope.txt | head -30
grep -E "^test |1-cos|FAIL|panicked" $R/layer.txt | cut -c1-200 | head -20
for f in $R/bench_*.txt; do echo "== $(basename $f)"; grep -E "/(step|step_x4|linears_only|without/[a-z]+) |prefix/|-> " $f | sed "s|decoder_layer/bf16[a-z0-9_]*/B1_ctx4096||" | cut -c1-150; done
cd $OUT && tar czf r.tgz r && rm -rf r
