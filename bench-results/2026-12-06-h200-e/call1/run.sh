#!/bin/bash
# Session 54, call 1 (issue 7): the grouped path's tile on SM90 = gemm.blockscaled's wgmma body
# (128-row slots) instead of the mma.sync 64-row tile. gpu_fused_moe's small trials (both tile
# kernels: packed_tile:: default = wgmma, packed_tile_mma:: forced mma.sync), the packed model
# trials (T 512 / 4096 on the default path = wgmma), memcheck / racecheck (reduced profile) of the
# tiled trials, then the bench at T 512, 4096 (default, tile, tile_mma, gemv rows).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
cd $B/bin
bash $S ./gpu_fused_moe none $R/fm 12 60 'tiny|routing|bad|graph|alloc|logits|kernel_choice' > $R/fm_small.txt 2>&1
echo "fused_moe small: $(tail -1 $R/fm_small.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe none $R/fmm 10 110 '^packed.*models' > $R/fm_models.txt 2>&1
echo "fused_moe packed models: $(tail -1 $R/fm_models.txt) t=$SECONDS" >> $R/summary.txt; save
export B12X_TEST_PROFILE=reduced
bash $S ./gpu_fused_moe memcheck $R/mc 16 40 '^packed_tile.*(tiny|bad|graph)' > $R/fm_memcheck.txt 2>&1
echo "fused_moe memcheck: $(tail -1 $R/fm_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe racecheck $R/rc 16 20 '^packed_tile(_mma)?::(bad_ids_masked::t40|graph_replay.*t40|tiny::shared_100::t300)' > $R/fm_racecheck.txt 2>&1
echo "fused_moe racecheck: $(tail -1 $R/fm_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
unset B12X_TEST_PROFILE
left=$((500 - SECONDS))
if [ $left -gt 40 ]; then
  B12X_MOE_TOKENS=512,4096 B12X_BENCH_OUT=$R/bench timeout $((left - 5)) ./bench_fused_moe > $R/bench.txt 2>&1
  echo "bench rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
M=gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,dram__bytes_read.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for c in qwen3_30b_a3b/T4096 gpt_oss_120b/T4096; do
  [ $((585 - SECONDS)) -lt 50 ] && break
  n=$(echo $c | tr / _)
  B12X_MOE_TOKENS=4096 B12X_BENCH_FILTER=fused_moe/$c B12X_BENCH_OUT=$R/b_$n timeout 45 ncu --clock-control none --kernel-name regex:fused_moe --launch-count 9 \
    --metrics $M --csv ./bench_fused_moe > $R/ncu_$n.csv 2> $R/ncu_$n.err
  echo "ncu $n rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/gpu.txt $R/summary.txt
for f in $R/ncu_*.csv; do echo "== $f"; grep -v "^==" $f | awk -F'","' '{print $5"|"$(NF-2)"|"$NF}' | sed 's/"//g' | sed 's/(b12x::[A-Za-z]*Params)//' | cut -c1-120 | grep -v "^ID\|^|\|Kernel Name" | head -50; done 2>/dev/null
grep -h "FAIL\|fail" $R/fm/none.txt $R/fmm/none.txt $R/mc/memcheck.txt $R/rc/racecheck.txt 2>/dev/null | head -30
for f in $R/fm/*fail*.log $R/fmm/*fail*.log $R/mc/*fail*.log $R/rc/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -60
[ -f $R/bench/fused_moe.md ] && grep -E "/T[0-9]" $R/bench/fused_moe.md | grep -v read_probe | cut -d'|' -f2-8
cd $OUT && tar czf r.tgz r && rm -rf r
