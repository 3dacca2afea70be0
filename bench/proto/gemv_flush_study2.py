#!/usr/bin/env python3
"""Prototype (not the source of any reported number), follow-up of gemv_flush_study.py: after
PyTorch's flush (zero_ + sum of 256 MB) the library's TMA GEMV takes ~2 us longer than after a
read-only flush, while F.linear and the read probe do not. Which part of the flush, or which
preceding kernel, costs it? Variants (all in one harness, gemv_cross_harness.make_timer):
  torch      zero_ + sum (peers.py)          tsum     sum only (read-only, torch's kernel)
  k2         the project's read kernel over 256 MB (read-only)
  k2+add     k2, then a one-element torch add_  k2+tsum  k2, then a one-element torch sum
  zero+k2r   torch zero_, then the project's read kernel over the same buffer
  torch+smem torch, then a do-nothing grid holding 200 KB of shared memory per SM

    nvcc ... -o /tmp/libgemv_ext.so gemv_torch_ext.cu && python3 gemv_flush_study2.py /tmp/libgemv_ext.so [a|b]
(run b: each flush followed by a one-element torch add_, plus the GEMV without the L2 hint.)
"""
import sys

import torch
import torch.nn.functional as F

from gemv_cross_harness import Ext, TorchFlush, grid, make_timer, print_grid


def main():
    ext = Ext(sys.argv[1])
    tiny = torch.zeros(1, device="cuda")
    torch_flush = TorchFlush()
    big = torch_flush.buf
    sink = {}
    variant = sys.argv[2] if len(sys.argv) > 2 else "a"
    flushes = {
        "torch": torch_flush,
        "tsum": lambda: sink.__setitem__("s", big.sum(dtype=torch.int64)),
        "k2": lambda: ext.flush_kind(2),
        "k2+add": lambda: (ext.flush_kind(2), tiny.add_(1)),
        "k2+tsum": lambda: (ext.flush_kind(2), sink.__setitem__("s", tiny.sum())),
        "zero+k2r": lambda: (big.zero_(), ext.read(big)),
        "torch+smem": lambda: (torch_flush(), ext.smem_dummy()),
    }
    if variant == "b":
        # Run b: does a one-element kernel between any flush and the timed graph remove the cost?
        flushes = {
            "torch": torch_flush,
            "torch+add": lambda: (torch_flush(), tiny.add_(1)),
            "tsum+add": lambda: (sink.__setitem__("s", big.sum(dtype=torch.int64)), tiny.add_(1)),
            "k2+add": lambda: (ext.flush_kind(2), tiny.add_(1)),
            "k0+add": lambda: (ext.flush_kind(0), tiny.add_(1)),
            "k1+add": lambda: (ext.flush_kind(1), tiny.add_(1)),
        }
    timers = {name: make_timer(f, 30) for name, f in flushes.items()}
    torch.manual_seed(0)
    cases = [(7168, 4096, 16, (2, 8, 2, 0)), (7168, 4096, 1, (1, 8, 3, 0))]
    if variant == "b":
        cases.append((18432, 7168, 16, (2, 8, 2, 1)))
    for n, k, m, (nt, kb, ms, sk) in cases:
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        fns = {
            "F.linear": lambda: F.linear(x, w),
            "b12x ef": lambda: ext.gemv(w, x, y, n, k, m, nt, kb, ms, sk, 1),
            "read W": lambda: ext.read(w),
        }
        if variant == "b":
            fns["b12x nh"] = lambda: ext.gemv(w, x, y, n, k, m, nt, kb, ms, sk, 0)
        print(f"== N={n} K={k} M={m}, ours tma nt{nt} kb{kb} s{ms}")
        print_grid(grid(fns, timers), timers, 10, 14)


if __name__ == "__main__":
    main()
