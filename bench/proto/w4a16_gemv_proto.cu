// Prototype harness (not part of the build): W4A16 decode GEMV on SM90 — y[M, N] = x[M, K] .
// dequant(W)[N, K]^T with an NVFP4 weight (E2M1 pairs [N, K/2] row-major as checkpoints store them,
// UE4M3 scales [N, K/16] row-major, f32 encode scale enc: w = e2m1 * ue4m3 / enc) and BF16
// activations, M <= 16. Measures how close the simplest tensor-core design gets to the read
// ceiling before the library op is written (b12x-gemm/src/blockscaled/README.md).
//
// Kernel: swap-AB mma.sync m16n8k16 bf16 (16 weight rows = the MMA's M, 8 tokens = its N; two MMAs
// for M > 8). A CTA of WARPS warps takes one 16-row block; warp w takes K / WARPS of it in 128-k
// chunks and the warps' partials are summed through shared memory in a fixed order. K permutation
// instead of a weight interleave: lane (g, t) loads 16 contiguous bytes (k = 32t .. 32t + 31 of
// the chunk) of rows g and g + 8, and k-step s (0..7) feeds k = 32t + 4s .. + 3 to its MMA slots
// 2t, 2t+1, 2t+8, 2t+9; x is read at the same k (8 bytes of row g per step). Dequantization:
// a byte of two codes -> bf16x2 of e2m1 * 2^-126 by bit placement (the magnitude bits into the
// exponent's low bits and the mantissa's top bit: E2M1's subnormal 0.5 lands on bf16's), then one
// mul.bf16x2 by ue4m3 * 2^119 (a 128-entry shared table), i.e. w * enc * 2^-7, exact; the epilogue
// multiplies by 2^7 / enc in f32. Variant B: tokens as the MMA's M (x fragments reused by RT
// weight tiles); variant C: the weight's nibbles interleaved per bf16x2 pair (interleave_pairs).
// Variant D: C with a tight loop; DA: D with funnel shifts (ALU pipe); E: a per-warp cp.async
// ring; F: a persistent streaming wave with a producer warp's bulk-copy ring (prepared in session
// 24, not yet run: the next device call's first experiment). Results:
// bench-results/2026-12-02-h200-b/w4a16-proto{,-b,-c,-d,-e,-f}/ and w4a16-ncu-stalls/ (44-54% of
// the ceiling; B faster at M = 16; C and D cut instructions to 3.85 / 3.5 per element and then
// are latency-bound: one chunk in flight per warp is too little).
//
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -lcublas \
//     -o /tmp/w4a16 w4a16_gemv_proto.cu && /tmp/w4a16
#ifndef PROTO_NO_CUBLAS  // -DPROTO_NO_CUBLAS: compile-only checks where the toolkit lacks cuBLAS
#include <cublas_v2.h>
#endif
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "../../b12x-core/kernels/read_bw.cu"
#include "b12x/mma.cuh"
#include "b12x/fp4_dequant.cuh"

using b12x::bf16;
#include "proto_common.cuh"

struct W4Params {
  const unsigned char* codes;   // [N, K/2]
  const unsigned char* scales;  // [N, K/16] UE4M3
  const bf16* x;                // [M, K]
  float* y;                     // [M, N]
  float out_scale;              // 2^7 / enc
  int n, k, m;
};

// ue4m3 code -> f32 (formats.md): subnormal m * 2^-9, else (8 + m) * 2^(e - 10).
__device__ __forceinline__ float ue4m3_f32(uint32_t c) {
  const uint32_t e = (c >> 3) & 0xF, m = c & 7;
  return e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), (int)e - 10);
}

// Byte j of w (two codes, lo = the even k) -> bf16x2 (lo, hi) of e2m1 * 2^-126.
__device__ __forceinline__ uint32_t e2m1x2_bf16_scaled(uint32_t w, int j) {
  const uint32_t v = __byte_perm(w, 0u, 0x4440u + j);  // byte j, others zero
  const uint32_t u6 = v * 0x40040u;                      // lo nibble << 6, and << 18
  const uint32_t u12 = v * 0x1001000u;                   // lo nibble << 12, and << 24
  // lo: magnitude bits 2..0 -> 8..6, sign 3 -> 15; hi: magnitude 6..4 -> 24..22, sign 7 -> 31.
  return (u6 & 0x01C001C0u) | (u12 & 0x80008000u);
}

__device__ __forceinline__ uint32_t smem_u32addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ uint32_t hmul2_bf16(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// Variant C's weight: within every 32-bit word (8 consecutive k), the nibbles reordered so that
// the pair (2q, 2q + 1) sits at nibbles q and q + 4 (16 bits apart, as a bf16x2 wants them).
__global__ void interleave_pairs(const uint32_t* in, uint32_t* out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = b12x::e2m1_interleave_word(in[i]);
}

// Pair q of an interleaved word -> bf16x2 of e2m1 * 2^-126 (as e2m1x2_bf16_scaled).
template <int Q>
__device__ __forceinline__ uint32_t e2m1_pair_interleaved(uint32_t w) {
  const uint32_t mag = (Q <= 1 ? w << (6 - 4 * Q) : w >> (4 * Q - 6)) & 0x01C001C0u;
  const uint32_t sgn = Q == 3 ? w : w << (12 - 4 * Q);
  return (sgn & 0x80008000u) | mag;
}
// The same with the shifts as funnel shifts (SHF, the ALU pipe) where ptxas would otherwise pick
// IMAD.SHL (the FMA pipe, half rate on SM90, which mul.bf16x2 needs too): the library helper.
template <int Q>
__device__ __forceinline__ uint32_t e2m1_pair_interleaved_alu(uint32_t w) {
  return b12x::e2m1_pair_bf16_2m126<Q>(w);
}

template <int MT, int WARPS, bool kInterleaved = false, int PF = 1, bool kReplicated = false>
__global__ void __launch_bounds__(32 * WARPS) w4a16_nvfp4(const __grid_constant__ W4Params p) {
  // ue4m3 code -> bf16x2 of (value * 2^119, same); kLanes copies (entry c of lane l at
  // c * kLanes + l) so the lanes' lookups of random codes never share a bank.
  constexpr int kLanes = kReplicated ? 32 : 1;
  __shared__ uint32_t s_scale[128 * kLanes];
  __shared__ float s_part[WARPS][MT * 128];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  for (int i = threadIdx.x; i < 128 * kLanes; i += blockDim.x) {
    const __nv_bfloat16 h = __float2bfloat16_rn(ldexpf(ue4m3_f32(i / kLanes), 119));
    const uint32_t b = __bfloat16_as_ushort(h);
    s_scale[i] = b | (b << 16);
  }
  const uint32_t* s_lut = s_scale + (kReplicated ? lane : 0);
  __syncthreads();
  const int row0 = blockIdx.x * 16;
  // gridDim.y CTAs split K (their sums added atomically into a zeroed y), then the warps.
  const int kw = p.k / (WARPS * gridDim.y), kbeg = (blockIdx.y * WARPS + warp) * kw;
  const unsigned char* c_lo = p.codes + (size_t)(row0 + g) * (p.k / 2);
  const unsigned char* c_hi = c_lo + (size_t)8 * (p.k / 2);
  const unsigned char* s_lo = p.scales + (size_t)(row0 + g) * (p.k / 16);
  const unsigned char* s_hi = s_lo + (size_t)8 * (p.k / 16);
  float acc[MT][4] = {};
  // Token rows this lane feeds as the MMA's column g (and g + 8 for the second MMA).
  const bf16* xr[MT];
  bool xl[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    xl[mt] = g + 8 * mt < p.m;
    xr[mt] = p.x + (size_t)(xl[mt] ? g + 8 * mt : 0) * p.k;
  }
  const auto load = [&](int k0, uint4& wl, uint4& wh, uint32_t& sl, uint32_t& sh) {
    const int kk = k0 + 32 * t;
    wl = __ldg(reinterpret_cast<const uint4*>(c_lo + kk / 2));
    wh = __ldg(reinterpret_cast<const uint4*>(c_hi + kk / 2));
    sl = *reinterpret_cast<const unsigned short*>(s_lo + kk / 16);
    sh = *reinterpret_cast<const unsigned short*>(s_hi + kk / 16);
  };
  uint4 wl, wh, ql = make_uint4(0, 0, 0, 0), qh = ql;
  uint32_t sl, sh, qsl = 0, qsh = 0;
  load(kbeg, wl, wh, sl, sh);
  if (PF == 2 && kbeg + 128 < kbeg + kw) load(kbeg + 128, ql, qh, qsl, qsh);
  for (int k0 = kbeg; k0 < kbeg + kw; k0 += 128) {
    // PF chunks of W in flight: the next (PF = 1) or the next two (PF = 2).
    uint4 nl = PF == 2 ? ql : wl, nh = PF == 2 ? qh : wh;
    uint32_t nsl = PF == 2 ? qsl : sl, nsh = PF == 2 ? qsh : sh;
    if (PF == 2) {
      if (k0 + 256 < kbeg + kw) load(k0 + 256, ql, qh, qsl, qsh);
    } else if (k0 + 128 < kbeg + kw) {
      load(k0 + 128, nl, nh, nsl, nsh);
    }
    const int kk = k0 + 32 * t;
    uint4 xv[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        xv[mt][q] = xl[mt] ? __ldg(reinterpret_cast<const uint4*>(xr[mt] + kk) + q) : make_uint4(0, 0, 0, 0);
    const uint32_t wlw[4] = {wl.x, wl.y, wl.z, wl.w}, whw[4] = {wh.x, wh.y, wh.z, wh.w};
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      // Step s: bytes 2s, 2s + 1 of the lane's 16 (k = 32t + 4s .. + 3), one 16-k scale block.
      const uint32_t scl = s_lut[((s < 4 ? sl : sl >> 8) & 0x7F) * kLanes];
      const uint32_t sch = s_lut[((s < 4 ? sh : sh >> 8) & 0x7F) * kLanes];
      const uint32_t wlo = wlw[s / 2], whi = whw[s / 2];
      const int j = 2 * (s & 1);
      uint32_t a[4];
      if constexpr (kInterleaved) {
        // Pairs j, j + 1 of the word (elements 4s .. 4s + 3 of the lane's 32).
        const uint32_t p0l = (s & 1) ? e2m1_pair_interleaved<2>(wlo) : e2m1_pair_interleaved<0>(wlo);
        const uint32_t p1l = (s & 1) ? e2m1_pair_interleaved<3>(wlo) : e2m1_pair_interleaved<1>(wlo);
        const uint32_t p0h = (s & 1) ? e2m1_pair_interleaved<2>(whi) : e2m1_pair_interleaved<0>(whi);
        const uint32_t p1h = (s & 1) ? e2m1_pair_interleaved<3>(whi) : e2m1_pair_interleaved<1>(whi);
        a[0] = hmul2_bf16(p0l, scl);
        a[1] = hmul2_bf16(p0h, sch);
        a[2] = hmul2_bf16(p1l, scl);
        a[3] = hmul2_bf16(p1h, sch);
      } else {
        a[0] = hmul2_bf16(e2m1x2_bf16_scaled(wlo, j), scl);      // row g, slots 2t, 2t+1
        a[1] = hmul2_bf16(e2m1x2_bf16_scaled(whi, j), sch);      // row g+8
        a[2] = hmul2_bf16(e2m1x2_bf16_scaled(wlo, j + 1), scl);  // row g, slots 2t+8, 2t+9
        a[3] = hmul2_bf16(e2m1x2_bf16_scaled(whi, j + 1), sch);  // row g+8
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xv[mt][s / 2]);
        const uint32_t b[2] = {xw[2 * (s & 1)], xw[2 * (s & 1) + 1]};
        b12x::mma_m16n8k16_bf16_f32(acc[mt], a, b);
      }
    }
    wl = nl;
    wh = nh;
    sl = nsl;
    sh = nsh;
  }
  // D[row][token]: c0, c1 = (g, 2t), (g, 2t+1); c2, c3 = (g + 8, ...).
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 4; ++i) s_part[warp][mt * 128 + (g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[mt][i];
  __syncthreads();
  for (int e = threadIdx.x; e < MT * 128; e += blockDim.x) {
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) v += s_part[w][e];
    const int mt = e / 128, r = (e % 128) / 8, tok = 8 * mt + e % 8;
    if (tok < p.m) {
      float* dst = p.y + (size_t)tok * p.n + row0 + r;
      if (gridDim.y == 1) {
        *dst = v * p.out_scale;
      } else {
        atomicAdd(dst, v * p.out_scale);
      }
    }
  }
}

// One 128-k chunk of variants D, E and F: the lane's 16 code bytes of rows g and g + 8
// (interleaved words), their two scale bytes per row, x's 64 bytes of row g; 8 k-steps of
// dequantization (kAlu: the pair conversion as funnel shifts) and MMA into acc.
template <bool kAlu>
__device__ __forceinline__ void chunk_mma(const uint4& wl, const uint4& wh, uint32_t scl2, uint32_t sch2,
                                          const uint4 (&xv)[4], const uint32_t* s_scale, float (&acc)[4]) {
  const uint32_t wlw[4] = {wl.x, wl.y, wl.z, wl.w}, whw[4] = {wh.x, wh.y, wh.z, wh.w};
  const uint32_t sc[2][2] = {{s_scale[scl2 & 0x7F], s_scale[sch2 & 0x7F]},
                             {s_scale[(scl2 >> 8) & 0x7F], s_scale[(sch2 >> 8) & 0x7F]}};
  const auto pair = [](uint32_t w, bool odd, bool second) {
    if (kAlu) {
      return odd ? (second ? e2m1_pair_interleaved_alu<3>(w) : e2m1_pair_interleaved_alu<2>(w))
                 : (second ? e2m1_pair_interleaved_alu<1>(w) : e2m1_pair_interleaved_alu<0>(w));
    }
    return odd ? (second ? e2m1_pair_interleaved<3>(w) : e2m1_pair_interleaved<2>(w))
               : (second ? e2m1_pair_interleaved<1>(w) : e2m1_pair_interleaved<0>(w));
  };
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    const uint32_t wlo = wlw[s / 2], whi = whw[s / 2];
    const uint32_t scl = sc[s / 4][0], sch = sc[s / 4][1];
    const bool odd = s & 1;
    const uint32_t a[4] = {hmul2_bf16(pair(wlo, odd, false), scl), hmul2_bf16(pair(whi, odd, false), sch),
                           hmul2_bf16(pair(wlo, odd, true), scl), hmul2_bf16(pair(whi, odd, true), sch)};
    const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xv[s / 2]);
    const uint32_t b[2] = {xw[2 * odd], xw[2 * odd + 1]};
    b12x::mma_m16n8k16_bf16_f32(acc, a, b);
  }
}

// Variant D: variant C (interleaved pairs, MT = 1) with a tight loop: pointers advanced per chunk
// (no 64-bit index math per load), two register buffers used in turn by a loop unrolled twice
// (no copies), so the inner loop is loads, the dequantization, the MMAs and the scale lookups.
// K per warp must be a multiple of 256.
template <int WARPS, bool kAlu = false>
__global__ void __launch_bounds__(32 * WARPS) w4a16_nvfp4_d(const __grid_constant__ W4Params p) {
  __shared__ uint32_t s_scale[128];
  __shared__ float s_part[WARPS][128];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  for (int c = threadIdx.x; c < 128; c += blockDim.x) {
    const __nv_bfloat16 h = __float2bfloat16_rn(ldexpf(ue4m3_f32(c), 119));
    const uint32_t b = __bfloat16_as_ushort(h);
    s_scale[c] = b | (b << 16);
  }
  __syncthreads();
  const int row0 = blockIdx.x * 16;
  const int kw = p.k / WARPS, kbeg = warp * kw, chunks = kw / 128;
  // The lane's 16 bytes of rows g and g + 8 (k = kbeg + 32t ..), their two scale bytes, and its
  // 64 bytes of x row g; per chunk the codes advance 64 bytes, the scales 8, x 256.
  const uint4* cl = reinterpret_cast<const uint4*>(p.codes + (size_t)(row0 + g) * (p.k / 2) + kbeg / 2) + t;
  const uint4* ch = cl + (size_t)8 * (p.k / 2) / 16;
  const unsigned short* sl = reinterpret_cast<const unsigned short*>(p.scales + (size_t)(row0 + g) * (p.k / 16) + kbeg / 16) + t;
  const unsigned short* sh = sl + (size_t)8 * (p.k / 16) / 2;
  const bool xlive = g < p.m;
  const uint4* xp = reinterpret_cast<const uint4*>(p.x + (size_t)(xlive ? g : 0) * p.k + kbeg) + 4 * t;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const auto compute = [&](const uint4& wl, const uint4& wh, uint32_t scl2, uint32_t sch2, const uint4* x) {
    uint4 xv[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) xv[q] = xlive ? __ldg(x + q) : make_uint4(0, 0, 0, 0);
    chunk_mma<kAlu>(wl, wh, scl2, sch2, xv, s_scale, acc);
  };
  uint4 al = __ldg(cl), ah = __ldg(ch);
  uint32_t asl = *sl, ash = *sh;
  for (int i = 0; i < chunks; i += 2) {
    const uint4 bl = __ldg(cl + 4), bh = __ldg(ch + 4);
    const uint32_t bsl = sl[4], bsh = sh[4];
    compute(al, ah, asl, ash, xp);
    cl += 8;
    ch += 8;
    sl += 8;
    sh += 8;
    if (i + 2 < chunks) {
      al = __ldg(cl);
      ah = __ldg(ch);
      asl = *sl;
      ash = *sh;
    }
    compute(bl, bh, bsl, bsh, xp + 16);
    xp += 32;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) s_part[warp][(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[i];
  __syncthreads();
  for (int e = threadIdx.x; e < 128; e += blockDim.x) {
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) v += s_part[w][e];
    const int r = e / 8, tok = e % 8;
    if (tok < p.m) p.y[(size_t)tok * p.n + row0 + r] = v * p.out_scale;
  }
}

// Variant E: D's math fed from a per-warp shared-memory ring of S chunks filled by cp.async (16
// bytes of each of the warp's 16 rows per lane and chunk, the 8 scale bytes of a row by lanes
// t = 0 / 1), so S - 1 chunks (~1.1 KB each) per warp are in flight instead of one.
__device__ __forceinline__ void cp_async_ca_8(uint32_t s_addr, const void* g_ptr) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(s_addr), "l"(g_ptr) : "memory");
}
template <int WARPS, int S>
__global__ void __launch_bounds__(32 * WARPS) w4a16_nvfp4_e(const __grid_constant__ W4Params p) {
  constexpr int kStage = 16 * 64 + 16 * 8;  // codes of 16 rows x 128 k, then their 16 x 8 scales
  extern __shared__ __align__(16) unsigned char e_smem[];
  __shared__ uint32_t s_scale[128];
  __shared__ float s_part[WARPS][128];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  for (int c = threadIdx.x; c < 128; c += blockDim.x) {
    const __nv_bfloat16 h = __float2bfloat16_rn(ldexpf(ue4m3_f32(c), 119));
    const uint32_t b = __bfloat16_as_ushort(h);
    s_scale[c] = b | (b << 16);
  }
  __syncthreads();
  const uint32_t ring = smem_u32addr(e_smem) + warp * S * kStage;
  const int row0 = blockIdx.x * 16;
  const int kw = p.k / WARPS, kbeg = warp * kw, chunks = kw / 128;
  const unsigned char* cl = p.codes + (size_t)(row0 + g) * (p.k / 2) + kbeg / 2 + 16 * t;
  const unsigned char* ch = cl + (size_t)8 * (p.k / 2);
  const unsigned char* sp = p.scales + (size_t)(row0 + g + (t & 1) * 8) * (p.k / 16) + kbeg / 16;
  const bool xlive = g < p.m;
  const uint4* xp = reinterpret_cast<const uint4*>(p.x + (size_t)(xlive ? g : 0) * p.k + kbeg) + 4 * t;
  // Stage layout: row r's 64 code bytes at 64 r (lane t's 16 at 64 r + 16 t), row r's 8 scale
  // bytes at 1024 + 8 r.
  const auto issue = [&](int c) {
    const uint32_t st = ring + (c % S) * kStage;
    b12x::cp_async_cg_16(st + 64 * g + 16 * t, cl + (size_t)64 * c);
    b12x::cp_async_cg_16(st + 64 * (g + 8) + 16 * t, ch + (size_t)64 * c);
    if (t < 2) cp_async_ca_8(st + 1024 + 8 * (g + 8 * t), sp + (size_t)8 * c);
  };
#pragma unroll 1
  for (int c = 0; c < S - 1; ++c) {
    if (c < chunks) issue(c);
    b12x::cp_async_commit();
  }
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 1
  for (int c = 0; c < chunks; ++c) {
    b12x::cp_async_wait<S - 2>();
    __syncwarp();
    const uint32_t st = ring + (c % S) * kStage;
    uint4 wl, wh;
    uint32_t scl2, sch2;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wl.x), "=r"(wl.y), "=r"(wl.z), "=r"(wl.w) : "r"(st + 64 * g + 16 * t));
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wh.x), "=r"(wh.y), "=r"(wh.z), "=r"(wh.w) : "r"(st + 64 * (g + 8) + 16 * t));
    asm volatile("ld.shared.u16 %0, [%1];" : "=r"(scl2) : "r"(st + 1024 + 8 * g + 2 * t));
    asm volatile("ld.shared.u16 %0, [%1];" : "=r"(sch2) : "r"(st + 1024 + 8 * (g + 8) + 2 * t));
    __syncwarp();
    if (c + S - 1 < chunks) issue(c + S - 1);
    b12x::cp_async_commit();
    uint4 xv[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) xv[q] = xlive ? __ldg(xp + 16 * c + q) : make_uint4(0, 0, 0, 0);
    chunk_mma<true>(wl, wh, scl2, sch2, xv, s_scale, acc);
  }
  b12x::cp_async_wait<0>();
#pragma unroll
  for (int i = 0; i < 4; ++i) s_part[warp][(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[i];
  __syncthreads();
  for (int e = threadIdx.x; e < 128; e += blockDim.x) {
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) v += s_part[w][e];
    const int r = e / 8, tok = e % 8;
    if (tok < p.m) p.y[(size_t)tok * p.n + row0 + r] = v * p.out_scale;
  }
}

// Access-pattern probe: the loads of variant D (lane t: 16 bytes of rows g and g + 8 at k = 32t of
// each 128-k chunk, 16 rows per warp, warps splitting K) with no math — whether this pattern
// itself reads at the ceiling. kRowBytes = 0: that pattern; > 0: each warp instead reads kRowBytes
// contiguous bytes of one row per instruction (16 B per lane), the same rows and bytes.
template <int WARPS, int kRowSpan>
__global__ void __launch_bounds__(32 * WARPS) w4a16_pattern_probe(const __grid_constant__ W4Params p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int row0 = blockIdx.x * 16;
  const int kw = p.k / WARPS, kbeg = warp * kw;
  uint32_t acc = 0;
  if (kRowSpan == 0) {
    const uint4* cl = reinterpret_cast<const uint4*>(p.codes + (size_t)(row0 + g) * (p.k / 2) + kbeg / 2) + t;
    const uint4* ch = cl + (size_t)8 * (p.k / 2) / 16;
#pragma unroll 4
    for (int c = 0; c < kw / 128; ++c) {
      const uint4 a = __ldg(cl + 4 * c), b = __ldg(ch + 4 * c);
      acc ^= a.x ^ a.w ^ b.y ^ b.z;
    }
  } else {
    // Row r of the 16, bytes [kbeg / 2, (kbeg + kw) / 2): lanes cover 512 contiguous bytes.
    const int bytes = kw / 2;
    for (int r = 0; r < 16; ++r) {
      const uint4* src = reinterpret_cast<const uint4*>(p.codes + (size_t)(row0 + r) * (p.k / 2) + kbeg / 2);
#pragma unroll 4
      for (int i = lane; i < bytes / 16; i += 32) {
        const uint4 a = __ldg(src + i);
        acc ^= a.x ^ a.w;
      }
    }
  }
  if (acc == 0x9e3779b9u) p.y[0] = (float)acc;
}

// Variant F (session 24, prepared for the next device call, NOT YET RUN): the structure the
// load-only probes pointed to — a persistent wave streaming long contiguous runs through a deep
// shared-memory ring. Items are (16-row block, 1024-k stage) in row-block-major order, split into
// equal contiguous ranges over the grid (stream-K); per CTA a producer warp (warp 4, lane 0) fills
// an S-stage ring with 16 bulk copies of 512 code bytes and 16 of 64 scale bytes per item
// (reviewed by a helper in session 24: protocol and addresses modelled exhaustively, no bug found;
// its padding and fence suggestions applied)
// (mbarrier full[s] counts the bytes; empty[s] the 4 consumer warps), and 4 consumer warps each
// take a quarter of the stage's K (two 128-k chunks, variant D's math reading from shared
// memory). At a row-block boundary the consumers sum their partials through shared memory and
// add them atomically into y (zeroed in the graph; several CTAs share a row block).
// Stage layout: code rows at a 576-byte pitch, scale rows at an 80-byte pitch from byte 9216 (the
// padding keeps the consumers' 16-byte and 2-byte reads free of bank conflicts); 9216 bytes copied.
constexpr int kFCodePitch = 576, kFScaleBase = 16 * kFCodePitch, kFScalePitch = 80;
constexpr int kFStageBytes = kFScaleBase + 16 * kFScalePitch;
constexpr int kFCopiedBytes = 16 * 512 + 16 * 64;
template <int S>
__global__ void __launch_bounds__(160) w4a16_nvfp4_f(const __grid_constant__ W4Params p) {
  extern __shared__ __align__(128) unsigned char f_smem[];
  __shared__ __align__(8) uint64_t f_full[S], f_empty[S];
  __shared__ uint32_t s_scale[128];
  __shared__ float s_part[4][128];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  for (int c = threadIdx.x; c < 128; c += blockDim.x) {
    const __nv_bfloat16 h = __float2bfloat16_rn(ldexpf(ue4m3_f32(c), 119));
    const uint32_t b = __bfloat16_as_ushort(h);
    s_scale[c] = b | (b << 16);
  }
  const uint32_t ring = smem_u32addr(f_smem), full = smem_u32addr(f_full), empty = smem_u32addr(f_empty);
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; ++i) {
      b12x::mbar_init(full + 8 * i, 1);
      b12x::mbar_init(empty + 8 * i, 4);
    }
    b12x::mbar_fence_init();
  }
  __syncthreads();
  const int nks = p.k / 1024;
  const long long total = (long long)(p.n / 16) * nks;
  const long long i0 = total * blockIdx.x / gridDim.x, i1 = total * (blockIdx.x + 1) / gridDim.x;
  if (warp == 4) {  // producer
    if (lane == 0) {
      for (long long i = i0; i < i1; ++i) {
        const int s = (int)((i - i0) % S);
        const uint32_t round = (uint32_t)((i - i0) / S);
        b12x::mbar_wait(empty + 8 * s, (round & 1) ^ 1);
        const int rb = (int)(i / nks), ks = (int)(i % nks);
        const uint32_t st = ring + s * kFStageBytes;
        b12x::mbar_arrive_expect_tx(full + 8 * s, kFCopiedBytes);
        for (int r = 0; r < 16; ++r) {
          const size_t row = (size_t)rb * 16 + r;
          b12x::bulk_copy_g2s(st + kFCodePitch * r, p.codes + row * (p.k / 2) + (size_t)ks * 512, 512, full + 8 * s);
          b12x::bulk_copy_g2s(st + kFScaleBase + kFScalePitch * r, p.scales + row * (p.k / 16) + (size_t)ks * 64, 64, full + 8 * s);
        }
      }
    }
    return;
  }
  // Consumers: warp w (0..3) takes k [256 w, 256 w + 256) of every 1024-k stage.
  const bool xlive = g < p.m;
  const bf16* xrow = p.x + (size_t)(xlive ? g : 0) * p.k;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const auto flush = [&](int rb) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s_part[warp][(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[i];
      acc[i] = 0.0f;
    }
    asm volatile("bar.sync 1, 128;" ::: "memory");
    const int e = threadIdx.x;  // 0..127: (row r, token tok)
    const float v = s_part[0][e] + s_part[1][e] + s_part[2][e] + s_part[3][e];
    const int r = e / 8, tok = e % 8;
    if (tok < p.m) atomicAdd(p.y + (size_t)tok * p.n + rb * 16 + r, v * p.out_scale);
    asm volatile("bar.sync 1, 128;" ::: "memory");
  };
  int cur_rb = (int)(i0 / nks);
  for (long long i = i0; i < i1; ++i) {
    const int s = (int)((i - i0) % S);
    const uint32_t round = (uint32_t)((i - i0) / S);
    const int rb = (int)(i / nks), ks = (int)(i % nks);
    if (rb != cur_rb) {
      flush(cur_rb);
      cur_rb = rb;
    }
    b12x::mbar_wait(full + 8 * s, round & 1);
    const uint32_t st = ring + s * kFStageBytes;
#pragma unroll
    for (int c2 = 0; c2 < 2; ++c2) {
      const int koff = 256 * warp + 128 * c2;  // within the stage
      uint4 wl, wh;
      uint32_t scl2, sch2;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wl.x), "=r"(wl.y), "=r"(wl.z), "=r"(wl.w) : "r"(st + kFCodePitch * g + koff / 2 + 16 * t));
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wh.x), "=r"(wh.y), "=r"(wh.z), "=r"(wh.w) : "r"(st + kFCodePitch * (g + 8) + koff / 2 + 16 * t));
      asm volatile("ld.shared.u16 %0, [%1];" : "=r"(scl2) : "r"(st + kFScaleBase + kFScalePitch * g + koff / 16 + 2 * t));
      asm volatile("ld.shared.u16 %0, [%1];" : "=r"(sch2) : "r"(st + kFScaleBase + kFScalePitch * (g + 8) + koff / 16 + 2 * t));
      const uint4* xp = reinterpret_cast<const uint4*>(xrow + (size_t)ks * 1024 + koff + 32 * t);
      uint4 xv[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) xv[q] = xlive ? __ldg(xp + q) : make_uint4(0, 0, 0, 0);
      chunk_mma<true>(wl, wh, scl2, sch2, xv, s_scale, acc);
    }
    // Generic-proxy reads of the stage before the producer's async-proxy refill: the PTX ISA
    // ("Async Proxy") asks for a cross-proxy fence; CUTLASS omits it, this prototype keeps it.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncwarp();
    if (lane == 0) b12x::mbar_arrive(empty + 8 * s);
  }
  if (i1 > i0) flush(cur_rb);
}

// Variant B (tokens as the MMA's M): D[16 tokens][8 rows] += x[16][16 k] . W[16 k][8 rows]; a warp
// holds the x fragments of a chunk (reused by its RT 8-row tiles: x is read once per RT * 8
// weight rows instead of once per 16) and the same K permutation (lane t: k = 32t .. 32t + 31).
// A CTA of WARPS warps takes 8 RT rows, the warps splitting K; tokens 8..15 are zero for M <= 8.
template <int RT, int WARPS>
__global__ void __launch_bounds__(32 * WARPS) w4a16_nvfp4_b(const __grid_constant__ W4Params p) {
  __shared__ uint32_t s_scale[128];
  __shared__ float s_part[WARPS][RT * 128];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  for (int c = threadIdx.x; c < 128; c += blockDim.x) {
    const __nv_bfloat16 h = __float2bfloat16_rn(ldexpf(ue4m3_f32(c), 119));
    const uint32_t b = __bfloat16_as_ushort(h);
    s_scale[c] = b | (b << 16);
  }
  __syncthreads();
  const int row0 = blockIdx.x * 8 * RT;
  const int kw = p.k / WARPS, kbeg = warp * kw;
  const unsigned char* cr[RT];
  const unsigned char* sr[RT];
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    cr[r] = p.codes + (size_t)(row0 + 8 * r + g) * (p.k / 2);
    sr[r] = p.scales + (size_t)(row0 + 8 * r + g) * (p.k / 16);
  }
  const bool x0 = g < p.m, x1 = g + 8 < p.m;
  const bf16* xr0 = p.x + (size_t)(x0 ? g : 0) * p.k;
  const bf16* xr1 = p.x + (size_t)(x1 ? g + 8 : 0) * p.k;
  float acc[RT][4] = {};
  uint4 wv[RT];
  uint32_t sv[RT];
  const auto load = [&](int k0, uint4 (&w)[RT], uint32_t (&sc)[RT]) {
    const int kk = k0 + 32 * t;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      w[r] = __ldg(reinterpret_cast<const uint4*>(cr[r] + kk / 2));
      sc[r] = *reinterpret_cast<const unsigned short*>(sr[r] + kk / 16);
    }
  };
  load(kbeg, wv, sv);
  for (int k0 = kbeg; k0 < kbeg + kw; k0 += 128) {
    uint4 nw[RT];
    uint32_t ns[RT];
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      nw[r] = wv[r];
      ns[r] = sv[r];
    }
    if (k0 + 128 < kbeg + kw) load(k0 + 128, nw, ns);
    const int kk = k0 + 32 * t;
    uint4 xa[4], xb[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      xa[q] = x0 ? __ldg(reinterpret_cast<const uint4*>(xr0 + kk) + q) : make_uint4(0, 0, 0, 0);
      xb[q] = x1 ? __ldg(reinterpret_cast<const uint4*>(xr1 + kk) + q) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const uint32_t* w0 = reinterpret_cast<const uint32_t*>(&xa[s / 2]);
      const uint32_t* w1 = reinterpret_cast<const uint32_t*>(&xb[s / 2]);
      const int e = 2 * (s & 1);
      const uint32_t a[4] = {w0[e], w1[e], w0[e + 1], w1[e + 1]};
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        const uint32_t sc = s_scale[(s < 4 ? sv[r] : sv[r] >> 8) & 0x7F];
        const uint32_t* ww = reinterpret_cast<const uint32_t*>(&wv[r]);
        const uint32_t word = ww[s / 2];
        const int j = 2 * (s & 1);
        const uint32_t b[2] = {hmul2_bf16(e2m1x2_bf16_scaled(word, j), sc), hmul2_bf16(e2m1x2_bf16_scaled(word, j + 1), sc)};
        b12x::mma_m16n8k16_bf16_f32(acc[r], a, b);
      }
    }
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      wv[r] = nw[r];
      sv[r] = ns[r];
    }
  }
  // D[token][row]: c0, c1 = (g, 2t), (g, 2t+1); c2, c3 = (g + 8, ...).
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int i = 0; i < 4; ++i) s_part[warp][r * 128 + (g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[r][i];
  __syncthreads();
  for (int e = threadIdx.x; e < RT * 128; e += blockDim.x) {
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) v += s_part[w][e];
    const int r = e / 128, tok = (e % 128) / 8, row = row0 + 8 * r + e % 8;
    if (tok < p.m) p.y[(size_t)tok * p.n + row] = v * p.out_scale;
  }
}

// Reference: one thread per output, f32, decoded values (e2m1 * ue4m3 / enc), k in order.
__global__ void w4a16_ref(W4Params p, float enc) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.m * p.n) return;
  const int tok = i / p.n, r = i % p.n;
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float acc = 0.0f;
  for (int k = 0; k < p.k; ++k) {
    const uint32_t c = (p.codes[(size_t)r * (p.k / 2) + k / 2] >> (4 * (k & 1))) & 0xF;
    const float w = ((c & 8) ? -mag[c & 7] : mag[c & 7]) * ue4m3_f32(p.scales[(size_t)r * (p.k / 16) + k / 16]) / enc;
    acc = fmaf(w, __bfloat162float(p.x[(size_t)tok * p.k + k]), acc);
  }
  p.y[i] = acc;
}

// Random codes and scales (UE4M3 in [2^-4, 8]) and the dequantized bf16 weight for cuBLAS.
__global__ void fill_w(unsigned char* codes, unsigned char* scales, bf16* wd, int n, int k, float enc, uint32_t seed) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)n * k / 16; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 2246822519u;
    scales[i] = (unsigned char)(0x18 + (h & 0x3F) % 0x38);  // codes 0x18 .. 0x4F
    const float s = ue4m3_f32(scales[i]);
    for (int e = 0; e < 8; ++e) {
      uint32_t q = (uint32_t)(i * 8 + e) * 2246822519u ^ seed;
      q ^= q >> 15;
      q *= 2654435761u;
      q ^= q >> 16;
      const unsigned char b = (unsigned char)(q & 0xFF);
      codes[i * 8 + e] = b;
      for (int h2 = 0; h2 < 2; ++h2) {
        const uint32_t c = (b >> (4 * h2)) & 0xF;
        const float v = ((c & 8) ? -mag[c & 7] : mag[c & 7]) * s / enc;
        wd[i * 16 + 2 * e + h2] = __float2bfloat16_rn(v);
      }
    }
  }
}

template <int MT, int WARPS, bool kInterleaved = false, int PF = 1, bool kReplicated = false>
static void launch(const W4Params& p, cudaStream_t st, int ks = 1) {
  if (ks > 1) CK(cudaMemsetAsync(p.y, 0, (size_t)p.m * p.n * 4, st));
  w4a16_nvfp4<MT, WARPS, kInterleaved, PF, kReplicated><<<dim3(p.n / 16, ks), 32 * WARPS, 0, st>>>(p);
}
template <int WARPS, bool kAlu = false>
static void launch_d(const W4Params& p, cudaStream_t st) {
  w4a16_nvfp4_d<WARPS, kAlu><<<p.n / 16, 32 * WARPS, 0, st>>>(p);
}
template <int WARPS, int S>
static void launch_e(const W4Params& p, cudaStream_t st) {
  const int smem = WARPS * S * (16 * 64 + 16 * 8);
  CK(cudaFuncSetAttribute(w4a16_nvfp4_e<WARPS, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  w4a16_nvfp4_e<WARPS, S><<<p.n / 16, 32 * WARPS, smem, st>>>(p);
}
template <int S>
static void launch_f(const W4Params& p, cudaStream_t st, int ctas_per_sm) {
  if (p.m > 8 || p.k % 1024 != 0) {
    printf("launch_f: needs M <= 8 and K %% 1024 == 0\n");
    exit(1);
  }
  const int smem = S * kFStageBytes;
  CK(cudaFuncSetAttribute(w4a16_nvfp4_f<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaMemsetAsync(p.y, 0, (size_t)p.m * p.n * 4, st));
  w4a16_nvfp4_f<S><<<sms * ctas_per_sm, 160, smem, st>>>(p);
}
template <int RT, int WARPS>
static void launch_b(const W4Params& p, cudaStream_t st) {
  w4a16_nvfp4_b<RT, WARPS><<<p.n / (8 * RT), 32 * WARPS, 0, st>>>(p);
}

int main(int argc, char** argv) {
  const bool ncu_mode = argc > 1 && std::string(argv[1]) == "ncu";
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  const int sms = prop.multiProcessorCount;
#ifndef PROTO_NO_CUBLAS
  cublasHandle_t hb;
  cublasCreate(&hb);
  cublasSetStream(hb, st);
#endif
  struct Shape { int n, k; };
  const Shape shapes[] = {{18432, 7168}, {36864, 7168}, {7168, 18432}, {7168, 2048}};
  const int ms[] = {1, 4, 16};
  const float enc = 37.5f;
  size_t maxnk = 0;
  for (auto s : shapes) maxnk = std::max(maxnk, (size_t)s.n * s.k);
  unsigned char *codes, *codes_il, *scales;
  bf16 *wd, *x, *yb;
  float *y, *yref;
  CK(cudaMalloc(&codes, maxnk / 2));
  CK(cudaMalloc(&codes_il, maxnk / 2));
  CK(cudaMalloc(&scales, maxnk / 16));
  CK(cudaMalloc(&wd, maxnk * 2));
  CK(cudaMalloc(&x, 16 * 36864 * 2));
  CK(cudaMalloc(&yb, 16 * 36864 * 2));
  CK(cudaMalloc(&y, 16 * 36864 * 4));
  CK(cudaMalloc(&yref, 16 * 36864 * 4));
  fill_bf16<<<256, 256>>>(x, 16 * 36864, 7);
  printf("%-12s %3s %-10s %10s %8s %8s  %s\n", "NxK", "M", "cfg", "us", "TB/s", "vs cuBLAS", "check");
  for (auto sh : shapes) {
    fill_w<<<1024, 256>>>(codes, scales, wd, sh.n, sh.k, enc, 0x1234u + sh.n);
    interleave_pairs<<<1024, 256>>>((const uint32_t*)codes, (uint32_t*)codes_il, (size_t)sh.n * sh.k / 8);
    CK(cudaDeviceSynchronize());
    const size_t wbytes = (size_t)sh.n * sh.k / 2 + (size_t)sh.n * sh.k / 16;
    if (!ncu_mode) {  // read probe of the same bytes (the project's b12x_read_bw, best of 1-4 CTAs per SM x 512)
      const size_t nv = wbytes / 16;
      double best = 1e30;
      for (int c : {1, 2, 4})
        for (int kind = 0; kind < 2; ++kind) {
          ReadBwParams rp{(const b12x::Vec16*)wd, g_sink, nv, 0x9e3779b9u, 0};
          double tt = time_graph(st, [&] {
            if (kind) b12x_read_bw_u8<<<sms * c, 512, 0, st>>>(rp); else b12x_read_bw<<<sms * c, 512, 0, st>>>(rp);
          });
          best = std::min(best, tt);
        }
      printf("%-12s read probe %.2f us (%.3f TB/s) for %.1f MB\n", "", best, wbytes / best / 1e6, wbytes / 1e6);
    }
    for (int m : ms) {
      W4Params p{codes, scales, x, y, 128.0f / enc, sh.n, sh.k, m};
      W4Params pr = p;
      pr.y = yref;
      w4a16_ref<<<(m * sh.n + 255) / 256, 256, 0, st>>>(pr, enc);
      float one = 1, zero = 0;
#ifndef PROTO_NO_CUBLAS
      const double tc = time_graph(st, [&] {
        cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, m, sh.k, &one, wd, CUDA_R_16BF, sh.k, x, CUDA_R_16BF, sh.k, &zero,
                     yb, CUDA_R_16BF, sh.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      });
#else
      (void)one, (void)zero, (void)yb;
      const double tc = 0.0;
#endif
      std::vector<float> ref((size_t)m * sh.n);
      CK(cudaStreamSynchronize(st));
      CK(cudaMemcpy(ref.data(), yref, ref.size() * 4, cudaMemcpyDeviceToHost));
      const auto run = [&](const char* name, auto fn) {
        CK(cudaMemsetAsync(y, 0xFF, (size_t)m * sh.n * 4, st));
        fn();
        CK(cudaStreamSynchronize(st));
        std::vector<float> got(ref.size());
        CK(cudaMemcpy(got.data(), y, got.size() * 4, cudaMemcpyDeviceToHost));
        double worst = 0, scale = 0;
        for (float v : ref) scale = std::max(scale, (double)fabsf(v));
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, fabs((double)got[i] - ref[i]));
        const double tt = time_graph(st, fn);
        const double bytes = wbytes + (double)m * sh.k * 2 + (double)m * sh.n * 4;
        printf("%6dx%-5d %3d %-10s %10.2f %8.3f %8.2fx  max|err|/max|y| %.2e%s\n", sh.n, sh.k, m, name, tt, bytes / tt / 1e6,
               tc / tt, worst / scale, worst / scale < 1e-4 ? "" : "  FAIL");
      };
      W4Params pc = p;
      pc.codes = codes_il;
      if (ncu_mode) {  // one launch of each, for ncu
        launch<1, 8, true>(pc, st);
        launch_e<4, 8>(pc, st);
        if (sh.k % 1024 == 0) launch_f<8>(pc, st, 2);
        CK(cudaStreamSynchronize(st));
        return 0;
      }
      if (m <= 8) {
        run("mt1_w4", [&] { launch<1, 4>(p, st); });
        run("mt1_w8", [&] { launch<1, 8>(p, st); });
        run("C_mt1_w4", [&] { launch<1, 4, true>(pc, st); });
        run("C_mt1_w8", [&] { launch<1, 8, true>(pc, st); });
        if (sh.k % (8 * 256) == 0) run("D_w8", [&] { launch_d<8>(pc, st); });
        if (sh.k % (4 * 256) == 0) run("D_w4", [&] { launch_d<4>(pc, st); });
        if (sh.k % (2 * 256) == 0) run("D_w2", [&] { launch_d<2>(pc, st); });
        if (sh.k % (8 * 256) == 0) run("DA_w8", [&] { launch_d<8, true>(pc, st); });
        if (sh.k % (4 * 256) == 0) run("DA_w4", [&] { launch_d<4, true>(pc, st); });
        if (m == 1) {
          const auto probe = [&](const char* name, auto fn) {
            const double tt = time_graph(st, fn);
            const double wb = (double)sh.n * sh.k / 2;
            printf("%6dx%-5d %3d %-10s %10.2f %8.3f  (codes only, no math)\n", sh.n, sh.k, m, name, tt, wb / tt / 1e6);
          };
          probe("P_frag_w8", [&] { w4a16_pattern_probe<8, 0><<<sh.n / 16, 256, 0, st>>>(pc); });
          probe("P_frag_w4", [&] { w4a16_pattern_probe<4, 0><<<sh.n / 16, 128, 0, st>>>(pc); });
          probe("P_rows_w8", [&] { w4a16_pattern_probe<8, 1><<<sh.n / 16, 256, 0, st>>>(pc); });
          probe("P_rows_w4", [&] { w4a16_pattern_probe<4, 1><<<sh.n / 16, 128, 0, st>>>(pc); });
        }
        if (sh.k % 1024 == 0) {
          run("F_s4_c2", [&] { launch_f<4>(pc, st, 2); });
          run("F_s8_c2", [&] { launch_f<8>(pc, st, 2); });
          run("F_s6_c3", [&] { launch_f<6>(pc, st, 3); });
          run("F_s12_c1", [&] { launch_f<12>(pc, st, 1); });
        }
        run("E_w4_s4", [&] { launch_e<4, 4>(pc, st); });
        run("E_w4_s8", [&] { launch_e<4, 8>(pc, st); });
        run("E_w8_s4", [&] { launch_e<8, 4>(pc, st); });
        run("E_w2_s8", [&] { launch_e<2, 8>(pc, st); });
        run("E_w2_s16", [&] { launch_e<2, 16>(pc, st); });
      } else {
        run("mt2_w4", [&] { launch<2, 4>(p, st); });
        run("mt2_w8", [&] { launch<2, 8>(p, st); });
        run("C_mt2_w4", [&] { launch<2, 4, true>(pc, st); });
        run("C_mt2_w8", [&] { launch<2, 8, true>(pc, st); });
        run("CR_mt2_w8", [&] { launch<2, 8, true, 1, true>(pc, st); });
        run("CR_mt2_w4", [&] { launch<2, 4, true, 1, true>(pc, st); });
      }
      if (m > 8) run("B_rt4_w8", [&] { launch_b<4, 8>(p, st); });
      printf("%6dx%-5d %3d %-10s %10.2f %8.3f (bf16 weight: %.1f MB)\n", sh.n, sh.k, m, "cublas", tc,
             ((double)sh.n * sh.k * 2) / tc / 1e6, (double)sh.n * sh.k * 2 / 1e6);
    }
  }
  return 0;
}
