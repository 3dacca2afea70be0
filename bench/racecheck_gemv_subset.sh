#!/usr/bin/env bash
# racecheck on a subset of gpu_bf16_gemv that covers every kernel family (ring, direct, unaligned,
# SIMT, split-K merge, K tails, graph replay): the full reduced profile takes > 240 s under racecheck.
# Run from the repo root on the GPU machine, with .gpu/bundle present.
cd .gpu/bundle/bin
for f in awkward_k40 awkward_tiny deepseek_v4_router::m1 deepseek_v4_router::m64 deepseek_v4_router_f32_x::m9 unaligned_odd_k::m17 llama3_8b_o_proj::m33 graph_replay_equals_eager; do
  echo "=== racecheck gpu_bf16_gemv $f"
  B12X_TEST_PROFILE=reduced timeout -k 5 55 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_bf16_gemv --test-threads 1 "$f" 2>&1 | grep -E "^test |RACECHECK SUMMARY|Error|Race|test result"
  echo "rc=${PIPESTATUS[0]}"
done
