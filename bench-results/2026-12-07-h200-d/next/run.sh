#!/bin/bash
# Prepared in session 60 (no device time left that session) for the next call (issue 7).
# Bundles (sm_90a, `cargo xtask gpu-bundle --targets gpu_fused_moe,bench_fused_moe`, then
# `rm -f .gpu/bundle/bin/b12x-xtask && mkdir -p .gpu/bz_bN && tar cJf .gpu/bz_bN/bundle.tar.xz -C .gpu bundle`):
#   b9  = `main` (the kernels of session 59's merge: the 64-row wgmma tile SM90's default below
#         Query::wgmma_from — its new `kernel_choice` / `split::t200` expectations never ran);
#   b10 = branch `wip/wg64-producer` (the 64-row kernel with a producer warp, 544 threads;
#         session 60 fixed its serialized wgmmas);
#   b11 = branch `wip/wg-last-release` (both wgmma tiles: the last warp to leave a stage refills it).
# Carry .gpu/bz_b9 .gpu/bz_b10 .gpu/bz_b11. Two calls: `STEP=1 END=590 bash …/run.sh`, then
# `STEP=2 END=590 bash …/run.sh` (the second only needs what the first left open).
# STEP 1, in priority order: the whole gpu_fused_moe suite on b9; the branches' tiled trials; the
#   bench rows that decide the merges, all bundles in one job (T = 4096 defaults: b9 / b11; the
#   64-row tile forced at T = 512 / 1024: b9 / b10 / b11).
# STEP 2: memcheck and racecheck of the branches' ring / persistent trials, the decode rows
#   T = 1 / 8 on b9, b9's three unfinished racecheck trials, T = 256 / 2048 on b9.
END=${END:-590}; STEP=${STEP:-1}; ROOT=$PWD; R=$OUT/r$STEP; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r$STEP.tgz r$STEP); }
have() { [ -f $ROOT/.gpu/bz_$1/bundle.tar.xz ]; }
for b in b9 b10 b11; do have $b && { mkdir -p $ROOT/.gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $ROOT/.gpu/bz_$b/bundle.tar.xz $ROOT/.gpu/$b; }; done
into() { cd $ROOT/.gpu/$1/bundle/bin && export B12X_COMMIT=$(cat ../COMMIT); }
left() { echo $((END - 10 - SECONDS)); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
if [ $STEP = 1 ]; then
  into b9; timeout 170 bash $S ./gpu_fused_moe none $R/fm9 16 140 > $R/fm9.txt 2>&1
  echo "b9 suite: $(tail -1 $R/fm9.txt) t=$SECONDS" >> $R/summary.txt; save
  have b10 && { into b10; timeout 70 bash $S ./gpu_fused_moe none $R/fm10 16 45 '^packed_tile_wg64::' > $R/fm10.txt 2>&1
    echo "b10 wg64 trials: $(tail -1 $R/fm10.txt) t=$SECONDS" >> $R/summary.txt; save; }
  have b11 && { into b11; timeout 90 bash $S ./gpu_fused_moe none $R/fm11 16 60 '^packed_tile(_wg64)?::' > $R/fm11.txt 2>&1
    echo "b11 tiled trials: $(tail -1 $R/fm11.txt) t=$SECONDS" >> $R/summary.txt; save; }
  # One job, alternating bundles: the T = 4096 defaults (128-row tile), then the forced 64-row rows.
  for b in b9 b11; do have $b && [ $(left) -gt 120 ] && { into $b
    B12X_MOE_TOKENS=4096 B12X_BENCH_FILTER=fused_moe/ B12X_BENCH_OUT=$R/bench_${b}_t4096 timeout 45 ./bench_fused_moe > $R/bench_${b}_t4096.txt 2>&1
    echo "bench $b T4096 rc=$? t=$SECONDS" >> $R/summary.txt; save; }; done
  for b in b9 b10 b11; do have $b && [ $(left) -gt 60 ] && { into $b
    B12X_MOE_TOKENS=512,1024 B12X_BENCH_FILTER=fused_moe_tile_wg64/ B12X_BENCH_OUT=$R/bench_${b}_wg64 timeout 40 ./bench_fused_moe > $R/bench_${b}_wg64.txt 2>&1
    echo "bench $b wg64 rc=$? t=$SECONDS" >> $R/summary.txt; save; }; done
  grep -hE "/T[0-9]" $R/bench_*/fused_moe.md 2>/dev/null | grep -v read_probe | cut -d'|' -f2-4,7-8
else
  for b in b10 b11; do have $b && { into $b
    B12X_TEST_PROFILE=reduced timeout 60 bash $S ./gpu_fused_moe memcheck $R/mc$b 8 40 '^packed_tile(_wg64)?::(ring|persist)' > $R/mc$b.txt 2>&1
    echo "$b memcheck: $(tail -1 $R/mc$b.txt) t=$SECONDS" >> $R/summary.txt; save; }; done
  for b in b10 b11; do have $b && { into $b
    B12X_TEST_PROFILE=reduced timeout 120 bash $S ./gpu_fused_moe racecheck $R/rc$b 8 80 '^packed_tile(_wg64)?::ring::(s2|s3|c3)' > $R/rc$b.txt 2>&1
    echo "$b racecheck: $(tail -1 $R/rc$b.txt) t=$SECONDS" >> $R/summary.txt; save; }; done
  into b9
  [ $(left) -gt 40 ] && { B12X_MOE_TOKENS=1,8 B12X_BENCH_FILTER=fused_moe/ B12X_BENCH_OUT=$R/bench_b9_decode timeout 40 ./bench_fused_moe > $R/bench_b9_decode.txt 2>&1
    echo "bench T1/8 rc=$? t=$SECONDS" >> $R/summary.txt; save; }
  l=$(left); [ $l -gt 30 ] && B12X_TEST_PROFILE=reduced timeout $(( l < 130 ? l : 130 )) bash $S ./gpu_fused_moe racecheck $R/rc9 3 20 '^packed_tile(_wg64)?::(persist::c1::h1088_s4|persist::c3::h1088_s2|ring::c3::s4)::t300' > $R/rc9.txt 2>&1
  echo "b9 racecheck: $(tail -1 $R/rc9.txt) t=$SECONDS" >> $R/summary.txt; save
  [ $(left) -gt 60 ] && { l=$(left); B12X_MOE_TOKENS=256,2048 B12X_BENCH_FILTER=/T B12X_BENCH_OUT=$R/bench_b9 timeout $(( l < 70 ? l : 70 )) ./bench_fused_moe > $R/bench_b9.txt 2>&1
    echo "bench T256/2048 rc=$? t=$SECONDS" >> $R/summary.txt; save; }
  grep -hE "/T[0-9]" $R/bench_*/fused_moe.md 2>/dev/null | grep -v read_probe | cut -d'|' -f2-4,7-8
fi
cat $R/gpu.txt $R/summary.txt
for f in $R/*/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -40
cd $OUT && tar czf r$STEP.tgz r$STEP && rm -rf r$STEP
