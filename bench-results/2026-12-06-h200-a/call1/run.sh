#!/bin/bash
# Session 50, call 1 (commit 2b72d83): attention.rope_paged on a GPU for the first time, the
# layer's fuse_rope_attention and FoldNorms::First trials, then the B = 1 bench.
# Bundle (carried compressed: the binaries are 53 MB): cargo xtask gpu-bundle --targets
# gpu_rope_paged,gpu_decoder_layer,bench_decoder_layer,bench_rope_paged; tar cJf .gpu/bz/bundle.tar.xz -C .gpu bundle.
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt
timeout 120 ./gpu_rope_paged > $R/rope_paged.txt 2>&1
echo "gpu_rope_paged rc=$? t=$SECONDS: $(grep 'test result' $R/rope_paged.txt)" >> $R/summary.txt; save
bash $S ./gpu_decoder_layer none $R/layer 3 100 'rope_attention|fold_norms_first' > $R/layer_none.txt 2>&1
echo "layer rope_attention + first: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
for v in bf16_pdl_gs/ bf16_pdl_gs_ra/ bf16_pdl_gs_f1_ra/ bf16_pdl_gs/ bf16_pdl_gs_ra/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 280 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 60 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
[ $SECONDS -lt 360 ] && B12X_BENCH_QUICK=1 B12X_BENCH_OUT=$R/bench_rope_paged timeout 80 ./bench_rope_paged > $R/bench_rope_paged.txt 2>&1
echo "bench_rope_paged rc=$? t=$SECONDS" >> $R/summary.txt; save
# Sanitizers on what time is left (the call's limit is ~580 s): every trial of the fused suite
# under memcheck, then racecheck on the decode / extend / variant trials, 8 processes each.
left=$((450 - SECONDS)); [ $left -gt 30 ] && bash $S ./gpu_rope_paged memcheck $R/mc 8 $((left > 150 ? left - 120 : 30)) . > $R/rope_paged_memcheck.txt 2>&1
echo "rope_paged memcheck: $(tail -1 $R/rope_paged_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
left=$((560 - SECONDS)); [ $left -gt 40 ] && timeout $((left + 15)) bash $S ./gpu_rope_paged racecheck $R/rc 8 5 'decode|extend|variants::(s3_w8|pdl_s6|splits5)' > $R/rope_paged_racecheck.txt 2>&1
echo "rope_paged racecheck: $(tail -1 $R/rope_paged_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt $R/gpu.txt
grep -E "FAILED|failed|Error|error" $R/rope_paged.txt | head -20
grep -E "^rope_paged/|rope_paged/decode" $R/bench_rope_paged.txt | cut -c1-110 | head -12
for f in $R/bench_*.txt; do echo "== $(basename $f)"; grep -E "/(step|step_x4|linears_attention|op/attention|op/qkv_proj|without/rope) |prefix/" $f | sed "s|decoder_layer/bf16[a-z0-9_]*/B1_ctx4096/||" | cut -c1-42; done
cd $OUT && tar czf r.tgz r && rm -rf r
