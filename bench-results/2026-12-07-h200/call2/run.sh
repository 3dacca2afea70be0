#!/bin/bash
# Session 57, call 2 (issue 7): b6 (branch wip/tma-wgmma-tile d041820, the TMA-fed wgmma tile) —
# 1. every tile at T 1024 / 2048 (the per-T split's boundary: the forced fused_moe_tile_wg rows
#    against the default rows, one job); 2. the whole gpu_fused_moe suite (call 1 ran the small
#    trials to a 35 s deadline and part of the model trials); before it, the decode rows (T 1 / 8)
#    and the micro proto again, on the same card.
END=${END:-360}; ROOT=$PWD; R=$OUT/r; mkdir -p $R; S=$ROOT/bench/sanitize_parallel.sh
mkdir -p .gpu/b6 && python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .gpu/bz_b6/bundle.tar.xz .gpu/b6
export B12X_ALLOW_PARTIAL_ARCHS=1
save() { (cd $OUT && tar czf r.tgz r); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
cd $ROOT/.gpu/b6/bundle/bin; export B12X_COMMIT=$(cat ../COMMIT)
B12X_MOE_TOKENS=1024,2048 B12X_BENCH_OUT=$R/bench_b6_split timeout ${BT:-80} ./bench_fused_moe > $R/bench_b6_split.txt 2>&1
echo "bench b6 T1024/2048 every row rc=$? t=$SECONDS" >> $R/summary.txt; save
B12X_MOE_TOKENS=1,8 B12X_BENCH_FILTER=fused_moe/ B12X_BENCH_OUT=$R/bench_b6_decode timeout 40 ./bench_fused_moe > $R/bench_b6_decode.txt 2>&1
echo "bench b6 T1/8 rc=$? t=$SECONDS" >> $R/summary.txt; save
(cd $ROOT/bench/proto && timeout 80 nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -DPROTO_NO_CUBLAS -o /tmp/moe_micro moe_micro_proto.cu > $R/proto_build.txt 2>&1 \
  && timeout 50 /tmp/moe_micro > $R/proto.txt 2>&1; echo "moe_micro proto rc=$? t=$SECONDS" >> $R/summary.txt); save
bash $S ./gpu_fused_moe none $R/fm 16 $(( END - 40 - SECONDS )) '.' > $R/fm_all.txt 2>&1
echo "gpu_fused_moe all (b6): $(tail -1 $R/fm_all.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/gpu.txt $R/summary.txt
for f in $R/fm/*fail*.log; do [ -f $f ] && { echo "== $f"; tail -6 $f; }; done 2>/dev/null | head -40
cat $R/proto.txt; grep -hE "/T[0-9]" $R/bench_b6_split/fused_moe.md $R/bench_b6_decode/fused_moe.md | grep -v read_probe | cut -d'|' -f2-6
cd $OUT && tar czf r.tgz r && rm -rf r
