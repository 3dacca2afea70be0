#!/bin/bash
# Session 61 (issue 7): the device calls that decide session 60's branches. Bundles (sm_90a,
# `cargo xtask gpu-bundle --targets gpu_fused_moe,bench_fused_moe[,gpu_blockscaled_gemv]`, then
# `rm -f .gpu/bundle/bin/b12x-xtask && tar cJf .gpu/bz_bN/bundle.tar.xz -C .gpu bundle`):
#   b9  = main 7b26e41's kernels (bundle c7d41b0: the 64-row wgmma tile as SM90's default below
#         Query::wgmma_from);
#   b10 = wip/wg64-producer (the 64-row kernel with a producer warp, 544 threads);
#   b11 = wip/wg-last-release, b12 = wip/wg-kperm (attribution of b15's tile changes);
#   b15 = wip/cand = main + wip/wg-combined (b11 + b12 + a producer path from a shared-memory
#         tile table) + wip/gemv-nodiv (the decode GEMV body with no division per unit);
#         carries gpu_blockscaled_gemv (the same GEMV body's dense kernels).
# STEP=1 END=590 (one call may be all the budget allows: device starts kept failing): bench rows
#   in one job (T = 4096 defaults b9 / b15; decode T = 1 / 8 b9 / b15; the 64-row tile forced at
#   T = 512 / 1024 b9 / b15 / b10), then b15's whole gpu_fused_moe suite and
#   gpu_blockscaled_gemv, memcheck of b15's ring / persistent trials, racecheck of its ring
#   trials, b10's 64-row trials — each skipped when the time left is too short.
# STEP=2 END=590: memcheck of b15's decode / grouped GEMV trials and dense GEMV, b10's memcheck /
#   racecheck, T = 256 / 2048 rows b9 / b15, b11 / b12 T = 4096 (attribution), b9's three
#   unfinished racecheck trials.
END=${END:-590}; STEP=${STEP:-1}; ROOT=$PWD; R=$OUT/r$STEP; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r$STEP.tgz r$STEP); }
have() { [ -f $ROOT/.gpu/bz_$1/bundle.tar.xz ]; }
for b in b9 b10 b11 b12 b15; do have $b && { mkdir -p $ROOT/.gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $ROOT/.gpu/bz_$b/bundle.tar.xz $ROOT/.gpu/$b; }; done
into() { cd $ROOT/.gpu/$1/bundle/bin && export B12X_COMMIT=$(cat ../COMMIT); }
left() { echo $((END - 10 - SECONDS)); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
trials() {  # bundle, name, timeout, per-trial deadline, filter[, binary]
  local bin=${6:-gpu_fused_moe}
  have $1 && [ $(left) -gt 40 ] && { into $1; l=$(left); timeout $(( l < $3 ? l : $3 )) bash $S ./$bin none $R/fm_$1_$bin 16 $4 "$5" > $R/fm_$1_$bin.txt 2>&1
    echo "$1 $2: $(tail -1 $R/fm_$1_$bin.txt) t=$SECONDS" >> $R/summary.txt; save; }
}
san() {  # bundle, tool, timeout, workers, per-trial deadline, filter[, binary]
  local bin=${7:-gpu_fused_moe}
  have $1 && [ $(left) -gt 30 ] && { into $1; l=$(left); B12X_TEST_PROFILE=reduced timeout $(( l < $3 ? l : $3 )) bash $S ./$bin $2 $R/$2_$1_$bin $4 $5 "$6" > $R/$2_$1_$bin.txt 2>&1
    echo "$1 $2 $bin: $(tail -1 $R/$2_$1_$bin.txt) t=$SECONDS" >> $R/summary.txt; save; }
}
bench() {  # bundle, tag, tokens, filter, timeout
  have $1 && [ $(left) -gt 30 ] && { into $1; l=$(left); B12X_MOE_TOKENS=$3 B12X_BENCH_FILTER=$4 B12X_BENCH_OUT=$R/bench_$1_$2 timeout $(( l < $5 ? l : $5 )) ./bench_fused_moe > $R/bench_$1_$2.txt 2>&1
    echo "bench $1 $2 rc=$? t=$SECONDS" >> $R/summary.txt; save; }
}
if [ $STEP = 1 ]; then
  for b in b9 b15; do bench $b t4096 4096 fused_moe/ 45; done
  for b in b9 b15; do bench $b decode 1,8 fused_moe/ 40; done
  trials b15 suite 170 140 .
  for b in b9 b15 b10; do bench $b wg64 512,1024 fused_moe_tile_wg64/ 40; done
  trials b15 "dense gemv trials" 60 40 . gpu_blockscaled_gemv
  san b15 memcheck 60 8 40 '^packed_tile(_wg64)?::(ring|persist)'
  san b15 racecheck 80 8 55 '^packed_tile(_wg64)?::ring::(s2|s3|c3)'
  trials b10 "wg64 trials" 60 40 '^packed_tile_wg64::'
else
  san b15 memcheck 60 8 40 '^packed(_gemv)?::'
  san b15 memcheck 60 8 40 . gpu_blockscaled_gemv
  san b10 memcheck 50 8 35 '^packed_tile_wg64::(ring|persist)'
  san b10 racecheck 80 8 55 '^packed_tile_wg64::ring::(s2|s3|c3)'
  for b in b9 b15; do bench $b t256_2048 256,2048 /T 50; done
  for b in b12 b11; do bench $b t4096 4096 fused_moe/ 45; done
  san b9 racecheck 130 3 20 '^packed_tile(_wg64)?::(persist::c1::h1088_s4|persist::c3::h1088_s2|ring::c3::s4)::t300'
fi
for f in $R/bench_*/fused_moe.md; do [ -f $f ] && { echo "== $f"; grep -E "/T[0-9]" $f | grep -v read_probe | cut -d'|' -f2-4,7-8; }; done
cat $R/gpu.txt $R/summary.txt
for f in $R/*/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -40
cd $OUT && tar czf r$STEP.tgz r$STEP && rm -rf r$STEP
