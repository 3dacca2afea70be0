#!/bin/bash
# Session 51, call 5 (the final code after the refactors of the duplicates pass): the rope
# epilogue's suite and the layer's rope_qkv trials at B = 1. Bundle: gpu_qkv_rope, gpu_decoder_layer.
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cd $B/bin
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
cat $B/COMMIT > $R/commit.txt 2>/dev/null
timeout 30 ./gpu_qkv_rope > $R/qkv_rope.txt 2>&1; echo "gpu_qkv_rope rc=$? $(grep 'test result' $R/qkv_rope.txt)" >> $R/summary.txt
timeout 40 ./gpu_decoder_layer rope_qkv::b1 > $R/layer.txt 2>&1; echo "layer rope_qkv::b1 rc=$? $(grep 'test result' $R/layer.txt)" >> $R/summary.txt
cat $R/summary.txt $R/gpu.txt $R/commit.txt; grep -E "^test " $R/layer.txt | cut -c1-120
cd $OUT && tar czf r.tgz r && rm -rf r
