#!/bin/bash
# Session 25, call 1: the W4A16 prototype's variant F (persistent stream-K, producer-warp bulk-copy
# ring) beside the earlier variants, ncu of F; and gpu_blockscaled_pack (pack_weight's device
# upload) plain and under memcheck.
set -u
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
( cd $B/bin
  B12X_CACHE_DIR=/tmp/c-t timeout 120 ./gpu_blockscaled_pack --test-threads 1 > $R/gpu_blockscaled_pack.log 2>&1
  echo "gpu_blockscaled_pack rc=$? $(grep -c '\.\.\. ok' $R/gpu_blockscaled_pack.log) ok" >> $R/summary.txt
  B12X_CACHE_DIR=/tmp/c-m timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 ./gpu_blockscaled_pack --test-threads 1 > $R/memcheck.log 2>&1
  echo "memcheck rc=$? $(grep -c '\.\.\. ok' $R/memcheck.log) ok; $(grep 'ERROR SUMMARY' $R/memcheck.log | tail -1)" >> $R/summary.txt ) &
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/w4a16 w4a16_gemv_proto.cu -lcublas > $R/build.log 2>&1 || { cat $R/build.log; exit 1; }
wait
timeout 300 /tmp/w4a16 > $R/run.txt 2>&1; echo "rc $?" >> $R/run.txt
timeout 120 ncu --set full --clock-control none --kernel-name regex:w4a16_nvfp4_f --launch-count 1 /tmp/w4a16 ncu > $R/ncu.txt 2>&1
grep -E "w4a16_nvfp4|^\s+(Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|Executed Instructions|Registers Per Thread) " $R/ncu.txt | sed 's/  */ /g' > $R/ncu-digest.txt
cat $R/summary.txt
grep -E "read probe|D_w2|E_w4_s4|F_|cublas|FAIL|rc" $R/run.txt; cat $R/ncu-digest.txt
