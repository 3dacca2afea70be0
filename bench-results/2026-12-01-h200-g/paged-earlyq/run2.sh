#!/bin/bash
# Session 17, call 10: the sanitizers on the 16-row-tile trials (extend_padded: every model and
# dtype; the E4M3 16-row entry points' PTX also changed with the Q-load split), reduced profile,
# same bundle as call 9. From the repo root.
R=$OUT/r; mkdir -p $R; cd .gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_TEST_PROFILE=reduced
timeout 130 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_paged --test-threads 1 extend_padded > $R/memcheck_extend.log 2>&1; echo "memcheck extend_padded rc=$?" >> $R/rc2.txt
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged --test-threads 1 e4m3::extend_padded > $R/racecheck_extend_e4m3.log 2>&1; echo "racecheck e4m3::extend_padded rc=$?" >> $R/rc2.txt
