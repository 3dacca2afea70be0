#!/bin/bash
# Call 1 (session 47, issue 6): the small ops' early release (LayerOptions::early_release).
# Bundle: cargo xtask gpu-bundle --targets gpu_rmsnorm,gpu_rope_kv_append,gpu_decoder_layer,bench_decoder_layer
# 1. B = 1 layer rows A/B: bf16_pdl_gs (base) / bf16_pdl_gs_er / bf16_pdl_s16_gs_er, alternating.
# 2. gpu_rmsnorm, gpu_rope_kv_append (all), gpu_decoder_layer (the PDL gate/up-epilogue trials
#    with and without early release, one worker), then memcheck / racecheck on the new trials.
# 3. B = 8 rows of base and _er if time is left.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt
i=0
for v in bf16_pdl_gs/ bf16_pdl_gs_er/ bf16_pdl_s16_gs_er/ bf16_pdl_gs/ bf16_pdl_gs_er/; do
  i=$((i+1)); t=${v%/}_$i
  [ $SECONDS -lt 220 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 45 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
bash $S ./gpu_rmsnorm none $R/norm 8 60 > $R/norm_none.txt 2>&1
echo "rmsnorm none: $(tail -1 $R/norm_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_rope_kv_append none $R/rka 8 60 > $R/rka_none.txt 2>&1
echo "rka none: $(tail -1 $R/rka_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_decoder_layer none $R/layer 1 200 'gate_up_silu_pdl(_early_release)?::b(1|8)$' > $R/layer_none.txt 2>&1
echo "layer none: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
export B12X_TEST_PROFILE=reduced
[ $SECONDS -lt 430 ] && bash $S ./gpu_rmsnorm memcheck $R/normm 8 30 'pdl_early' > $R/norm_memcheck.txt 2>&1
echo "rmsnorm memcheck: $(tail -1 $R/norm_memcheck.txt) t=$SECONDS" >> $R/summary.txt
[ $SECONDS -lt 440 ] && bash $S ./gpu_rope_kv_append memcheck $R/rkam 8 30 'early_release' > $R/rka_memcheck.txt 2>&1
echo "rka memcheck: $(tail -1 $R/rka_memcheck.txt) t=$SECONDS" >> $R/summary.txt
[ $SECONDS -lt 450 ] && bash $S ./gpu_rope_kv_append racecheck $R/rkar 8 30 'early_release' > $R/rka_racecheck.txt 2>&1
echo "rka racecheck: $(tail -1 $R/rka_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
unset B12X_TEST_PROFILE
[ $SECONDS -lt 480 ] && B12X_BENCH_FILTER=bf16_pdl_gs/B8 B12X_BENCH_OUT=$R/bench_b8 timeout 45 ./bench_decoder_layer > $R/bench_b8.txt 2>&1
[ $SECONDS -lt 530 ] && B12X_BENCH_FILTER=bf16_pdl_gs_er/B8 B12X_BENCH_OUT=$R/bench_b8er timeout 45 ./bench_decoder_layer > $R/bench_b8er.txt 2>&1
echo "bench b8 t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
for f in $R/bench_*.txt; do echo "== $f"; grep -E "/(step|step_x4|linears_only|op/attention|read_probe) |prefix/" $f | cut -c1-100; done
grep -h "FAIL\|fail" $R/*_none.txt | head
cd $OUT && tar czf r.tgz r && rm -rf r
