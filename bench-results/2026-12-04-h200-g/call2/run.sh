#!/bin/bash
# Session 40, call 2 (issue 6): the attention's 8-warp decode tiles (`_s3_n8_w8`,
# PlanOptions::warps). gpu_paged whole suite (plain) + the wide trials under memcheck and
# racecheck; the paged bench at B = 1 and 8 (PDL) with 4 and 8 warps; the layer's B = 1 PDL step
# with the default, 8-warp and 16-split 8-warp attention; the layer's wide trials.
# Bundle: cargo xtask gpu-bundle --targets gpu_paged,bench_paged,gpu_decoder_layer,bench_decoder_layer
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_paged none $R/paged 16 150 > $R/paged_none.txt 2>&1
echo "gpu_paged none: $(tail -1 $R/paged_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_paged memcheck $R/paged 16 60 'wide_w8' > $R/paged_memcheck.txt 2>&1
echo "gpu_paged memcheck wide: $(tail -1 $R/paged_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_paged racecheck $R/paged 16 60 'wide_w8::(llama3_8b|llama3_8b_e4m3|d64_group8)' > $R/paged_racecheck.txt 2>&1
echo "gpu_paged racecheck wide: $(tail -1 $R/paged_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_decoder_layer none $R/layer 2 100 'attention_w8' > $R/layer_none.txt 2>&1
echo "layer w8 none: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
run_paged() { # tag, env...
  local tag=$1; shift
  env B12X_PAGED_BATCHES=1,8 B12X_PAGED_PDL=1 "$@" B12X_BENCH_OUT=$R/paged_$tag timeout 150 ./bench_paged > $R/paged_$tag.txt 2>&1
  echo "bench_paged $tag rc=$? t=$SECONDS" >> $R/summary.txt; save
}
run_paged w4
run_paged w8 B12X_PAGED_WARPS=8
for v in bf16_pdl/ bf16_pdl_w8/ bf16_pdl_s16_w8/ bf16_w8/; do
  t=${v%/}
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/layer_$t timeout 120 ./bench_decoder_layer > $R/layer_$t.txt 2>&1
  echo "layer $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt
for t in w4 w8; do grep -E "_x8/" $R/paged_$t/paged.md | grep -v read_probe | awk -F'|' '{print $2, $3, $4, $5}'; done
for t in bf16_pdl bf16_pdl_w8 bf16_pdl_s16_w8 bf16_w8; do grep -E "/step|prefix/[345]|op/attention" $R/layer_$t/decoder_layer.md | awk -F'|' '{print $2, $4}'; done
for f in $R/*/none.txt $R/*/memcheck.txt $R/*/racecheck.txt; do grep -v "passed=1" $f | head -6; done 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
