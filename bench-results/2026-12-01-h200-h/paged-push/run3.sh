#!/bin/bash
# Session 18, call 3: the pushed cluster merge with its finish compacted (loops over the splits
# kept rolled, the sink joined once per row: ~6 KB of code after the barrier instead of ~9.6)
# and the BF16 split rule (2 splits when the pairs fill a third to a half of the SMs), bundle
# at COMMIT. The full gpu_paged suite; the same-job A/B through paged_trace_proto.cu (HEAD's
# kernel = paged_head.cu, built with -DPT_SMEM5, against the working tree's), base / new / new /
# base at 8 x 2k and 8 x 8k; the bench's B = 8 rows (B12X_BENCH_QUICK=1). From the repo root.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; HERE=$ROOT/bench-results/2026-12-01-h200-h/paged-push
mkdir -p /tmp/base && cp -r b12x-attention b12x-core bench /tmp/base/ && cp $HERE/paged_head.cu /tmp/base/b12x-attention/kernels/paged.cu
( (cd /tmp/base/bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -DPT_SMEM5 -I../../b12x-core/include -o /tmp/ptrace_base paged_trace_proto.cu) > $R/build3_base.log 2>&1; echo "build base rc=$?" >> $R/rc3.txt ) &
( (cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace_new paged_trace_proto.cu) > $R/build3_new.log 2>&1; echo "build new rc=$?" >> $R/rc3.txt ) &
B=$ROOT/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
timeout 200 ./gpu_paged --test-threads 1 > $R/paged_tests3.log 2>&1; echo "paged tests rc=$?" >> $R/rc3.txt
wait
for ctx in 2048 8192; do for v in base new new base; do echo "=== $v 8 $ctx" >> $R/ab3.txt; timeout 60 /tmp/ptrace_$v 8 $ctx >> $R/ab3.txt 2>&1; done; done
B12X_BENCH_SAMPLES=20 B12X_BENCH_QUICK=1 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo timeout 120 ./bench_paged > $R/bench3.log 2>&1; echo "bench rc=$?" >> $R/rc3.txt
rm -rf $R/cache; echo done >> $R/rc3.txt
cd $OUT && tar czf r.tgz r
