#!/bin/bash
# Session 35, call 1: SM120 native NVFP4 x NVFP4 (kind::mxf4nvf4), its emulated build on the H200.
# Full gpu_blockscaled_gemv profile (the new ::native_nvfp4 trials pin every native config; the
# emulator's FP4 element loop changed, so every native trial reruns), memcheck (reduced) on every
# native trial, racecheck on the small NVFP4 native trials, gpu_bsmma_probe (portable path) plain
# and under memcheck.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt
bash $S ./gpu_blockscaled_gemv none $R/full 16 150 > $R/full_none.txt 2>&1
echo "full none: $(tail -1 $R/full_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv memcheck $R/san 16 120 'native' > $R/san_memcheck.txt 2>&1
echo "memcheck: $(tail -1 $R/san_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_blockscaled_gemv racecheck $R/race 16 90 '(awkward_n129_k96_f32|tiny_1x32|awkward_n1000_bias)::Nvfp4::native' > $R/race.txt 2>&1
echo "racecheck: $(tail -1 $R/race.txt) t=$SECONDS" >> $R/summary.txt; save
bash $S ./gpu_bsmma_probe none $R/probe 8 60 > $R/probe_none.txt 2>&1
echo "probe none: $(tail -1 $R/probe_none.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_bsmma_probe memcheck $R/probe 8 60 > $R/probe_memcheck.txt 2>&1
echo "probe memcheck: $(tail -1 $R/probe_memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
cat $R/summary.txt; grep -v " rc=0 passed=1 " $R/full/none.txt | head -20
grep "native" $R/full/none.txt | sort -t' ' -k6 -n | tail -5
grep -v "passed=1" $R/san/memcheck.txt $R/race/racecheck.txt | head
for f in $R/full/*fail*.log $R/san/*fail*.log $R/race/*fail*.log $R/probe/*fail*.log; do [ -f $f ] && { echo "== $f"; grep -E "Err|error|FAILED|panicked|ERROR SUMMARY|expected|bound|hazard" $f | head -6; }; done 2>/dev/null | head -40
cd $OUT && tar czf r.tgz r && rm -rf r
