#!/bin/bash
# Session 54, call 2 (issue 7), replacing call 1 (never run: no device was lent): two bundles.
#   .gpu/b2 = the wgmma tile (128-row slots) + W4A16's activation in the wgmma FC1's epilogue;
#   .gpu/b1 = the wgmma tile without the fused activation (call 1's bundle), bench only.
# gpu_fused_moe (b2): small trials (packed_tile:: = wgmma, packed_tile_mma:: = mma.sync forced),
# the packed model trials, memcheck / racecheck (reduced profile) of the tiled trials; then the
# bench at T 512, 4096 (b2: default, tile, tile_mma, gemv rows) and b1's default rows at T 4096.
END=${END:-580}; ROOT=$PWD; R=$OUT/r; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
for b in b1 b2; do mkdir -p .gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .gpu/bz_$b/bundle.tar.xz .gpu/$b; done
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
cd $ROOT/.gpu/b2/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
bash $S ./gpu_fused_moe none $R/fm 12 50 'tiny|routing|bad|graph|alloc|logits|kernel_choice' > $R/fm_small.txt 2>&1
echo "fused_moe small: $(tail -1 $R/fm_small.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe none $R/fmm 10 90 '^packed.*models' > $R/fm_models.txt 2>&1
echo "fused_moe packed models: $(tail -1 $R/fm_models.txt) t=$SECONDS" >> $R/summary.txt; save
export B12X_TEST_PROFILE=reduced
bash $S ./gpu_fused_moe memcheck $R/mc 16 30 '^packed_tile.*(tiny|bad|graph)' > $R/fm_memcheck.txt 2>&1
echo "fused_moe memcheck: $(tail -1 $R/fm_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe racecheck $R/rc 16 15 '^packed_tile(_mma)?::(bad_ids_masked::t40|graph_replay.*t40|tiny::shared_100::t300|tiny::w4a16_nvfp4_silu::t64)' > $R/fm_racecheck.txt 2>&1
echo "fused_moe racecheck: $(tail -1 $R/fm_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
unset B12X_TEST_PROFILE
left=$((END - 35 - SECONDS))
if [ $left -gt 40 ]; then
  B12X_MOE_TOKENS=4096,512 B12X_BENCH_OUT=$R/bench timeout $((left - 60)) ./bench_fused_moe > $R/bench.txt 2>&1
  echo "bench b2 rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
left=$((END - SECONDS))
if [ $left -gt 25 ]; then
  cd $ROOT/.gpu/b1/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
  B12X_MOE_TOKENS=4096 B12X_BENCH_FILTER=fused_moe/ B12X_BENCH_OUT=$R/bench_b1 timeout $((left - 5)) ./bench_fused_moe > $R/bench_b1.txt 2>&1
  echo "bench b1 rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/gpu.txt $R/summary.txt
grep -h "FAIL\|fail" $R/fm/none.txt $R/fmm/none.txt $R/mc/memcheck.txt $R/rc/racecheck.txt 2>/dev/null | head -30
for f in $R/fm/*fail*.log $R/fmm/*fail*.log $R/mc/*fail*.log $R/rc/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -60
for f in $R/bench/fused_moe.md $R/bench_b1/fused_moe.md; do [ -f $f ] && { echo "== $f"; grep -E "/T[0-9]" $f | grep -v read_probe | cut -d'|' -f2-8; }; done
cd $OUT && tar czf r.tgz r && rm -rf r
