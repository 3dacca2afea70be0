#!/bin/bash
# Session 40 call1: prepared in session 39 (next/run.sh), plus an ncu look at the B = 1 attention. Validates
# device time left). Validates and measures the fused SwiGLU down projection (a1e7d90) and reads
# the B = 1 attention's layout with paged_stream_proto. Bundle first, on the CPU machine:
#   cargo xtask gpu-bundle --targets gpu_bf16_gemv,gpu_silu_and_mul,gpu_decoder_layer,bench_decoder_layer
#   rm -f .gpu/bundle/bin/b12x-xtask      # then run with carry [".gpu/bundle"]
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh; ROOT=$PWD
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_bf16_gemv none $R/gemv 16 100 > $R/gemv_none.txt 2>&1
echo "gemv none: $(tail -1 $R/gemv_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_bf16_gemv memcheck $R/gemv 16 60 'silu' > $R/gemv_memcheck.txt 2>&1
echo "gemv memcheck (silu): $(tail -1 $R/gemv_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_silu_and_mul none $R/silu 16 60 > $R/silu_none.txt 2>&1
echo "silu_and_mul none: $(tail -1 $R/silu_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_decoder_layer none $R/layer 1 150 'fused_silu' > $R/layer_none.txt 2>&1
echo "layer fused none: $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_decoder_layer memcheck $R/layer 2 60 'fused_silu_pdl::b1|fused_silu::b8' > $R/layer_memcheck.txt 2>&1
echo "layer fused memcheck: $(tail -1 $R/layer_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
for f in bf16_pdl/ bf16_pdl_fs/ bf16/ bf16_fs/; do
  n=${f%/}
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_$n timeout 120 ./bench_decoder_layer > $R/bench_$n.txt 2>&1
  echo "bench $n rc=$? t=$SECONDS" >> $R/summary.txt; save
done
(cd $B/bin && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=bf16_pdl/B1_ctx4096 timeout 150 ncu --clock-control none -k regex:b12x_paged --launch-skip 30 --launch-count 1 --set full --import-source no -o $R/paged_b1 ./bench_decoder_layer > $R/ncu_run.txt 2>&1; \
  ncu --import $R/paged_b1.ncu-rep --page details > $R/ncu_paged_b1.txt 2>&1)
echo "ncu paged B = 1 rc=$? t=$SECONDS" >> $R/summary.txt; save
(cd $ROOT/bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/pstream paged_stream_proto.cu \
  && PS_SHAPES=1:4096,1:8192 timeout 120 /tmp/pstream) > $R/pstream_b1.txt 2>&1
echo "paged_stream_proto B = 1 rc=$? t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt $R/pstream_b1.txt
for n in bf16_pdl bf16_pdl_fs bf16 bf16_fs; do grep -E "/step|prefix/|op/down" $R/bench_$n/decoder_layer.md | awk -F'|' '{print $2, $4, $8}'; done
for f in $R/*/none.txt $R/*/memcheck.txt; do grep -v "passed=1" $f | head -6; done 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
