#!/bin/bash
# Session 37, call 2 (issue 6): attention.paged's 6-stage decode rings (_s6_n8). gpu_paged's
# stages6 / eight_row_tiles trials plain + memcheck + racecheck (stages6 only); the paged
# bench's x8 rows at B = 1 and 8 with PDL over split caps and ring depths; the layer bench's
# BF16 rows (variants incl. _pdl_r6, _pdl_s8_r6, _pdl_s16_r6).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_paged none $R/paged 16 40 'stages6|eight_row_tiles' > $R/paged_none.txt 2>&1
echo "paged none: $(tail -1 $R/paged_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_paged memcheck $R/paged 16 40 'stages6|eight_row_tiles' > $R/paged_memcheck.txt 2>&1
echo "paged memcheck: $(tail -1 $R/paged_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_paged racecheck $R/paged 16 60 'stages6' > $R/paged_racecheck.txt 2>&1
echo "paged racecheck: $(tail -1 $R/paged_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
export B12X_PAGED_BATCHES=1,8 B12X_PAGED_PDL=1 B12X_BENCH_FILTER=_x8/
for v in "default::" "cap8_s3:8:3" "cap8_s6:8:6" "cap16_s6:16:6" "s6::6" "cap4_s6:4:6"; do
  IFS=: read name cap st <<< "$v"
  env ${cap:+B12X_PAGED_SPLIT_CAP=$cap} ${st:+B12X_PAGED_STAGES=$st} B12X_BENCH_OUT=$R/paged_bench_$name timeout 60 ./bench_paged > $R/paged_bench_$name.txt 2>&1
  echo "paged bench $name rc=$? t=$SECONDS" >> $R/summary.txt
done; save
unset B12X_PAGED_BATCHES B12X_PAGED_PDL
B12X_BENCH_FILTER=bf16 B12X_BENCH_OUT=$R/bench timeout 200 ./bench_decoder_layer > $R/bench_layer.txt 2>&1; echo "bench layer rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
for f in $R/paged_bench_*.txt; do echo "== $f"; grep -E "x8/" $f | cut -c1-110; done
grep -E "/step|linears_attention" $R/bench_layer.txt | cut -c1-90
for f in $R/paged/*.txt; do grep -v "passed=1" $f | head -8; done 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
