#!/bin/bash
# Session 65 (issue 7): the default-on tail-slot bundle's first GPU run (session 64's STEP=2), plus
# where the time goes at T = 4096 (every kernel of one eager call) and the decode GEMV at T = 8.
# Two bundles (sm_90a, gitignored, built on the CPU machine with `B12X_CUDA_ARCHS=sm_90a cargo xtask
# gpu-bundle --targets gpu_fused_moe,bench_fused_moe`, then `tar cJf .gpu/bz_<b>/bundle.tar.xz -C
# .gpu bundle`): bt = eb2d097 (tails by default, session 64's kernels), bf = main at 6543f15 —
# FC1's activation in the wgmma tiles' epilogue, opt-in (`PlanOptions::fused_activation`: trials
# `fused_act::*` compare it with the default bit for bit, bench rows `fused_moe_fused_act/<case>`;
# its own `_act` kernels, the plain tiles' SASS is eb2d097's); the activation with the SFU's exp /
# reciprocal on every path (the whole suite runs); the 32-row wgmma tile by default from the
# grouped GEMV up to 16 rows per expert (T = 512 of DeepSeek-V4-Flash and gpt-oss-120b:
# `fused_moe_tile_wg64/` their A/B). A later session: rebuild both bundles (bt from eb2d097 in a
# worktree, bf from main) before the call.
# STEP=1: bf's whole suite (tails by default, fused_act, every path's new activation math),
#   memcheck of the fused / default-tail trials, T 512 / 2048 / 4096 rows (bf: default, fused,
#   no tails; bt: default), ncu per kernel at T = 4096 (Qwen3-30B-A3B, gpt-oss-120b) and of the
#   decode GEMV at T = 8 (DeepSeek-V4-Flash).
# STEP=2: a short call (~400 s): bf's A/B rows at T 512 / 4096, the whole suite, memcheck, bt's rows.
# Run: STEP=1 END=570 bash bench-results/2026-12-07-gpu-i/run.sh   (carry .gpu/bz_bt .gpu/bz_bf)
END=${END:-590}; STEP=${STEP:-1}; ROOT=$PWD; R=$OUT/r$STEP; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r$STEP.tgz r$STEP); }
have() { [ -f $ROOT/.gpu/bz_$1/bundle.tar.xz ]; }
for b in bt bf; do have $b && { mkdir -p $ROOT/.gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $ROOT/.gpu/bz_$b/bundle.tar.xz $ROOT/.gpu/$b; }; done
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
ncu_call() {  # tag, filter, tokens, launches, sections...
  local tag=$1 f=$2 tok=$3 n=$4; shift 4; [ $(left) -gt 50 ] || return; into bf; l=$(left)
  B12X_BENCH_FILTER=$f B12X_MOE_TOKENS=$tok B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/ncu_bench_$tag \
    timeout $(( l < 90 ? l : 90 )) ncu --clock-control none --kernel-name regex:b12x_fused_moe --launch-count $n \
    "$@" -o $R/ncu_$tag ./bench_fused_moe > $R/ncu_$tag.txt 2>&1
  echo "ncu $tag rc=$? t=$SECONDS" >> $R/summary.txt
  ncu --import $R/ncu_$tag.ncu-rep --page details > $R/ncu_${tag}_details.txt 2>&1; save
}
if [ $STEP = 1 ]; then
  trials bf all 230 75 ""
  san bf memcheck fused 70 16 45 '^fused_act::(own|wg32)::tiny::w4a16_.*_(silu_limit1|oai7)|^fused_act::own::tiny::shared_50|^packed_tile::(tiny::(w4a16|w4a8|nvfp4)_.*_(silu|oai7)|tiny::shared|bad_ids|graph_replay|split|persist)'
  bench bf big 512,2048,4096 'fused_moe/|fused_moe_fused_act/|fused_moe_notail/' 130
  bench bt big 512,2048,4096 'fused_moe/' 80
  for c in qwen3_30b_a3b gpt_oss_120b; do
    ncu_call t4096_$c fused_moe/$c/T4096 4096 11 --section SpeedOfLight --section LaunchStats --section Occupancy \
      --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
  done
  ncu_call t8_deepseek fused_moe/deepseek_v4_flash_tp2/T8 8 7 --section SpeedOfLight --section LaunchStats \
    --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
elif [ $STEP = 2 ]; then
  # (a short call: the A/B rows first, then the whole suite, then memcheck)
  bench bf ab 512,4096 'fused_moe/|fused_moe_fused_act/|fused_moe_tile_wg64/' 120
  trials bf all 200 60 ""
  san bf memcheck fused 60 16 40 '^fused_act::(own|wg32)::tiny::w4a16_.*_(silu_limit1|oai7)|^fused_act::own::tiny::shared_50|^packed_tile::(tiny::(w4a16|nvfp4)_.*_(silu|oai7)|bad_ids|graph_replay|split)'
  bench bt ab 512,4096 'fused_moe/' 60
fi
for f in $R/bench_*/fused_moe.md; do [ -f $f ] && { echo "== $f"; grep -E "/T[0-9]" $f | grep -v read_probe | cut -d'|' -f2-4,7-8; }; done
for f in $R/ncu_*_details.txt; do echo "== $f"; grep -E "^  b12x_fused_moe|Duration  " $f | paste - - | awk '{print $1, $(NF-1), $NF}'; done
cat $R/gpu.txt $R/summary.txt
for f in $R/*/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -40
cd $OUT && tar czf r$STEP.tgz r$STEP && rm -rf r$STEP
