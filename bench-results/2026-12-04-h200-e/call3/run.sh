#!/bin/bash
# Session 38, call 3 (issue 6): bf16_gemv's ring / direct feeds load their first W before the
# PDL wait (was an L2 prefetch hint); rope_kv_append PDL plans read positions, the batch and
# form cos/sin before the wait. The layer bench at B = 1 (plain, PDL, PDL + 6-stage rings) with
# prefixes, then the suites of the three touched kernels (+ rope, kv_append: shared headers).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
for f in bf16/ bf16_pdl/ bf16_pdl_r6/; do
  n=${f%/}
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_$n timeout 200 ./bench_decoder_layer > $R/bench_$n.txt 2>&1
  echo "bench $n rc=$? t=$SECONDS" >> $R/summary.txt; save
done
bash $S ./gpu_bf16_gemv none $R/gemv 16 100 > $R/gemv_none.txt 2>&1
echo "gemv none: $(tail -1 $R/gemv_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_rope_kv_append none $R/rka 16 40 > $R/rka_none.txt 2>&1
echo "rope_kv_append none: $(tail -1 $R/rka_none.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_rope none $R/rope 16 30 > $R/rope_none.txt 2>&1
echo "rope none: $(tail -1 $R/rope_none.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_kv_append none $R/kva 16 30 > $R/kva_none.txt 2>&1
echo "kv_append none: $(tail -1 $R/kva_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_rope_kv_append memcheck $R/rka 16 60 > $R/rka_memcheck.txt 2>&1
echo "rope_kv_append memcheck: $(tail -1 $R/rka_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_bf16_gemv memcheck $R/gemv 16 60 'pdl_chain|graph|mmad|mma_' > $R/gemv_memcheck.txt 2>&1
echo "gemv memcheck (pdl/graph/mma subset): $(tail -1 $R/gemv_memcheck.txt) t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
for n in bf16 bf16_pdl bf16_pdl_r6; do grep -E "/step|linears|prefix" $R/bench_$n/decoder_layer.md | awk -F'|' '{print $2, $4, $8}'; done
for f in $R/*/none.txt $R/*/memcheck.txt; do grep -v "passed=1" $f | head -6; done 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
