#!/bin/bash
# Session 25, call 6: where the W4A16 decode kernel's warps wait (as landed: call 5's binaries):
# ncu stall breakdown (per-warp stall reasons) of the NVFP4 kernel at 18432 x 7168, M = 1 and
# M = 8, one launch each, the session's race picking the config.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
for m in 1 8; do
  B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=3 B12X_BENCH_FILTER=blockscaled_w4a16_nvfp4/M${m}_N18432_K7168 timeout 120 ncu --clock-control none \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
    --metrics regex:smsp__pcsamp_warps_issue_stalled_.*,smsp__inst_executed.sum,smsp__warps_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warps_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warps_issue_stalled_math_pipe_throttle_per_warp_active.pct,smsp__warps_issue_stalled_wait_per_warp_active.pct,smsp__warps_issue_stalled_barrier_per_warp_active.pct,smsp__warps_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warps_issue_stalled_lg_throttle_per_warp_active.pct,smsp__warps_issue_stalled_not_selected_per_warp_active.pct,smsp__warps_issue_stalled_selected_per_warp_active.pct,smsp__warps_issue_stalled_dispatch_stall_per_warp_active.pct,smsp__warps_issue_stalled_no_instruction_per_warp_active.pct,smsp__warps_issue_stalled_sleeping_per_warp_active.pct,smsp__warps_issue_stalled_branch_resolving_per_warp_active.pct \
    -k regex:b12x_bsgemv -c 1 ./bench_blockscaled_gemv > $R/ncu_m$m.txt 2>&1
  echo "ncu m$m rc=$? t=$SECONDS" >> $R/summary.txt
done
cat $R/summary.txt
for m in 1 8; do echo "== M=$m"; grep -E "b12x_bsgemv|stalled_[a-z_]*_per_warp_active.pct|inst_executed.sum|Grid Size|Warp Cycles Per Issued" $R/ncu_m$m.txt | grep -v pcsamp | sed 's/  */ /g'; done
