#!/bin/bash
# ncu_mix.sh BENCH_BINARY BENCH_FILTER KERNEL_REGEX [OUT_FILE]
# On the GPU machine (from the bundle's bin folder): profiles the first launch of the kernel
# matching KERNEL_REGEX while BENCH_BINARY runs the cases matching BENCH_FILTER (race on, so
# name the race's pick, e.g. 'b12x_nvfp4_t256_u4_bf16$'), and prints the executed instructions
# per opcode with their names, the totals (warp and thread instructions), DRAM throughput,
# duration and occupancy. Divide smsp__thread_inst_executed.sum by the elements the launch
# covered for instructions per element (bench-results/2026-12-01-h200-f/ncu-fp4/ did this).
set -u
BIN=$1 FILTER=$2 KREGEX=$3 OUTF=${4:-/dev/stdout}
B12X_CACHE_DIR=${B12X_CACHE_DIR:-/tmp/ncu-mix-cache} B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=$FILTER \
  ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,smsp__thread_inst_executed.sum \
  --print-metric-instances details -k regex:"$KREGEX" -c 1 "$BIN" > "$OUTF" 2>&1
