#!/usr/bin/env python3
"""Prototype (not the source of any reported number): what bench/peers.py's Timer charges a
graph-replayed call that does almost nothing (a one-element add), and torch's
F.linear at M = 16, N = 7168, K = 4096, replayed on the current (legacy default) stream as
peers.py does and on a side stream. Pairs with graph_overhead_proto.cu.

    python3 graph_overhead_torch.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peers import Timer  # noqa: E402


def main():
    timer = Timer(50)
    tiny = torch.zeros(1, device="cuda")
    x = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(7168, 4096, device="cuda", dtype=torch.bfloat16)
    for p in range(2):
        print(f"pass {p}: one-element add, current stream: {timer.time_us(lambda: tiny.add_(1)):.2f} us")
        print(f"pass {p}: F.linear M16 7168x4096, current stream: {timer.time_us(lambda: F.linear(x, w)):.2f} us")
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            print(f"pass {p}: one-element add, side stream: {timer.time_us(lambda: tiny.add_(1)):.2f} us")
            print(f"pass {p}: F.linear M16 7168x4096, side stream: {timer.time_us(lambda: F.linear(x, w)):.2f} us")


if __name__ == "__main__":
    main()
