#!/bin/bash
# Session 43, call 1 (issue 7): where moe.fused_moe's decode time goes, and the first change.
# Two bundles: .gpu/bundle_base (77cae1b, session 42's kernels) and .gpu/bundle (the FC kernels'
# slots / row tokens cached in shared memory). For each: ncu per kernel of one eager call
# (route, FC1, [quant], FC2, combine; caches flushed per kernel, clocks untouched) at
# DeepSeek-V4-Flash T1 / T8, gpt-oss T1, Qwen3 T1; the quick bench (T 1, 8) of both in one job;
# FC1's warp stalls (base, DeepSeek T1); the new bundle's small gpu_fused_moe trials; then
# gpu_route_topk under memcheck (reduced profile).
R=$OUT/r; mkdir -p $R; S=$PWD/bench/sanitize_parallel.sh; ROOT=$PWD
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20
save() { (cd $OUT && tar czf r.tgz r); }
M=gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
for b in bundle_base bundle; do
  cd $ROOT/.gpu/$b/bin; export B12X_COMMIT=$(cat ../COMMIT)
  for c in deepseek_v4_flash_tp2/T1 deepseek_v4_flash_tp2/T8 gpt_oss_120b/T1 qwen3_30b_a3b/T1; do
    n=${b}_$(echo $c | tr / _)
    B12X_BENCH_FILTER=fused_moe/$c B12X_BENCH_OUT=$R/b_$n timeout 100 ncu --clock-control none --kernel-name regex:fused_moe --launch-count 5 \
      --metrics $M --csv ./bench_fused_moe > $R/ncu_$n.csv 2> $R/ncu_$n.err
    echo "$n rc=$? t=$SECONDS" >> $R/summary.txt
  done
  save
done
for b in bundle_base bundle bundle_base bundle; do
  cd $ROOT/.gpu/$b/bin
  B12X_BENCH_QUICK=1 B12X_BENCH_OUT=$R/bench_$b timeout 100 ./bench_fused_moe > $R/bench_$b.txt 2>&1
  echo "bench $b rc=$? t=$SECONDS" >> $R/summary.txt
  grep "^fused_moe/" $R/bench_$b.txt >> $R/bench_ab.txt
done
save
cd $ROOT/.gpu/bundle_base/bin
B12X_BENCH_FILTER=fused_moe/deepseek_v4_flash_tp2/T1 B12X_BENCH_OUT=$R/b_st timeout 150 ncu --clock-control none --kernel-name regex:decode_gemv --launch-count 2 \
  --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section SpeedOfLight \
  --print-details all ./bench_fused_moe > $R/ncu_stalls.txt 2>&1
echo "stalls rc=$? t=$SECONDS" >> $R/summary.txt; save
cd $ROOT/.gpu/bundle/bin
bash $S ./gpu_fused_moe none $R/fm 12 90 'tiny|routing|bad|graph|alloc|logits' > $R/fm_small.txt 2>&1
echo "fused_moe small: $(tail -1 $R/fm_small.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_route_topk memcheck $R/rtm 8 100 > $R/rt_memcheck.txt 2>&1
echo "route_topk memcheck: $(tail -1 $R/rt_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
left=$((480 - SECONDS))
if [ $left -gt 45 ]; then  # issue 6: where rope_kv_append's warm CTAs run (never run before)
  (cd $ROOT/bench/proto && timeout 90 bash -c 'nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I../../b12x-core/include -I../../b12x-attention/kernels -o /tmp/wop warm_overlap_proto.cu && /tmp/wop') > $R/warm_overlap.txt 2>&1
  echo "warm_overlap rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
left=$((570 - SECONDS))
if [ $left -gt 60 ]; then
  B12X_BENCH_FILTER=/T4096 B12X_BENCH_OUT=$R/bench_t4096 timeout $((left - 10)) ./bench_fused_moe > $R/bench_t4096.txt 2>&1
  echo "bench T4096 rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/summary.txt; cat $R/bench_ab.txt; grep '^fused_moe/' $R/bench_t4096.txt
for f in $R/ncu_*.csv; do echo "== $f"; grep -v "^==" $f | awk -F'","' '{print $5"|"$(NF-2)"|"$(NF-1)"|"$NF}' | sed 's/"//g' | cut -c1-160 | grep -v "^ID\|^|" | head -40; done
grep -E "Duration|Warp Cycles Per Issued|Stall|Achieved Occupancy|Block Limit" $R/ncu_stalls.txt | head -40
cd $OUT && tar czf r.tgz r && rm -rf r
