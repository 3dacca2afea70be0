#!/bin/bash
# Session 43, call 1 (issue 7): moe.fused_moe's decode path, three bundles:
#   .gpu/bundle_base  77cae1b (session 42's kernels)
#   .gpu/bundle_cache a8b4cba (FC kernels cache slots / row tokens in shared memory)
#   .gpu/bundle_q     fde6ad8 (+ x and h quantized by the FC producer warps: no x^ in the route,
#                     no quant_rows launch; route one CTA)
# 1. the new bundle's packed trials of gpu_fused_moe (plain); 2. the quick bench (T 1, 8) of
# all three in one job, base and new twice; 3. ncu per kernel of one eager call (caches flushed
# per kernel, clocks untouched) for base and new at DeepSeek-V4-Flash T1 / T8 and gpt-oss T1;
# 4. memcheck of the new bundle's small packed trials and of gpu_route_topk (reduced profile).
R=$OUT/r; mkdir -p $R; S=$PWD/bench/sanitize_parallel.sh; ROOT=$PWD
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_BENCH_SAMPLES=20
save() { (cd $OUT && tar czf r.tgz r); }
cd $ROOT/.gpu/bundle_q/bin; export B12X_COMMIT=$(cat ../COMMIT)
bash $S ./gpu_fused_moe none $R/fm 12 100 'packed::' > $R/fm_packed.txt 2>&1
echo "fused_moe packed: $(tail -1 $R/fm_packed.txt) t=$SECONDS" >> $R/summary.txt; save
for b in bundle_base bundle_cache bundle_q bundle_base bundle_q; do
  cd $ROOT/.gpu/$b/bin; export B12X_COMMIT=$(cat ../COMMIT)
  B12X_BENCH_QUICK=1 B12X_BENCH_OUT=$R/bench_$b timeout 100 ./bench_fused_moe > $R/bench_$b.txt 2>&1
  echo "bench $b rc=$? t=$SECONDS" >> $R/summary.txt
  grep "^fused_moe/" $R/bench_$b.txt | sed "s/^/$b /" >> $R/bench_ab.txt
done
save
M=gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
for b in bundle_base bundle_q; do
  cd $ROOT/.gpu/$b/bin; export B12X_COMMIT=$(cat ../COMMIT)
  for c in deepseek_v4_flash_tp2/T1 deepseek_v4_flash_tp2/T8 gpt_oss_120b/T1; do
    n=${b}_$(echo $c | tr / _)
    B12X_BENCH_FILTER=fused_moe/$c B12X_BENCH_OUT=$R/b_$n timeout 60 ncu --clock-control none --kernel-name regex:fused_moe --launch-count 5 \
      --metrics $M --csv ./bench_fused_moe > $R/ncu_$n.csv 2> $R/ncu_$n.err
    echo "$n rc=$? t=$SECONDS" >> $R/summary.txt
  done
  save
done
cd $ROOT/.gpu/bundle_q/bin; export B12X_COMMIT=$(cat ../COMMIT)
left=$((540 - SECONDS))
if [ $left -gt 100 ]; then
  B12X_TEST_PROFILE=reduced bash $S ./gpu_fused_moe memcheck $R/fmm 16 $(((left - 100) / 2)) 'packed::(tiny::(w4a8_mx|nvfp4|w4a16_nvfp4)_(silu|oai7)|routing|bad|graph)' > $R/fm_memcheck.txt 2>&1
  echo "fused_moe memcheck: $(tail -1 $R/fm_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
  left=$((540 - SECONDS))
  if [ $left -gt 150 ]; then
    B12X_TEST_PROFILE=reduced bash $S ./gpu_fused_moe racecheck $R/fmr 16 $((left - 130)) 'packed::(tiny::(w4a8_mx|nvfp4)_silu::t(1|8|64)|graph)' > $R/fm_racecheck.txt 2>&1
    echo "fused_moe racecheck: $(tail -1 $R/fm_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
  fi
fi
left=$((580 - SECONDS))
if [ $left -gt 30 ]; then
  B12X_TEST_PROFILE=reduced bash $S ./gpu_route_topk memcheck $R/rtm 8 $((left - 25)) > $R/rt_memcheck.txt 2>&1
  echo "route_topk memcheck: $(tail -1 $R/rt_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/summary.txt; cat $R/bench_ab.txt | cut -c1-110
grep -h "FAIL\|fail" $R/fm/none.txt 2>/dev/null | head; for f in $R/fm/none_fail_*.log; do [ -f $f ] && { echo "== $f"; tail -5 $f; }; done 2>/dev/null | head -40
for f in $R/ncu_*.csv; do echo "== $f"; grep -v "^==" $f | awk -F'","' '{print $5"|"$(NF-2)"|"$NF}' | sed 's/"//g' | sed 's/(b12x::[A-Za-z]*Params)//' | cut -c1-120 | grep -v "^ID\|^|\|Kernel Name" | head -30; done
cd $OUT && tar czf r.tgz r && rm -rf r
