#!/bin/bash
# Session 20, call 8: the GPU suites whose tests race (the session's autotune) with 11 samples per
# round, d54b247 (.gpu/bundle: cargo xtask gpu-bundle --packages
# b12x-core,b12x-gemm,b12x-norm,b12x-attention, pruned to those suites): gpu_bf16_gemv,
# gpu_session, gpu_rmsnorm, gpu_rmsnorm_quant, gpu_varlen's race trial; then gpu_bf16_gemv under
# memcheck (reduced profile) with what time is left. Wall time of each. From the repo root.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
cd $B/bin
t() { local t0=$SECONDS; timeout $1 "${@:3}" > $R/$2.log 2>&1; echo "$2 rc=$? wall $((SECONDS - t0))s" >> $R/rc.txt; }
t 150 gemv ./gpu_bf16_gemv --test-threads 1
t 60 session ./gpu_session --test-threads 1
t 90 rmsnorm ./gpu_rmsnorm --test-threads 1
t 90 rmsnorm_quant ./gpu_rmsnorm_quant --test-threads 1
t 60 varlen_race ./gpu_varlen --test-threads 1 race
left=$((330 - SECONDS)); [ $left -gt 30 ] && B12X_TEST_PROFILE=reduced t $left gemv_memcheck compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1
echo "total ${SECONDS}s" >> $R/rc.txt
cd $OUT && tar czf r.tgz r && rm -rf r
