#!/bin/bash
# Session 58, call 1 (issue 7; = session 57's call 2, the proto now also probes FC1's and FC2's byte counts): b6 (branch wip/tma-wgmma-tile d041820 = main's merge, the TMA-fed
# wgmma tile), in priority order for a short call:
# 1. the model trials call 1 did not start (gpt-oss-120b / Qwen3-30B-A3B at T 512 / 4096: the wgmma
#    tile at T = 4096, gpt-oss's K = 2880 tails); 2. every tile at T 1024 / 2048 (the per-T split's
#    boundary: forced fused_moe_tile_wg rows against the default rows, one job); 3. the decode rows
#    (T 1 / 8) and the micro proto on the same card; 4. the rest of the suite while time is left.
END=${END:-420}; ROOT=$PWD; R=$OUT/r; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
mkdir -p .gpu/b6 && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .gpu/bz_b6/bundle.tar.xz .gpu/b6
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
cd $ROOT/.gpu/b6/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
timeout ${MT:-120} bash $S ./gpu_fused_moe none $R/fmm 4 $(( ${MT:-120} - 40 )) '^packed::models::(gpt_oss_120b|qwen3_30b_a3b)::t(512|4096)' > $R/fm_models.txt 2>&1
echo "models (b6): $(tail -1 $R/fm_models.txt) t=$SECONDS" >> $R/summary.txt; save
left=$((END - 10 - SECONDS)); [ $left -gt 30 ] && { B12X_MOE_TOKENS=1024,2048 B12X_BENCH_OUT=$R/bench_b6_split timeout $(( left < 80 ? left : 80 )) ./bench_fused_moe > $R/bench_b6_split.txt 2>&1
echo "bench b6 T1024/2048 every row rc=$? t=$SECONDS" >> $R/summary.txt; save; }
left=$((END - 10 - SECONDS)); [ $left -gt 20 ] && { B12X_MOE_TOKENS=1,8 B12X_BENCH_FILTER=fused_moe/ B12X_BENCH_OUT=$R/bench_b6_decode timeout $(( left < 40 ? left : 40 )) ./bench_fused_moe > $R/bench_b6_decode.txt 2>&1
echo "bench b6 T1/8 rc=$? t=$SECONDS" >> $R/summary.txt; save; }
left=$((END - 10 - SECONDS)); [ $left -gt 50 ] && { (cd $ROOT/bench/proto && timeout 60 nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -DPROTO_NO_CUBLAS -o /tmp/moe_micro moe_micro_proto.cu > $R/proto_build.txt 2>&1 \
  && timeout 40 /tmp/moe_micro > $R/proto.txt 2>&1; echo "moe_micro proto rc=$? t=$SECONDS" >> $R/summary.txt); save; }
for c in fused_moe/qwen3_30b_a3b/T4096:4096 fused_moe_tile_wg/qwen3_30b_a3b/T512:512; do
  left=$((END - 60 - SECONDS)); [ $left -lt 30 ] && break
  n=$(echo ${c%%:*} | tr / _)
  B12X_BENCH_FILTER=${c%%:*} B12X_MOE_TOKENS=${c##*:} B12X_BENCH_SAMPLES=3 B12X_BENCH_OUT=$R/ncu_bench_$n \
    timeout $left ncu --clock-control none --kernel-name regex:b12x_fused_moe --launch-count 9 --set full -o $R/ncu_$n ./bench_fused_moe > $R/ncu_$n.txt 2>&1
  echo "ncu $n rc=$? t=$SECONDS" >> $R/summary.txt
  ncu --import $R/ncu_$n.ncu-rep --page details > $R/ncu_${n}_details.txt 2>&1; rm -f $R/ncu_$n.ncu-rep; save
done
left=$((END - 30 - SECONDS)); [ $left -gt 20 ] && { bash $S ./gpu_fused_moe none $R/fm 16 $left '^(packed_tile_mma|simple|packed_tile::tiny)' > $R/fm_rest.txt 2>&1
echo "rest (b6): $(tail -1 $R/fm_rest.txt) t=$SECONDS" >> $R/summary.txt; save; }
cat $R/gpu.txt $R/summary.txt
for f in $R/fm*/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -40
cat $R/proto.txt 2>/dev/null; grep -hE "/T[0-9]" $R/bench_b6_split/fused_moe.md $R/bench_b6_decode/fused_moe.md 2>/dev/null | grep -v read_probe | cut -d'|' -f2-6
cd $OUT && tar czf r.tgz r && rm -rf r
