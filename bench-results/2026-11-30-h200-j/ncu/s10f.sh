#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats --section WarpStateStats --section LaunchStats --section InstructionStats"
for sk in 60; do
B12X_AUTOTUNE=0 B12X_BENCH_FILTER=rmsnorm_quant_mxfp8/T32768_D7168 B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/b timeout 150 ncu --clock-control none -k regex:b12x_rmsnorm_mxfp8 --launch-skip 2 -c 1 $S ./bench_rmsnorm_quant > $R/ncu_fused_mxfp8.txt 2>&1
B12X_AUTOTUNE=0 B12X_BENCH_FILTER=rmsnorm/T32768_D7168 B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/b timeout 150 ncu --clock-control none -k regex:b12x_rmsnorm_v --launch-skip 2 -c 1 $S ./bench_rmsnorm > $R/ncu_plain.txt 2>&1
done
for f in $R/ncu_*.txt; do echo "== $f"; grep -E "^\s+(Duration|DRAM Throughput|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Executed Instructions |Warp Cycles Per Issued|Grid Size|Block Size|Block Limit Registers)" $f | sed 's/  */ /g'; grep -B1 -A3 "represents about" $f | head -12; grep -E "b12x_rmsnorm" $f | head -2; done
cd $OUT && tar czf r.tgz r
