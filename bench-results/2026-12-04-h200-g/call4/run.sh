#!/bin/bash
# Session 40, call 4 (issue 6), the call-3 bundle (commit 24f470a): call 3's B = 1 gate_up_silu
# row ran a config cached by a memcheck trial (the race timed under the sanitizer), and its
# layer suite ran 4 trials at once, which trips the free-memory check. Here: the B = 1 bench rows
# first on a fresh cache (the gs and plain PDL steps, same machine), then the layer trials that
# call 3 did not finish, one at a time.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
for v in bf16_pdl_gs/ bf16_pdl/; do
  t=${v%/}
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 90 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
bash $S ./gpu_decoder_layer none $R/layer 1 230 'gate_up_silu|attention_w8|::bf16::b(1|8)|::bf16_pdl::b(1|8)|fused_silu::b8' > $R/layer_none.txt 2>&1
echo "layer none: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt
for f in $R/bench_*/decoder_layer.md; do grep -E "/step|prefix/[6-9]|op/gate_up|linears_only" $f | awk -F'|' '{print $2, $4, $8}'; done
grep "gemm.bf16_gemv.*N=24576" $R/bench_*.txt | cut -c1-220
cat $R/layer/none.txt
cd $OUT && tar czf r.tgz r && rm -rf r
