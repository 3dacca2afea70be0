#!/bin/bash
# Session 14: the new flush kernels (b12x_flush_fill, b12x_flush_read) under compute-sanitizer,
# through gpu_session (its races time every candidate with EventTimer). Bundle of ed3d502, from
# the repo root on the device.
cd .gpu/bundle/bin && export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_TEST_PROFILE=reduced && (timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_session --test-threads 1 2>&1 | tail -8; echo "memcheck rc=${PIPESTATUS[0]}"; timeout 100 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_session --test-threads 1 2>&1 | tail -6; echo "racecheck rc=${PIPESTATUS[0]}") | tee $OUT/sanitizer-gpu_session.log
