#!/usr/bin/env python3
"""Prototype (not the source of any reported number): the library's TMA GEMV re-tuned under
PyTorch's flush (zero_ + sum of 256 MB: a clean L2 of normal-priority lines), against F.linear
and the read probe in the same harness: stage shape (64-k boxes per stage x stages, down to
nvjet's 1 x 16), the L2 evict-first hint on W, and the tensor maps' L2 promotion.

    nvcc ... -o /tmp/libgemv_ext.so gemv_torch_ext.cu && python3 gemv_flush_study4.py /tmp/libgemv_ext.so
"""
import sys

import torch
import torch.nn.functional as F

from gemv_cross_harness import Ext, TorchFlush, add_checked, grid, make_timer


def main():
    ext = Ext(sys.argv[1])
    timer = make_timer(TorchFlush(), 30)
    torch.manual_seed(0)
    for n, k, m, sk in [(7168, 4096, 16, 0), (7168, 4096, 8, 0), (18432, 7168, 16, 1), (4096, 7168, 16, 0)]:
        nt = 2 if m > 8 else 1
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = F.linear(x.float(), w.float())
        fns = {"F.linear": lambda: F.linear(x, w), "read W": lambda: ext.read(w)}
        for kb, ms in [(8, 2), (4, 5), (2, 10), (1, 16)]:
            for ef in (1, 0):
                for promo in (0, 2):
                    add_checked(fns, f"kb{kb} s{ms} {'ef' if ef else 'nh'} p{promo}",
                                lambda c=(kb, ms, sk, ef, promo): ext.gemv(w, x, y, n, k, m, nt, c[0], c[1], c[2], c[3], c[4]),
                                y, ref)
        print(f"== N={n} K={k} M={m} {'sk' if sk else 'rb'} nt{nt}, torch flush")
        for fname, row in grid(fns, {"torch": timer}).items():
            print(f"  {fname:18s} " + " / ".join(f"{t:.2f}" for t in row["torch"]))


if __name__ == "__main__":
    main()
