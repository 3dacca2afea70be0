#!/bin/bash
# Session 51, call 4 (the call-2 bundle, commit 483e5cc; the rest of the device budget): the
# rope epilogue's suite, then the B = 1 x 4k A/B _pdl_gs / _pdl_gs_rq twice.
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
timeout 60 ./gpu_qkv_rope > $R/qkv_rope.txt 2>&1
echo "gpu_qkv_rope rc=$? t=$SECONDS: $(grep 'test result' $R/qkv_rope.txt)" >> $R/summary.txt; save
i=0
for v in bf16_pdl_gs/ bf16_pdl_gs_rq/ bf16_pdl_gs/ bf16_pdl_gs_rq/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 130 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 45 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt $R/gpu.txt
for f in $R/bench_*.txt; do echo "$(basename $f) $(grep -E '/step ' $f | awk '{print $2, $4, $5}') x4 $(grep -E '/step_x4 ' $f | awk '{print $2, $5}')"; done
cd $OUT && tar czf r.tgz r && rm -rf r
