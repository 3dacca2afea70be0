#!/usr/bin/env python3
"""Prototype (not the source of any reported number): which part of the cold start costs our TMA
GEMV ~2 us after PyTorch's flush (gemv_flush_study5.py: a one-CTA launch of the same kernel on
the same x after the flush removed it) — x out of L2, or the kernel's code? After the flush:
  single   nothing              +x      x.sum() (x's lines back in L2)
  +code    the same kernel on 64 rows of another W with another x (code warm, x cold)
  +both    the same kernel on 64 rows with the same x (study 5's +warm)
F.linear gets single and +x.

    nvcc ... -o /tmp/libgemv_ext.so gemv_torch_ext.cu && python3 gemv_flush_study6.py /tmp/libgemv_ext.so
"""
import ctypes
import sys

import torch
import torch.nn.functional as F

from gemv_cross_harness import make_timer


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.gemv_ext_launch.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 7 + [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.gemv_ext_init()
    big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    sink = {}

    def cur():
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def torch_flush():
        big.zero_()
        sink["s"] = big.sum(dtype=torch.int64)

    torch.manual_seed(0)
    for n, k, m, (nt, kb, ms, sk) in [(7168, 4096, 16, (2, 8, 2, 0)), (7168, 4096, 8, (1, 8, 3, 0)),
                                      (18432, 7168, 8, (1, 8, 3, 1))]:
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        w2 = torch.randn(64, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        x2 = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ysmall = torch.empty(m, 64, device="cuda", dtype=torch.bfloat16)

        def ours():
            lib.gemv_ext_launch(w.data_ptr(), x.data_ptr(), y.data_ptr(), n, k, m, nt, kb, ms, sk, cur(), 1, 0)

        def small(xx):
            lib.gemv_ext_launch(w2.data_ptr(), xx.data_ptr(), ysmall.data_ptr(), 64, k, m, nt, kb, ms, 0, cur(), 1, 0)

        timers = {
            "single": make_timer(torch_flush, 30),
            "+x": make_timer(lambda: (torch_flush(), sink.__setitem__("x", x.sum())), 30),
            "+code": make_timer(lambda: (torch_flush(), small(x2)), 30),
            "+both": make_timer(lambda: (torch_flush(), small(x)), 30),
        }
        print(f"== N={n} K={k} M={m}, ours tma nt{nt} kb{kb} s{ms} {'sk' if sk else 'rb'}, torch flush")
        for rnd in range(2):
            row = "  ".join(f"{t}: {timer(ours):.2f}" for t, timer in timers.items())
            print(f"  round {rnd} b12x tma  {row}")
            row = "  ".join(f"{t}: {timers[t](lambda: F.linear(x, w)):.2f}" for t in ("single", "+x"))
            print(f"  round {rnd} F.linear  {row}")


if __name__ == "__main__":
    main()
