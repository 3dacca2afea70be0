#!/bin/bash
# Builds .gpu/bundle_lf (HEAD + lf.patch: bench_fused_moe, gpu_fused_moe) for call 2, after build.sh.
# lf.patch = early.patch (FC2's early weights) + FC1 computing the route's slots from ids itself
# and streaming its first ring of weights before its PDL wait (T k <= 64), and the suite's
# T = 16 decode trials (T k above 64: FC1's waiting path).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
D=bench-results/2026-12-05-h200-b/call2
git diff --quiet -- b12x-moe b12x-gemm || { echo "b12x-moe / b12x-gemm have local changes: commit or stash them" >&2; exit 1; }
git apply "$D/lf.patch"
# keep call 3's .gpu/bundle (build.sh's last) aside while gpu-bundle writes .gpu/bundle
[ -d .gpu/bundle ] && { rm -rf .gpu/bundle_call3; mv .gpu/bundle .gpu/bundle_call3; }
cargo xtask gpu-bundle --targets bench_fused_moe,gpu_fused_moe || { git apply -R "$D/lf.patch"; exit 1; }
git apply -R "$D/lf.patch"
rm -f .gpu/bundle/bin/b12x-xtask
rm -rf .gpu/bundle_lf; mv .gpu/bundle .gpu/bundle_lf
[ -d .gpu/bundle_call3 ] && mv .gpu/bundle_call3 .gpu/bundle
du -sh .gpu/bundle_*
