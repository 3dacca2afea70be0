#!/bin/bash
# Session 16, call 9 (bundle of b12x-core,b12x-quant at COMMIT): where the flat NVFP4 quantizer's
# issue slots go, against MXFP4 on the same shape (M = 32768, K = 4096, given scale, default
# configs, no race): ncu's speed-of-light, warp states and executed instructions per opcode.
# Then the two benches on that shape (race on) for the times. From the repo root.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
S=$(date +%s)
ncu_one() { # label filter kernel-regex bin
  B12X_AUTOTUNE=0 B12X_CACHE_DIR=/tmp/ncu-cache B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=$2 timeout 150 ncu --clock-control none \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section Occupancy --section LaunchStats \
    --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,smsp__thread_inst_executed.sum \
    --print-metric-instances values -k regex:"$3" -c 1 ./$4 > $R/ncu_$1.txt 2>&1; echo "ncu $1 rc=$? t=$(( $(date +%s) - S ))s" >> $R/rc.txt
}
ncu_one nvfp4 M32768_K4096_bf16_given 'b12x_nvfp4_t' bench_nvfp4
ncu_one mxfp4 mxfp4/M32768_K4096 'b12x_mxfp4_t' bench_mx
B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_FILTER=M32768_K4096 timeout 120 ./bench_nvfp4 > $R/bench_nvfp4.log 2>&1; echo "bench nvfp4 rc=$?" >> $R/rc.txt
B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_FILTER=M32768_K4096 timeout 120 ./bench_mx > $R/bench_mx.log 2>&1; echo "bench mx rc=$?" >> $R/rc.txt
cd $OUT && tar czf r.tgz r
