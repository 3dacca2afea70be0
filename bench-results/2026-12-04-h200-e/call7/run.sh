#!/bin/bash
# Session 38, call 7 (issue 6): the example at 431f350 (every format at B = 8, BF16 at B = 1),
# then the layer bench, every format and batch (one job per format: the report is written at
# the end of each), with the step_x4 and prefix rows.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
timeout 150 ./example_decoder_layer > $R/example_b8.txt 2>&1; echo "example (every format, B = 8) rc=$? t=$SECONDS" >> $R/summary.txt
timeout 60 ./example_decoder_layer bf16 1 6 > $R/example_bf16_b1.txt 2>&1; echo "example (bf16, B = 1, 6 steps) rc=$? t=$SECONDS" >> $R/summary.txt; save
for f in block_fp8 nvfp4 bf16; do
  B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_$f timeout 330 ./bench_decoder_layer > $R/bench_$f.txt 2>&1
  echo "bench $f rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt; tail -3 $R/example_b8.txt $R/example_bf16_b1.txt
for f in bf16 block_fp8 nvfp4; do grep -E "/step|linears|sum_of_ops|read_probe" $R/bench_$f/decoder_layer.md | awk -F'|' '{print $2, $4, $8}'; done
cd $OUT && tar czf r.tgz r && rm -rf r
