#!/bin/bash
# Prepared in session 59 for the next call (issue 7). Bundle b9 = `main` after session 59's merge
# (`cargo xtask gpu-bundle --targets gpu_fused_moe,bench_fused_moe`, then `rm -f
# .gpu/bundle/bin/b12x-xtask && tar cJf .gpu/bz_b9/bundle.tar.xz -C .gpu bundle`; carry
# .gpu/bz_b9). What session 59's call left open, in priority order:
# 1. the whole gpu_fused_moe suite on main (the 64-row wgmma tile as SM90's default below the
#    split: `packed_tile::kernel_choice` and `packed_tile::split::t200` have new expectations);
# 2. racecheck of the three persistent trials that did not finish (reduced profile, long limit);
# 3. bench at T = 256 / 2048 (Qwen3-30B-A3B at 16 rows per expert: grouped GEMV against the
#    64-row tile; DeepSeek-V4-Flash at 48 rows: the 64- against the 128-row tile), clean this
#    time (sanitize_parallel.sh now stops its trials when killed);
# 4. decode rows T = 1 / 8 (criterion 2's numbers on this card);
# 5. with .gpu/bz_b10 (built from branch wip/wg64-producer, faf3eea): its 64-row trials, memcheck,
#    and its `fused_moe_tile_wg64` rows against b9's in one job (T 512 / 1024 / 2048).
END=${END:-600}; ROOT=$PWD; R=$OUT/r; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
mkdir -p .gpu/b9 && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .gpu/bz_b9/bundle.tar.xz .gpu/b9
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
cd $ROOT/.gpu/b9/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
timeout 170 bash $S ./gpu_fused_moe none $R/fm 16 140 > $R/fm.txt 2>&1
echo "suite: $(tail -1 $R/fm.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced timeout 130 bash $S ./gpu_fused_moe racecheck $R/rc 3 20 '^packed_tile(_wg64)?::(persist::c1::h1088_s4|persist::c3::h1088_s2|ring::c3::s4)::t300' > $R/rc.txt 2>&1
echo "racecheck: $(tail -1 $R/rc.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_MOE_TOKENS=256,2048 B12X_BENCH_FILTER=/T B12X_BENCH_OUT=$R/bench_b9 timeout 60 ./bench_fused_moe > $R/bench_b9.txt 2>&1
echo "bench T256/2048 rc=$? t=$SECONDS" >> $R/summary.txt; save
left=$((END - 10 - SECONDS)); [ $left -gt 25 ] && { B12X_MOE_TOKENS=1,8 B12X_BENCH_FILTER=fused_moe/ B12X_BENCH_OUT=$R/bench_b9_decode timeout $(( left < 40 ? left : 40 )) ./bench_fused_moe > $R/bench_b9_decode.txt 2>&1
echo "bench T1/8 rc=$? t=$SECONDS" >> $R/summary.txt; save; }
if [ -f $ROOT/.gpu/bz_b10/bundle.tar.xz ] && [ $((END - SECONDS)) -gt 200 ]; then
  mkdir -p $ROOT/.gpu/b10 && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $ROOT/.gpu/bz_b10/bundle.tar.xz $ROOT/.gpu/b10
  cd $ROOT/.gpu/b10/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
  timeout 60 bash $S ./gpu_fused_moe none $R/fm10 8 40 '^packed_tile_wg64::[^m]' > $R/fm10.txt 2>&1
  B12X_TEST_PROFILE=reduced timeout 40 bash $S ./gpu_fused_moe memcheck $R/mc10 8 25 '^packed_tile_wg64::ring' > $R/mc10.txt 2>&1
  echo "b10: $(tail -1 $R/fm10.txt); $(tail -1 $R/mc10.txt) t=$SECONDS" >> $R/summary.txt; save
  for b in b10 b9; do cd $ROOT/.gpu/$b/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
    B12X_MOE_TOKENS=512,1024,2048 B12X_BENCH_FILTER=fused_moe_tile_wg64/ B12X_BENCH_OUT=$R/bench_${b}_wg64 timeout 50 ./bench_fused_moe > $R/bench_${b}_wg64.txt 2>&1
    echo "bench $b wg64 rows rc=$? t=$SECONDS" >> $R/summary.txt; save; done
fi
cat $R/gpu.txt $R/summary.txt
for f in $R/fm/*fail*.log $R/rc/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -40
grep -hE "/T[0-9]" $R/bench_b9/fused_moe.md $R/bench_b9_decode/fused_moe.md $R/bench_b*_wg64/fused_moe.md 2>/dev/null | grep -v read_probe | cut -d'|' -f2-4,7-8
cd $OUT && tar czf r.tgz r && rm -rf r
