#!/bin/bash
# Session 56, call 1 (issue 7): the wgmma tile with a TMA producer, A/B in one job.
#   .gpu/b1 = session 55's build (the landed kernels: every thread issues cp.async loads; wait_group 0
#             and a block barrier per k-tile; 2 stages): the baseline;
#   .gpu/b3 = one thread fills a stage with TMA / bulk copies (x's two 64-k slabs, the codes box in the
#             64-byte swizzle, the scale tiles); wgmma groups stay in flight across k-tiles (per-stage
#             empty barriers); 4 stages; two warpgroups of two m64 tiles (256 threads), 2 A buffers;
#   .gpu/b5 = b3 with 3 A-register buffers (two wgmma groups in flight while a step dequantizes) and
#             four warpgroups of one m64 tile each (512 threads, 127 registers);
#   .gpu/b6 = b5 with the activation kernel's 16-byte loads (it loaded gate / up one bf16 at a time).
# 1. bench b1, b6 at T 1024, 2048, 4096 (default rows); 2. gpu_fused_moe (b6) small trials; 3. the
# tiled path's model trials (b6); 4. memcheck / racecheck of the tiled trials (b6, reduced); 5. bench
# b5, b3 (default rows); 6. b6 Qwen3 T 512 / 768, every row.
END=${END:-585}; ROOT=$PWD; R=$OUT/r; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
for b in b1 b3 b5 b6; do mkdir -p .gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .gpu/bz_$b/bundle.tar.xz .gpu/$b; done
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bench() {  # bundle, seconds
  cd $ROOT/.gpu/$1/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
  B12X_BENCH_FILTER=fused_moe/ B12X_MOE_TOKENS=${TOKS:-1024,2048,4096} B12X_BENCH_OUT=$R/bench_$1 timeout $2 ./bench_fused_moe > $R/bench_$1.txt 2>&1
  echo "bench $1 rc=$? t=$SECONDS" >> $R/summary.txt; save
}
bench b1 ${BT:-60}; bench b6 ${BT:-60}
cd $ROOT/.gpu/b6/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
bash $S ./gpu_fused_moe none $R/fm 12 ${ST:-35} 'tiny|routing|bad|graph|alloc|logits|kernel_choice|split' > $R/fm_small.txt 2>&1
echo "fused_moe small (b6): $(tail -1 $R/fm_small.txt) t=$SECONDS" >> $R/summary.txt; save
timeout ${MT:-90} bash $S ./gpu_fused_moe none $R/fmm 10 $(( ${MT:-90} - 50 )) '^packed_tile::models|^packed::models.*t(512|4096)' > $R/fm_models.txt 2>&1
echo "fused_moe tiled models (b6): $(tail -1 $R/fm_models.txt) t=$SECONDS" >> $R/summary.txt; save
export B12X_TEST_PROFILE=reduced
bash $S ./gpu_fused_moe memcheck $R/mc 16 ${CT:-20} '^packed_tile::.*(tiny|bad|graph|split|ring)' > $R/fm_memcheck.txt 2>&1
echo "fused_moe memcheck (b6): $(tail -1 $R/fm_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe racecheck $R/rc 16 10 '^packed_tile::(bad_ids_masked::t40|graph_replay.*t40|tiny::shared_100::t300|split::t[23]00|ring::s[24]::t300)' > $R/fm_racecheck.txt 2>&1
echo "fused_moe racecheck (b6): $(tail -1 $R/fm_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
unset B12X_TEST_PROFILE
for b in b5 b3; do left=$((END - 20 - SECONDS)); [ $left -gt 40 ] && bench $b $(( left < 65 ? left : 65 )); done
left=$((END - 10 - SECONDS))
if [ $left -gt 20 ]; then
  cd $ROOT/.gpu/b6/bundle/bin
  B12X_MOE_TOKENS=512,768 B12X_BENCH_FILTER=qwen3 B12X_BENCH_OUT=$R/bench_b6_512 timeout $left ./bench_fused_moe > $R/bench_b6_512.txt 2>&1
  echo "bench b6 T512/768 qwen3 rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/gpu.txt $R/summary.txt
grep -h "FAIL\|fail" $R/fm/none.txt $R/fmm/none.txt $R/mc/memcheck.txt $R/rc/racecheck.txt 2>/dev/null | head -30
for f in $R/fm/*fail*.log $R/fmm/*fail*.log $R/mc/*fail*.log $R/rc/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -60
for f in $R/bench_b*/fused_moe.md; do echo "== $f"; grep -E "/T[0-9]" $f | grep -v read_probe | cut -d'|' -f2-6; done
cd $OUT && tar czf r.tgz r && rm -rf r
