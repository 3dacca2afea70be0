#!/bin/bash
# Session 63 (issue 7): tail slots. Bundles (sm_90a, gitignored, built on the CPU machine into
# .gpu/bz_bN/bundle.tar.xz with `cargo xtask gpu-bundle --targets gpu_fused_moe,bench_fused_moe`):
#   b17 = main 5920bb2 (device code identical to a696f43: the 8-row grouped-GEMV bound on SM90),
#   b18 = wip/tail 2bc31f9 (main + tail slots: an expert's last <= 64 rows in a 64-row slot run by the
#         64-row wgmma tile, launched after the 128-row tile and started without waiting for it).
# STEP=0: b17 alone: the moved trials, decode T 1..64 (with the separate GEMVs) and T 512 / 2048 /
#   4096 rows, memcheck of the tiles' tiny / bad-id / replay / split trials.
# STEP=1: b18's tiled trials with and without tail slots and the trials the 8-row bound moved, the tail grouping's memcheck / racecheck, then T = 512 / 2048 / 4096 rows
#   of b17 and b18 (b18's incl. `fused_moe_notail`) in one job.
# STEP=2: the rest of b18's suite, b17's decode rows (criterion 2 on the card the call lands on).
END=${END:-590}; STEP=${STEP:-1}; ROOT=$PWD; R=$OUT/r$STEP; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r$STEP.tgz r$STEP); }
have() { [ -f $ROOT/.gpu/bz_$1/bundle.tar.xz ]; }
for b in b17 b18; do have $b && { mkdir -p $ROOT/.gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $ROOT/.gpu/bz_$b/bundle.tar.xz $ROOT/.gpu/$b; }; done
into() { cd $ROOT/.gpu/$1/bundle/bin && export B12X_COMMIT=$(cat ../COMMIT); }
left() { echo $((END - 10 - SECONDS)); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
trials() {  # bundle, tag, timeout, per-trial deadline, filter[, binary]
  local bin=${6:-gpu_fused_moe}
  have $1 && [ $(left) -gt 40 ] && { into $1; l=$(left); timeout $(( l < $3 ? l : $3 )) bash $S ./$bin none $R/fm_$1_$2 16 $4 "$5" > $R/fm_$1_$2.txt 2>&1
    echo "$1 $2: $(tail -1 $R/fm_$1_$2.txt) t=$SECONDS" >> $R/summary.txt; save; }
}
san() {  # bundle, tool, tag, timeout, workers, per-trial deadline, filter
  have $1 && [ $(left) -gt 30 ] && { into $1; l=$(left); B12X_TEST_PROFILE=reduced timeout $(( l < $4 ? l : $4 )) bash $S ./gpu_fused_moe $2 $R/$2_$1_$3 $5 $6 "$7" > $R/$2_$1_$3.txt 2>&1
    echo "$1 $2 $3: $(tail -1 $R/$2_$1_$3.txt) t=$SECONDS" >> $R/summary.txt; save; }
}
bench() {  # bundle, tag, tokens, filter, timeout
  have $1 && [ $(left) -gt 30 ] && { into $1; l=$(left); B12X_MOE_TOKENS=$3 B12X_BENCH_FILTER=$4 B12X_BENCH_OUT=$R/bench_$1_$2 timeout $(( l < $5 ? l : $5 )) ./bench_fused_moe > $R/bench_$1_$2.txt 2>&1
    echo "bench $1 $2 rc=$? t=$SECONDS" >> $R/summary.txt; save; }
}
MOVED='^packed(_tile)?::(tiny::.*::t32|routing::.*::t32|bad_ids_masked::t(17|32)|graph_replay_with_new_routing_equals_eager::t32|kernel_choice|models::deepseek_v4_flash_tp2::t512)$'
TILED='^packed_tile(_notail)?::'
if [ $STEP = 0 ]; then  # b17 alone (b18 still building): the moved trials, the rows on main
  trials b17 moved 70 35 "$MOVED"
  bench b17 decode 1,2,5,8,64 'fused_moe' 100
  bench b17 big 512,2048,4096 'fused_moe/' 90
  san b17 memcheck moved 90 16 50 '^packed_tile(_wg64)?::(tiny|bad_ids|graph_replay|split|routing)'
elif [ $STEP = 1 ]; then  # (the moved trials run on b18: its grouped GEMV is b17's)
  trials b18 tiled 110 70 "$TILED|$MOVED"
  bench b17 big 512,2048,4096 'fused_moe/' 80
  bench b18 big 512,2048,4096 'fused_moe/|fused_moe_notail/' 120
  san b18 memcheck tail 80 16 45 '^packed_tile::(tiny::(w4a16|w4a8|nvfp4)_.*_(silu|oai7)|tiny::shared|bad_ids|graph_replay|split|persist|ring)'
  san b18 racecheck tail 90 4 40 '^packed_tile::(persist::c1::h1088_s4|ring::s2|tiny::shared_50)::t300'
  bench b17 decode 1,2,5,8,64 'fused_moe' 90
elif [ $STEP = 3 ]; then  # little budget left: b18's tiled trials, its T = 2048 / 4096 rows with and without tails
  trials b18 tiled 100 60 "$TILED"
  bench b18 big 2048,4096 'fused_moe/|fused_moe_notail/' 100
elif [ $STEP = 2 ]; then
  rx() { echo "^($(sed 's/[][().*+?^$|\\]/\\&/g' $1 | paste -sd'|'))\$"; }
  trials b18 rest 200 150 "${REST:-.}"
  bench b17 decode 1,2,5,8,64 fused_moe 90
fi
for f in $R/bench_*/fused_moe.md; do [ -f $f ] && { echo "== $f"; grep -E "/T[0-9]" $f | grep -v read_probe | cut -d'|' -f2-4,7-8; }; done
cat $R/gpu.txt $R/summary.txt
for f in $R/*/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -40
cd $OUT && tar czf r$STEP.tgz r$STEP && rm -rf r$STEP
