#!/bin/bash
# Session 16, call 13 (same bundle as run.sh): the full bench_nvfp4 table (both global-scale
# modes, every shape, race on, read-probe rows), the numbers reported for issue 3. From the repo root.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_COMMIT=$(cat $B/COMMIT)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
B12X_CACHE_DIR=/tmp/cache-final B12X_BENCH_OUT=$R/final timeout 200 ./bench_nvfp4 > $R/bench_nvfp4.log 2>&1; echo "bench rc=$?" >> $R/rc.txt
cd $OUT && tar czf r.tgz r
