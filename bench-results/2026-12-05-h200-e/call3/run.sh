#!/bin/bash
# Call 3 (session 48, issue 6): smaller fractions of W (call 2: 0.3 best): a second stream in the B = 1 step's graph warms the O projection's
# weight into L2 while the attention runs (bench rows warm_o/*; B12X_LAYER_WARM configs
# ctas:threads:frac:evict_last). Bundle: cargo xtask gpu-bundle --targets bench_decoder_layer
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt
export B12X_LAYER_WARM=132:256:0.3:1,132:256:0.1:1,132:256:0.15:1,132:256:0.2:1,132:256:0.25:1,132:256:0.3:1,132:512:0.3:1,132:256:0.2:0,132:256:0.2:1,132:256:0.25:1
B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=bf16_pdl_gs/ B12X_BENCH_OUT=$R/bench timeout 240 ./bench_decoder_layer > $R/bench.txt 2>&1
echo "rc=$? t=$SECONDS" >> $R/bench.txt
cat $R/gpu.txt
grep -E "/(step|step_x4|linears_only|read_probe) |prefix/|warm_o" $R/bench.txt | cut -c1-100 | sed "s|decoder_layer.bf16_pdl_gs.B1_ctx4096.||"
