// common.cuh — shared device helpers for every b12x kernel.                crate: b12x-core
//   Vector types and 16-byte loads/stores, type conversions, warp/block reductions, arch guards.
// Device code only; include from kernels/*.cu as #include "b12x/common.cuh".
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace b12x {

// SM120/SM121-only instructions (block-scaled mma.sync) must sit behind this guard.
// __CUDA_ARCH_FAMILY_SPECIFIC__ alone is not enough: it is also defined for sm_90a.
#if defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL)
#define B12X_SM120_FEATURES 1
#else
#define B12X_SM120_FEATURES 0
#endif

using bf16 = __nv_bfloat16;
using fp16 = __half;

// 16 bytes, the unit of every vectorized global access.
struct alignas(16) Vec16 {
  uint32_t w[4];
};

// Number of elements of T in one 16-byte vector.
template <typename T>
struct VecN {
  static constexpr int value = 16 / sizeof(T);
};

__device__ __forceinline__ Vec16 ld_global_v16(const void* p) {
  Vec16 v;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
               : "l"(p));
  return v;
}

// Streaming load: data read once (weights), do not keep it in L1.
__device__ __forceinline__ Vec16 ld_global_stream_v16(const void* p) {
  Vec16 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
               : "l"(p));
  return v;
}

// Coherent load (data this grid may have written earlier, e.g. split-K partials).
__device__ __forceinline__ Vec16 ld_global_cg_v16(const void* p) {
  Vec16 v;
  asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
               : "l"(p));
  return v;
}

__device__ __forceinline__ void st_global_v16(void* p, const Vec16& v) {
  asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]),
               "r"(v.w[2]), "r"(v.w[3])
               : "memory");
}

template <typename T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_f32<bf16>(bf16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_f32<fp16>(fp16 v) { return __half2float(v); }

// Round-to-nearest-even conversion from f32 (the one rounding of every op's output).
template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ fp16 from_f32<fp16>(float v) { return __float2half_rn(v); }

// Unpack a 16-byte vector of T into floats (N = 16 / sizeof(T)).
template <typename T>
__device__ __forceinline__ void unpack_f32(const Vec16& v, float (&out)[16 / sizeof(T)]) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < int(16 / sizeof(T)); ++i) out[i] = to_f32<T>(e[i]);
}
// bf16 -> f32 is the bf16 bits in the top half of the f32: one shift (low element) or one mask
// (high element) per value, where element-wise conversion costs a PRMT and a shift for the high
// one. The same values, bit for bit.
template <>
__device__ __forceinline__ void unpack_f32<bf16>(const Vec16& v, float (&out)[8]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(v.w[i] << 16);
    out[2 * i + 1] = __uint_as_float(v.w[i] & 0xFFFF0000u);
  }
}

template <typename T>
__device__ __forceinline__ Vec16 pack_from_f32(const float (&in)[16 / sizeof(T)]) {
  Vec16 v;
  T* e = reinterpret_cast<T*>(&v);
#pragma unroll
  for (int i = 0; i < int(16 / sizeof(T)); ++i) e[i] = from_f32<T>(in[i]);
  return v;
}

// Butterfly sum over a full warp; every lane gets the same value, in the same order.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Deterministic block sum: warp butterflies, then warp 0 sums the per-warp values in order.
// `s_red` must hold 33 floats. Every thread returns the total. Contains __syncthreads().
__device__ __forceinline__ float block_sum(float v, float* s_red) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  if (lane == 0) s_red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < nwarps ? s_red[lane] : 0.0f;
    t = warp_sum(t);
    if (lane == 0) s_red[32] = t;
  }
  __syncthreads();
  return s_red[32];
}

// Programmatic dependent launch (PDL, sm_90+). A kernel launched with programmatic stream
// serialization may start while the kernel before it on the stream is still running:
// `pdl_wait` blocks until that kernel has completed and its writes are visible (it returns at
// once when the launch had no programmatic dependency), so everything that may depend on the
// previous kernel (activations, outputs, scratch) goes after it; only data nothing on the
// stream writes (weights) may be read before. `pdl_launch_dependents` lets the next
// PDL-launched kernel start once every CTA of this grid has issued it (or exited).
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
// The usual pair: wait for the previous kernel, then let the next PDL kernel launch (so at most
// the kernel right before this one is still running while this one reads early).
__device__ __forceinline__ void pdl_wait_then_release() {
  pdl_wait();
  pdl_launch_dependents();
}

// Arrival counting without a memset node before the kernel. The 64-bit word holds
// `tag << 16 | arrivals`, where the tag is this launch's %gridid (the temporal grid launch
// number) with bit 47 set, so neither zeroed nor all-ones memory carries it. A word without
// this launch's tag (anything another kernel or an eager launch left there) counts as zero
// arrivals. Replays of one graph node reuse their grid id (measured on the H200), so the last
// of `total` arrivals also clears the word: the next replay then starts from zero. Returns the
// arrivals before this one; `total` at most 65535. Only the first arrival of a launch needs a
// compare-and-swap (to stamp the tag); the others see the tag and add, so many arrivals on one
// word (every CTA of a grid) do not retry in a loop: a CAS-only version took 150 µs for 528 CTAs.
__device__ __forceinline__ unsigned long long launch_tag() {
  unsigned long long id;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(id));
  return ((id & 0x7fffffffffffull) | 0x800000000000ull) << 16;
}
__device__ __forceinline__ unsigned int arrive_tagged(unsigned long long* word, unsigned int total) {
  const unsigned long long tag = launch_tag();
  unsigned long long seen = *reinterpret_cast<volatile unsigned long long*>(word);
  bool first = false;
  while ((seen & ~0xffffull) != tag) {  // not stamped for this launch yet: stamp it with one arrival
    const unsigned long long old = atomicCAS(word, seen, tag | 1ull);
    if (old == seen) {
      first = true;
      break;
    }
    seen = old;
  }
  const unsigned int before = first ? 0u : unsigned(atomicAdd(word, 1ull) & 0xffffull);
  if (before + 1 == total) atomicExch(word, 0ull);  // every arrival of this launch is in
  return before;
}

}  // namespace b12x
