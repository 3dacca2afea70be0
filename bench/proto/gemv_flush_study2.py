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
import ctypes
import sys

import torch
import torch.nn.functional as F

from gemv_cross_harness import make_timer


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.gemv_ext_launch.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 7 + [ctypes.c_void_p, ctypes.c_int]
    lib.gemv_ext_flush_kind.argtypes = [ctypes.c_int, ctypes.c_void_p]
    lib.gemv_ext_read.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_void_p]
    lib.gemv_ext_smem_dummy.argtypes = [ctypes.c_void_p]
    lib.gemv_ext_init()
    big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    tiny = torch.zeros(1, device="cuda")
    sink = {}

    def cur():
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def torch_flush():
        big.zero_()
        sink["s"] = big.sum(dtype=torch.int64)

    variant = sys.argv[2] if len(sys.argv) > 2 else "a"
    flushes = {
        "torch": torch_flush,
        "tsum": lambda: sink.__setitem__("s", big.sum(dtype=torch.int64)),
        "k2": lambda: lib.gemv_ext_flush_kind(2, cur()),
        "k2+add": lambda: (lib.gemv_ext_flush_kind(2, cur()), tiny.add_(1)),
        "k2+tsum": lambda: (lib.gemv_ext_flush_kind(2, cur()), sink.__setitem__("s", tiny.sum())),
        "zero+k2r": lambda: (big.zero_(), lib.gemv_ext_read(big.data_ptr(), big.numel(), cur())),
        "torch+smem": lambda: (torch_flush(), lib.gemv_ext_smem_dummy(cur())),
    }
    if variant == "b":
        # Run b: does a one-element kernel between any flush and the timed graph remove the cost?
        flushes = {
            "torch": torch_flush,
            "torch+add": lambda: (torch_flush(), tiny.add_(1)),
            "tsum+add": lambda: (sink.__setitem__("s", big.sum(dtype=torch.int64)), tiny.add_(1)),
            "k2+add": lambda: (lib.gemv_ext_flush_kind(2, cur()), tiny.add_(1)),
            "k0+add": lambda: (lib.gemv_ext_flush_kind(0, cur()), tiny.add_(1)),
            "k1+add": lambda: (lib.gemv_ext_flush_kind(1, cur()), tiny.add_(1)),
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
            "b12x ef": lambda: lib.gemv_ext_launch(w.data_ptr(), x.data_ptr(), y.data_ptr(), n, k, m, nt, kb, ms, sk, cur(), 1),
            "read W": lambda: lib.gemv_ext_read(w.data_ptr(), w.numel() * 2, cur()),
        }
        if variant == "b":
            fns["b12x nh"] = lambda: lib.gemv_ext_launch(w.data_ptr(), x.data_ptr(), y.data_ptr(), n, k, m, nt, kb, ms, sk, cur(), 0)
        print(f"== N={n} K={k} M={m}, ours tma nt{nt} kb{kb} s{ms}")
        print("  " + " " * 10 + "".join(f"{t:>14s}" for t in timers))
        res = {}
        for rnd in range(2):
            for fname, fn in (list(fns.items()) if rnd == 0 else list(fns.items())[::-1]):
                for tname, timer in timers.items():
                    res.setdefault(fname, {}).setdefault(tname, []).append(timer(fn))
        for fname, row in res.items():
            print(f"  {fname:10s}" + "".join(f"{'/'.join(f'{t:.2f}' for t in ts):>14s}" for ts in row.values()))


if __name__ == "__main__":
    main()
