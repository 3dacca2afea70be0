#!/bin/bash
# Session 24, call 11: ncu stall reasons of the W4A16 prototype's variant C (18432 x 7168, M = 1,
# mt1_w8), the first launch of the ncu mode.
set -u
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/w4a16 w4a16_gemv_proto.cu -lcublas > $R/build.log 2>&1 || { cat $R/build.log; exit 1; }
timeout 200 ncu --clock-control none --kernel-name regex:w4a16_nvfp4 --launch-count 1 \
  --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy \
  --metrics smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__pcsamp_warps_issue_stalled_short_scoreboard,smsp__pcsamp_warps_issue_stalled_mio_throttle,smsp__pcsamp_warps_issue_stalled_lg_throttle,smsp__pcsamp_warps_issue_stalled_wait,smsp__pcsamp_warps_issue_stalled_math_pipe_throttle,smsp__pcsamp_warps_issue_stalled_not_selected,smsp__pcsamp_warps_issue_stalled_selected,smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_dispatch_stall,smsp__pcsamp_warps_issue_stalled_no_instructions,smsp__pcsamp_warps_issue_stalled_imc_miss,smsp__pcsamp_warps_issue_stalled_branch_resolving,smsp__pcsamp_warps_issue_stalled_tex_throttle,smsp__pcsamp_warps_issue_stalled_drain,smsp__pcsamp_warps_issue_stalled_sleeping,smsp__pcsamp_warps_issue_stalled_membar,smsp__pcsamp_warps_issue_stalled_misc \
  --print-details all /tmp/w4a16 ncu > $R/ncu.txt 2>&1
grep -E "pcsamp|Stall|stall|Throughput|Eligible|Issued Warp" $R/ncu.txt | sed 's/  */ /g' | head -60
