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
import ctypes
import statistics
import sys

import torch
import torch.nn.functional as F

from gemv_cross_harness import make_timer


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.gemv_ext_launch.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 7 + [ctypes.c_void_p, ctypes.c_int]
    lib.gemv_ext_flush_kind.argtypes = [ctypes.c_int, ctypes.c_void_p]
    lib.gemv_ext_read.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_void_p]
    lib.gemv_ext_init()
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, L2 {getattr(props, 'L2_cache_size', 0) / 2**20:.0f} MiB, torch {torch.__version__}")
    big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    sink = {}

    def cur():
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def torch_flush():
        big.zero_()
        sink["s"] = big.sum(dtype=torch.int64)

    flushes = {"torch": torch_flush}
    for kind in range(5):
        flushes[f"k{kind}"] = lambda kind=kind: lib.gemv_ext_flush_kind(kind, cur())
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
            def ours(ef=ef):
                lib.gemv_ext_launch(w.data_ptr(), x.data_ptr(), y.data_ptr(), n, k, m, nt, kb, ms, sk, cur(), ef)
                return y
            ours()
            torch.cuda.synchronize()
            err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
            assert err < 2e-2, err
            fns[f"b12x {'ef' if ef else 'nh'}"] = ours
        fns["read W"] = lambda: lib.gemv_ext_read(w.data_ptr(), w.numel() * 2, cur())
        print(f"== N={n} K={k} M={m} ({n * k * 2 / 1e6:.1f} MB), ours tma nt{nt} kb{kb} s{ms} {'sk' if sk else 'rb'}")
        print("  " + " " * 10 + "".join(f"{t:>16s}" for t in timers))
        res = {}
        for rnd in range(2):
            for fname, fn in (list(fns.items()) if rnd == 0 else list(fns.items())[::-1]):
                for tname, timer in timers.items():
                    res.setdefault(fname, {}).setdefault(tname, []).append(timer(fn))
        for fname, row in res.items():
            print(f"  {fname:10s}" + "".join(f"{'/'.join(f'{t:.2f}' for t in ts):>16s}" for ts in row.values()))


if __name__ == "__main__":
    main()
