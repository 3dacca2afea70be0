#!/bin/bash
# Session 12, call h: the two attention.paged trials never run on a GPU (merge_paths::group16_e4m3,
# ::d96_f16_extend_stages3) and racecheck over the whole merge_paths group (timed out in session 11).
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
S=$(date +%s)
cd bin
timeout 120 ./gpu_paged merge_paths --test-threads 1 > $R/gpu_paged_merge_paths.log 2>&1; echo "gpu_paged merge_paths rc=$? $(grep 'test result' $R/gpu_paged_merge_paths.log) t=$(( $(date +%s) - S ))s"
grep -E "group16_e4m3|d96_f16_extend_stages3|FAILED" $R/gpu_paged_merge_paths.log | head
B12X_TEST_PROFILE=reduced timeout 330 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged merge_paths --test-threads 1 > $R/racecheck_merge_paths.log 2>&1
echo "racecheck merge_paths rc=$? $(grep -E 'RACECHECK SUMMARY|test result' $R/racecheck_merge_paths.log | tr '\n' ' ') t=$(( $(date +%s) - S ))s"
grep -E "^test " $R/racecheck_merge_paths.log | tail -3
cd $OUT && tar czf r.tgz r
