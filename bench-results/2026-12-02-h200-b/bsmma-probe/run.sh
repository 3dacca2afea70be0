#!/bin/bash
# Session 24, call 5: the block-scaled MMA probe kernels (b12x-gemm/kernels/bsmma_probe.cu) on the
# H200: their portable path (the SM120 MMA path is compiled and SASS-checked only) against the CPU
# product, bit for bit; then under memcheck.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
B12X_CACHE_DIR=/tmp/c-t timeout 60 ./gpu_bsmma_probe --test-threads 1 > $R/gpu_bsmma_probe.log 2>&1
echo "gpu_bsmma_probe rc=$? $(grep -c '\.\.\. ok' $R/gpu_bsmma_probe.log) ok" >> $R/summary.txt
B12X_CACHE_DIR=/tmp/c-m timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 ./gpu_bsmma_probe --test-threads 1 > $R/memcheck.log 2>&1
echo "memcheck rc=$? $(grep -c '\.\.\. ok' $R/memcheck.log) ok; $(grep 'ERROR SUMMARY' $R/memcheck.log | tail -1)" >> $R/summary.txt
cat $R/summary.txt
