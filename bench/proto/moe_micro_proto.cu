// Prototype harness (not part of the build): moe.fused_moe's decode at T = 1 as ONE launch, to
// measure how close a single persistent kernel gets to the read ceiling before the library path
// is written (issue 7 criterion 2; plan in b12x-moe/src/fused_moe/README.md, "Criterion 2").
// Shape: DeepSeek-V4-Flash TP2 (256 experts, top-6, hidden 4096, intermediate 1024, SiLU) with
// MXFP4 weights and BF16 activations (W4A16): 6 x (2048 x 4096 + 4096 x 1024) FP4 weights touched,
// ~38.3 MB with the UE8M0 scales.
//
// Kernel (one launch, grid = the co-resident CTAs, 8 warps each):
// - expert ids and routing weights read in the kernel (T = 1: pair s = slot s, no grouping);
// - FC1 units (slot, 16 rows: 8 gate rows j .. j + 7 then their 8 up rows) strided over the
//   grid; the CTA's warps split K (512 each, four 128-k chunks, all eight 16-byte loads per lane
//   issued before the math), swap-AB mma.sync m16n8k16 (weights the M side, the token the N
//   side), partial sums added through shared memory in warp order; the activation in f32 with
//   the library's rounding points, h = bf16(w . silu(bf16(g)) . bf16(u)) written to a scratch;
// - with `prefetch`, each CTA's FC2 unit (16 output rows x the 6 experts, K = 1024 split over
//   its warps) is asked for with cp.async into shared memory at the kernel's start, so its bytes
//   stream during FC1 and across the barrier; without, after the barrier;
// - a grid barrier (one atomic per CTA; the last arriver resets the count and bumps an epoch
//   word with a release; the others spin on acquire loads of it; the epoch is read at the
//   start, so replays need no reset);
// - FC2 from shared memory, h read through L2; per expert bf16(sum) (the library's y_rows
//   rounding), summed in k order (its combine) into y: no combine launch, deterministic.
// Codes as e2m1_interleave_word words (pair q at nibbles q, q + 4: e2m1_pair_bf16_2m126<Q>,
// code . 2^-126), UE8M0 scales row-major [rows, K / 32] (the library packs 128x4-swizzled scales
// and permuted words: this proto measures the schedule, not the layout). The scale multiplier
// is bf16(2^(e - 61)): code . 2^-126 . 2^(e - 61) = w . 2^-60, undone in f32 by the epilogue.
// Session 57 (H100, bench-results/2026-12-07-h200/call1/r/proto.txt): checks PASS; 32.2 / 31.4 us
// (40-41% of the read ceiling), FC1 alone 16.9 us (51%); mode 3 added afterwards (not yet run).
//
// Modes timed (graph replay, L2 flushed before each sample, the project's flush):
//   full (prefetch), full (no prefetch), FC1 only, FC1 + the barrier; the read probe (b12x_read_bw) over 1 GiB for
//   the ceiling, and over the same 38 MB once (its small-read ramp).
//   nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -DPROTO_NO_CUBLAS \
//     -o /tmp/moe_micro moe_micro_proto.cu && /tmp/moe_micro
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>
#include "../../b12x-core/kernels/read_bw.cu"
#include "b12x/fp4_dequant.cuh"
#include "b12x/mma.cuh"

using b12x::bf16;
#include "proto_common.cuh"

constexpr int kE = 256, kTopK = 6, kHd = 4096, kI = 1024, kWarps = 8, kThreads = 32 * kWarps;
constexpr int kFc1Rows = 2 * kI;             // per expert, gate / up interleaved per 16 rows
constexpr int kFc1Units = kTopK * (kFc1Rows / 16);
constexpr int kFc2Units = kHd / 16;
constexpr int kFc1KWarp = kHd / kWarps;      // 512: four 128-k chunks per warp
constexpr int kFc2KWarp = kI / kWarps;       // 128: one chunk per warp and expert
static_assert(kFc1KWarp % 128 == 0 && kFc2KWarp == 128, "chunks of 128 k");
// FC2 prefetch: per lane and expert the 16 bytes of rows g and g + 8 (lane-private slots).
constexpr int kFc2Smem = kTopK * 2 * kThreads * 16;  // 48 KB

struct MicroParams {
  const uint4* w1;        // [E, 2I, Hd / 32] uint4 (32 k per 16 bytes)
  const uint8_t* s1;      // [E, 2I, Hd / 32] UE8M0
  const uint4* w2;        // [E, Hd, I / 32]
  const uint8_t* s2;      // [E, Hd, I / 32]
  const bf16* x;          // [Hd] (T = 1)
  const int* ids;         // [topk]
  const float* wts;       // [topk]
  bf16* h;                // [topk, I]
  bf16* y;                // [Hd]
  unsigned* bar;          // [2]: arrivals, epoch
  int mode;               // 0: full with the FC2 prefetch, 1: full without, 2: FC1 only, 3: FC1 + barrier
};

__device__ __forceinline__ void cp_async_16(uint32_t s, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void cp_async_commit_wait_all() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ float bf16r(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// 128 k of rows g / g + 8 (the lane's 32 k: words wl, wh; its scale multipliers sl, sh) against
// x's 32 k for the lane's column (xv: 4 x 16 bytes, zero for columns past the tokens).
__device__ __forceinline__ void chunk(const uint4& wl, const uint4& wh, uint32_t sl, uint32_t sh, const uint4 (&xv)[4],
                                      float (&acc)[4]) {
  const uint32_t lw[4] = {wl.x, wl.y, wl.z, wl.w}, hw[4] = {wh.x, wh.y, wh.z, wh.w};
#pragma unroll
  for (int s = 0; s < 8; ++s) {  // k = 32t + 4s .. + 3: pairs 2 (s % 2), + 1 of word s / 2
    const uint32_t a0 = lw[s / 2], a1 = hw[s / 2];
    uint32_t a[4];
    if (s & 1) {
      a[0] = hmul2(b12x::e2m1_pair_bf16_2m126<2>(a0), sl);
      a[1] = hmul2(b12x::e2m1_pair_bf16_2m126<2>(a1), sh);
      a[2] = hmul2(b12x::e2m1_pair_bf16_2m126<3>(a0), sl);
      a[3] = hmul2(b12x::e2m1_pair_bf16_2m126<3>(a1), sh);
    } else {
      a[0] = hmul2(b12x::e2m1_pair_bf16_2m126<0>(a0), sl);
      a[1] = hmul2(b12x::e2m1_pair_bf16_2m126<0>(a1), sh);
      a[2] = hmul2(b12x::e2m1_pair_bf16_2m126<1>(a0), sl);
      a[3] = hmul2(b12x::e2m1_pair_bf16_2m126<1>(a1), sh);
    }
    const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xv[s / 2]);
    const uint32_t b[2] = {xw[2 * (s & 1)], xw[2 * (s & 1) + 1]};
    b12x::mma_m16n8k16_bf16_f32(acc, a, b);
  }
}

__global__ void __launch_bounds__(kThreads) moe_micro(const __grid_constant__ MicroParams p) {
  extern __shared__ __align__(16) unsigned char dyn[];
  __shared__ __align__(16) bf16 xs[kHd];
  __shared__ uint32_t tab[256];
  __shared__ float part[kWarps][kTopK][16];
  __shared__ int sid[kTopK];
  __shared__ float swt[kTopK];
  __shared__ unsigned s_epoch;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  if (tid == 0) s_epoch = *(volatile unsigned*)(p.bar + 1);
  if (tid < kTopK) sid[tid] = p.ids[tid], swt[tid] = p.wts[tid];
  for (int e = tid; e < 256; e += kThreads) {
    const float m = e < 61 - 133 ? 0.0f : ldexpf(1.0f, e - 61);
    const uint32_t b = __bfloat16_as_ushort(__float2bfloat16_rn(m));
    tab[e] = b | (b << 16);
  }
  for (int i = tid; i < kHd / 8; i += kThreads) reinterpret_cast<uint4*>(xs)[i] = reinterpret_cast<const uint4*>(p.x)[i];
  __syncthreads();

  const int fc2u = blockIdx.x < kFc2Units ? int(blockIdx.x) : -1;  // at most one FC2 unit per CTA
  const uint32_t fc2s = static_cast<uint32_t>(__cvta_generic_to_shared(dyn));
  auto fc2_row = [&](int s, int hrow) {  // FC2 row (output o0 + g + 8 hrow) of slot s's expert, the lane's 16 bytes
    return p.w2 + ((size_t)sid[s] * kHd + 16 * fc2u + g + 8 * hrow) * (kI / 32) + (kFc2KWarp * warp) / 32 + t;
  };
  auto fc2_prefetch = [&]() {
    if (fc2u < 0) return;
#pragma unroll
    for (int s = 0; s < kTopK; ++s)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) cp_async_16(fc2s + uint32_t(((s * 2 + hr) * kThreads + tid) * 16), fc2_row(s, hr));
  };
  if (p.mode == 0) fc2_prefetch();

  // FC1.
  for (int u = blockIdx.x; u < kFc1Units; u += gridDim.x) {
    const int s = u / (kFc1Rows / 16), rb = u % (kFc1Rows / 16);
    const size_t row = (size_t)sid[s] * kFc1Rows + 16 * rb + g;
    const uint4* cl = p.w1 + row * (kHd / 32) + (kFc1KWarp * warp) / 32 + t;
    const uint4* ch = cl + (size_t)8 * (kHd / 32);
    constexpr int C = kFc1KWarp / 128;
    uint4 wl[C], wh[C];
#pragma unroll
    for (int c = 0; c < C; ++c) wl[c] = __ldg(cl + 4 * c), wh[c] = __ldg(ch + 4 * c);
    const uint8_t* sp = p.s1 + row * (kHd / 32) + (kFc1KWarp * warp) / 32 + t;
    uint32_t scl[C], sch[C];
#pragma unroll
    for (int c = 0; c < C; ++c) scl[c] = __ldg(sp + 4 * c), sch[c] = __ldg(sp + 8 * (kHd / 32) + 4 * c);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int c = 0; c < C; ++c) {
      uint4 xv[4];
      const uint4* xp = reinterpret_cast<const uint4*>(xs + kFc1KWarp * warp + 128 * c + 32 * t);
#pragma unroll
      for (int q = 0; q < 4; ++q) xv[q] = g == 0 ? xp[q] : make_uint4(0, 0, 0, 0);
      chunk(wl[c], wh[c], tab[scl[c]], tab[sch[c]], xv, acc);
    }
    if (t == 0) part[warp][0][g] = acc[0], part[warp][0][8 + g] = acc[2];  // column 0: the token
    __syncthreads();
    if (tid < 8) {
      float gs = 0.0f, us = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) gs += part[w][0][tid], us += part[w][0][8 + tid];
      const float gv = bf16r(gs * 0x1p60f), uv = bf16r(us * 0x1p60f);
      const float a = gv / (1.0f + __expf(-gv)) * uv;
      p.h[s * kI + 8 * rb + tid] = __float2bfloat16_rn(swt[s] * a);
    }
    __syncthreads();
  }
  if (p.mode == 2) return;

  // The grid barrier.
  __syncthreads();
  if (tid == 0) {
    __threadfence();
    const unsigned arrived = atomicAdd(p.bar, 1u);
    if (arrived == gridDim.x - 1) {
      atomicExch(p.bar, 0u);
      __threadfence();
      asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p.bar + 1), "r"(s_epoch + 1) : "memory");
    } else {
      while (ld_acquire(p.bar + 1) == s_epoch) __nanosleep(20);
    }
  }
  __syncthreads();
  if (fc2u < 0 || p.mode == 3) return;
  if (p.mode == 1) fc2_prefetch();
  cp_async_commit_wait_all();

  // FC2: warp w takes k 128 w .. of every expert; h through L2.
  float acc[kTopK][4];
#pragma unroll
  for (int s = 0; s < kTopK; ++s) {
    acc[s][0] = acc[s][1] = acc[s][2] = acc[s][3] = 0.0f;
    const uint4* wsm = reinterpret_cast<const uint4*>(dyn) + (s * 2) * kThreads + tid;
    const uint4 wl = wsm[0], wh = wsm[kThreads];
    const uint8_t* sp = p.s2 + ((size_t)sid[s] * kHd + 16 * fc2u + g) * (kI / 32) + (kFc2KWarp * warp) / 32 + t;
    const uint32_t sl = tab[__ldg(sp)], sh = tab[__ldg(sp + 8 * (kI / 32))];
    uint4 xv[4];
    const uint4* hp = reinterpret_cast<const uint4*>(p.h + s * kI + kFc2KWarp * warp + 32 * t);
#pragma unroll
    for (int q = 0; q < 4; ++q) xv[q] = g == 0 ? __ldcg(hp + q) : make_uint4(0, 0, 0, 0);
    chunk(wl, wh, sl, sh, xv, acc[s]);
  }
  if (t == 0)
#pragma unroll
    for (int s = 0; s < kTopK; ++s) part[warp][s][g] = acc[s][0], part[warp][s][8 + g] = acc[s][2];
  __syncthreads();
  if (tid < 16) {
    float y = 0.0f;
    for (int s = 0; s < kTopK; ++s) {
      float v = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) v += part[w][s][tid];
      y += bf16r(v * 0x1p60f);  // y_rows = bf16(sum), combined in k order
    }
    p.y[16 * fc2u + tid] = __float2bfloat16_rn(y);
  }
}

// ---- data and the CPU oracle ------------------------------------------------------------
__global__ void fill_words(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed; h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    p[i] = h;
  }
}
__global__ void fill_scales(uint8_t* p, size_t n, uint32_t seed) {  // UE8M0 118 .. 133
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed; h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = uint8_t(118 + (h >> 7) % 16);
  }
}
static float e2m1_f(uint32_t c) {
  static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (c & 8 ? -1.0f : 1.0f) * mag[c & 7];
}
// Element j (0..31) of a 16-byte group of interleaved words: word j / 8, k 2q + r at nibble q + 4r.
static float code_at(const uint8_t* grp, int j) {
  uint32_t w;
  memcpy(&w, grp + 4 * (j / 8), 4);
  const int k = j % 8, q = k / 2, r = k % 2;
  return e2m1_f((w >> (4 * (q + 4 * r))) & 0xF);
}
static float bf16r_h(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
// One row's dot with v (length K): codes [K / 32 groups of 16 bytes], scales [K / 32].
static float dot_row(const uint8_t* codes, const uint8_t* sc, const float* v, int K) {
  double acc = 0.0;
  for (int b = 0; b < K / 32; ++b) {
    const float s = ldexpf(1.0f, int(sc[b]) - 127);
    for (int j = 0; j < 32; ++j) acc += double(code_at(codes + 16 * b, j) * s) * v[32 * b + j];
  }
  return float(acc);
}

int main() {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  const size_t n1 = (size_t)kE * kFc1Rows * kHd / 8, n2 = (size_t)kE * kHd * kI / 8;  // words
  const size_t ns1 = (size_t)kE * kFc1Rows * kHd / 32, ns2 = (size_t)kE * kHd * kI / 32;
  uint32_t *w1, *w2;
  uint8_t *s1, *s2;
  CK(cudaMalloc(&w1, n1 * 4)); CK(cudaMalloc(&w2, n2 * 4)); CK(cudaMalloc(&s1, ns1)); CK(cudaMalloc(&s2, ns2));
  fill_words<<<2048, 256, 0, st>>>(w1, n1, 0x1234u);
  fill_words<<<2048, 256, 0, st>>>(w2, n2, 0x9876u);
  fill_scales<<<2048, 256, 0, st>>>(s1, ns1, 0x55u);
  fill_scales<<<2048, 256, 0, st>>>(s2, ns2, 0x77u);
  bf16 *x, *h, *y;
  CK(cudaMalloc(&x, kHd * 2)); CK(cudaMalloc(&h, kTopK * kI * 2)); CK(cudaMalloc(&y, kHd * 2));
  fill_bf16<<<64, 256, 0, st>>>(x, kHd, 0x42u);
  const int ids_h[kTopK] = {7, 200, 31, 128, 255, 64};
  const float wts_h[kTopK] = {0.31f, 0.22f, 0.17f, 0.13f, 0.10f, 0.07f};
  int* ids;
  float* wts;
  unsigned* bar;
  CK(cudaMalloc(&ids, sizeof ids_h)); CK(cudaMalloc(&wts, sizeof wts_h)); CK(cudaMalloc(&bar, 8));
  CK(cudaMemcpy(ids, ids_h, sizeof ids_h, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(wts, wts_h, sizeof wts_h, cudaMemcpyHostToDevice));
  CK(cudaMemset(bar, 0, 8));
  CK(cudaFuncSetAttribute(moe_micro, cudaFuncAttributeMaxDynamicSharedMemorySize, kFc2Smem));
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, moe_micro, kThreads, kFc2Smem));
  const int grid = occ * prop.multiProcessorCount;
  printf("occupancy %d CTAs/SM -> grid %d (FC1 units %d, FC2 units %d)\n", occ, grid, kFc1Units, kFc2Units);
  if (grid < kFc2Units) printf("note: grid < FC2 units: this proto gives each CTA at most one FC2 unit\n");
  MicroParams p{reinterpret_cast<const uint4*>(w1), s1, reinterpret_cast<const uint4*>(w2), s2, x, ids, wts, h, y, bar, 0};
  auto launch = [&](int mode) {
    p.mode = mode;
    moe_micro<<<grid, kThreads, kFc2Smem, st>>>(p);
  };

  // Oracle on the touched experts.
  std::vector<uint16_t> xh(kHd);
  CK(cudaStreamSynchronize(st));
  CK(cudaMemcpy(xh.data(), x, kHd * 2, cudaMemcpyDeviceToHost));
  std::vector<float> xf(kHd), yref(kHd, 0.0f), href(kTopK * kI);
  for (int i = 0; i < kHd; ++i) { uint32_t b = uint32_t(xh[i]) << 16; memcpy(&xf[i], &b, 4); }
  std::vector<uint8_t> c1((size_t)kFc1Rows * kHd / 2), sc1((size_t)kFc1Rows * kHd / 32);
  std::vector<uint8_t> c2((size_t)kHd * kI / 2), sc2((size_t)kHd * kI / 32);
  std::vector<float> yrows(kTopK * kHd);
  for (int s = 0; s < kTopK; ++s) {
    const size_t ex = ids_h[s];
    CK(cudaMemcpy(c1.data(), reinterpret_cast<uint8_t*>(w1) + ex * c1.size(), c1.size(), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sc1.data(), s1 + ex * sc1.size(), sc1.size(), cudaMemcpyDeviceToHost));
    for (int j = 0; j < kI; ++j) {
      const int r = 16 * (j / 8) + j % 8;  // gate row; its up row is r + 8
      const float gv = bf16r_h(dot_row(&c1[(size_t)r * kHd / 2], &sc1[(size_t)r * kHd / 32], xf.data(), kHd));
      const float uv = bf16r_h(dot_row(&c1[(size_t)(r + 8) * kHd / 2], &sc1[(size_t)(r + 8) * kHd / 32], xf.data(), kHd));
      href[s * kI + j] = bf16r_h(wts_h[s] * (gv / (1.0f + expf(-gv)) * uv));
    }
  }
  for (int s = 0; s < kTopK; ++s) {
    const size_t ex = ids_h[s];
    CK(cudaMemcpy(c2.data(), reinterpret_cast<uint8_t*>(w2) + ex * c2.size(), c2.size(), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sc2.data(), s2 + ex * sc2.size(), sc2.size(), cudaMemcpyDeviceToHost));
    for (int o = 0; o < kHd; ++o)
      yrows[s * kHd + o] = bf16r_h(dot_row(&c2[(size_t)o * kI / 2], &sc2[(size_t)o * kI / 32], &href[s * kI], kI));
  }
  for (int o = 0; o < kHd; ++o) {
    float a = 0.0f;
    for (int s = 0; s < kTopK; ++s) a += yrows[s * kHd + o];
    yref[o] = bf16r_h(a);
  }
  // Check both full modes (twice each: the epoch barrier across launches).
  bool ok = true;
  for (int mode = 0; mode < 2; ++mode)
    for (int rep = 0; rep < 2; ++rep) {
      CK(cudaMemset(y, 0xFF, kHd * 2));
      launch(mode);
      CK(cudaStreamSynchronize(st));
      CK(cudaGetLastError());
      std::vector<uint16_t> yo(kHd), ho(kTopK * kI);
      CK(cudaMemcpy(yo.data(), y, kHd * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(ho.data(), h, kTopK * kI * 2, cudaMemcpyDeviceToHost));
      double ymax = 0, yerr = 0, hmax = 0, herr = 0;
      int hdiff = 0;
      for (int o = 0; o < kHd; ++o) {
        float v; uint32_t b = uint32_t(yo[o]) << 16; memcpy(&v, &b, 4);
        ymax = std::max(ymax, (double)fabsf(yref[o]));
        yerr = std::max(yerr, (double)fabsf(v - yref[o]));
        if (!std::isfinite(v)) yerr = INFINITY;
      }
      for (int i = 0; i < kTopK * kI; ++i) {
        float v; uint32_t b = uint32_t(ho[i]) << 16; memcpy(&v, &b, 4);
        hmax = std::max(hmax, (double)fabsf(href[i]));
        herr = std::max(herr, (double)fabsf(v - href[i]));
        hdiff += v != href[i];
      }
      const bool pass = yerr <= 2e-2 * ymax && herr <= 2e-2 * hmax;
      ok &= pass;
      printf("check mode %d rep %d: h max err %.3g of %.3g (%d / %d not bitwise), y max err %.3g of %.3g: %s\n", mode, rep,
             herr, hmax, hdiff, kTopK * kI, yerr, ymax, pass ? "PASS" : "FAIL");
    }

  const double bytes1 = (double)kTopK * kFc1Rows * (kHd / 2 + kHd / 32), bytes2 = (double)kTopK * kHd * (kI / 2 + kI / 32);
  // The ceiling: the read probe over 1 GiB (best of two unrolls), and over the touched bytes.
  void* big;  // the probe's own buffer (time_graph flushes through g_flush, a different one)
  CK(cudaMalloc(&big, 1ull << 30));
  auto probe = [&](size_t bytes) {
    ReadBwParams rp{(const b12x::Vec16*)big, g_sink, bytes / 16, 0x9e3779b9u, 0};
    double best = 1e30;
    for (int gx : {prop.multiProcessorCount * 4, prop.multiProcessorCount * 8})
      best = std::min(best, time_graph(st, [&] { b12x_read_bw_u8<<<gx, 512, 0, st>>>(rp); }, 15));
    return best;
  };
  const double t_big = probe(1ull << 30);
  const double t_small = probe(size_t(bytes1 + bytes2) / 16 * 16);
  const double t_fc1 = probe(size_t(bytes1) / 16 * 16), t_fc2 = probe(size_t(bytes2) / 16 * 16);
  const double ceil_tbs = double(1ull << 30) / t_big * 1e-6;
  auto pct = [&](double bytes, double us) { return 100.0 * bytes / us * 1e-6 / ceil_tbs; };  // % of the ceiling
  printf("read probe: 1 GiB %.1f us = %.3f TB/s (the ceiling); %.1f MB %.1f us (%.1f%%); FC1's %.1f MB %.1f us (%.1f%%);"
         " FC2's %.1f MB %.1f us (%.1f%%)\n", t_big, ceil_tbs, (bytes1 + bytes2) * 1e-6, t_small, pct(bytes1 + bytes2, t_small),
         bytes1 * 1e-6, t_fc1, pct(bytes1, t_fc1), bytes2 * 1e-6, t_fc2, pct(bytes2, t_fc2));
  const char* names[4] = {"full, FC2 prefetched before the barrier", "full, FC2 loaded after the barrier", "FC1 only",
                          "FC1 + the grid barrier"};
  for (int mode = 0; mode < 4; ++mode) {
    const double us = time_graph(st, [&] { launch(mode); });
    const double b = mode >= 2 ? bytes1 : bytes1 + bytes2;
    printf("%-42s %7.2f us  %6.1f MB  %.3f TB/s  %.1f%% of the ceiling\n", names[mode], us, b * 1e-6, b / us * 1e-6,
           pct(b, us));
  }
  printf(ok ? "ALL CHECKS PASS\n" : "CHECK FAILED\n");
  return ok ? 0 : 1;
}
