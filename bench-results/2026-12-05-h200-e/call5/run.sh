#!/bin/bash
# Call 5 (session 48, issue 6): bench/proto/evict_last_persist_proto.cu, then gemm.l2_warm and
# LayerOptions::warm_o_proj on the landed code —
# GPU suites (gpu_l2_warm whole; gpu_decoder_layer's warm_o trials), memcheck / racecheck on the
# reduced profile, then the B = 1 bench: default PDL step against warm_o_proj (30%, 20%, 40%, 50%, 66 CTAs)
# in one job, base/wo/base/wo. Bundle: cargo xtask gpu-bundle --targets gpu_l2_warm,gpu_decoder_layer,bench_decoder_layer
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt
# Do evict-last lines survive the flush, and does the reset undo it? (bench/proto, ~10 s)
(cd $B/../../bench/proto && nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I../../b12x-core/include \
  -o /tmp/elp evict_last_persist_proto.cu -lcuda && timeout 60 /tmp/elp) > $R/evict_last_persist.txt 2>&1
echo "evict_last_persist rc=$? t=$SECONDS" >> $R/summary.txt
timeout 120 ./gpu_l2_warm > $R/l2_warm.txt 2>&1; echo "gpu_l2_warm rc=$? t=$SECONDS: $(grep 'test result' $R/l2_warm.txt)" >> $R/summary.txt
grep "l2_warm: 24 MB" $R/l2_warm.txt >> $R/summary.txt
B12X_TEST_PROFILE=reduced timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 ./gpu_l2_warm > $R/l2_warm_memcheck.txt 2>&1
echo "l2_warm memcheck rc=$? $(grep -E 'ERROR SUMMARY|test result' $R/l2_warm_memcheck.txt | tr '\n' ' ') t=$SECONDS" >> $R/summary.txt
B12X_TEST_PROFILE=reduced timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 ./gpu_l2_warm > $R/l2_warm_racecheck.txt 2>&1
echo "l2_warm racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|test result' $R/l2_warm_racecheck.txt | tr '\n' ' ') t=$SECONDS" >> $R/summary.txt
save
bash $S ./gpu_decoder_layer none $R/layer 4 120 'warm_o' > $R/layer_none.txt 2>&1
echo "layer warm_o: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
for v in bf16_pdl_gs/ bf16_pdl_gs_wo/ bf16_pdl_gs/ bf16_pdl_gs_wo/ bf16_pdl_gs_wo20/ bf16_pdl_gs_wo40/ bf16_pdl_gs_wo50/ bf16_pdl_gs_wo30c66/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 440 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 60 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
[ $SECONDS -lt 480 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_decoder_layer memcheck $R/lm 2 40 'warm_o::b1$|pdl_warm_o::b8$' > $R/layer_memcheck.txt 2>&1
echo "layer memcheck: $(tail -1 $R/layer_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt $R/gpu.txt $R/evict_last_persist.txt
for f in $R/bench_*.txt; do echo "== $(basename $f)"; grep -E "/(step|step_x4|linears_only|op/attention|op/o_proj|read_probe) |prefix/|without/" $f | sed "s|decoder_layer/bf16[a-z0-9_]*/B1_ctx4096/||" | cut -c1-60; done
cd $OUT && tar czf r.tgz r && rm -rf r
