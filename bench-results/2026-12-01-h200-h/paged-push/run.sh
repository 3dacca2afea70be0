#!/bin/bash
# Session 18, call 1: attention.paged with the 8-row tiles' cluster merge pushed (each split
# stores its share of partials into the finishing split's shared memory before one cluster
# barrier; no DSMEM loads, no closing barrier). Bundle of `cargo xtask gpu-bundle --packages
# b12x-core,b12x-attention,b12x-norm` at COMMIT (-dirty: the working tree). The full gpu_paged
# suite, then the same-job A/B through paged_trace_proto.cu: HEAD's kernel (paged_head.cu =
# `git show 4ee180f:b12x-attention/kernels/paged.cu`, built with -DPT_SMEM5; not kept) against the
# working tree's, base / new / new / base at 8 x 2k, base / new / new / base at 8 x 8k. From the repo root.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; HERE=$ROOT/bench-results/2026-12-01-h200-h/paged-push
mkdir -p /tmp/base && cp -r b12x-attention b12x-core bench /tmp/base/ && cp $HERE/paged_head.cu /tmp/base/b12x-attention/kernels/paged.cu
( (cd /tmp/base/bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -DPT_SMEM5 -I../../b12x-core/include -o /tmp/ptrace_base paged_trace_proto.cu) > $R/build_base.log 2>&1; echo "build base rc=$?" >> $R/rc.txt ) &
( (cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace_new paged_trace_proto.cu) > $R/build_new.log 2>&1; echo "build new rc=$?" >> $R/rc.txt ) &
B=$ROOT/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
timeout 200 ./gpu_paged --test-threads 1 > $R/paged_tests.log 2>&1; echo "paged tests rc=$?" >> $R/rc.txt
wait
for v in base new new base; do echo "=== $v 8 2048" >> $R/ab.txt; timeout 60 /tmp/ptrace_$v 8 2048 >> $R/ab.txt 2>&1; done
for v in base new new base; do echo "=== $v 8 8192" >> $R/ab.txt; timeout 60 /tmp/ptrace_$v 8 8192 >> $R/ab.txt 2>&1; done
echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r
