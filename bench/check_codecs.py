#!/usr/bin/env python3
"""Compares b12x's element codes with PyTorch's and ml_dtypes' casts (formats.md cross-check).

    cargo run -p b12x-quant --example codec_dump -- /tmp/codec_dump.bin
    python3 bench/check_codecs.py /tmp/codec_dump.bin

The dump holds the CPU codec's codes; the GPU quantizers equal them bit for bit (their GPU
suites check that), so agreeing here means the GPU codes agree too. Compared only where the
references follow the same rule as formats.md:
- E4M3 vs torch.float8_e4m3fn and ml_dtypes.float8_e4m3fn on finite |x| < 464 (beyond that they
  give NaN where b12x and CUDA saturate to 448);
- E5M2 vs torch.float8_e5m2 and ml_dtypes.float8_e5m2 on finite |x| < 61440 (beyond: Inf);
- E2M1 vs ml_dtypes.float4_e2m1fn on finite |x| <= 6.
Exit status 1 on any mismatch; a reference that is not installed is reported as skipped.
"""

import struct
import sys

import numpy as np


def load(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    off = 8
    xs = np.frombuffer(data, dtype="<f4", count=n, offset=off)
    off += 4 * n
    codes = [np.frombuffer(data, dtype=np.uint8, count=n, offset=off + i * n) for i in range(3)]
    return xs, codes


def compare(name, xs, ours, theirs, mask):
    bad = np.nonzero(mask & (ours != theirs))[0]
    print(f"{name}: {int(mask.sum())} inputs compared, {len(bad)} differ")
    for i in bad[:8]:
        print(f"    x={xs[i]!r} ({xs[i].view(np.uint32):#010x}): b12x {ours[i]:#04x}, reference {theirs[i]:#04x}")
    return len(bad) == 0


def main():
    xs, (e4m3, e5m2, e2m1) = load(sys.argv[1] if len(sys.argv) > 1 else "codec_dump.bin")
    finite = np.isfinite(xs)
    ax = np.abs(np.where(finite, xs, 0))
    ok = True
    ran = 0
    np.seterr(invalid="ignore")  # NaN/Inf inputs cast to NaN codes: expected, masked out below
    try:
        import ml_dtypes

        ref = xs.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        ok &= compare("E4M3 vs ml_dtypes", xs, e4m3, ref, finite & (ax < 464))
        ref = xs.astype(ml_dtypes.float8_e5m2).view(np.uint8)
        ok &= compare("E5M2 vs ml_dtypes", xs, e5m2, ref, finite & (ax < 61440))
        ref = xs.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
        ok &= compare("E2M1 vs ml_dtypes", xs, e2m1, ref, finite & (ax <= 6))
        ran += 1
    except ImportError:
        print("ml_dtypes not installed: skipped")
    try:
        import torch

        t = torch.from_numpy(xs.copy())
        ref = t.to(torch.float8_e4m3fn).view(torch.uint8).numpy()
        ok &= compare("E4M3 vs torch", xs, e4m3, ref, finite & (ax < 464))
        ref = t.to(torch.float8_e5m2).view(torch.uint8).numpy()
        ok &= compare("E5M2 vs torch", xs, e5m2, ref, finite & (ax < 61440))
        ran += 1
    except ImportError:
        print("torch not installed: skipped")
    if ran == 0:
        print("no reference installed: nothing compared")
        sys.exit(2)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
