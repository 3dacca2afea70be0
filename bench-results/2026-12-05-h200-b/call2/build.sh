#!/bin/bash
# Builds the bundles of calls 2 and 3 from a clean checkout of main (~30-40 min on 2 cores):
#   .gpu/bundle_base  HEAD: bench_fused_moe                                  (call 2)
#   .gpu/bundle_pf    HEAD + prefetch.patch: bench_fused_moe, gpu_fused_moe  (call 2)
#   .gpu/bundle_ew    HEAD + early.patch:    bench_fused_moe, gpu_fused_moe  (call 2)
#   .gpu/bundle       HEAD: bench_fused_moe, bench_decoder_layer, gpu_rope_kv_append (call 3)
# Each patch is taken out of the working tree again after its build. Every bundle drops the xtask
# binary (the 64 MiB carry limit). Then:
#   run(command="bash bench-results/2026-12-05-h200-b/call2/run.sh",
#       carry=[".gpu/bundle_base", ".gpu/bundle_pf", ".gpu/bundle_ew"])
#   run(command="bash bench-results/2026-12-05-h200-b/call3/run.sh", carry=[".gpu/bundle"])
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
D=bench-results/2026-12-05-h200-b/call2
git diff --quiet -- b12x-moe b12x-gemm || { echo "b12x-moe / b12x-gemm have local changes: commit or stash them" >&2; exit 1; }
bundle() {  # NAME TARGETS
  rm -rf .gpu/bundle
  cargo xtask gpu-bundle --targets "$2"
  rm -f .gpu/bundle/bin/b12x-xtask
  if [ "$1" != bundle ]; then rm -rf ".gpu/$1"; mv .gpu/bundle ".gpu/$1"; fi
}
bundle bundle_base bench_fused_moe
for v in pf:prefetch ew:early; do
  git apply "$D/${v#*:}.patch"
  bundle "bundle_${v%%:*}" bench_fused_moe,gpu_fused_moe || { git apply -R "$D/${v#*:}.patch"; exit 1; }
  git apply -R "$D/${v#*:}.patch"
done
bundle bundle bench_fused_moe,bench_decoder_layer,gpu_rope_kv_append
du -sh .gpu/bundle_base .gpu/bundle_pf .gpu/bundle_ew .gpu/bundle
echo "call 2 carries $(du -cm .gpu/bundle_base .gpu/bundle_pf .gpu/bundle_ew | tail -1 | cut -f1) MiB, call 3 $(du -sm .gpu/bundle | cut -f1) MiB (limit 64)"
