#!/usr/bin/env python3
"""Prototype (not the source of any reported number): how the L2 flush before each sample
changes a graph-replayed GEMV's time — F.linear (cuBLAS nvjet), the library's TMA kernel with
and without the L2 evict-first hint on W, and the project's read probe over W's bytes — all in
one process and one harness (gemv_cross_harness.make_timer), flushes:
  torch  peers.py's: zero_ + sum of a 256 MB buffer
  k0     the project's EventTimer: memset 2x L2 (0x5a), read it back
  k1     memset 256 MB, read it back
  k2     read 256 MB only (no write)
  k3     memset 2x L2 only (leaves dirty lines)
  k4     k0, then a read of another 256 MB

    nvcc -std=c++17 -O3 -arch=sm_90a -shared -Xcompiler -fPIC -I../../b12x-core/include \
      -o /tmp/libgemv_ext.so gemv_torch_ext.cu && python3 gemv_flush_study.py /tmp/libgemv_ext.so
"""
import sys

import torch
import torch.nn.functional as F

from gemv_cross_harness import Ext, TorchFlush, add_checked, grid, make_timer, print_grid


def main():
    ext = Ext(sys.argv[1])
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, L2 {getattr(props, 'L2_cache_size', 0) / 2**20:.0f} MiB, torch {torch.__version__}")
    flushes = {"torch": TorchFlush()}
    for kind in range(5):
        flushes[f"k{kind}"] = lambda kind=kind: ext.flush_kind(kind)
    timers = {name: make_timer(f, 30) for name, f in flushes.items()}
    cases = [(7168, 4096, 16, (2, 8, 2, 0)), (7168, 4096, 1, (1, 8, 3, 0)), (18432, 7168, 16, (2, 8, 2, 1))]
    torch.manual_seed(0)
    for n, k, m, (nt, kb, ms, sk) in cases:
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = F.linear(x.float(), w.float())
        fns = {"F.linear": lambda: F.linear(x, w)}
        for ef in (1, 0):
            add_checked(fns, f"b12x {'ef' if ef else 'nh'}", lambda ef=ef: ext.gemv(w, x, y, n, k, m, nt, kb, ms, sk, ef), y, ref)
        fns["read W"] = lambda: ext.read(w)
        print(f"== N={n} K={k} M={m} ({n * k * 2 / 1e6:.1f} MB), ours tma nt{nt} kb{kb} s{ms} {'sk' if sk else 'rb'}")
        print_grid(grid(fns, timers), timers, 10, 16)


if __name__ == "__main__":
    main()
