#!/bin/bash
# Session 38, call 8 (issue 6): at 1595c13 (plain bf16_gemv launches back on the ring's old
# issue order; PDL unchanged): the gpu_bf16_gemv suite, a memcheck subset, and the layer bench
# at B = 1 (plain and PDL).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_bf16_gemv none $R/gemv 16 100 > $R/gemv_none.txt 2>&1
echo "gemv none: $(tail -1 $R/gemv_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_bf16_gemv memcheck $R/gemv 16 60 'pdl_chain|graph|mmad|mma_' > $R/gemv_memcheck.txt 2>&1
echo "gemv memcheck (pdl/graph/mma subset): $(tail -1 $R/gemv_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
for f in bf16/ bf16_pdl/; do
  n=${f%/}
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$f B12X_BENCH_OUT=$R/bench_$n timeout 120 ./bench_decoder_layer > $R/bench_$n.txt 2>&1
  echo "bench $n rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt
for n in bf16 bf16_pdl; do grep -E "/step|linears|op/" $R/bench_$n/decoder_layer.md | awk -F'|' '{print $2, $4, $8}'; done
for f in $R/*/none.txt $R/*/memcheck.txt; do grep -v "passed=1" $f | head -6; done 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
