#!/bin/bash
# Session 17, call 11: memcheck on the whole reduced gpu_paged suite, racecheck on its decode
# trials; same bundle as call 9. From the repo root.
R=$OUT/r; mkdir -p $R; cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_TEST_PROFILE=reduced
timeout 140 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_paged --test-threads 1 > $R/memcheck_all.log 2>&1; echo "memcheck all rc=$?" >> $R/rc3.txt
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged --test-threads 1 ::decode_b > $R/racecheck_decode.log 2>&1; echo "racecheck ::decode_b rc=$?" >> $R/rc3.txt
