#!/bin/bash
# Call 3 (prepared in session 44, not yet run): HEAD's .gpu/bundle from call2/build.sh.
# Issue 7 criterion 3: the full fused_moe bench (T 1, 2, 8, 64 decode; 512, 4096 grouped with
# FLOPs against the mma.sync ceiling). Issue 6: rope_kv_append's suite, memcheck and racecheck
# (reduced; its racecheck never ran), the B = 1 layer rows without / with the warm part
# (bf16_pdl_gs / bf16_pdl_gs_wl), and bench/proto/warm_overlap_proto.cu.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh; ROOT=$PWD
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
B12X_BENCH_OUT=$R/bench_moe timeout 200 ./bench_fused_moe > $R/bench_moe.txt 2>&1
echo "bench fused_moe rc=$? t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 300 ] && bash $S ./gpu_rope_kv_append none $R/rka 8 40 > $R/rka_none.txt 2>&1
echo "rka none: $(tail -1 $R/rka_none.txt) t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 340 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_rope_kv_append racecheck $R/rkr 16 40 > $R/rka_racecheck.txt 2>&1
echo "rka racecheck: $(tail -1 $R/rka_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 400 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_rope_kv_append memcheck $R/rkm 16 20 > $R/rka_memcheck.txt 2>&1
echo "rka memcheck: $(tail -1 $R/rka_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
for v in bf16_pdl_gs/ bf16_pdl_gs_wl/; do
  t=${v%/}
  [ $SECONDS -lt 480 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 35 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
left=$((570 - SECONDS))
if [ $left -gt 40 ]; then
  (cd $ROOT/bench/proto && timeout $((left - 5)) bash -c 'nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I../../b12x-core/include -I../../b12x-attention/kernels -o /tmp/wop warm_overlap_proto.cu && /tmp/wop') > $R/warm_overlap.txt 2>&1
  echo "warm_overlap rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/summary.txt
grep -E "^fused_moe/|^read_probe/fused_moe/" $R/bench_moe.txt | cut -c1-110
for f in $R/bench_bf16*/decoder_layer.md; do grep -E "/step|prefix/" $f | awk -F'|' '{print $2, $4, $8}'; done
tail -30 $R/warm_overlap.txt
cd $OUT && tar czf r.tgz r && rm -rf r
