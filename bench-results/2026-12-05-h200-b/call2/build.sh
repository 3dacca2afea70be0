#!/bin/bash
# Builds the two bundles run.sh carries, from a clean checkout of main (~10-20 min on 2 cores):
# .gpu/bundle_base = HEAD's bench_fused_moe; .gpu/bundle = HEAD + prefetch.patch (the four
# binaries run.sh uses; the xtask binary dropped for the 64 MiB carry limit). The patch is taken
# out of the working tree again at the end. Then: run(command="bash bench-results/2026-12-05-h200-b/call2/run.sh",
# carry=[".gpu/bundle", ".gpu/bundle_base"]).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
D=bench-results/2026-12-05-h200-b/call2
git diff --quiet -- b12x-moe || { echo "b12x-moe has local changes: commit or stash them first" >&2; exit 1; }
rm -rf .gpu/bundle .gpu/bundle_base
cargo xtask gpu-bundle --targets bench_fused_moe
mv .gpu/bundle .gpu/bundle_base
rm -f .gpu/bundle_base/bin/b12x-xtask
git apply $D/prefetch.patch
trap 'git apply -R $D/prefetch.patch' EXIT
cargo xtask gpu-bundle --targets bench_fused_moe,gpu_fused_moe,bench_decoder_layer,gpu_rope_kv_append
rm -f .gpu/bundle/bin/b12x-xtask
du -sh .gpu/bundle .gpu/bundle_base
