#!/usr/bin/env python3
"""PyTorch peers for the b12x benchmarks, timed with the project's method (DESIGN.md §7).

    python3 peers.py OUT.json [--quick] [--only SUBSTRING]

Each sample is one replay of a CUDA graph holding one op call; before each sample (outside the
timed events) the L2 is flushed by zero-filling a buffer of max(256 MiB, 2 x L2) bytes and reading it back (no dirty lines left to write back during the sample); the
result is the median of the samples. Inputs are random normal (seeded), never zeros.

The case keys are the b12x bench case names, so `B12X_PEER_JSON=OUT.json` lets the Rust benches
put the peer next to each row:

    { "<case>": {"name": "<peer>", "us": <median us>, "samples": n}, ..., "_meta": {...} }

Cases `bf16_gemv_x8/...` (every GEMV shape but the LM head) time a decode graph's steady state:
each replayed graph holds 8 back-to-back calls, each on its own copy of W (cold weights, as
consecutive layers); the value is the sample's median / 8, as in the Rust bench's `_x8` rows.

Cases `paged_decode_x8/B{b}_ctx{c}` (K + V of one call ≤ 512 MB) time 8 back-to-back SDPA calls,
each on its own contiguous K/V, per replay (the Rust paged bench's `_x8` rows).

Cases `rmsnorm_x8/T4096_D{4096,7168}_bf16` time 8 back-to-back `F.rms_norm` calls on distinct x per
replay the same way (the Rust rmsnorm bench's `_x8` rows).

Cases `varlen_prefill/S{S}` (causal) and `varlen_prefill/S4096_full` (not) time SDPA with
`enable_gqa=True` on one sequence, q [1, 32, S, 128] and k/v [1, 8, S, 128] BF16, as the Rust
varlen bench's prefill rows.

Cases `kv_append/{decode_B{b},prefill_T{t}}_{bf16,e4m3}` write k and v `[T, 8, 128]` BF16 into
paged caches (P = 16, scattered pages, as the Rust kv_append bench) with `index_copy_` at slot
ids computed on the host from the same page table; the E4M3 rows divide by the request's scales
and cast to `float8_e4m3fn` first.

Cases `blockscaled_prefill_bf16/M{m}_N{n}_K{k}` (F.linear) and `blockscaled_prefill_fp8/M{m}_N{n}_K{k}`
(torch._scaled_mm, per-tensor FP8) are the peers of gemm.blockscaled's tiled (middle / prefill) rows.
Cases `blockscaled_w4a16/M{m}_N{n}_K{k}_bf16` time `F.linear` (cuBLAS BF16) on a BF16 weight of the
W4A16 rows' shape: the issue's peer for gemm.blockscaled's decode path (cuBLAS on the dequantized
weight; the values do not change its speed). Cases `blockscaled_fp8_scaled_mm/M16_N{n}_K{k}`
time `torch._scaled_mm` (cuBLASLt FP8) on E4M3 x and W of the same shapes with per-tensor scales,
BF16 out: the issue's FP8 peer of the W8A16 rows at M = 16 (the W8A16 bench adds a second row per
M = 16 case against it).

Cases `silu_and_mul/T{t}_I{i}_bf16` time `F.silu(x[:, :I]) * x[:, I:]` on x [T, 2I] BF16 (two
kernels; the Rust silu_and_mul bench's plain rows).

--quick keeps every case (the benches pick their own subset) and takes 30 samples instead of 50.
"""

import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F

GEMV_M = [1, 2, 4, 8, 16]
GEMV_NK_BF16 = [(4096, 7168), (7168, 4096), (18432, 7168), (1024, 4096), (129280, 7168)]
GEMV_NK_F32 = [(384, 7168)]  # the FP32-output router GEMV
RMS_T = [1, 8, 128, 4096, 32768]
RMS_D = [4096, 7168]
RMS_EPS = 1e-6
RMS_X8_T = [4096]  # token counts of the rmsnorm_x8 cases
CALLS = 8  # back-to-back calls per replay in the bf16_gemv_x8 cases
W4A16_NK = [(18432, 7168), (36864, 7168), (7168, 18432), (4096, 7168), (7168, 2048)]  # blockscaled_w4a16
PREFILL_NK = [(7168, 7168), (18432, 7168)]  # blockscaled_prefill_{bf16,fp8}: gemm.blockscaled's tiled path
PREFILL_M = [64, 256, 2048, 8192]
CALLS_MAX_W_BYTES = 1 << 30  # the x8 cases leave out the LM head
SILU_T = [1, 8, 64, 4096, 32768]  # silu_and_mul
SILU_I = [12288, 18432]

LINEAR = "torch.nn.functional.linear (cuBLAS)"
SCALED_MM = "torch._scaled_mm (cuBLASLt FP8 E4M3, per-tensor scales)"
MM_F32 = "torch.mm(bf16, out_dtype=float32) (cuBLAS)"
LINEAR_F32 = "torch.nn.functional.linear(x.float(), W_f32) (cuBLAS fp32; W cast once)"
RMS = "torch.nn.functional.rms_norm"
# attention.paged decode (b12x-attention/benches/paged.rs): Llama-3-8B heads, contiguous BF16 K/V.
DECODE_B = [8, 32, 128]
DECODE_CTX = [2048, 8192, 32768]
DECODE_H, DECODE_HKV, DECODE_D = 32, 8, 128
SDPA = "torch.nn.functional.scaled_dot_product_attention (q_len 1, enable_gqa, contiguous BF16 K/V)"
DECODE_X8_MAX_KV_BYTES = 512 << 20  # the paged_decode_x8 cases: K + V of one call at most this
# attention.kv_append (b12x-attention/benches/kv_append.rs): Llama-3-8B KV heads, P = 16, scattered pages.
APPEND_HKV, APPEND_D, APPEND_P = 8, 128, 16
APPEND_DECODE_B = [1, 8, 32, 128]
APPEND_DECODE_CTX = 2048
APPEND_PREFILL_T = [4096, 65536]
APPEND_SCALE = 0.01
APPEND = "torch index_copy_ of k and v at host-computed slot ids"
APPEND_E4M3 = "k / scale, v / scale, .to(float8_e4m3fn), then index_copy_ at host-computed slot ids"
# attention.varlen prefill (b12x-attention/benches/varlen.rs): one sequence, Llama-3-8B heads, BF16.
PREFILL_S = [1024, 4096, 16384]
PREFILL_FULL_S = 4096  # the non-causal case
PREFILL_H, PREFILL_HKV, PREFILL_D = 32, 8, 128
SDPA_PREFILL = "torch.nn.functional.scaled_dot_product_attention (enable_gqa, BF16 [1, H, S, D])"


def back_to_back(fns):
    """One callable making the calls `fns` in order (the x8 cases' graph body); returns the last
    call's output."""

    def chain():
        for f in fns[:-1]:
            f()
        return fns[-1]()

    return chain


class L2Flush:
    """Zero-fills a buffer of max(256 MiB, 2 x L2) bytes and reads it back: leaves only clean
    lines in L2, so the timed op pays no write-backs (b12x-core's EventTimer flushes the same way)."""

    def __init__(self):
        props = torch.cuda.get_device_properties(0)
        l2 = getattr(props, "L2_cache_size", 0) or 0
        self.buf = torch.empty(max(256 << 20, 2 * l2), dtype=torch.uint8, device="cuda")
        self.sum = None

    def __call__(self):
        self.buf.zero_()
        self.sum = self.buf.sum(dtype=torch.int64)


class Timer:
    """Graph replay between CUDA events, L2 flushed before each sample (`flush`: any callable
    enqueuing work on the current stream; default L2Flush)."""

    def __init__(self, samples, flush=None):
        self.flush = flush or L2Flush()
        self.samples = samples
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def time_us(self, fn, calls=1):
        """Median µs of one replay of a graph holding fn() (which makes `calls` op calls), / calls."""
        # Warm up on a side stream (cuBLAS handles/workspaces), then capture one call.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                out = fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn()
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
        if isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
            raise RuntimeError("peer produced non-finite output")
        times = []
        for _ in range(self.samples):
            self.flush()
            self.start.record()
            graph.replay()
            self.end.record()
            self.end.synchronize()
            times.append(self.start.elapsed_time(self.end) * 1e3)
        del graph, out
        return statistics.median(times) / calls


def router_fn(x, w):
    """FP32-output GEMV as cuBLAS does it: bf16 inputs, fp32 output (falls back to fp32 GEMM)."""
    try:
        out = torch.mm(x, w.t(), out_dtype=torch.float32)
        if out.dtype == torch.float32:
            return MM_F32, lambda: torch.mm(x, w.t(), out_dtype=torch.float32)
    except (TypeError, RuntimeError, NotImplementedError):
        pass
    w32 = w.float()
    return LINEAR_F32, lambda: F.linear(x.float(), w32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="output JSON path")
    ap.add_argument("--quick", action="store_true", help="30 samples instead of 50 (same cases)")
    ap.add_argument("--only", default="", help="only cases whose key contains this substring")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("peers.py: no CUDA device visible to torch")
    torch.manual_seed(0)
    timer = Timer(30 if args.quick else 50)
    dev = "cuda"
    results = {}

    def add(key, name, fn, calls=1):
        if args.only and args.only not in key:
            return
        us = timer.time_us(fn, calls)
        results[key] = {"name": name, "us": us, "samples": timer.samples}
        if calls > 1:
            results[key]["calls_per_replay"] = calls
        print(f"{key:<40} {us:>10.2f} us  {name}", flush=True)

    with torch.no_grad():
        for n, k in GEMV_NK_BF16 + GEMV_NK_F32:
            f32 = (n, k) in GEMV_NK_F32
            w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
            for m in GEMV_M:
                key = f"bf16_gemv/M{m}_N{n}_K{k}_{'f32' if f32 else 'bf16'}"
                x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                if f32:
                    name, fn = router_fn(x, w)
                else:
                    name, fn = LINEAR, (lambda x=x, w=w: F.linear(x, w))
                add(key, name, fn)
            if n * k * 2 <= CALLS_MAX_W_BYTES:
                ws = [w] + [w.clone() for _ in range(CALLS - 1)]
                for m in GEMV_M:
                    key = f"bf16_gemv_x{CALLS}/M{m}_N{n}_K{k}_{'f32' if f32 else 'bf16'}"
                    if args.only and args.only not in key:
                        continue
                    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                    fns = [router_fn(x, wi) if f32 else (LINEAR, (lambda x=x, wi=wi: F.linear(x, wi))) for wi in ws]
                    chain = back_to_back([f for _, f in fns])
                    add(key, f"{fns[0][0]}, {CALLS} back-to-back on distinct W", chain, CALLS)
                del ws
            del w
            torch.cuda.empty_cache()
        for n, k in W4A16_NK:
            if args.only and not any(args.only in f"blockscaled_w4a16/M{m}_N{n}_K{k}_bf16" for m in GEMV_M):
                continue
            w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
            for m in GEMV_M:
                x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                add(f"blockscaled_w4a16/M{m}_N{n}_K{k}_bf16", LINEAR, lambda x=x, w=w: F.linear(x, w))
            del w
            torch.cuda.empty_cache()
        for n, k in W4A16_NK:
            key = f"blockscaled_fp8_scaled_mm/M16_N{n}_K{k}"
            if args.only and args.only not in key:
                continue
            x8 = torch.randn(16, k, device=dev).to(torch.float8_e4m3fn)
            w8 = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
            one = torch.ones((), device=dev, dtype=torch.float32)
            try:
                add(key, SCALED_MM, lambda x8=x8, w8=w8, one=one: torch._scaled_mm(
                    x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
            except (RuntimeError, TypeError) as e:  # an older torch without this signature
                print(f"{key}: torch._scaled_mm failed: {e}", flush=True)
            del x8, w8
            torch.cuda.empty_cache()
        for n, k in PREFILL_NK:
            w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
            w8 = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
            one = torch.ones((), device=dev, dtype=torch.float32)
            for m in PREFILL_M:
                key = f"blockscaled_prefill_bf16/M{m}_N{n}_K{k}"
                if not args.only or args.only in key:
                    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                    add(key, LINEAR, lambda x=x, w=w: F.linear(x, w))
                key = f"blockscaled_prefill_fp8/M{m}_N{n}_K{k}"
                if not args.only or args.only in key:
                    x8 = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
                    try:
                        add(key, SCALED_MM, lambda x8=x8, w8=w8, one=one: torch._scaled_mm(
                            x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
                    except (RuntimeError, TypeError) as e:
                        print(f"{key}: torch._scaled_mm failed: {e}", flush=True)
            del w, w8
            torch.cuda.empty_cache()
        for d in RMS_D:
            weight = torch.randn(d, device=dev, dtype=torch.bfloat16)
            for t in RMS_T:
                x = torch.randn(t, d, device=dev, dtype=torch.bfloat16)
                add(f"rmsnorm/T{t}_D{d}_bf16", RMS, lambda x=x, d=d, weight=weight: F.rms_norm(x, (d,), weight, eps=RMS_EPS))
                if t in RMS_X8_T and not (args.only and args.only not in f"rmsnorm_x{CALLS}/T{t}_D{d}_bf16"):
                    xs = [x] + [torch.randn(t, d, device=dev, dtype=torch.bfloat16) for _ in range(CALLS - 1)]
                    rms = [lambda xi=xi, d=d, weight=weight: F.rms_norm(xi, (d,), weight, eps=RMS_EPS) for xi in xs]
                    chain = back_to_back(rms)
                    add(f"rmsnorm_x{CALLS}/T{t}_D{d}_bf16", f"{RMS}, {CALLS} back-to-back on distinct x", chain, CALLS)
                    del xs
                del x
        for b in DECODE_B:
            for ctx in DECODE_CTX:
                key = f"paged_decode/B{b}_ctx{ctx}"
                if args.only and args.only not in key:
                    continue
                q = torch.randn(b, DECODE_H, 1, DECODE_D, device=dev, dtype=torch.bfloat16)
                k = torch.randn(b, DECODE_HKV, ctx, DECODE_D, device=dev, dtype=torch.bfloat16)
                v = torch.randn(b, DECODE_HKV, ctx, DECODE_D, device=dev, dtype=torch.bfloat16)
                add(key, SDPA, lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
                key = f"paged_decode_x{CALLS}/B{b}_ctx{ctx}"
                if k.numel() * 2 * 2 <= DECODE_X8_MAX_KV_BYTES and not (args.only and args.only not in key):
                    kvs = [(k, v)] + [(k.clone(), v.clone()) for _ in range(CALLS - 1)]
                    sdpa = [
                        lambda ki=ki, vi=vi, q=q: F.scaled_dot_product_attention(q, ki, vi, enable_gqa=True)
                        for ki, vi in kvs
                    ]
                    chain = back_to_back(sdpa)
                    add(key, f"{SDPA}, {CALLS} back-to-back on distinct K/V", chain, CALLS)
                    del kvs
                del q, k, v
                torch.cuda.empty_cache()
        prefill = [(s, True, f"varlen_prefill/S{s}") for s in PREFILL_S]
        prefill.append((PREFILL_FULL_S, False, f"varlen_prefill/S{PREFILL_FULL_S}_full"))
        for s, causal, key in prefill:
            if args.only and args.only not in key:
                continue
            q = torch.randn(1, PREFILL_H, s, PREFILL_D, device=dev, dtype=torch.bfloat16)
            k = torch.randn(1, PREFILL_HKV, s, PREFILL_D, device=dev, dtype=torch.bfloat16)
            v = torch.randn(1, PREFILL_HKV, s, PREFILL_D, device=dev, dtype=torch.bfloat16)
            name = f"{SDPA_PREFILL}, is_causal={causal}"
            fn = lambda q=q, k=k, v=v, causal=causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            add(key, name, fn)
            del q, k, v
            torch.cuda.empty_cache()
        append_cases = [(f"decode_B{b}", [APPEND_DECODE_CTX - (i * 389) % APPEND_DECODE_CTX for i in range(b)], 1,
                         APPEND_DECODE_CTX // APPEND_P) for b in APPEND_DECODE_B]
        append_cases += [(f"prefill_T{t}", [t], t, t // APPEND_P) for t in APPEND_PREFILL_T]
        for name, lens, q_len, max_pages in append_cases:
            for cache in ("bf16", "e4m3"):
                key = f"kv_append/{name}_{cache}"
                if args.only and args.only not in key:
                    continue
                b, t = len(lens), len(lens) * q_len
                num_pages = b * max_pages
                gen = torch.Generator().manual_seed(7)
                pt = torch.randperm(num_pages, generator=gen).view(b, max_pages)
                slots = torch.tensor(
                    [int(pt[i, p // APPEND_P]) * APPEND_P + p % APPEND_P for i, l in enumerate(lens) for p in range(l - q_len, l)],
                    dtype=torch.int64, device=dev)
                k = torch.randn(t, APPEND_HKV, APPEND_D, device=dev, dtype=torch.bfloat16)
                v = torch.randn(t, APPEND_HKV, APPEND_D, device=dev, dtype=torch.bfloat16)
                cdt = torch.bfloat16 if cache == "bf16" else torch.uint8
                kc = torch.zeros(num_pages * APPEND_P, APPEND_HKV, APPEND_D, device=dev, dtype=cdt)
                vc = torch.zeros_like(kc)
                if cache == "bf16":
                    def fn(k=k, v=v, kc=kc, vc=vc, slots=slots):
                        kc.index_copy_(0, slots, k)
                        vc.index_copy_(0, slots, v)
                    add(key, APPEND, fn)
                else:
                    req = torch.repeat_interleave(torch.arange(b, device=dev), q_len)
                    scales = torch.full((b, APPEND_HKV), APPEND_SCALE, device=dev)
                    def fn(k=k, v=v, kc=kc, vc=vc, slots=slots, req=req, scales=scales):
                        s = scales[req].unsqueeze(-1)
                        kc.index_copy_(0, slots, (k / s).to(torch.float8_e4m3fn).view(torch.uint8))
                        vc.index_copy_(0, slots, (v / s).to(torch.float8_e4m3fn).view(torch.uint8))
                    add(key, APPEND_E4M3, fn)
                del k, v, kc, vc, slots
                torch.cuda.empty_cache()
        for inter in SILU_I:
            for t in SILU_T:
                key = f"silu_and_mul/T{t}_I{inter}_bf16"
                if args.only and args.only not in key:
                    continue
                x = torch.randn(t, 2 * inter, device=dev, dtype=torch.bfloat16)
                add(key, "F.silu(x[:, :I]) * x[:, I:]", lambda x=x, inter=inter: F.silu(x[:, :inter]) * x[:, inter:])
                del x
                torch.cuda.empty_cache()
    results["_meta"] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "samples": timer.samples,
        "l2_flush_bytes": timer.flush.buf.numel(),
        "method": "median of CUDA-graph replays (one op call each; bf16_gemv_x8 / rmsnorm_x8 / paged_decode_x8: 8 back-to-back calls on distinct W / x / K,V, / 8), L2 flushed before each sample",
    }
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    print(f"{len(results) - 1} peer cases -> {args.out}")


if __name__ == "__main__":
    main()
