#!/usr/bin/env bash
# ncu side by side: the b12x bf16_gemv race winner and cuBLAS (torch) for one bench case.
#
#   bash bench/ncu_compare.sh BUNDLE_BIN OUTDIR M N K
#
# BUNDLE_BIN is the bundle's bin/ folder; B12X_CACHE_DIR must hold the selections of an earlier
# bench run (so the bench does not race and its first gemv launch is the winner). Writes
# OUTDIR/ncu-b12x-M{M}_N{N}_K{K}.txt and OUTDIR/ncu-cublas-M{M}_N{N}_K{K}.txt (--set full).
set -euo pipefail
BIN="$1"; OUT="$2"; M="$3"; N="$4"; K="$5"
CASE="M${M}_N${N}_K${K}"
mkdir -p "$OUT"
(cd "$BIN" && B12X_BENCH_FILTER="bf16_gemv/${CASE}_" B12X_BENCH_SAMPLES=20 \
  ncu --set full --kernel-name regex:b12x_bf16_gemv --launch-count 1 ./bench_bf16_gemv) \
  >"$OUT/ncu-b12x-${CASE}.txt" 2>&1 || echo "ncu (b12x) failed: see $OUT/ncu-b12x-${CASE}.txt"
ncu --set full --profile-from-start off python3 - "$M" "$N" "$K" >"$OUT/ncu-cublas-${CASE}.txt" 2>&1 <<'PY' || echo "ncu (cuBLAS) failed"
import sys, torch
m, n, k = map(int, sys.argv[1:4])
x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    torch.nn.functional.linear(x, w)
torch.cuda.synchronize()
torch.cuda.profiler.start()
torch.nn.functional.linear(x, w)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
PY
