#!/bin/bash
# Session 17, call 9: attention.paged with the Q tile's global loads issued before the first KV
# blocks (8-row tiles; kEarlyQ in paged.cu). Bundle of `cargo xtask gpu-bundle --packages
# b12x-core,b12x-attention` at COMMIT (-dirty: the working tree). The full GPU suite, memcheck
# and racecheck on the eight_row_tiles trials (reduced profile), then the bench's B = 8 rows
# (B12X_BENCH_QUICK=1; the same-job A/B of the kernel is call 8's paged_trace_proto run,
# ../paged-stream/ab5.txt). From the repo root.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20 B12X_COMMIT=$(cat $B/COMMIT)
timeout 190 ./gpu_paged --test-threads 1 > $R/paged_tests.log 2>&1; echo "paged tests rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_paged --test-threads 1 eight_row_tiles > $R/paged_memcheck.log 2>&1; echo "memcheck eight_row_tiles rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 100 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged --test-threads 1 eight_row_tiles > $R/paged_racecheck.log 2>&1; echo "racecheck eight_row_tiles rc=$?" >> $R/rc.txt
B12X_BENCH_QUICK=1 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo timeout 90 ./bench_paged > $R/bench.log 2>&1; echo "bench rc=$?" >> $R/rc.txt
rm -rf $R/cache; cd $OUT && tar czf r.tgz r
