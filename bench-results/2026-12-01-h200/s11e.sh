#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_TEST_PROFILE=reduced
S=$(date +%s)
timeout 250 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_paged --test-threads 1 > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|test result' $R/memcheck.log | tr '\n' ' ') t=$(( $(date +%s) - S ))s"
for f in merge_paths llama3_8b::bf16_bf16::decode_b; do
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged --test-threads 1 $f > $R/racecheck_${f%%::*}.log 2>&1; echo "racecheck $f rc=$? $(grep -E 'RACECHECK SUMMARY|test result' $R/racecheck_${f%%::*}.log | tr '\n' ' ') t=$(( $(date +%s) - S ))s"
done
tail -3 $R/memcheck.log; tail -3 $R/racecheck_*.log
cd $OUT && tar czf r.tgz r
