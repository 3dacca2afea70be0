#!/bin/bash
# Session 18, call 2: the pushed cluster merge and the BF16 split rule (at most one CTA per SM:
# B = 8 takes 2 splits), bundle at COMMIT. compute-sanitizer memcheck over the whole reduced
# gpu_paged suite and racecheck over its merge_paths and eight_row_tiles trials; then
# paged_trace_proto.cu (working tree) at 8 x 2k plain and with PT_WARM=1 PT_WARM_KEYS=768 (the
# warm-up launch runs the split merges' code: is the end of the CTA cold code?), and the BF16
# 3-stage cluster runs at B = 4 with caps 6, 4, 2 (PT_CAPS; 2k and 8k). From the repo root.
R=$OUT/r; mkdir -p $R; ROOT=$PWD
( (cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace_new paged_trace_proto.cu) > $R/build_new.log 2>&1; echo "build new rc=$?" >> $R/rc2.txt ) &
B=$ROOT/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
B12X_TEST_PROFILE=reduced timeout 170 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_paged --test-threads 1 > $R/paged_memcheck.log 2>&1; echo "memcheck whole reduced rc=$?" >> $R/rc2.txt
B12X_TEST_PROFILE=reduced timeout 170 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged --test-threads 1 merge_paths eight_row_tiles > $R/paged_racecheck.log 2>&1; echo "racecheck merge_paths eight_row_tiles rc=$?" >> $R/rc2.txt
wait
echo "=== new 8 2048" >> $R/warm.txt; timeout 60 /tmp/ptrace_new 8 2048 >> $R/warm.txt 2>&1
echo "=== new 8 2048 PT_WARM=1 PT_WARM_KEYS=768" >> $R/warm.txt; PT_WARM=1 PT_WARM_KEYS=768 timeout 60 /tmp/ptrace_new 8 2048 >> $R/warm.txt 2>&1
echo "=== new 8 2048 PT_WARM=1 (1 key)" >> $R/warm.txt; PT_WARM=1 timeout 60 /tmp/ptrace_new 8 2048 >> $R/warm.txt 2>&1
for ctx in 2048 8192; do for i in 1 2; do echo "=== new 4 $ctx PT_CAPS=6,4,2" >> $R/b4.txt; PT_CAPS=6,4,2 timeout 60 /tmp/ptrace_new 4 $ctx >> $R/b4.txt 2>&1; done; done
echo done >> $R/rc2.txt
cd $OUT && tar czf r.tgz r
