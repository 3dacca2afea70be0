#!/usr/bin/env python3
"""Prototype (not the source of any reported number): after PyTorch's flush our TMA GEMV takes
~2.5 us longer in PyTorch's harness (21.4 us at M = 16, 7168x4096) than in the project's Rust
bench with the equivalent flush (18.8 us), while F.linear takes 19.0-19.4. Is it a cold start
(the kernel's code and descriptors out of L2 after the flush)? Mode `warm` (flush5.txt), timed
under PyTorch's flush:
  single       one call (as before)
  +warm        the flush, then the same kernel on a 64-row problem (its code back in L2), then the call
  x8           8 back-to-back calls on 8 distinct W per replay (time / 8: the decode-graph steady state)
for our kernel and F.linear (its warm-up: F.linear on 64 rows of W, whatever kernel cuBLAS picks).

Mode `code` (flush6.txt): which part of that cold start costs our kernel ~2 us (mode warm: a
one-CTA launch of the same kernel on the same x after the flush removed it) — x out of L2, or
the kernel's code? After the flush:
  single   nothing              +x      x.sum() (x's lines back in L2)
  +code    the same kernel on 64 rows of another W with another x (code warm, x cold)
  +both    the same kernel on 64 rows with the same x (study 5's +warm)
F.linear gets single and +x.

    nvcc ... -o /tmp/libgemv_ext.so gemv_torch_ext.cu && python3 gemv_flush_study5.py /tmp/libgemv_ext.so [warm|code]
"""
import sys

import torch
import torch.nn.functional as F

from gemv_cross_harness import Ext, TorchFlush, make_timer


def warm(ext, torch_flush, sink):
    """Mode warm (flush5.txt): single, +warm, x8."""
    for n, k, m, (nt, kb, ms, sk) in [(7168, 4096, 16, (2, 8, 2, 0)), (7168, 4096, 8, (1, 8, 3, 0)),
                                      (18432, 7168, 16, (2, 8, 2, 1))]:
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        ys = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
        ysmall = torch.empty(m, 64, device="cuda", dtype=torch.bfloat16)

        def ours(i=0):
            ext.gemv(ws[i], x, ys[i], n, k, m, nt, kb, ms, sk)

        def ours_warm():  # the same kernel instantiation on 64 rows (one row block)
            ext.gemv(ws[1], x, ysmall, 64, k, m, nt, kb, ms, 0)

        def lin_warm():
            sink["w"] = F.linear(x, ws[1][:64])

        timers = {
            "single": make_timer(torch_flush, 30),
            "+warm ours": make_timer(lambda: (torch_flush(), ours_warm()), 30),
            "+warm F.linear": make_timer(lambda: (torch_flush(), lin_warm()), 30),
        }
        x8 = make_timer(torch_flush, 30)
        fns = {"F.linear": lambda: F.linear(x, ws[0]), "b12x tma": ours}
        print(f"== N={n} K={k} M={m}, ours tma nt{nt} kb{kb} s{ms} {'sk' if sk else 'rb'}, torch flush")
        for rnd in range(2):
            for fname, fn in fns.items():
                row = [f"{t}: {timer(fn):.2f}" for t, timer in timers.items()]
                if fname == "F.linear":
                    t8 = x8(lambda: [F.linear(x, ws[i]) for i in range(8)]) / 8
                else:
                    t8 = x8(lambda: [ours(i) for i in range(8)]) / 8
                print(f"  round {rnd} {fname:9s} " + "  ".join(row) + f"  x8: {t8:.2f}")


def code(ext, torch_flush, sink):
    """Mode code (flush6.txt): single, +x, +code, +both."""
    for n, k, m, (nt, kb, ms, sk) in [(7168, 4096, 16, (2, 8, 2, 0)), (7168, 4096, 8, (1, 8, 3, 0)),
                                      (18432, 7168, 8, (1, 8, 3, 1))]:
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        w2 = torch.randn(64, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        x2 = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ysmall = torch.empty(m, 64, device="cuda", dtype=torch.bfloat16)

        def ours():
            ext.gemv(w, x, y, n, k, m, nt, kb, ms, sk)

        def small(xx):
            ext.gemv(w2, xx, ysmall, 64, k, m, nt, kb, ms, 0)

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


def main():
    ext = Ext(sys.argv[1])
    torch.manual_seed(0)
    mode = sys.argv[2] if len(sys.argv) > 2 else "warm"
    {"warm": warm, "code": code}[mode](ext, TorchFlush(), {})


if __name__ == "__main__":
    main()
