#!/bin/bash
# Session 57, call 1 (issue 7): session 56's call 1 (bench-results/2026-12-06-h200-g/call1/run.sh:
# the TMA-fed wgmma tile A/B, b1 = session 55's landed kernels, b3 / b5 / b6 the branch's builds,
# b6 = branch head 7ce893f + the review's hardening), with one step added before the b5 / b3 benches:
# bench/proto/moe_micro_proto.cu (the one-launch T = 1 decode prototype) built with the machine's
# nvcc and run (its own CPU oracle check, then graph-replay timings against the read probe).
# Knobs for a short call: END (s), BT (each bench), ST (small trials), MT (model trials; <= 50 skips),
# CT (memcheck deadline), PT (proto).
END=${END:-585}; ROOT=$PWD; R=$OUT/r; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
for b in b1 b3 b5 b6; do mkdir -p .gpu/$b && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .gpu/bz_$b/bundle.tar.xz .gpu/$b; done
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bench() {  # bundle, seconds
  cd $ROOT/.gpu/$1/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
  B12X_BENCH_FILTER=fused_moe/ B12X_MOE_TOKENS=${TOKS:-1024,2048,4096} B12X_BENCH_OUT=$R/bench_$1 timeout $2 ./bench_fused_moe > $R/bench_$1.txt 2>&1
  echo "bench $1 rc=$? t=$SECONDS" >> $R/summary.txt; save
}
bench b1 ${BT:-60}; bench b6 ${BT:-60}
cd $ROOT/.gpu/b6/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
bash $S ./gpu_fused_moe none $R/fm 12 ${ST:-35} 'tiny|routing|bad|graph|alloc|logits|kernel_choice|split' > $R/fm_small.txt 2>&1
echo "fused_moe small (b6): $(tail -1 $R/fm_small.txt) t=$SECONDS" >> $R/summary.txt; save
[ ${MT:-90} -gt 50 ] && timeout ${MT:-90} bash $S ./gpu_fused_moe none $R/fmm 10 $(( ${MT:-90} - 50 )) '^packed_tile::models|^packed::models.*t(512|4096)' > $R/fm_models.txt 2>&1
echo "fused_moe tiled models (b6): $(tail -1 $R/fm_models.txt) t=$SECONDS" >> $R/summary.txt; save
export B12X_TEST_PROFILE=reduced
bash $S ./gpu_fused_moe memcheck $R/mc 16 ${CT:-20} '^packed_tile::.*(tiny|bad|graph|split|ring)' > $R/fm_memcheck.txt 2>&1
echo "fused_moe memcheck (b6): $(tail -1 $R/fm_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_fused_moe racecheck $R/rc 16 10 '^packed_tile::(bad_ids_masked::t40|graph_replay.*t40|tiny::shared_100::t300|split::t[23]00|ring::s[24]::t300)' > $R/fm_racecheck.txt 2>&1
echo "fused_moe racecheck (b6): $(tail -1 $R/fm_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
unset B12X_TEST_PROFILE
cd $ROOT/bench/proto
timeout 100 nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -DPROTO_NO_CUBLAS -o /tmp/moe_micro moe_micro_proto.cu > $R/proto_build.txt 2>&1 \
  && timeout ${PT:-60} /tmp/moe_micro > $R/proto.txt 2>&1
echo "moe_micro proto rc=$? t=$SECONDS" >> $R/summary.txt; save; cd $ROOT
for b in b5 b3; do left=$((END - 20 - SECONDS)); [ $left -gt 40 ] && bench $b $(( left < 65 ? left : 65 )); done
left=$((END - 10 - SECONDS))
if [ $left -gt 20 ]; then
  cd $ROOT/.gpu/b6/bundle/bin
  B12X_MOE_TOKENS=512,768 B12X_BENCH_FILTER=qwen3 B12X_BENCH_OUT=$R/bench_b6_512 timeout $left ./bench_fused_moe > $R/bench_b6_512.txt 2>&1
  echo "bench b6 T512/768 qwen3 rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/gpu.txt $R/summary.txt; cat $R/proto.txt 2>/dev/null; tail -5 $R/proto_build.txt 2>/dev/null
grep -h "FAIL\|fail" $R/fm/none.txt $R/fmm/none.txt $R/mc/memcheck.txt $R/rc/racecheck.txt 2>/dev/null | head -30
for f in $R/fm/*fail*.log $R/fmm/*fail*.log $R/mc/*fail*.log $R/rc/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -60
for f in $R/bench_b*/fused_moe.md; do echo "== $f"; grep -E "/T[0-9]" $f | grep -v read_probe | cut -d'|' -f2-6; done
cd $OUT && tar czf r.tgz r && rm -rf r
