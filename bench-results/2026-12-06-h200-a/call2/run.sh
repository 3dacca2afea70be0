#!/bin/bash
# Session 50, call 2 (commit cab1527): the fused kernel with the first Q unit's cos / sin before
# the PDL wait and the append after the initial blocks' issue. gpu_rope_paged plain, memcheck
# and racecheck (8 processes each), the layer's fused B = 1 trial beside them, then the B = 1
# layer A/B (_pdl_gs, _pdl_gs_ra, _pdl_gs) and the op bench. Sized for ~250 s of device time.
# Bundle: as call 1 (gpu_rope_paged,gpu_decoder_layer,bench_decoder_layer,bench_rope_paged, xz).
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
timeout 60 ./gpu_rope_paged > $R/rope_paged.txt 2>&1
echo "gpu_rope_paged rc=$? t=$SECONDS: $(grep 'test result' $R/rope_paged.txt)" >> $R/summary.txt; save
(timeout 100 ./gpu_decoder_layer --exact qwen3_8b::bf16_gate_up_silu_pdl_rope_attention::b1 > $R/layer_b1.txt 2>&1; echo "layer ra b1 rc=$? $(grep 'test result' $R/layer_b1.txt)" > $R/layer_b1.sum) &
bash $S ./gpu_rope_paged memcheck $R/mc 8 20 . > $R/rope_paged_memcheck.txt 2>&1
echo "rope_paged memcheck: $(tail -1 $R/rope_paged_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_rope_paged racecheck $R/rc 8 20 'decode|extend|variants::(s3_w8|pdl_s6|splits5)' > $R/rope_paged_racecheck.txt 2>&1
echo "rope_paged racecheck: $(tail -1 $R/rope_paged_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
wait; cat $R/layer_b1.sum >> $R/summary.txt
for v in bf16_pdl_gs/ bf16_pdl_gs_ra/ bf16_pdl_gs/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 200 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 45 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
[ $SECONDS -lt 230 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=rope_paged/decode_B1 B12X_BENCH_OUT=$R/bench_rope_paged timeout 40 ./bench_rope_paged > $R/bench_rope_paged.txt 2>&1
echo "bench_rope_paged rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt $R/gpu.txt
grep -A3 -E "^---- " $R/rope_paged.txt | head -20
grep -E "rope_paged/decode" $R/bench_rope_paged.txt | cut -c1-100
for f in $R/bench_*.txt; do echo "== $(basename $f)"; grep -E "/(step|step_x4|linears_attention|op/attention|without/rope) |prefix/" $f | sed "s|decoder_layer/bf16[a-z0-9_]*/B1_ctx4096/||" | cut -c1-42; done
cd $OUT && tar czf r.tgz r && rm -rf r
