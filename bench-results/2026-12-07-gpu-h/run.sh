#!/bin/bash
# Session 64 (issue 7): tail slots' first GPU run. One bundle (sm_90a, gitignored, built on the CPU
# machine into .gpu/bz_bm/bundle.tar.xz with `cargo xtask gpu-bundle --targets
# gpu_fused_moe,bench_fused_moe`): bm = main (tail slots opt-in: trials `packed_tile_tail::*`,
# `packed_tile::persist::*_tail`, bench rows `fused_moe_tail/<case>` next to the default `fused_moe/`;
# from session 64's second commit also the 32-row wgmma tile, forced: `packed_tile_wg32::*`,
# `fused_moe_tile_wg32/<case>` beside `fused_moe_tile_wg64/<case>`).
# STEP=1: tiled trials with and without tails + the trials session 62's 8-row bound moved; T = 512 /
#   2048 / 4096 rows with and without tails (one job); memcheck / racecheck of the tail trials;
#   decode rows T 1..64.
# STEP=2: bt = the flip (tails default on SM90): its tiled trials + memcheck + T 2048 / 4096 rows.
# Run: STEP=1 END=570 bash bench-results/2026-12-07-gpu-h/run.sh   (carry .gpu/bz_bm [.gpu/bz_bt])
END=${END:-590}; STEP=${STEP:-1}; ROOT=$PWD; R=$OUT/r$STEP; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r$STEP.tgz r$STEP); }
have() { [ -f $ROOT/.gpu/bz_$1/bundle.tar.xz ]; }
for b in bm bt; do have $b && { mkdir -p $ROOT/.gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $ROOT/.gpu/bz_$b/bundle.tar.xz $ROOT/.gpu/$b; }; done
into() { cd $ROOT/.gpu/$1/bundle/bin && export B12X_COMMIT=$(cat ../COMMIT); }
left() { echo $((END - 10 - SECONDS)); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
trials() {  # bundle, tag, timeout, per-trial deadline, filter
  have $1 && [ $(left) -gt 40 ] && { into $1; l=$(left); timeout $(( l < $3 ? l : $3 )) bash $S ./gpu_fused_moe none $R/fm_$1_$2 16 $4 "$5" > $R/fm_$1_$2.txt 2>&1
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
TAILSAN='^packed_tile_tail::(tiny::(w4a16|w4a8|nvfp4)_.*_(silu|oai7)|tiny::shared|bad_ids|graph_replay)|^packed_tile::(persist::.*_tail|split)'
if [ $STEP = 1 ]; then
  trials bm tiled 130 80 "^packed_tile(_tail|_wg32)?::|$MOVED"
  bench bm big 512,2048,4096 'fused_moe/|fused_moe_tail/' 130
  bench bm wg32 512,1024 'fused_moe/|fused_moe_tile_wg64/|fused_moe_tile_wg32/' 90
  san bm memcheck tail 80 16 45 "$TAILSAN|^packed_tile_wg32::(ring|tiny::shared|bad_ids|graph_replay)"
  san bm racecheck tail 80 4 35 '^packed_tile::persist::c1::h1088_s4_tail::t300$|^packed_tile_tail::tiny::shared_50::t300$|^packed_tile_wg32::ring::s2::t300$'
  bench bm decode 1,2,5,8,64 'fused_moe' 90
  # where a T = 512 call goes (never profiled since the grouped GEMV / 64-row tile split): one eager
  # call, caches flushed per kernel, duration / SOL / occupancy per kernel
  for c in qwen3_30b_a3b gpt_oss_120b; do [ $(left) -gt 60 ] || break; into bm; l=$(left)
    B12X_BENCH_FILTER=fused_moe/$c/T512 B12X_MOE_TOKENS=512 B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/ncu_bench_$c \
      timeout $(( l < 60 ? l : 60 )) ncu --clock-control none --kernel-name regex:b12x_fused_moe --launch-count 12 \
      --section SpeedOfLight --section LaunchStats --section Occupancy -o $R/ncu_$c ./bench_fused_moe > $R/ncu_$c.txt 2>&1
    echo "ncu $c rc=$? t=$SECONDS" >> $R/summary.txt
    ncu --import $R/ncu_$c.ncu-rep --page details > $R/ncu_${c}_details.txt 2>&1; save; done
elif [ $STEP = 2 ]; then
  trials bt tiled 120 75 "^packed_tile(_notail)?::"
  san bt memcheck tail 80 16 45 '^packed_tile::(tiny::(w4a16|w4a8|nvfp4)_.*_(silu|oai7)|tiny::shared|bad_ids|graph_replay|split|persist)'
  bench bt big 2048,4096 'fused_moe/|fused_moe_notail/' 110
fi
for f in $R/bench_*/fused_moe.md; do [ -f $f ] && { echo "== $f"; grep -E "/T[0-9]" $f | grep -v read_probe | cut -d'|' -f2-4,7-8; }; done
for c in qwen3_30b_a3b gpt_oss_120b; do [ -f $R/ncu_${c}_details.txt ] && grep -E "^  b12x_fused_moe|Duration  " $R/ncu_${c}_details.txt | paste - - | awk '{print $1, $(NF-1), $NF}'; done
cat $R/gpu.txt $R/summary.txt
for f in $R/*/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -40
cd $OUT && tar czf r$STEP.tgz r$STEP && rm -rf r$STEP
