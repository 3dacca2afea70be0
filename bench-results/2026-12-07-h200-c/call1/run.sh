#!/bin/bash
# Session 59, call 1 (issue 7). Bundles (sm_90a, `cargo xtask gpu-bundle --targets
# gpu_fused_moe,bench_fused_moe`): b6 = main b1b5525's kernels (session 57's merge, the baseline);
# b8 = branch wip/wg64 3696d89 = wip/persist-tile (the wgmma tile persistent, `PlanOptions::tile_ctas`;
# its 128-row kernel's SASS byte-identical to session 58's b7) + the 64-row wgmma tile
# (`TileKernel::Wgmma64`, forced rows `fused_moe_tile_wg64/*`, trials `packed_tile_wg64::*`).
# Priority order (results saved after each step):
# 1. b8's small tiled trials (packed_tile / packed_tile_wg64 but the models: persist, ring, split,
#    kernel_choice);
# 2. bench b8 (T 512 / 1024 / 4096: the default rows and the forced wg / wg64 / mma rows) and b6
#    (the same rows: the baseline), one job; then memcheck / racecheck of b8's persist / ring
#    trials (reduced profile); before them, bench/proto/wgmma_rs_ceiling_proto.cu (the k-loop
#    structure's ceiling: 4 / 2 warpgroups, N 128 / 64, dequantization chains of 0..4);
# 3. ncu (--set full) of one eager Qwen3-30B-A3B T = 4096 call on b8, with the wgmma tile's
#    per-instruction stall samples (source page, SASS, csv);
# 4. b8's model trials at T = 512 (wg64 forced) and T = 4096 (persistent CTAs over many tiles);
# 5. ncu of Qwen3 T = 512 with wg64 forced.
END=${END:-420}; ROOT=$PWD; R=$OUT/r; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
for b in b6 b8; do mkdir -p .gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .gpu/bz_$b/bundle.tar.xz .gpu/$b; done
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
B6=$ROOT/.gpu/b6/bundle/bin; B8=$ROOT/.gpu/b8/bundle/bin
cd $B8; export B12X_COMMIT=$(cat ../COMMIT)
timeout 50 bash $S ./gpu_fused_moe none $R/fm8 8 35 '^packed_tile(_wg64)?::[^m]' > $R/fm8.txt 2>&1
echo "b8 tiled (small): $(tail -1 $R/fm8.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_MOE_TOKENS=512,1024,4096 B12X_BENCH_FILTER=/T B12X_BENCH_OUT=$R/bench_b8 timeout 90 ./bench_fused_moe > $R/bench_b8.txt 2>&1
echo "bench b8 T512/1024/4096 rc=$? t=$SECONDS" >> $R/summary.txt; save
cd $B6; export B12X_COMMIT=$(cat ../COMMIT)
B12X_MOE_TOKENS=512,1024,4096 B12X_BENCH_FILTER=/T B12X_BENCH_OUT=$R/bench_b6 timeout 75 ./bench_fused_moe > $R/bench_b6.txt 2>&1
echo "bench b6 T512/1024/4096 rc=$? t=$SECONDS" >> $R/summary.txt; save
(cd $ROOT && timeout 60 nvcc -std=c++17 -O3 -arch=sm_90a -I b12x-core/include -o /tmp/wgc bench/proto/wgmma_rs_ceiling_proto.cu > $R/wgc_build.txt 2>&1 && timeout 30 /tmp/wgc > $R/wgmma_ceiling.txt 2>&1; echo "wgmma ceiling proto rc=$? t=$SECONDS" >> $R/summary.txt); save
cd $B8; export B12X_COMMIT=$(cat ../COMMIT)
B12X_TEST_PROFILE=reduced timeout 45 bash $S ./gpu_fused_moe memcheck $R/mc8 8 35 '^packed_tile(_wg64)?::(persist|ring)' > $R/fm8_memcheck.txt 2>&1
echo "b8 memcheck: $(tail -1 $R/fm8_memcheck.txt) t=$SECONDS" >> $R/summary.txt
B12X_TEST_PROFILE=reduced timeout 40 bash $S ./gpu_fused_moe racecheck $R/rc8 8 30 '^packed_tile(_wg64)?::(persist|ring)' > $R/fm8_racecheck.txt 2>&1
echo "b8 racecheck: $(tail -1 $R/fm8_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
ncu_one() {  # case T name
  left=$((END - 10 - SECONDS)); [ $left -lt 40 ] && return
  B12X_BENCH_FILTER=$1 B12X_MOE_TOKENS=$2 B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/ncu_bench_$3 \
    timeout $(( left < 100 ? left : 100 )) ncu --clock-control none --kernel-name regex:b12x_fused_moe --launch-count 9 --set full -o $R/ncu_$3 ./bench_fused_moe > $R/ncu_$3.txt 2>&1
  echo "ncu b8 $3 rc=$? t=$SECONDS" >> $R/summary.txt
  ncu --import $R/ncu_$3.ncu-rep --page details > $R/ncu_$3_details.txt 2>&1
  ncu --import $R/ncu_$3.ncu-rep --kernel-name regex:tile_wg --launch-count 1 --page source --csv --print-source sass > $R/ncu_$3_sass.csv 2>&1; xz -q $R/ncu_$3_sass.csv; rm -f $R/ncu_$3.ncu-rep; save
}
ncu_one fused_moe/qwen3_30b_a3b/T4096 4096 qwen3_t4096
left=$((END - 10 - SECONDS)); [ $left -gt 50 ] && { timeout $(( left < 110 ? left : 110 )) bash $S ./gpu_fused_moe none $R/fm8m 4 $(( (left < 110 ? left : 110) - 40 )) '^packed_tile_wg64::models::.*::t512|^packed::models::(gpt_oss_120b|qwen3_30b_a3b|deepseek_v4_flash_tp2)::t4096' > $R/fm8_models.txt 2>&1
echo "b8 models (wg64 T512, default T4096): $(tail -1 $R/fm8_models.txt) t=$SECONDS" >> $R/summary.txt; save; }
ncu_one fused_moe_tile_wg64/qwen3_30b_a3b/T512 512 qwen3_t512_wg64
cat $R/gpu.txt $R/summary.txt $R/wgmma_ceiling.txt
for f in $R/fm*/*fail*.log $R/mc8/*fail*.log $R/rc8/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -40
grep -hE "/T[0-9]" $R/bench_b6/fused_moe.md $R/bench_b8/fused_moe.md 2>/dev/null | grep -v read_probe | cut -d'|' -f2-4,7-8
cd $OUT && tar czf r.tgz r && rm -rf r
