// Prototype harness for gemm.blockscaled's tiled prefill kernels (not part of the build, not the
// source of any reported number): on the GPU machine (nvcc, no Rust) it compiles in seconds,
// where a GPU bundle takes ~10 minutes. It includes the kernel source without its entry points
// (B12X_PROTO_ENTRY_POINTS), instantiates the library's mma.sync tiled kernels and the SM90 wgmma
// kernels, fills random packed weights (NVFP4, MXFP8, block FP8 128 x 128 and 32 x 32 with f32
// scales) and bf16 x, compares each wgmma kernel's y with the tiled kernel of its format (the
// validated reference; the summation order differs, so "far" counts elements off by more than 2%
// + 1e-3) and times each with graph replays (L2 flushed, median of 20) at the deepest ring that
// fits and one or two stages less. Session 29 also used it for the warp-layout study in
// blockscaled/README.md (that variant of the kernel is not kept).
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr \
//     -I../../b12x-core/include -o /tmp/t bsgemm_tile_proto.cu && /tmp/t
// Env: PROTO_M=m, PROTO_SHAPE=NxK (one case).
#define B12X_PROTO_ENTRY_POINTS 1
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstring>
#include <string>
#include "../../b12x-gemm/kernels/blockscaled_gemv.cu"
#include "../../b12x-core/kernels/read_bw.cu"
using b12x::bf16;

#include "proto_common.cuh"

// The library's mma.sync tiled kernels (the reference of each format) and the wgmma kernels.
B12X_BSGEMM(Nvfp4, nvfp4, w4a16, 4, 8, 1, false, b12x::bf16, bf16)
B12X_BSGEMM(Mxfp8, mxfp8, w8a16, 4, 8, 1, false, b12x::bf16, bf16)
B12X_BSGEMM(Fp8Block, fp8block, w8a16, 4, 4, 1, false, b12x::bf16, bf16)
B12X_BSGEMM(Fp8Block, fp8block, w8a16, 2, 4, 1, false, b12x::bf16, bf16)
B12X_BSGEMM_WG(Nvfp4, nvfp4, w4a16, 8, false, b12x::bf16, bf16)
B12X_BSGEMM_WG(Mxfp8, mxfp8, w8a16, 8, false, b12x::bf16, bf16)
B12X_BSGEMM_WG(Fp8Block, fp8block, w8a16, 8, false, b12x::bf16, bf16)
B12X_BSGEMM_WG(Fp8Block, fp8block, w8a16, 4, false, b12x::bf16, bf16)

struct Variant {
  const char* name;
  void (*fn)(BsGemmParams);
  int fmt;  // 0 NVFP4, 1 MXFP8, 2 block FP8 (128 x 128, or 32 x 32 with fmt 3)
  int wm, wn;
  bool wg;  // 1024 bytes of alignment slack
};
static const Variant kVariants[] = {
    {"nvfp4_wm4_wn8", b12x_bsgemm_w4a16_nvfp4_wm4_wn8_bf16out, 0, 4, 8, false},
    {"wg_nvfp4", b12x_bsgemm_wg_w4a16_nvfp4_wn8_bf16out, 0, 4, 8, true},
    {"mxfp8_wm4_wn8", b12x_bsgemm_w8a16_mxfp8_wm4_wn8_bf16out, 1, 4, 8, false},
    {"wg_mxfp8", b12x_bsgemm_wg_w8a16_mxfp8_wn8_bf16out, 1, 4, 8, true},
    {"fp8block_wm4_wn4", b12x_bsgemm_w8a16_fp8block_wm4_wn4_bf16out, 2, 4, 4, false},
    {"wg_fp8block_wn8", b12x_bsgemm_wg_w8a16_fp8block_wn8_bf16out, 2, 4, 8, true},
    {"wg_fp8block_wn4", b12x_bsgemm_wg_w8a16_fp8block_wn4_bf16out, 2, 4, 4, true},
    {"fp8block32_wm2_wn4", b12x_bsgemm_w8a16_fp8block_wm2_wn4_bf16out, 3, 2, 4, false},
    {"wg_fp8block32_wn8", b12x_bsgemm_wg_w8a16_fp8block_wn8_bf16out, 3, 4, 8, true},
    {"wg_fp8block32_wn4", b12x_bsgemm_wg_w8a16_fp8block_wn4_bf16out, 3, 4, 4, true},
};

__global__ void fill_bytes(unsigned char* p, size_t n, uint32_t seed, int mode) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    unsigned char b = (unsigned char)(h >> 8);
    if (mode == 1 && (b & 0x7F) == 0x7F) b ^= 1;        // E4M3: no NaN
    if (mode == 2) b = (unsigned char)(48 + (h & 15));  // UE4M3 scale bytes 48..63
    if (mode == 3) b = (unsigned char)(120 + (h & 7));  // UE8M0 2^-7 .. 2^0
    p[i] = b;
  }
}
__global__ void fill_f32_scales(float* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = ldexpf(1.0f + (float)((i * 2654435761u ^ seed) & 7) / 8.0f, -8 + (int)(i % 5));
}

int main() {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  struct Shape { int m, n, k; };
  std::vector<Shape> shapes = {{2048, 7168, 7168}, {8192, 7168, 7168}, {2048, 18432, 7168}, {8192, 18432, 7168}};
  if (const char* e = getenv("PROTO_SHAPE")) {
    int n, k;
    sscanf(e, "%dx%d", &n, &k);
    shapes = {{getenv("PROTO_M") ? atoi(getenv("PROTO_M")) : 2048, n, k}};
  }
  for (const Shape& sh : shapes) {
    const int M = sh.m, N = sh.n, K = sh.k;
    bf16 *x, *y;
    unsigned char *codes, *scales;
    CK(cudaMalloc(&x, (size_t)M * K * 2));
    CK(cudaMalloc(&y, (size_t)M * N * 2));
    CK(cudaMalloc(&codes, (size_t)N * K));
    const size_t sbytes = (size_t)((N + 127) / 128) * ((K / 16 + 3) / 4) * 512 + 4 * ((N + 31) / 32) * (((K + 31) / 32 + 3) / 4 * 4);
    CK(cudaMalloc(&scales, sbytes));
    fill_bf16<<<1024, 256, 0, st>>>(x, (size_t)M * K, 7);
    std::vector<uint16_t> ref((size_t)M * N), got((size_t)M * N);
    for (int fmt = 0; fmt < 4; ++fmt) {
      fill_bytes<<<1024, 256, 0, st>>>(codes, (size_t)N * K, 11 + fmt, fmt == 0 ? 0 : 1);
      BsGemmParams p{};
      p.codes = codes; p.scales = scales; p.x = x; p.y = y;
      p.ldx = K; p.ldy = N; p.n = N; p.k = K; p.m = M;
      p.row_bytes = fmt == 0 ? K / 2 : K;
      p.ktiles = (K + 127) / 128;
      p.out_scale = 1.0f;
      if (fmt == 0) {
        p.scale_tiles = (K / 16 + 3) / 4;
        fill_bytes<<<1024, 256, 0, st>>>(scales, sbytes, 5, 2);
      } else if (fmt == 1) {
        p.scale_tiles = (K / 32 + 3) / 4;
        p.scale_bias = 120;
        fill_bytes<<<1024, 256, 0, st>>>(scales, sbytes, 5, 3);
      } else {
        const int tile = fmt == 3 ? 32 : 128;
        p.sld = ((K + tile - 1) / tile + 3) / 4 * 4;
        p.sgroups = (N + tile - 1) / tile;
        p.flags = fmt == 3 ? 2 : 0;
        fill_f32_scales<<<1024, 256, 0, st>>>((float*)scales, sbytes / 4, 5);
      }
      CK(cudaStreamSynchronize(st));
      bool have_ref = false;
      for (const Variant& v : kVariants) {
        if (v.fmt != fmt) continue;
        const int BM = 32 * v.wm, BN = 32 * v.wn, RB = fmt == 0 ? 64 : 128;
        const int minb = 1;
        const uint32_t stage = BM * 256 + BN * RB + 2048;
        int most = 8;
        const int budget = (int)(prop.sharedMemPerMultiprocessor / minb) - 2048;  // static smem and per-CTA reserve
        while (most > 2 && (int)(most * stage + 1024) > std::min<int>(budget, (int)prop.sharedMemPerBlockOptin - 1200)) --most;
        for (int stages = most; stages >= 2 && stages >= most - 2; --stages) {
        p.stages = stages;
        p.mtiles = (M + BM - 1) / BM;
        p.kt_per = p.ktiles;
        const int smem = stages * stage + (v.wg ? 1024 : 128);
        CK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        dim3 grid(p.mtiles * ((N + BN - 1) / BN), 1, 1);
        CK(cudaMemsetAsync(y, 0xFF, (size_t)M * N * 2, st));
        v.fn<<<grid, 256, smem, st>>>(p);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(got.data(), y, (size_t)M * N * 2, cudaMemcpyDeviceToHost));
        size_t diff = 0, far = 0;
        if (!have_ref) {
          ref = got;
          have_ref = true;
        } else {
          for (size_t i = 0; i < ref.size(); ++i) {
            diff += ref[i] != got[i];
            uint32_t ua = uint32_t(ref[i]) << 16, ub = uint32_t(got[i]) << 16;
            float fa, fb;
            memcpy(&fa, &ua, 4);
            memcpy(&fb, &ub, 4);
            far += !(fabsf(fa - fb) <= 0.02f * fmaxf(fabsf(fa), fabsf(fb)) + 1e-3f);
          }
        }
        int occ = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, v.fn, 256, smem));
        const double us = time_graph(st, [&] { v.fn<<<grid, 256, smem, st>>>(p); }, 20);
        printf("%-26s M %5d N %5d K %5d  s%d occ %d  %9.1f us  %6.1f TFLOP/s  mismatches %zu far %zu%s\n", v.name, M, N, K, stages,
               occ, us, 2.0 * M * N * K / us * 1e-6, diff, far, !far ? "" : "  <-- DIFFERS");
        fflush(stdout);
        }
      }
    }
    CK(cudaFree(x)); CK(cudaFree(y)); CK(cudaFree(codes)); CK(cudaFree(scales));
  }
  return 0;
}
