#!/bin/bash
# Prepared in session 60 (no device time left that session) for the next calls (issue 7).
# Bundles (sm_90a, `cargo xtask gpu-bundle --targets gpu_fused_moe,bench_fused_moe`, then
# `rm -f .gpu/bundle/bin/b12x-xtask && mkdir -p .gpu/bz_bN && tar cJf .gpu/bz_bN/bundle.tar.xz -C .gpu bundle`;
# each ~2 MB; session 60 left them built in /work/main/.gpu — rebuild if the checkout is new):
#   b9  = `main` (session 59's merge: the 64-row wgmma tile SM90's default below
#         Query::wgmma_from — its `kernel_choice` / `split::t200` expectations never ran);
#   b10 = branch `wip/wg64-producer` (the 64-row kernel with a producer warp; session 60 fixed
#         its serialized wgmmas);
#   b11 = branch `wip/wg-last-release` (both wgmma tiles: the last warp to leave a stage refills it);
#   b12 = branch `wip/wg-kperm` (both wgmma tiles: x̂ / h in fragment order, pair<Q> conversion);
#   b13 = branch `wip/wg-combined` (b12 + b11 + a producing path with no global loads or
#         divisions per k-tile: the merge candidate).
#   b14 = branch `wip/gemv-nodiv` (the decode GEMV body without a division per unit; also
#         carries gpu_blockscaled_gemv: the same body's dense kernels).
# (A bundle's COMMIT may name a pre-rebase id of its branch: the same code.)
# Carry .gpu/bz_b9 .. .gpu/bz_b14 (~2 MB each; a missing bundle's steps are skipped).
# STEP=1 END=590: the bench rows that decide the merges, all bundles in one job (T = 4096
#   defaults: b9 / b13 / b12 / b11 — b10 leaves the 128-row kernel as it is; the 64-row tile
#   forced at T = 512 / 1024: all five), then the branches' tiled trials (a branch whose trials
#   fail: its rows do not count).
# STEP=2 END=590: the whole gpu_fused_moe suite on b9; memcheck of the branches' ring /
#   persistent trials; racecheck of b13's ring trials.
# STEP=3 END=400 (if the budget allows): decode rows T = 1 / 8 on b9 and b14 in one job, b14's
#   packed (decode / grouped GEMV) trials and gpu_blockscaled_gemv; T = 256 / 2048 on b9; the
#   other branches' racecheck; b9's three unfinished racecheck trials.
END=${END:-590}; STEP=${STEP:-1}; ROOT=$PWD; R=$OUT/r$STEP; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r$STEP.tgz r$STEP); }
have() { [ -f $ROOT/.gpu/bz_$1/bundle.tar.xz ]; }
for b in b9 b10 b11 b12 b13 b14; do have $b && { mkdir -p $ROOT/.gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $ROOT/.gpu/bz_$b/bundle.tar.xz $ROOT/.gpu/$b; }; done
into() { cd $ROOT/.gpu/$1/bundle/bin && export B12X_COMMIT=$(cat ../COMMIT); }
left() { echo $((END - 10 - SECONDS)); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
trials() {  # bundle, name, timeout, per-trial deadline, filter[, binary]
  local bin=${6:-gpu_fused_moe}
  have $1 && [ $(left) -gt 40 ] && { into $1; l=$(left); timeout $(( l < $3 ? l : $3 )) bash $S ./$bin none $R/fm_$1_$bin 16 $4 "$5" > $R/fm_$1_$bin.txt 2>&1
    echo "$1 $2: $(tail -1 $R/fm_$1_$bin.txt) t=$SECONDS" >> $R/summary.txt; save; }
}
san() {  # bundle, tool, timeout, workers, per-trial deadline, filter
  have $1 && [ $(left) -gt 30 ] && { into $1; l=$(left); B12X_TEST_PROFILE=reduced timeout $(( l < $3 ? l : $3 )) bash $S ./gpu_fused_moe $2 $R/$2_$1 $4 $5 "$6" > $R/$2_$1.txt 2>&1
    echo "$1 $2: $(tail -1 $R/$2_$1.txt) t=$SECONDS" >> $R/summary.txt; save; }
}
bench() {  # bundle, tag, tokens, filter, timeout
  have $1 && [ $(left) -gt 30 ] && { into $1; l=$(left); B12X_MOE_TOKENS=$3 B12X_BENCH_FILTER=$4 B12X_BENCH_OUT=$R/bench_$1_$2 timeout $(( l < $5 ? l : $5 )) ./bench_fused_moe > $R/bench_$1_$2.txt 2>&1
    echo "bench $1 $2 rc=$? t=$SECONDS" >> $R/summary.txt; save; }
}
if [ $STEP = 1 ]; then
  for b in b9 b13 b12 b11; do bench $b t4096 4096 fused_moe/ 45; done
  for b in b9 b13 b12 b11 b10; do bench $b wg64 512,1024 fused_moe_tile_wg64/ 40; done
  trials b13 "tiled trials" 90 60 '^packed_tile(_wg64)?::'
  trials b12 "tiled trials" 90 60 '^packed_tile(_wg64)?::'
  trials b11 "tiled trials" 90 60 '^packed_tile(_wg64)?::'
  trials b10 "wg64 trials" 60 40 '^packed_tile_wg64::'
elif [ $STEP = 2 ]; then
  trials b9 suite 170 140 .
  for b in b13 b12 b11 b10; do san $b memcheck 60 8 40 '^packed_tile(_wg64)?::(ring|persist)'; done
  san b13 racecheck 100 8 70 '^packed_tile(_wg64)?::ring::(s2|s3|c3)'
else
  for b in b9 b14; do bench $b decode 1,8 fused_moe/ 40; done
  trials b14 "packed trials" 90 60 '^packed(_gemv)?::'
  trials b14 "dense gemv trials" 90 60 . gpu_blockscaled_gemv
  bench b9 t256_2048 256,2048 /T 70
  for b in b12 b11; do san $b racecheck 100 8 70 '^packed_tile(_wg64)?::ring::(s2|s3|c3)'; done
  san b10 racecheck 100 8 70 '^packed_tile_wg64::ring::(s2|s3|c3)'
  san b9 racecheck 130 3 20 '^packed_tile(_wg64)?::(persist::c1::h1088_s4|persist::c3::h1088_s2|ring::c3::s4)::t300'
fi
for f in $R/bench_*/fused_moe.md; do [ -f $f ] && { echo "== $f"; grep -E "/T[0-9]" $f | grep -v read_probe | cut -d'|' -f2-4,7-8; }; done
cat $R/gpu.txt $R/summary.txt
for f in $R/*/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -40
cd $OUT && tar czf r$STEP.tgz r$STEP && rm -rf r$STEP
