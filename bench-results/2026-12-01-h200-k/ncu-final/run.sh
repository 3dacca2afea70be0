#!/bin/bash
# Session 21, call 6: ncu of the final kernels (16d720a) at full size, as call 1 (../ncu/run.sh):
# fused NVFP4 and MXFP8 (D = 7168) at T = 32768, quantization.nvfp4 given at M = 8192, K = 7168.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
ncu_one() { # label filter kernel-regex bin
  C=/tmp/ncu-cache-$1
  B12X_CACHE_DIR=$C B12X_BENCH_SAMPLES=5 B12X_BENCH_FILTER=$2 B12X_BENCH_OUT=$R/b_$1 timeout 60 ./$4 > $R/bench_$1.log 2>&1
  B12X_CACHE_DIR=$C B12X_BENCH_SAMPLES=3 B12X_BENCH_FILTER=$2 timeout 100 ncu --clock-control none \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section SchedulerStats \
    --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,smsp__thread_inst_executed.sum \
    --print-metric-instances details -k regex:"$3" -c 1 ./$4 > $R/ncu_$1.txt 2>&1; echo "ncu $1 rc=$?" >> $R/rc.txt
}
ncu_one rq_nvfp4_4096 rmsnorm_quant_nvfp4/T32768_D4096 'b12x_rmsnorm_nvfp4_v' bench_rmsnorm_quant
ncu_one rq_mxfp8_7168 rmsnorm_quant_mxfp8/T32768_D7168 'b12x_rmsnorm_mxfp8_v' bench_rmsnorm_quant
ncu_one nvfp4_8192_7168 nvfp4/M8192_K7168_bf16_given 'b12x_nvfp4_t' bench_nvfp4
cd $OUT && tar czf r.tgz r && rm -rf r
