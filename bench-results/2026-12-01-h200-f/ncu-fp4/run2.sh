#!/bin/bash
# Session 16, call 10: as run.sh, but the race's picks (nvfp4 t256_u4, mxfp4 t128_u4, by symbol)
# and the executed instructions per opcode with their names (--print-metric-instances details).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; cd $B/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
ncu_one() { # label filter kernel-regex bin
  B12X_CACHE_DIR=/tmp/ncu-cache-$1 B12X_BENCH_SAMPLES=20 B12X_BENCH_FILTER=$2 timeout 200 ncu --clock-control none \
    --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,smsp__thread_inst_executed.sum \
    --print-metric-instances details -k regex:"$3" -c 1 ./$4 > $R/ncu2_$1.txt 2>&1; echo "ncu $1 rc=$?" >> $R/rc.txt
}
ncu_one nvfp4 M32768_K4096_bf16_given 'b12x_nvfp4_t256_u4_bf16$' bench_nvfp4
ncu_one mxfp4 mxfp4/M32768_K4096 'b12x_mxfp4_t128_u4_bf16$' bench_mx
cd $OUT && tar czf r.tgz r
