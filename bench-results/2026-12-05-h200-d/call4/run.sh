#!/bin/bash
# Call 4 (session 47, issue 7 hardening): moe.fused_moe with the route's slots/meta read through
# L2 (__ldcg) and the fit checks counting the op's static shared memory (no config changes on
# SM90). Bundle: cargo xtask gpu-bundle --targets gpu_fused_moe
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1
cd $B/bin
nvidia-smi --query-gpu=name --format=csv > $R/gpu.txt
B12X_TEST_PROFILE=reduced bash $S ./gpu_fused_moe none $R/moe 14 150 > $R/moe_none.txt 2>&1
echo "moe none (reduced): $(tail -1 $R/moe_none.txt) t=$SECONDS" >> $R/summary.txt
[ $SECONDS -lt 230 ] && B12X_TEST_PROFILE=reduced bash $S ./gpu_fused_moe memcheck $R/mm 14 20 'packed.*(graph|replay|t40|t17)' > $R/moe_memcheck.txt 2>&1
echo "moe memcheck: $(tail -1 $R/moe_memcheck.txt) t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt $R/gpu.txt
grep -v " 0 .*passed\|rc=0" $R/moe/none.txt | head -20
cd $OUT && tar czf r.tgz r && rm -rf r
