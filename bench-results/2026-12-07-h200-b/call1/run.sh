#!/bin/bash
# Session 58, call 1 (issue 7). Bundles (sm_90a, `cargo xtask gpu-bundle --targets
# gpu_fused_moe,bench_fused_moe`): b6 = main b1b5525's kernels (session 57's merge), b7 = branch
# wip/persist-tile 18110b6 (the wgmma tile persistent, `PlanOptions::tile_ctas`). Priority order:
# 1. b7's small tiled trials (packed_tile::* but the models, incl. persist / ring / split);
#    memcheck / racecheck of its persist / ring trials;
# 2. bench b6 (every row, T 1024 / 4096: the per-T split's boundary, the baseline) and b7
#    (the wgmma tile forced at T 512 / 1024 / 4096), one job; b7's T = 4096 model trials (many
#    tiles per persistent CTA);
# 3. b6's model trials session 57 did not start (gpt-oss / Qwen3 at T 512 / 4096);
# 4. decode rows (T 1 / 8) and the micro proto (read probes at its FC1 / FC2 byte counts);
# 5. ncu (--set full) of one eager Qwen3-30B-A3B call on b7: T = 4096 and T = 512 (wgmma forced).
END=${END:-250}; ROOT=$PWD; R=$OUT/r; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
for b in b6 b7; do mkdir -p .gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .gpu/bz_$b/bundle.tar.xz .gpu/$b; done
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
B6=$ROOT/.gpu/b6/bundle/bin; B7=$ROOT/.gpu/b7/bundle/bin
cd $B7; export B12X_COMMIT=$(cat ../COMMIT)
timeout 45 bash $S ./gpu_fused_moe none $R/fm7 8 30 '^packed_tile::[^m]' > $R/fm7.txt 2>&1
echo "b7 tiled (small): $(tail -1 $R/fm7.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced timeout 45 bash $S ./gpu_fused_moe memcheck $R/mc7 8 35 '^packed_tile::(persist|ring)' > $R/fm7_memcheck.txt 2>&1
echo "b7 memcheck: $(tail -1 $R/fm7_memcheck.txt) t=$SECONDS" >> $R/summary.txt
B12X_TEST_PROFILE=reduced timeout 40 bash $S ./gpu_fused_moe racecheck $R/rc7 8 30 '^packed_tile::(persist|ring)' > $R/fm7_racecheck.txt 2>&1
echo "b7 racecheck: $(tail -1 $R/fm7_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cd $B6; export B12X_COMMIT=$(cat ../COMMIT)
B12X_MOE_TOKENS=1024,4096 B12X_BENCH_OUT=$R/bench_b6 timeout 90 ./bench_fused_moe > $R/bench_b6.txt 2>&1
echo "bench b6 T1024/2048/4096 every row rc=$? t=$SECONDS" >> $R/summary.txt; save
cd $B7; export B12X_COMMIT=$(cat ../COMMIT)
B12X_MOE_TOKENS=512,1024,4096 B12X_BENCH_FILTER=fused_moe_tile_wg/ B12X_BENCH_OUT=$R/bench_b7 timeout 80 ./bench_fused_moe > $R/bench_b7.txt 2>&1
echo "bench b7 tile_wg T512..4096 rc=$? t=$SECONDS" >> $R/summary.txt; save
left=$((END - 10 - SECONDS)); [ $left -gt 50 ] && { timeout $(( left < 80 ? left : 80 )) bash $S ./gpu_fused_moe none $R/fm7m 4 20 '^packed::models::(gpt_oss_120b|qwen3_30b_a3b|deepseek_v4_flash_tp2)::t4096' > $R/fm7_models.txt 2>&1
echo "b7 T4096 models: $(tail -1 $R/fm7_models.txt) t=$SECONDS" >> $R/summary.txt; save; }
cd $B6; export B12X_COMMIT=$(cat ../COMMIT)
left=$((END - 10 - SECONDS)); [ $left -gt 40 ] && { timeout $(( left < 100 ? left : 100 )) bash $S ./gpu_fused_moe none $R/fmm 4 $(( (left < 100 ? left : 100) - 30 )) '^packed::models::(gpt_oss_120b|qwen3_30b_a3b)::t(512|4096)' > $R/fm_models.txt 2>&1
echo "b6 models: $(tail -1 $R/fm_models.txt) t=$SECONDS" >> $R/summary.txt; save; }
left=$((END - 10 - SECONDS)); [ $left -gt 20 ] && { B12X_MOE_TOKENS=1,8 B12X_BENCH_FILTER=fused_moe/ B12X_BENCH_OUT=$R/bench_b6_decode timeout $(( left < 40 ? left : 40 )) ./bench_fused_moe > $R/bench_b6_decode.txt 2>&1
echo "bench b6 T1/8 rc=$? t=$SECONDS" >> $R/summary.txt; save; }
left=$((END - 10 - SECONDS)); [ $left -gt 50 ] && { (cd $ROOT/bench/proto && timeout 60 nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -DPROTO_NO_CUBLAS -o /tmp/moe_micro moe_micro_proto.cu > $R/proto_build.txt 2>&1 \
  && timeout 40 /tmp/moe_micro > $R/proto.txt 2>&1; echo "moe_micro proto rc=$? t=$SECONDS" >> $R/summary.txt); save; }
cd $B7; export B12X_COMMIT=$(cat ../COMMIT)
for c in fused_moe/qwen3_30b_a3b/T4096:4096 fused_moe_tile_wg/qwen3_30b_a3b/T512:512; do
  left=$((END - 10 - SECONDS)); [ $left -lt 30 ] && break
  n=$(echo ${c%%:*} | tr / _)
  B12X_BENCH_FILTER=${c%%:*} B12X_MOE_TOKENS=${c##*:} B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/ncu_bench_$n \
    timeout $left ncu --clock-control none --kernel-name regex:b12x_fused_moe --launch-count 9 --set full -o $R/ncu_$n ./bench_fused_moe > $R/ncu_$n.txt 2>&1
  echo "ncu b7 $n rc=$? t=$SECONDS" >> $R/summary.txt
  ncu --import $R/ncu_$n.ncu-rep --page details > $R/ncu_${n}_details.txt 2>&1; rm -f $R/ncu_$n.ncu-rep; save
done
cat $R/gpu.txt $R/summary.txt
for f in $R/fm*/*fail*.log $R/mc7/*fail*.log $R/rc7/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -40
cat $R/proto.txt 2>/dev/null; grep -hE "/T[0-9]" $R/bench_b6/fused_moe.md $R/bench_b7/fused_moe.md $R/bench_b6_decode/fused_moe.md 2>/dev/null | grep -v read_probe | cut -d'|' -f2-4,7-8
cd $OUT && tar czf r.tgz r && rm -rf r
