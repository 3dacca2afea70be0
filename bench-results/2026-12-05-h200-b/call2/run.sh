#!/bin/bash
# Session 43, call 2 (NOT RUN: the device was gone by session 44 — kept for a later session).
# Build .gpu/bundle from HEAD with prefetch.patch applied (`git apply` it, `cargo xtask gpu-bundle
# --targets bench_fused_moe,gpu_fused_moe,bench_decoder_layer,gpu_rope_kv_append`, drop
# bin/b12x-xtask for the 64 MiB carry limit, then `git checkout` the patched files) and
# .gpu/bundle_base from HEAD unpatched (bench_fused_moe only).
# Original plan: bundle of 6d342d8 + FC1's L2 prefetch of FC2's touched weights
# (.gpu/bundle; rope_kv_append with the 8-load warm part of c2d682f, never run before) and
# 6d342d8's bench alone (.gpu/bundle_base: moe kernels = 77cae1b's).
# Issue 7: the packed trials with the prefetch; the quick bench base / prefetch / base /
# prefetch; the full fused_moe bench (T 1, 2, 8, 64 decode; 512, 4096 grouped with FLOPs).
# Issue 6: rope_kv_append's suite, memcheck and racecheck (reduced; its racecheck never ran);
# the layer's warm_kv trials one at a time; the B = 1 layer rows without / with the warm part;
# bench/proto/warm_overlap_proto.cu (where the warm CTAs run beside the QKV GEMV).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh; ROOT=$PWD
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_fused_moe none $R/fm 12 60 'packed::(tiny|routing|bad|graph|alloc|logits|models::.*::t(1|2|5|8)$)' > $R/fm_packed.txt 2>&1
echo "fused_moe packed: $(tail -1 $R/fm_packed.txt) t=$SECONDS" >> $R/summary.txt; save
for b in bundle_base bundle bundle_base bundle; do
  (cd $ROOT/.gpu/$b/bin && B12X_BENCH_QUICK=1 B12X_BENCH_OUT=$R/bq_$b timeout 60 ./bench_fused_moe > $R/bq_$b.txt 2>&1)
  echo "bench quick $b rc=$? t=$SECONDS" >> $R/summary.txt
  grep "^fused_moe/" $R/bq_$b.txt | sed "s/^/$b /" >> $R/bench_ab.txt
done
save
B12X_BENCH_OUT=$R/bench_moe timeout 170 ./bench_fused_moe > $R/bench_moe.txt 2>&1
echo "bench fused_moe rc=$? t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 420 ] && bash $S ./gpu_rope_kv_append none $R/rka 8 40 > $R/rka_none.txt 2>&1
echo "rka none: $(tail -1 $R/rka_none.txt) t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 450 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_rope_kv_append racecheck $R/rkr 16 40 > $R/rka_racecheck.txt 2>&1
echo "rka racecheck: $(tail -1 $R/rka_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
[ $SECONDS -lt 480 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_rope_kv_append memcheck $R/rkm 16 20 > $R/rka_memcheck.txt 2>&1
echo "rka memcheck: $(tail -1 $R/rka_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
echo 'layer warm_kv trials: not in this bundle (the 64 MiB carry limit)' >> $R/summary.txt
for v in bf16_pdl_gs/ bf16_pdl_gs_wl/; do
  t=${v%/}
  [ $SECONDS -lt 520 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 35 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
left=$((570 - SECONDS))
if [ $left -gt 40 ]; then
  (cd $ROOT/bench/proto && timeout $((left - 5)) bash -c 'nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I../../b12x-core/include -I../../b12x-attention/kernels -o /tmp/wop warm_overlap_proto.cu && /tmp/wop') > $R/warm_overlap.txt 2>&1
  echo "warm_overlap rc=$? t=$SECONDS" >> $R/summary.txt; save
fi
cat $R/summary.txt; cut -c1-100 $R/bench_ab.txt
grep -E "^fused_moe/|^read_probe/fused_moe/" $R/bench_moe.txt | cut -c1-100
for f in $R/bench_bf16*/decoder_layer.md; do grep -E "/step|prefix/" $f | awk -F'|' '{print $2, $4, $8}'; done
tail -30 $R/warm_overlap.txt
cd $OUT && tar czf r.tgz r && rm -rf r
