#!/bin/bash
# Proto call 3 (2026-12-03): FL64/128/192/1216 (1..4 of a word's rotations as IMAD.WIDE on the FMA
# pipe instead of SHF on the ALU pipe), FL256 (shared row blocks' fence/arrive/sum deferred to the
# CTA's end), FL512 (the ring past stage 0 requested after PROTO_DELAY ns) and combinations.
R=$OUT/r; mkdir -p $R
cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -I../../b12x-core/include -o /tmp/d bsgemv_decode_proto.cu > $R/build.txt 2>&1 || { grep -i error $R/build.txt; exit 1; }
F=0,64,128,192,1216,256,384,448,512,896,960
PROTO_CFG=3 PROTO_FLS=$F /tmp/d > $R/m1.txt 2>&1
PROTO_CFG=3 PROTO_FLS=0,512,960 PROTO_DELAY=250 /tmp/d > $R/m1_d250.txt 2>&1
PROTO_CFG=3 PROTO_FLS=0,512,960 PROTO_DELAY=1000 /tmp/d > $R/m1_d1000.txt 2>&1
PROTO_CFG=0 PROTO_FLS=0,192,448,960 /tmp/d > $R/m1_kb1.txt 2>&1
PROTO_M=8 PROTO_CFG=3 PROTO_FLS=0,192,448,960 /tmp/d > $R/m8.txt 2>&1
cut -c1-210 $R/m1.txt; grep -E "==|FL" $R/m1_d*.txt $R/m1_kb1.txt $R/m8.txt | cut -c1-150
PROTO_NCU=1 PROTO_SHAPE=0 PROTO_CFG=3 PROTO_FLS=0,192,448 timeout 200 ncu --clock-control none -k regex:px --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --metrics sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio /tmp/d > $R/ncu.txt 2>&1
grep -E "px<|duration|pipe_|throttle|membar|long_score|Issue Slots|Eligible Warps" $R/ncu.txt
