#!/bin/bash
# Session 40, call 3 (issue 6): the SwiGLU epilogue (bf16_gemv YAct::SiluMul, layers
# gate_up_silu) and the 8-warp attention default. gpu_bf16_gemv whole (the params struct grew)
# + memcheck/racecheck on the epilogue trials; gpu_paged whole (new defaults); gpu_decoder_layer
# whole + memcheck on gate_up_silu; the layer bench at B = 1 (quick) and B = 8 / 64 (PDL rows).
# Bundle: cargo xtask gpu-bundle --targets gpu_bf16_gemv,gpu_decoder_layer,bench_decoder_layer,gpu_paged
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_bf16_gemv none $R/gemv 16 90 > $R/gemv_none.txt 2>&1
echo "gemv none: $(tail -1 $R/gemv_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_bf16_gemv memcheck $R/gemv 16 40 'ysilu' > $R/gemv_memcheck.txt 2>&1
echo "gemv memcheck ysilu: $(tail -1 $R/gemv_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_bf16_gemv racecheck $R/gemv 16 40 'small_ysilu_limit_bias::m(1|16)' > $R/gemv_racecheck.txt 2>&1
echo "gemv racecheck ysilu: $(tail -1 $R/gemv_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_paged none $R/paged 16 60 > $R/paged_none.txt 2>&1
echo "gpu_paged none: $(tail -1 $R/paged_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_decoder_layer none $R/layer 4 120 > $R/layer_none.txt 2>&1
echo "layer none: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_decoder_layer memcheck $R/layer 2 40 'gate_up_silu_pdl::b1|gate_up_silu::b8|gate_up_silu_errors' > $R/layer_memcheck.txt 2>&1
echo "layer memcheck gs: $(tail -1 $R/layer_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
for v in bf16_pdl/ bf16_pdl_gs/ bf16_gs/ bf16/; do
  t=${v%/}
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 100 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
for v in bf16_pdl/B8 bf16_pdl_gs/B8 bf16_pdl/B64 bf16_pdl_gs/B64; do
  t=$(echo ${v} | tr '/' '_')
  [ $SECONDS -gt 540 ] && break
  B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 60 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt
for f in $R/bench_*/decoder_layer.md; do grep -E "/step|prefix/[4-9]|op/gate_up|op/attention|op/down|linears_only" $f | awk -F'|' '{print $2, $4, $8}'; done
for f in $R/*/none.txt $R/*/memcheck.txt $R/*/racecheck.txt; do grep -v "passed=1" $f | head -6; done 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
