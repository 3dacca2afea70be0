#!/bin/bash
# Session 15, call 7 (bundle of .gpu/bundle/COMMIT): the new GPU case stream_k_three_row_blocks
# (every config of its buckets), plain and under memcheck, then the whole suite once more.
R=$OUT/r; mkdir -p $R; cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1
timeout 60 ./gpu_bf16_gemv --test-threads 1 stream_k_three_row_blocks > $R/case.log 2>&1; echo "case rc=$?" >> $R/rc.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 stream_k_three_row_blocks > $R/case-memcheck.log 2>&1; echo "case memcheck rc=$?" >> $R/rc.txt
timeout 120 ./gpu_bf16_gemv --test-threads 1 > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/rc.txt
cd $OUT && tar czf r.tgz r && rm -rf r
