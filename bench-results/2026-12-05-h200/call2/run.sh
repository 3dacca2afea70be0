#!/bin/bash
# Session 42, call 2: route_topk's suite again (the oracle's infinite-key fix), the packed path's
# allocation trial alone three times (plain and with eager module loading), then memcheck and
# racecheck on gpu_fused_moe's small trials (reduced profile) with the time left.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_route_topk none $R/rt 8 60 > $R/rt_none.txt 2>&1
echo "route_topk none: $(tail -1 $R/rt_none.txt) t=$SECONDS" >> $R/summary.txt; save
for i in 1 2 3; do ./gpu_fused_moe --exact packed::run_allocates_nothing >> $R/alloc.txt 2>&1; echo "alloc plain $i rc=$?" >> $R/summary.txt; done
for i in 1 2; do CUDA_MODULE_LOADING=EAGER ./gpu_fused_moe --exact packed::run_allocates_nothing >> $R/alloc.txt 2>&1; echo "alloc eager $i rc=$?" >> $R/summary.txt; done
./gpu_fused_moe --exact simple::run_allocates_nothing >> $R/alloc.txt 2>&1; echo "alloc simple rc=$?" >> $R/summary.txt; save
left=$((540 - SECONDS))
B12X_TEST_PROFILE=reduced bash $S ./gpu_fused_moe memcheck $R/fm 16 $((left / 2 - 60)) 'tiny::(w4a16_nvfp4|w4a8_mx|nvfp4)_(silu|oai7)|routing|bad|graph|logits' > $R/fm_memcheck.txt 2>&1
echo "fused_moe memcheck: $(tail -1 $R/fm_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
left=$((540 - SECONDS))
B12X_TEST_PROFILE=reduced bash $S ./gpu_fused_moe racecheck $R/fmr 16 $((left - 130)) 'tiny::(w4a16_nvfp4|w4a8_mx)_silu::t(1|8|64)|graph|bad_ids' > $R/fm_racecheck.txt 2>&1
echo "fused_moe racecheck: $(tail -1 $R/fm_racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt
grep -h "changed from" $R/alloc.txt | head
for f in $R/fm/memcheck_fail_*.log $R/fmr/racecheck_fail_*.log $R/rt/none_fail_*.log; do [ -f $f ] && { echo "== $f"; grep -v "^$" $f | head -12; }; done 2>/dev/null | head -60
cd $OUT && tar czf r.tgz r && rm -rf r
