#!/bin/bash
# Session 37, call 3 (issue 6): attention.rope_kv_append (new: plain, memcheck, racecheck);
# rope and kv_append after their kernels moved into rope.cuh / kv_append.cuh (plain; kv_append
# memcheck reduced); gpu_paged whole suite with the new split / ring defaults; the layer bench's
# BF16 rows with the fused rope+append step.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_rope_kv_append none $R/rka 16 40 > $R/rka_none.txt 2>&1
echo "rope_kv_append none: $(tail -1 $R/rka_none.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_rope_kv_append memcheck $R/rka 16 60 > $R/rka_memcheck.txt 2>&1
echo "rope_kv_append memcheck: $(tail -1 $R/rka_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_rope_kv_append racecheck $R/rka 16 60 'decode|faults|graph' > $R/rka_racecheck.txt 2>&1
echo "rope_kv_append racecheck: $(tail -1 $R/rka_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
for t in rope kv_append; do
  bash $S ./gpu_$t none $R/$t 16 40 > $R/${t}_none.txt 2>&1
  echo "$t none: $(tail -1 $R/${t}_none.txt) t=$SECONDS" >> $R/summary.txt
done; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_kv_append memcheck $R/kv_append 16 60 > $R/kv_append_memcheck.txt 2>&1
echo "kv_append memcheck: $(tail -1 $R/kv_append_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_paged none $R/paged 16 90 > $R/paged_none.txt 2>&1
echo "paged none: $(tail -1 $R/paged_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_BENCH_FILTER=bf16 B12X_BENCH_OUT=$R/bench timeout 150 ./bench_decoder_layer > $R/bench_layer.txt 2>&1; echo "bench layer rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
grep -E "/step|linears_attention|op/rope_kv_append|op/attention" $R/bench_layer.txt | cut -c1-90
for f in $R/*/none.txt $R/*/memcheck.txt $R/*/racecheck.txt; do grep -v "passed=1" $f | head -6; done 2>/dev/null
for f in $R/*/*fail*.log; do echo "== $f"; grep -E "Error|error|panicked|differs|want" $f | head -5; done 2>/dev/null | head -40
cd $OUT && tar czf r.tgz r && rm -rf r
