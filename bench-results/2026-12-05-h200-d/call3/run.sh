#!/bin/bash
# Call 3 (session 47, issue 6): LayerOptions::early_release against the default PDL step on the
# landed code (register block reverted). Bundle: cargo xtask gpu-bundle --targets gpu_decoder_layer,bench_decoder_layer
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt
i=0
for v in bf16_pdl_gs/ bf16_pdl_gs_er/ bf16_pdl_gs/ bf16_pdl_gs_er/; do
  i=$((i+1)); t=${v%/}_$i
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 45 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
for v in bf16_pdl_gs/B8 bf16_pdl_gs_er/B8 bf16_pdl_gs/B64 bf16_pdl_gs_er/B64; do
  t=$(echo $v | tr '/' '_')
  [ $SECONDS -lt 330 ] && B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 60 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
[ $SECONDS -lt 400 ] && bash $S ./gpu_decoder_layer none $R/layer 1 60 'early_release::b(1|64)$' > $R/layer_none.txt 2>&1
echo "layer none: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 470 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_decoder_layer memcheck $R/lm 1 10 'early_release::b1$' > $R/layer_memcheck.txt 2>&1
echo "layer memcheck: $(tail -1 $R/layer_memcheck.txt) t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt $R/gpu.txt
for f in $R/bench_*.txt; do echo "== $f"; grep -E "/(step|step_x4|linears_only|op/attention|read_probe) |prefix/" $f | cut -c1-90; done
cd $OUT && tar czf r.tgz r && rm -rf r
