#!/usr/bin/env python3
"""Prototype (not the source of any reported number): the library's bf16_gemv TMA kernel
(through gemv_torch_ext.cu) and torch's F.linear (cuBLAS nvjet) timed in one process by the
same graph-replay harness (bench/peers.py's Timer), with either L2 flush: PyTorch's
(peers.py: zero_ + sum of max(256 MB, 2x L2)) or the project's (memset 2x L2 + read kernel),
plus the project's own C++ timing of our kernel. Rounds alternate the order.

    nvcc -std=c++17 -O3 -arch=sm_90a -shared -Xcompiler -fPIC -I../../b12x-core/include \
      -o /tmp/libgemv_ext.so gemv_torch_ext.cu && python3 gemv_cross_harness.py /tmp/libgemv_ext.so
"""
import ctypes
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peers import L2Flush, Timer  # noqa: E402


def make_timer(flush, samples):
    """bench/peers.py's Timer with another flush: µs of one graph replay of fn, median."""
    return Timer(samples, flush).time_us


class Ext:
    """gemv_torch_ext.cu's shared library, initialized; every call goes to torch's current stream."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        lib.gemv_ext_launch.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 7 + [ctypes.c_void_p] + [ctypes.c_int] * 2
        lib.gemv_ext_flush.argtypes = [ctypes.c_void_p]
        lib.gemv_ext_flush_kind.argtypes = [ctypes.c_int, ctypes.c_void_p]
        lib.gemv_ext_read.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_void_p]
        lib.gemv_ext_smem_dummy.argtypes = [ctypes.c_void_p]
        lib.gemv_ext_time_cpp.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 8
        lib.gemv_ext_time_cpp.restype = ctypes.c_double
        self.lib = lib
        self.sms = lib.gemv_ext_init()

    @staticmethod
    def stream():
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def gemv(self, w, x, y, n, k, m, nt, kb, stages, sk, ef=1, promo=0):
        """The library's TMA GEMV y = x W^T (config nt, kb, ring stages, stream-K when sk)."""
        self.lib.gemv_ext_launch(w.data_ptr(), x.data_ptr(), y.data_ptr(), n, k, m, nt, kb, stages, sk, self.stream(),
                                 ef, promo)

    def flush(self):
        """The project's flush before session 14 (memset 2x L2, read back with the read probe)."""
        self.lib.gemv_ext_flush(self.stream())

    def flush_kind(self, kind):
        self.lib.gemv_ext_flush_kind(kind, self.stream())

    def read(self, t):
        """The project's read probe over t's bytes."""
        self.lib.gemv_ext_read(t.data_ptr(), t.numel() * t.element_size(), self.stream())

    def smem_dummy(self):
        self.lib.gemv_ext_smem_dummy(self.stream())

    def time_cpp(self, w, x, y, n, k, m, nt, kb, stages, sk, samples):
        return self.lib.gemv_ext_time_cpp(w.data_ptr(), x.data_ptr(), y.data_ptr(), n, k, m, nt, kb, stages, sk, samples)


# bench/peers.py's flush (zero_ + sum of max(256 MB, 2x L2)), the peers' and, since session 14,
# b12x-core's EventTimer's.
TorchFlush = L2Flush


def rel_err(y, ref):
    return ((y.float() - ref).abs().max() / ref.abs().max()).item()


def add_checked(fns, name, fn, y, ref):
    """Runs fn once and adds it to fns under name if y then matches ref (else says so)."""
    fn()
    torch.cuda.synchronize()
    err = rel_err(y, ref)
    if err > 2e-2:
        print(f"  {name}: WRONG rel err {err:.3e}")
    else:
        fns[name] = fn


def grid(fns, timers, rounds=2):
    """{fn name: {timer name: [us per round]}}, every fn under every timer; odd rounds reversed."""
    res = {}
    for rnd in range(rounds):
        for fname, fn in (list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]):
            for tname, timer in timers.items():
                res.setdefault(fname, {}).setdefault(tname, []).append(timer(fn))
    return res


def print_grid(res, timers, name_width, col_width):
    print("  " + " " * name_width + "".join(f"{t:>{col_width}s}" for t in timers))
    for fname, row in res.items():
        print(f"  {fname:{name_width}s}" + "".join(f"{'/'.join(f'{t:.2f}' for t in ts):>{col_width}s}" for ts in row.values()))


def main():
    ext = Ext(sys.argv[1])
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, {ext.sms} SMs, torch {torch.__version__}, CUDA {torch.version.cuda}")
    samples = 50
    timers = {"torch-flush": make_timer(TorchFlush(), samples), "b12x-flush": make_timer(ext.flush, samples)}
    # (n, k, m, [(nt, kb, max_stages, sk)]): the library's race winners of these buckets and a neighbour.
    cases = [
        (7168, 4096, 16, [(2, 8, 2, 0), (2, 4, 5, 0)]),
        (7168, 4096, 8, [(1, 8, 3, 0), (1, 4, 6, 0)]),
        (7168, 4096, 1, [(1, 8, 3, 0)]),
        (18432, 7168, 16, [(2, 4, 5, 1), (2, 8, 2, 1)]),
        (18432, 7168, 8, [(1, 4, 6, 1), (1, 8, 3, 1)]),
    ]
    torch.manual_seed(0)
    for n, k, m, cfgs in cases:
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = F.linear(x.float(), w.float())
        fns = {"F.linear": lambda: F.linear(x, w)}
        for nt, kb, ms, sk in cfgs:
            add_checked(fns, f"b12x tma nt{nt} kb{kb} s{ms} {'sk' if sk else 'rb'}",
                        lambda cfg=(nt, kb, ms, sk): ext.gemv(w, x, y, n, k, m, *cfg), y, ref)
        print(f"== N={n} K={k} M={m} ({n * k * 2 / 1e6:.1f} MB)")
        rows = {}
        for rnd in range(3):
            order = list(fns.items())
            if rnd % 2:
                order.reverse()
            for fname, fn in order:
                for tname, timer in timers.items():
                    rows.setdefault((fname, tname), []).append(timer(fn))
            for nt, kb, ms, sk in cfgs:
                t = ext.time_cpp(w, x, y, n, k, m, nt, kb, ms, sk, 30)
                rows.setdefault((f"b12x tma nt{nt} kb{kb} s{ms} {'sk' if sk else 'rb'}", "C++ proto harness"), []).append(t)
        for (fname, tname), ts in rows.items():
            print(f"  {fname:28s} {tname:18s} " + "  ".join(f"{t:6.2f}" for t in ts) + f"   median {statistics.median(ts):6.2f} us")


if __name__ == "__main__":
    main()
