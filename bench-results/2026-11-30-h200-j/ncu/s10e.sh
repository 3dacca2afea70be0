#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats --section WarpStateStats --section LaunchStats --section InstructionStats"
B12X_BENCH_FILTER=rmsnorm_quant_mxfp8/T32768_D7168 B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/b timeout 150 ncu --clock-control none -k regex:b12x_rmsnorm_mxfp8_v4_bf16 -c 1 $S ./bench_rmsnorm_quant > $R/ncu_fused_mxfp8_v4.txt 2>&1
B12X_BENCH_FILTER=rmsnorm/T32768_D7168 B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/b timeout 150 ncu --clock-control none -k regex:b12x_rmsnorm_v4_bf16 -c 1 $S ./bench_rmsnorm > $R/ncu_plain_v4.txt 2>&1
B12X_BENCH_FILTER=mxfp4/M32768_K7168 B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/b timeout 150 ncu --clock-control none -k regex:b12x_mxfp4_t256_u2_bf16 -c 1 $S ./bench_mx > $R/ncu_mxfp4.txt 2>&1
for f in $R/ncu_*.txt; do echo "== $f"; grep -E "^\s+(Duration|DRAM Throughput|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Executed Instructions |Warp Cycles Per Issued|Grid Size|Block Size|Block Limit Registers|Stall)" $f | sed 's/  */ /g'; grep -iE "stall|estimated speedup" $f | head -8; done
cd $OUT && tar czf r.tgz r
