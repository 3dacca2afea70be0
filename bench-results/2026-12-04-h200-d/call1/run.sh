#!/bin/bash
# Session 37, call 1 (issue 6): every kernel of the step launched with PDL (small ops'
# Plan::with_pdl). gpu_rope (exact bad-input kinds, not yet run), the whole gpu_decoder_layer
# suite (explicit 0 resolutions after freeze; PDL trials now with PDL small ops), then the
# layer bench's BF16 rows (variants "", _s8, _pdl, _pdl_s4, _pdl_s8; linears_only rows).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_rope none $R/rope 16 40 > $R/rope_none.txt 2>&1
echo "rope none: $(tail -1 $R/rope_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_decoder_layer none $R/layer 6 90 > $R/layer_none.txt 2>&1
echo "layer none: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_BENCH_FILTER=bf16 B12X_BENCH_OUT=$R/bench timeout 280 ./bench_decoder_layer > $R/bench_layer.txt 2>&1; echo "bench layer rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
grep -E "/step|linears|sum_of_ops|/op/attention" $R/bench_layer.txt | cut -c1-100
for f in $R/*/none.txt; do grep -v "passed=1" $f | head -8; done 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
