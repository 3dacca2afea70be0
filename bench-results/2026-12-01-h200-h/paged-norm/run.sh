#!/bin/bash
# Session 18, call 7: the final normalization as o * (v_scale / l) (one division per row or
# 8-element chunk instead of one per element: the pushed merge's tail shrinks from ~6 KB to
# ~4.2 KB of SASS), in every merge path. The same-job A/B through paged_trace_proto.cu: b385daa's
# kernel (paged_head.cu = `git show b385daa:b12x-attention/kernels/paged.cu`, not kept) against
# the working tree's, base / new / new / base at 8 x 2k and 8 x 8k; then memcheck over the
# whole reduced gpu_paged suite and the full suite. Bundle of `cargo xtask gpu-bundle --packages
# b12x-core,b12x-attention` at COMMIT. From the repo root.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; HERE=$ROOT/bench-results/2026-12-01-h200-h/paged-norm
mkdir -p /tmp/base && cp -r b12x-attention b12x-core bench /tmp/base/ && cp $HERE/paged_head.cu /tmp/base/b12x-attention/kernels/paged.cu
( (cd /tmp/base/bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace_base paged_trace_proto.cu) > $R/build_base.log 2>&1; echo "build base rc=$?" >> $R/rc.txt ) &
( (cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/ptrace_new paged_trace_proto.cu) > $R/build_new.log 2>&1; echo "build new rc=$?" >> $R/rc.txt ) &
wait
for ctx in 2048 8192; do for v in base new new base; do echo "=== $v 8 $ctx" >> $R/ab.txt; timeout 60 /tmp/ptrace_$v 8 $ctx >> $R/ab.txt 2>&1; done; done
B=$ROOT/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
B12X_TEST_PROFILE=reduced timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_paged --test-threads 1 > $R/paged_memcheck.log 2>&1; echo "memcheck whole reduced rc=$?" >> $R/rc.txt
timeout 200 ./gpu_paged --test-threads 1 > $R/paged_tests.log 2>&1; echo "paged tests rc=$?" >> $R/rc.txt
echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r
