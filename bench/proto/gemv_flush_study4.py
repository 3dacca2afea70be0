#!/usr/bin/env python3
"""Prototype (not the source of any reported number): the library's TMA GEMV re-tuned under
PyTorch's flush (zero_ + sum of 256 MB: a clean L2 of normal-priority lines), against F.linear
and the read probe in the same harness: stage shape (64-k boxes per stage x stages, down to
nvjet's 1 x 16), the L2 evict-first hint on W, and the tensor maps' L2 promotion.

    nvcc ... -o /tmp/libgemv_ext.so gemv_torch_ext.cu && python3 gemv_flush_study4.py /tmp/libgemv_ext.so
"""
import ctypes
import sys

import torch
import torch.nn.functional as F

from gemv_cross_harness import make_timer


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.gemv_ext_launch.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 7 + [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.gemv_ext_read.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_void_p]
    lib.gemv_ext_init()
    big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    sink = {}

    def cur():
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def torch_flush():
        big.zero_()
        sink["s"] = big.sum(dtype=torch.int64)

    timer = make_timer(torch_flush, 30)
    torch.manual_seed(0)
    for n, k, m, sk in [(7168, 4096, 16, 0), (7168, 4096, 8, 0), (18432, 7168, 16, 1), (4096, 7168, 16, 0)]:
        nt = 2 if m > 8 else 1
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = F.linear(x.float(), w.float())
        fns = {"F.linear": lambda: F.linear(x, w), "read W": lambda: lib.gemv_ext_read(w.data_ptr(), w.numel() * 2, cur())}
        for kb, ms in [(8, 2), (4, 5), (2, 10), (1, 16)]:
            for ef in (1, 0):
                for promo in (0, 2):
                    def ours(kb=kb, ms=ms, ef=ef, promo=promo):
                        lib.gemv_ext_launch(w.data_ptr(), x.data_ptr(), y.data_ptr(), n, k, m, nt, kb, ms, sk, cur(), ef, promo)
                    ours()
                    torch.cuda.synchronize()
                    err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
                    name = f"kb{kb} s{ms} {'ef' if ef else 'nh'} p{promo}"
                    if err > 2e-2:
                        print(f"  {name}: WRONG {err:.3e}")
                        continue
                    fns[name] = ours
        print(f"== N={n} K={k} M={m} {'sk' if sk else 'rb'} nt{nt}, torch flush")
        res = {}
        for rnd in range(2):
            for fname, fn in (list(fns.items()) if rnd == 0 else list(fns.items())[::-1]):
                res.setdefault(fname, []).append(timer(fn))
        for fname, ts in res.items():
            print(f"  {fname:18s} " + " / ".join(f"{t:.2f}" for t in ts))


if __name__ == "__main__":
    main()
