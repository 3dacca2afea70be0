#!/bin/bash
# Session 23, call 5: ncu of the fused norm -> quantize kernels as landed (aac8ab2's binaries,
# .gpu/bundle) at T = 32768, D = 7168 (MXFP8, block FP8 f32, NVFP4): instructions per element,
# issue-slot use and stalls after this session's changes (as session 21's ncu-final/).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
ncu_one() { # label filter kernel-regex bin
  C=/tmp/ncu-cache-$1
  B12X_CACHE_DIR=$C B12X_BENCH_SAMPLES=5 B12X_BENCH_FILTER=$2 B12X_BENCH_OUT=$R/b_$1 timeout 60 ./$4 > $R/bench_$1.log 2>&1
  B12X_CACHE_DIR=$C B12X_BENCH_SAMPLES=3 B12X_BENCH_FILTER=$2 timeout 100 ncu --clock-control none \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section SchedulerStats \
    --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,smsp__thread_inst_executed.sum \
    --print-metric-instances details -k regex:"$3" -c 1 ./$4 > $R/ncu_$1.txt 2>&1; echo "ncu $1 rc=$? t=$SECONDS" >> $R/rc.txt
  cd $OUT && tar czf r.tgz r; cd $B/bin
}
ncu_one rq_mxfp8_7168 rmsnorm_quant_mxfp8/T32768_D7168 'b12x_rmsnorm_mxfp8_v' bench_rmsnorm_quant
ncu_one rq_f32_7168 rmsnorm_quant_fp8b128f32/T32768_D7168 'b12x_rmsnorm_fp8b128f32_v' bench_rmsnorm_quant
ncu_one rq_nvfp4_7168 rmsnorm_quant_nvfp4/T32768_D7168 'b12x_rmsnorm_nvfp4_v' bench_rmsnorm_quant
cat $R/rc.txt
cd $OUT && tar czf r.tgz r && rm -rf r
