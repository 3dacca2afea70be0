#!/bin/bash
# Session 55, call 2 (issue 7; a call-1 script for b1 alone never got a device): two bundles.
#   .gpu/b2 = the wgmma tile with kAdaptN (the wgmma's N = 32 / 64 / 96 / 128 by the slot's rows)
#             + the per-T tile choice (mma.sync below Query::wgmma_from);
#   .gpu/b1 = the per-T tile choice alone (N = 128 always): the A/B baseline.
# 1. gpu_fused_moe (b2) small trials; 2. memcheck / racecheck of the tiled trials (reduced);
# 3. bench b1 then b2 at T 1024, 2048, 4096 (every row; b2 also the 3- / 4-stage wgmma rows);
# 4. bench b2 at T 512, 768, 1536, 3072 (the crossover sweep's other points);
# 5. ncu --set full of one eager T = 4096 call (b2, 9 kernels), Qwen3-30B-A3B and gpt-oss-120b;
# 6. the packed model trials (b2) until the deadline.
END=${END:-585}; ROOT=$PWD; R=$OUT/r; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
for b in b1 b2; do mkdir -p .gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .gpu/bz_$b/bundle.tar.xz .gpu/$b; done
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
B1=$ROOT/.gpu/b1/bundle/bin; B2=$ROOT/.gpu/b2/bundle/bin
cd $B2; export B12X_COMMIT=$(cat ../COMMIT)
bash $S ./gpu_fused_moe none $R/fm 12 50 'tiny|routing|bad|graph|alloc|logits|kernel_choice|split' > $R/fm_small.txt 2>&1
echo "fused_moe small: $(tail -1 $R/fm_small.txt) t=$SECONDS" >> $R/summary.txt; save
export B12X_TEST_PROFILE=reduced
bash $S ./gpu_fused_moe memcheck $R/mc 16 30 '^packed_tile.*(tiny|bad|graph|split)' > $R/fm_memcheck.txt 2>&1
echo "fused_moe memcheck: $(tail -1 $R/fm_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe racecheck $R/rc 16 15 '^packed_tile(_mma)?::(bad_ids_masked::t40|graph_replay.*t40|tiny::shared_100::t300|split::t[23]00)' > $R/fm_racecheck.txt 2>&1
echo "fused_moe racecheck: $(tail -1 $R/fm_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
unset B12X_TEST_PROFILE
cd $B1; export B12X_COMMIT=$(cat ../COMMIT)
B12X_MOE_TOKENS=1024,2048,4096 B12X_BENCH_OUT=$R/bench_b1 timeout 120 ./bench_fused_moe > $R/bench_b1.txt 2>&1
echo "bench b1 rc=$? t=$SECONDS" >> $R/summary.txt; save
cd $B2; export B12X_COMMIT=$(cat ../COMMIT)
B12X_MOE_WG_STAGES=3,4 B12X_MOE_TOKENS=1024,2048,4096 B12X_BENCH_OUT=$R/bench_b2 timeout 150 ./bench_fused_moe > $R/bench_b2.txt 2>&1
echo "bench b2 rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_MOE_TOKENS=512,768,1536,3072 B12X_BENCH_OUT=$R/bench_b2_sweep timeout 120 ./bench_fused_moe > $R/bench_b2_sweep.txt 2>&1
echo "bench b2 sweep rc=$? t=$SECONDS" >> $R/summary.txt; save
for c in qwen3_30b_a3b gpt_oss_120b; do
  left=$((END - 150 - SECONDS)); [ $left -lt 30 ] && break
  B12X_BENCH_FILTER=fused_moe/$c/T4096 B12X_MOE_TOKENS=4096 B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/ncu_bench_$c \
    timeout $left ncu --clock-control none --kernel-name regex:b12x_fused_moe --launch-count 9 --set full -o $R/ncu_$c ./bench_fused_moe > $R/ncu_$c.txt 2>&1
  echo "ncu $c rc=$? t=$SECONDS" >> $R/summary.txt
  ncu --import $R/ncu_$c.ncu-rep --page details > $R/ncu_${c}_details.txt 2>&1; save
done
left=$((END - 15 - SECONDS))
if [ $left -gt 30 ]; then
  timeout $left bash $S ./gpu_fused_moe none $R/fmm 10 $((left - 40)) '^packed.*models' > $R/fm_models.txt 2>&1
  echo "fused_moe packed models: $(tail -1 $R/fm_models.txt) t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/gpu.txt $R/summary.txt
grep -h "FAIL\|fail" $R/fm/none.txt $R/fmm/none.txt $R/mc/memcheck.txt $R/rc/racecheck.txt 2>/dev/null | head -30
for f in $R/fm/*fail*.log $R/fmm/*fail*.log $R/mc/*fail*.log $R/rc/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -60
for f in $R/bench_b*/fused_moe.md; do echo "== $f"; grep -E "/T[0-9]" $f | grep -v read_probe | cut -d'|' -f2-6; done
for c in qwen3_30b_a3b gpt_oss_120b; do [ -f $R/ncu_${c}_details.txt ] && grep -E "^  b12x_fused_moe|Duration  " $R/ncu_${c}_details.txt | paste - - | awk '{print $1, $(NF-1), $NF}'; done
cd $OUT && tar czf r.tgz r && rm -rf r
