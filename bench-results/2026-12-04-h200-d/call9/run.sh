#!/bin/bash
# Session 37, call 9: the example (cargo run --release -p b12x-layers --example decoder_layer),
# built for sm_90a at the final commit: every format at B = 8 (its default), then BF16 at B = 1.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
timeout 150 ./example_decoder_layer > $R/example_b8.txt 2>&1; echo "example (every format, B = 8) rc=$? t=$SECONDS" >> $R/summary.txt
timeout 60 ./example_decoder_layer bf16 1 6 > $R/example_bf16_b1.txt 2>&1; echo "example (bf16, B = 1, 6 steps) rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt; tail -12 $R/example_b8.txt; tail -6 $R/example_bf16_b1.txt
cd $OUT && tar czf r.tgz r && rm -rf r
