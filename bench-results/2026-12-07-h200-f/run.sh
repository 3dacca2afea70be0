#!/bin/bash
# Session 62 (issue 7): the GPU trials and sanitizers that decide whether `wip/cand` (b15) merges,
# then session 61's unrun STEP=2 rows. Bundles as in ../2026-12-07-h200-e/run.sh:
#   b9 = main's kernels (c7d41b0), b10 = wip/wg64-producer, b11 = wip/wg-last-release,
#   b12 = wip/wg-kperm, b15 = wip/cand 7a326e8 (main + wip/wg-combined + wip/gemv-nodiv).
# STEP=1 END=590: b15's whole gpu_fused_moe suite and gpu_blockscaled_gemv trials, memcheck of its
#   ring / persistent / decode / grouped-GEMV trials and dense GEMV, racecheck of its ring trials,
#   then T = 4096 rows b9 / b15 (the card when the call lands on an H200).
# STEP=2 END=590: decode T = 1 / 8 rows b9 / b15, b10's 64-row trials / memcheck / racecheck,
#   T = 256 / 2048 rows b9 / b15, b11 / b12 T = 4096 (attribution), b9's three unfinished racecheck
#   trials.
# STEP=5 / 6 (C=b17 = main a696f43's code, the 8-row grouped-GEMV bound): the trials that bound
#   moved and memcheck of the merged tiles' tiny / bad-id / replay / split trials; then the
#   issue's bench rows (decode T 1..64 with the separate GEMVs, T = 512 / 4096).
# C=b16 runs STEP=1's candidate rows on b16 = wip/gemv12 (b15 + SM90's grouped GEMV up to 12
#   rows per expert: a plan change, the kernels b15's) instead of b15.
END=${END:-590}; STEP=${STEP:-1}; C=${C:-b15}; ROOT=$PWD; R=$OUT/r$STEP; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r$STEP.tgz r$STEP); }
have() { [ -f $ROOT/.gpu/bz_$1/bundle.tar.xz ]; }
for b in b9 b10 b11 b12 b15 b16 b17; do have $b && { mkdir -p $ROOT/.gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $ROOT/.gpu/bz_$b/bundle.tar.xz $ROOT/.gpu/$b; }; done
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
  trials $C suite 170 140 .
  trials $C "dense gemv trials" 60 40 . gpu_blockscaled_gemv
  san $C memcheck 60 8 40 '^packed_tile(_wg64)?::(ring|persist)'
  san $C racecheck 80 8 55 '^packed_tile(_wg64)?::ring::(s2|s3|c3)'
  san $C memcheck 60 8 40 '^packed(_gemv)?::'
  san $C memcheck 50 8 30 . gpu_blockscaled_gemv
  for b in b9 $C; do bench $b t4096 4096 fused_moe/ 45; done
elif [ $STEP = 3 ]; then  # call 1's unfinished trials (rest_*.txt: names), then STEP=2's rows that decide b16
  rx() { echo "^($(sed 's/[][().*+?^$|\\]/\\&/g' $ROOT/bench-results/2026-12-07-h200-f/$1 | paste -sd'|'))\$"; }
  trials $C "suite rest" 150 100 "$(rx rest_suite.txt)"
  trials $C "dense gemv trials" 90 70 . gpu_blockscaled_gemv
  san $C memcheck 70 8 45 "$(rx rest_memcheck.txt)"
  for b in b9 $C; do bench $b t256_2048 256,2048 /T 50; done
  san $C memcheck 110 8 80 . gpu_blockscaled_gemv
  for b in b9 $C; do bench $b decode 1,8 fused_moe/ 40; done
elif [ $STEP = 4 ]; then  # call 3's leftovers: memcheck names never started, b16's cut-off rows, b9's racecheck trials
  rx() { echo "^($(sed 's/[][().*+?^$|\\]/\\&/g' $ROOT/bench-results/2026-12-07-h200-f/$1 | paste -sd'|'))\$"; }
  san $C memcheck 70 9 50 "$(rx rest_memcheck2.txt)"
  bench $C t256_2048 256,2048 /T 75
  san $C racecheck 130 3 20 '^packed_tile(_wg64)?::(persist::c1::h1088_s4|persist::c3::h1088_s2|ring::c3::s4)::t300'
elif [ $STEP = 5 ]; then  # b17 = main with SM90's grouped-GEMV bound at 8 rows: the trials it moved
  F='^packed(_tile)?::(tiny::.*::t32|routing::.*::t32|bad_ids_masked::t(17|32)|graph_replay_with_new_routing_equals_eager::t32|kernel_choice|split::.*|models::deepseek_v4_flash_tp2::t512)$'
  trials $C "moved trials" 75 30 "$F"
  # memcheck of the merged wgmma tiles on every recipe / activation, bad ids, graph replay, split
  san $C memcheck 90 16 50 '^packed_tile(_wg64)?::(tiny|bad_ids|graph_replay|split|routing)'
elif [ $STEP = 6 ]; then  # the rows on today's main (b17), for the card the call lands on (the H200 is the issue's)
  bench $C decode 1,2,5,8,64 fused_moe 60
  bench $C t512_4096 512,4096 fused_moe/ 60
else
  for b in b9 b15; do bench $b decode 1,8 fused_moe/ 40; done
  trials b10 "wg64 trials" 60 40 '^packed_tile_wg64::'
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
