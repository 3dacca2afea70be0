#!/bin/bash
# Session 41, call 1 (issue 6): rope_kv_append's warm part. B = 1 × 4k layer rows without and
# with the warm part (three read modes, and with 16 attention splits), then the suites of the
# touched kernels (rope_kv_append, kv_append: plain; the layer's warm trials one at a time), then
# memcheck on rope_kv_append (every trial runs a warm part).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
for v in bf16_pdl_gs/ bf16_pdl_gs_wl/ bf16_pdl_gs_wn/ bf16_pdl_gs_wp/ bf16_pdl_s16_gs_wl/; do
  t=${v%/}
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 90 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
bash $S ./gpu_rope_kv_append none $R/rka 8 60 > $R/rka_none.txt 2>&1
echo "rka none: $(tail -1 $R/rka_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_kv_append none $R/ka 8 40 > $R/ka_none.txt 2>&1
echo "ka none: $(tail -1 $R/ka_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_decoder_layer none $R/layer 1 60 'warm_kv' > $R/layer_none.txt 2>&1
echo "layer none: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
left=$((560 - SECONDS - 130))
if [ $left -gt 30 ]; then
  B12X_TEST_PROFILE=reduced bash $S ./gpu_rope_kv_append memcheck $R/rka 16 $left > $R/rka_memcheck.txt 2>&1
  echo "rka memcheck: $(tail -1 $R/rka_memcheck.txt) t=$SECONDS" >> $R/summary.txt
fi
cat $R/summary.txt
for f in $R/bench_*/decoder_layer.md; do grep -E "/step|prefix/|linears" $f | awk -F'|' '{print $2, $4, $8}'; done
grep "rope_kv\|paged" $R/bench_bf16_pdl_gs_wl.txt | head -5 | cut -c1-200
cd $OUT && tar czf r.tgz r && rm -rf r
