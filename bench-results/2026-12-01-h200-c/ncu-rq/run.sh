#!/bin/bash
# Session 13, call e: ncu of the fused rmsnorm_quant v4 entry points (986899f kernels) at
# T = 32768, D = 4096: instructions per element, issue activity, DRAM throughput.
R=$OUT/r; mkdir -p $R
export B12X_ALLOW_PARTIAL_ARCHS=1
cat .gpu/bundle/COMMIT > $R/commit.txt
cd .gpu/bundle/bin
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__block_size
for o in mxfp8 fp8b128f32 nvfp4; do
  B12X_BENCH_FILTER=rmsnorm_quant_$o/T32768_D4096 B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/b_$o timeout 100 \
    ncu --clock-control none --kernel-name regex:"b12x_rmsnorm_${o}_v4_bf16" --launch-count 1 --metrics $M \
    ./bench_rmsnorm_quant > $R/ncu_$o.txt 2>&1
  echo "$o rc=$?"; grep -E "b12x_rmsnorm|duration|inst_executed|issue_active|throughput|warps_active|registers|block_size" $R/ncu_$o.txt | head -12
done
cd $OUT && tar czf r.tgz r
