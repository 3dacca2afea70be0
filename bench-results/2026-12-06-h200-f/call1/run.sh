#!/bin/bash
# Session 55, call 1 (issue 7): bundle .gpu/b1 = HEAD of .gpu/b1/bundle/COMMIT (SM90 picks the tile per T: mma.sync
# below Query::wgmma_from, wgmma from it). No kernel changed since session 54.
# 1. gpu_fused_moe small trials (incl. packed_tile::split::t200/t300, kernel_choice);
# 2. memcheck / racecheck (reduced profile) of the tiled trials incl. the split;
# 3. bench sweep T 512..4096 (default, wgmma forced (2, 3, 4 stages), mma.sync forced, grouped GEMV forced) — the
#    crossover behind WGMMA_ROWS_PER_EXPERT;
# 4. ncu --set full of one eager T = 4096 call (9 kernels) for Qwen3-30B-A3B and gpt-oss-120b;
# 5. the packed model trials (T 1..4096) until the deadline.
END=${END:-585}; ROOT=$PWD; R=$OUT/r; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
mkdir -p .gpu/b1 && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .gpu/bz_b1/bundle.tar.xz .gpu/b1
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
cd $ROOT/.gpu/b1/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
bash $S ./gpu_fused_moe none $R/fm 12 50 'tiny|routing|bad|graph|alloc|logits|kernel_choice|split' > $R/fm_small.txt 2>&1
echo "fused_moe small: $(tail -1 $R/fm_small.txt) t=$SECONDS" >> $R/summary.txt; save
export B12X_TEST_PROFILE=reduced
bash $S ./gpu_fused_moe memcheck $R/mc 16 30 '^packed_tile.*(tiny|bad|graph|split)' > $R/fm_memcheck.txt 2>&1
echo "fused_moe memcheck: $(tail -1 $R/fm_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe racecheck $R/rc 16 15 '^packed_tile(_mma)?::(bad_ids_masked::t40|graph_replay.*t40|tiny::shared_100::t300|split::t[23]00)' > $R/fm_racecheck.txt 2>&1
echo "fused_moe racecheck: $(tail -1 $R/fm_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
unset B12X_TEST_PROFILE
B12X_MOE_WG_STAGES=3,4 B12X_MOE_TOKENS=512,768,1024,1536,2048,3072,4096 B12X_BENCH_OUT=$R/bench timeout 200 ./bench_fused_moe > $R/bench.txt 2>&1
echo "bench sweep rc=$? t=$SECONDS" >> $R/summary.txt; save
for c in qwen3_30b_a3b gpt_oss_120b; do
  left=$((END - 200 - SECONDS)); [ $left -lt 30 ] && break
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
[ -f $R/bench/fused_moe.md ] && grep -E "/T[0-9]" $R/bench/fused_moe.md | grep -v read_probe | cut -d'|' -f2-6
for c in qwen3_30b_a3b gpt_oss_120b; do [ -f $R/ncu_${c}_details.txt ] && grep -E "^  b12x_fused_moe|Duration  " $R/ncu_${c}_details.txt | paste - - | awk '{print $1, $(NF-1), $NF}'; done
cd $OUT && tar czf r.tgz r && rm -rf r
