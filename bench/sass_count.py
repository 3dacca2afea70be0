#!/usr/bin/env python3
"""Instructions per kernel entry point, without a GPU: for issue-bound kernels (the fused
norm -> quantize outputs, the software-E2M1 quantizers) the static SASS count of a fully unrolled
entry point tracks its dynamic cost per element closely, so a change can be weighed before any
device time is spent.

    python3 bench/sass_count.py b12x-norm/kernels/rmsnorm.cu [--arch sm_90a] [--filter mxfp8_v4]
        [--base REV] [--ops 12]

Compiles the file to a cubin with the project's pinned nvcc (`cargo xtask toolchain`), reads the
SASS with cuobjdump and nvdisasm (downloaded once from PyPI into .b12x/sasstool: the pinned
toolchain does not ship them) and prints, per entry point: instructions (NOPs excluded), registers, spill bytes and
the most frequent opcodes. With --base REV the same file is also built from git revision REV
(a temporary worktree, its own headers) and each row shows the change.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NVCC = os.path.join(ROOT, ".b12x/toolchain/nvidia/cu13/bin/nvcc")
TOOL_DIR = os.path.join(ROOT, ".b12x/sasstool")
# cuobjdump -sass runs nvdisasm; 13.2 reads CUDA 13.0 cubins.
WHEELS = ["nvidia-cuda-cuobjdump==13.2.51", "nvidia-cuda-nvdisasm==13.2.51"]
BIN = os.path.join(TOOL_DIR, "nvidia/cu13/bin")
CUOBJDUMP = os.path.join(BIN, "cuobjdump")


def ensure_cuobjdump():
    if all(os.path.isfile(os.path.join(BIN, t)) for t in ("cuobjdump", "nvdisasm")):
        return
    os.makedirs(TOOL_DIR, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", TOOL_DIR, *WHEELS], check=True)
    for name in os.listdir(TOOL_DIR):
        if name.endswith(".whl"):
            with zipfile.ZipFile(os.path.join(TOOL_DIR, name)) as z:
                z.extractall(TOOL_DIR)
    for t in ("cuobjdump", "nvdisasm"):
        os.chmod(os.path.join(BIN, t), 0o755)


def build(tree, source, arch, out):
    """Compiles tree/source to the cubin `out`; returns {entry: (registers, spill bytes)}."""
    cmd = [NVCC, "-cubin", f"-arch={arch}", "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-Xptxas", "-v",
           "-I", os.path.join(tree, "b12x-core/include"), "-I", os.path.join(tree, "b12x-gemm/include"),
           "-I", os.path.join(tree, "b12x-quant/include"), "-o", out, os.path.join(tree, source)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(res.stderr)
    usage, cur = {}, None
    for line in res.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            cur = m.group(1)
            usage[cur] = [0, 0]
        m = re.search(r"(\d+) bytes spill stores", line)
        if m and cur:
            usage[cur][1] = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            usage[cur][0] = int(m.group(1))
    return usage


def count(cubin):
    """{entry: Counter of opcodes} from the cubin's SASS (predicates and modifiers dropped)."""
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    sass = subprocess.run([CUOBJDUMP, "-sass", cubin], capture_output=True, text=True, check=True, env=env).stdout
    out, cur = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            cur = m.group(1)
            out[cur] = collections.Counter()
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);", line)  # addresses grow past 4 hex digits
        if m and cur:
            op = re.sub(r"^@!?U?P\w+\s+", "", m.group(1)).split()[0].split(".")[0]
            if op != "NOP":
                out[cur][op] += 1
    return out


def measure(tree, source, arch, tmp, tag):
    cubin = os.path.join(tmp, f"{tag}.cubin")
    usage = build(tree, source, arch, cubin)
    return usage, count(cubin)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="kernel file, relative to the repo root (e.g. b12x-norm/kernels/rmsnorm.cu)")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--filter", default="", help="only entry points whose name contains this")
    ap.add_argument("--base", help="git revision to compare against")
    ap.add_argument("--ops", type=int, default=8, help="opcodes listed per entry point")
    args = ap.parse_args()
    if not os.path.isfile(NVCC):
        sys.exit("no pinned nvcc: run `cargo xtask toolchain` first")
    ensure_cuobjdump()
    with tempfile.TemporaryDirectory() as tmp:
        usage, ops = measure(ROOT, args.source, args.arch, tmp, "new")
        base = None
        if args.base:
            wt = os.path.join(tmp, "base")
            subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", wt, args.base], check=True)
            try:
                base = measure(wt, args.source, args.arch, tmp, "base")
            finally:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", wt], check=True)
        for name in sorted(ops):
            if args.filter not in name:
                continue
            n = sum(ops[name].values())
            regs, spill = usage.get(name, (0, 0))
            row = f"{name:<48} {n:6d} instr  {regs:3d} regs  {spill:4d} B spill"
            if base and name in base[1]:
                b = sum(base[1][name].values())
                row += f"  | base {b:6d} ({n - b:+d}, {100.0 * (n - b) / b:+.1f}%)"
            print(row)
            print("    " + " ".join(f"{k}:{v}" for k, v in ops[name].most_common(args.ops)))


if __name__ == "__main__":
    main()
