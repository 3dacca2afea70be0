#!/bin/bash
# Session 36, call 3 (issue 6): benchmarks. The decoder layer's step (one graph) vs its ops and the
# read ceiling, every weight format, BF16 also with PDL; activation.silu_and_mul against PyTorch's
# F.silu(g) * u (peers.py in the same job).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt
# call 2 ran out of rerun time before this trial's solo rerun (it failed only on the free-memory
# check while other trials ran in parallel): run it alone.
(cd $B/bin && timeout 90 ./gpu_decoder_layer --exact qwen3_8b::bf16_pdl::b64 > $R/layer_pdl_b64.txt 2>&1; echo "layer bf16_pdl b64 alone rc=$? t=$SECONDS" >> $R/summary.txt)
B12X_BENCH_OUT=$R/bench timeout 300 $B/bin/bench_decoder_layer > $R/bench_layer.txt 2>&1; echo "bench layer rc=$? t=$SECONDS" >> $R/summary.txt; save
timeout 60 python3 bench/peers.py $R/peers.json --only silu_and_mul > $R/peers.txt 2>&1; echo "peers rc=$? t=$SECONDS" >> $R/summary.txt
B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 120 $B/bin/bench_silu_and_mul > $R/bench_silu.txt 2>&1; echo "bench silu rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
grep -E "/step|sum_of_ops|read_probe" $R/bench_layer.txt | head -40
grep -E "silu_and_mul/" $R/bench_silu.txt | head -20; tail -3 $R/peers.txt
cd $OUT && tar czf r.tgz r && rm -rf r
