#!/bin/bash
# Session 49, call 1 (issue 6): the fused add+RMSNorm GEMV (bf16_gemv XAct::AddRmsNorm) and
# LayerOptions::fold_norms. Bundle: cargo xtask gpu-bundle --targets
# gpu_bf16_gemv,gpu_l2_warm,gpu_decoder_layer,bench_decoder_layer (then rm .gpu/bundle/bin/b12x-xtask).
# Suites: gpu_bf16_gemv's addnorm trials (plain; memcheck and racecheck on the reduced profile),
# gpu_l2_warm's speed trial (fixed events), gpu_decoder_layer's fold_norms trials; then the
# B = 1 bench: _pdl_gs / _pdl_gs_fn / _pdl_gs / _pdl_gs_fn / _pdl_fn in one job; then the layer
# B = 1 fold trial under memcheck alone.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt
timeout 150 ./gpu_bf16_gemv addnorm > $R/gemv_addnorm.txt 2>&1
echo "gpu_bf16_gemv addnorm rc=$? t=$SECONDS: $(grep 'test result' $R/gemv_addnorm.txt)" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 ./gpu_bf16_gemv addnorm > $R/gemv_addnorm_memcheck.txt 2>&1
echo "addnorm memcheck rc=$? $(grep -E 'ERROR SUMMARY|test result' $R/gemv_addnorm_memcheck.txt | tr '\n' ' ') t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 ./gpu_bf16_gemv odd_n_addnorm::m4 > $R/gemv_addnorm_racecheck.txt 2>&1
echo "addnorm racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|test result' $R/gemv_addnorm_racecheck.txt | tr '\n' ' ') t=$SECONDS" >> $R/summary.txt; save
[ -x ./gpu_l2_warm ] && timeout 60 ./gpu_l2_warm warm_range > $R/l2_warm_speed.txt 2>&1
echo "gpu_l2_warm warm_range rc=$? $(grep -E 'l2_warm: 24|test result' $R/l2_warm_speed.txt | tr '\n' ' ') t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_decoder_layer none $R/layer 4 100 'fold_norms' > $R/layer_none.txt 2>&1
echo "layer fold_norms: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
for v in bf16_pdl_gs/ bf16_pdl_gs_fn/ bf16_pdl_gs/ bf16_pdl_gs_fn/ bf16_pdl_fn/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 420 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 60 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
[ $SECONDS -lt 450 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_decoder_layer memcheck $R/lm 1 30 'bf16_gate_up_silu_pdl_fold_norms::b1$' > $R/layer_memcheck.txt 2>&1
echo "layer memcheck: $(tail -1 $R/layer_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt $R/gpu.txt
grep -E "FAILED|panicked|Error|expected|exceeds" $R/gemv_addnorm.txt | head -20
for f in $R/bench_*.txt; do echo "== $(basename $f)"; grep -E "/(step|step_x4|linears_only|op/qkv_proj|op/gate_up_proj|read_probe) |prefix/|without/norms" $f | sed "s|decoder_layer/bf16[a-z0-9_]*/B1_ctx4096/||" | cut -c1-60; grep -E "qkv|gate_up|-> " $f | grep -E "N=6144|N=24576" | cut -c1-200 | head -4; done
cd $OUT && tar czf r.tgz r && rm -rf r
