#!/usr/bin/env bash
# Whether a change leaves kernels' PTX untouched: compiles each .cu file at git revision REV (a
# temporary worktree, its own headers) and in the working tree, for sm_90a, sm_120a and sm_121a,
# with the pinned nvcc (`cargo xtask toolchain`), and compares the PTX of every entry point.
# A mend that is "PTX identical" on all three needs no new GPU run; anything else does.
#
#   bash bench/ptx_compare.sh REV b12x-quant/kernels/mx.cu b12x-norm/kernels/rmsnorm.cu ...
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NVCC=$ROOT/.b12x/toolchain/nvidia/cu13/bin/nvcc
REV=$1; shift
TMP=$(mktemp -d); trap 'git -C "$ROOT" worktree remove --force "$TMP/base" >/dev/null 2>&1 || true; rm -rf "$TMP"' EXIT
git -C "$ROOT" worktree add -q --detach "$TMP/base" "$REV"
status=0
for arch in sm_90a sm_120a sm_121a; do
  for f in "$@"; do
    b=$(basename "$f" .cu)
    for side in base new; do
      tree=$ROOT; [ $side = base ] && tree=$TMP/base
      "$NVCC" -std=c++17 -O3 --expt-relaxed-constexpr -arch=$arch -I "$tree/b12x-core/include" -ptx \
        -o "$TMP/$side-$b-$arch.ptx" "$tree/$f"
    done
    python3 - "$TMP/base-$b-$arch.ptx" "$TMP/new-$b-$arch.ptx" "$f $arch" <<'EOF' || status=1
import re, sys
def entries(path):
    text = open(path).read()
    return {m.group(1): m.group(0) for m in re.finditer(r"\.entry (\w+)\((.*?)\n}\n", text, re.S)}
a, b = entries(sys.argv[1]), entries(sys.argv[2])
diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
print(f"{sys.argv[3]}: {len(a)} entry points, " + ("PTX identical" if not diff else f"{len(diff)} differ: {', '.join(diff[:6])}"))
sys.exit(1 if diff else 0)
EOF
  done
done
exit $status
