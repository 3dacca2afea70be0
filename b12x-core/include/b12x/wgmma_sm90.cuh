// wgmma_sm90.cuh — SM90 (sm_90a) warpgroup MMA helpers for the SM90-only kernel candidates.
//                                                                              crate: b12x-core
// Everything here is behind B12X_SM90_FEATURES (sm_90a only: wgmma does not exist on SM120 /
// SM121, and compute_90 without the `a` suffix lacks it too); callers guard their kernels the
// same way and the Rust side lists those kernels on SM90 devices only. Device code only.
// PTX ISA: "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions" (wgmma).
#pragma once
#include <stdint.h>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define B12X_SM90_FEATURES 1
#else
#define B12X_SM90_FEATURES 0
#endif

namespace b12x {
namespace wg {

// Shared-memory matrix descriptor of a K-major bf16 tile in the 128-byte swizzle: rows of 128
// bytes (64 k), 16-byte chunk c of row r at chunk c ^ (r % 8), 8-row groups 1024 bytes apart
// (stride byte offset), the leading byte offset unused (1), atoms 1024-byte aligned. A k16 step
// s of a 64-k slab starts 32 s bytes into it (the hardware applies the swizzle to the address).
__device__ __forceinline__ uint64_t desc_sw128(uint32_t s_addr) {
  return (uint64_t)((s_addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
         ((uint64_t)1 << 62);
}

#if B12X_SM90_FEATURES
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Orders this thread's generic-proxy view of shared memory (cp.async data it has acquired)
// before its later async-proxy accesses (the wgmmas that read it).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// D[64 x 128] += A[64 x 16] B[16 x 128], A (bf16) from registers — each warp w of the
// warpgroup holds rows 16 w .. 16 w + 15 in mma.m16n8k16's A fragment (a0: row g, k 2t, 2t + 1;
// a1: row g + 8; a2: row g, k 2t + 8, 2t + 9; a3: row g + 8) — B (bf16, K-major: 128 columns
// of 16 contiguous k) from shared memory by descriptor, f32 accumulators d[4 j + e]: row 16 w +
// g + 8 (e >> 1), column 8 j + 2 t + (e & 1).
// accumulate = false overwrites d (scale-d = 0).
__device__ __forceinline__ void mma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(int(accumulate)));
}
// D[64 x 64] += A[64 x 16] B[16 x 64]: mma_m64n128k16_rs's operands and layout at N = 64
// (d[4 j + e], columns 8 j + 2 t + (e & 1), j < 8).
__device__ __forceinline__ void mma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(int(accumulate)));
}
#endif

}  // namespace wg
}  // namespace b12x
