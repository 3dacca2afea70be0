#!/usr/bin/env bash
# ncu (--set full, SM clocks not locked) of chosen quantizer kernels, one launch each, from the
# benches' own runs (the first launch of a symbol is in the bench's autotune race, same shape).
#
#   bash bench/ncu_quant.sh BUNDLE_BIN OUTDIR BENCH:FILTER:SYMBOL ...
#
# e.g. bench_mx:mxfp8/M8192_K7168:b12x_mxfp8_t128_u4_bf16. Writes OUTDIR/ncu-SYMBOL.txt and a
# digest of the headline metrics in OUTDIR/ncu-digest.txt, with the executed instructions per
# opcode (named) and in total: smsp__thread_inst_executed.sum over the elements the launch
# covered is the instructions per element (bench-results/2026-12-01-h200-f/ncu-fp4/).
set -uo pipefail
BIN="$1"; OUT="$2"; shift 2
mkdir -p "$OUT"
for spec in "$@"; do
  IFS=: read -r bench filter sym <<<"$spec"
  (cd "$BIN" && B12X_BENCH_FILTER="$filter" B12X_BENCH_SAMPLES=20 \
    ncu --set full --clock-control none --kernel-name "$sym" --launch-count 1 \
      --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,smsp__thread_inst_executed.sum \
      --print-metric-instances details "./$bench") \
    >"$OUT/ncu-$sym.txt" 2>&1 || echo "ncu failed for $sym: see $OUT/ncu-$sym.txt"
  {
    echo "=== $sym ($bench, $filter)"
    grep -E "^\s+(Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Executed Ipc Active|Issue Slots Busy|Issued Warp Per Scheduler|No Eligible|Achieved Occupancy|Registers Per Thread|Executed Instructions|Avg\. Active Threads Per Warp|Warp Cycles Per Issued Instruction|SM Frequency|DRAM Frequency|Grid Size|Block Size) " "$OUT/ncu-$sym.txt" | sed 's/  */ /g'
    grep -E "smsp__(thread_)?inst_executed.sum" "$OUT/ncu-$sym.txt" | sort -u | sed 's/  */ /g'
    sed -n '/sass__inst_executed_per_opcode/,/)/p' "$OUT/ncu-$sym.txt" | head -20 | sed 's/  */ /g'
  } >>"$OUT/ncu-digest.txt"
done
cat "$OUT/ncu-digest.txt"
