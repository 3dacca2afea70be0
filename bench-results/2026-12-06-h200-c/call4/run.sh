#!/bin/bash
# Session 52, call 4 (commit dfbd04e: the review's refactors — the ring-epilogue query checks
# shared, the bad-input trial through one helper): gpu_bf16_gemv split_norm (every trial),
# the bad-input trial under memcheck, the layer's norm2 trials.
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
timeout 150 ./gpu_bf16_gemv split_norm > $R/split.txt 2>&1
echo "gpu_bf16_gemv split_norm rc=$? t=$SECONDS: $(grep 'test result' $R/split.txt)" >> $R/summary.txt; save
timeout 90 ./gpu_decoder_layer norm2 > $R/layer_norm2.txt 2>&1
echo "layer norm2 rc=$? t=$SECONDS: $(grep 'test result' $R/layer_norm2.txt)" >> $R/summary.txt; save
bash $S ./gpu_bf16_gemv memcheck $R/mc 2 60 'split_norm_bad' > $R/split_memcheck.txt 2>&1
echo "split bad memcheck: $(tail -1 $R/split_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt $R/gpu.txt
grep -E "^test |FAIL|panicked" $R/split.txt $R/layer_norm2.txt | cut -c1-200 | head -30
cd $OUT && tar czf r.tgz r && rm -rf r
