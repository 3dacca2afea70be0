#!/bin/bash
# Session 15, call 1: branch wip/gemv-compact-epilogue (bundle of its commit; bench_bf16_gemv_base
# = the bench of ed3d502, whose kernel equals main's) on the H200: gpu_bf16_gemv, its reduced
# profile under memcheck, the bench A/B (base, new, new, base) on the 264 MB and 58 MB shapes, and
# gemv_flush_study5.py code against both kernel sources. From the repo root.
R=$OUT/r; mkdir -p $R; cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
timeout 150 ./gpu_bf16_gemv --test-threads 1 > $R/tests.log 2>&1; echo "tests rc=$?" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 > $R/memcheck.log 2>&1; echo "memcheck rc=$?" >> $R/rc.txt
for f in N18432 N7168_K4096; do
  for b in base new new base; do
    bin=./bench_bf16_gemv; [ $b = base ] && bin=./bench_bf16_gemv_base
    export B12X_CACHE_DIR=$R/cache-$b B12X_BENCH_OUT=$R/bo-$b B12X_BENCH_FILTER=$f
    echo "=== $f $b" >> $R/bench.log; timeout 120 $bin >> $R/bench.log 2>&1
  done
done
cd ../../../bench/proto
for v in base new; do
  src=../../b12x-gemm/kernels/bf16_gemv.cu; [ $v = base ] && src=../../.gpu/bundle/base/bf16_gemv.cu
  sed "s#../../b12x-gemm/kernels/bf16_gemv.cu#$src#" gemv_torch_ext.cu > ext_$v.cu
  nvcc -std=c++17 -O3 -arch=sm_90a -shared -Xcompiler -fPIC -I../../b12x-core/include -o /tmp/ext_$v.so ext_$v.cu >> $R/build.txt 2>&1
done
for v in base new base new; do echo "=== $v" >> $R/flush.txt; timeout 60 python3 gemv_flush_study5.py /tmp/ext_$v.so code >> $R/flush.txt 2>&1; done
cd $OUT && tar czf r.tgz r && rm -rf r
