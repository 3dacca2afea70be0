#!/bin/bash
# Session 14, call A: the benches under the new L2 flush (EventTimer::flush_l2: zero fill + plain
# read of max(256 MB, 2x L2), as bench/peers.py). gpu_session (races use the flush), the peers,
# bf16_gemv, rmsnorm, rmsnorm_quant. Run from the repo root with the bundle of this commit.
R=$OUT/r; mkdir -p $R
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_STEP_TIMEOUT=420
B12X_BINS="gpu_session bench_bf16_gemv bench_rmsnorm bench_rmsnorm_quant" bash .gpu/bundle/run.sh $R/t --only tests,peers,bench > $R/run.log 2>&1
cd $R/t && tar czf $OUT/r.tgz summary.txt tests.log peers.json peers.log bench.log bench-results && cp $R/run.log $OUT/
