#!/bin/bash
# Session 27, call 5: the final state (the review mends: shared fixture / replay helpers in
# gpu_blockscaled_gemv, the bench's shared Bench helper) — the full gpu_blockscaled_gemv profile,
# and the bench's quick decode + prefill rows for NVFP4 with call 1 / call 2 peers.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_blockscaled_gemv none $R/full 16 120 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
python3 - $ROOT/bench-results/2026-12-02-h200-e/call1/peers.json $ROOT/bench-results/2026-12-02-h200-e/call2/peers.json $R/peers.json <<'PY'
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
if isinstance(a, dict) and isinstance(b, dict):
    m = dict(a); m.update(b)
    for k in ("cases", "rows"):
        if isinstance(a.get(k), list) and isinstance(b.get(k), list):
            m[k] = a[k] + b[k]
        elif isinstance(a.get(k), dict) and isinstance(b.get(k), dict):
            m[k] = {**a[k], **b[k]}
    json.dump(m, open(sys.argv[3], "w"))
PY
mkdir -p $R/bench
B12X_BENCH_QUICK=1 B12X_CACHE_DIR=/tmp/c-b B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=nvfp4 B12X_PEER_JSON=$R/peers.json B12X_BENCH_OUT=$R/bench timeout 200 ./bench_blockscaled_gemv > $R/bench/bench.log 2>&1
echo "bench rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
grep -E "^\| (blockscaled)" $R/bench/*.md | grep -v "@fp8" | cut -d'|' -f2,3,4,7,10,11 | head -40
cd $OUT && tar czf r.tgz r && rm -rf r
