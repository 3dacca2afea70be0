// mma.cuh — warp-level tensor-core and async-copy wrappers.                crate: b12x-core
//   mma.sync (BF16/FP16 m16n8k16, f32 accumulate), ldmatrix, cp.async. Portable to SM80+,
//   in particular SM90 and SM120/SM121 (no wgmma, no tcgen05). Device code only.
// Fragment layouts are the PTX ISA's; each wrapper links the section that defines them.
#pragma once
#include <stdint.h>

#include "b12x/common.cuh"

namespace b12x {

// D = A * B + C, m16n8k16, A row-major bf16, B column-major bf16, C/D f32.
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-instructions-mma
// Fragments (https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-fragment-mma-16816-float),
// with g = lane / 4, t = lane % 4:
//   a[0] = A[g][2t..2t+1]    a[1] = A[g+8][2t..2t+1]  a[2] = A[g][2t+8..2t+9]  a[3] = A[g+8][2t+8..2t+9]
//   b[0] = B[2t..2t+1][g]    b[1] = B[2t+8..2t+9][g]
//   c[0..1] = C[g][2t..2t+1]  c[2..3] = C[g+8][2t..2t+1]
// (lower k index in the low 16 bits of each register).
__device__ __forceinline__ void mma_m16n8k16_bf16_f32(float (&d)[4], const uint32_t (&a)[4],
                                                      const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Same shape with FP16 inputs.
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-instructions-mma
__device__ __forceinline__ void mma_m16n8k16_f16_f32(float (&d)[4], const uint32_t (&a)[4],
                                                     const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Converts a generic pointer to shared memory into a 32-bit shared-space address.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices from shared memory; lane i supplies the row address of matrix i / 8.
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-instructions-ldmatrix
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t s_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s_addr));
}

// Same, transposed on load (for a row-major B operand).
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-instructions-ldmatrix
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t s_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s_addr));
}

// 16-byte global -> shared asynchronous copy, bypassing L1.
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async
__device__ __forceinline__ void cp_async_cg_16(uint32_t s_addr, const void* g_ptr) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s_addr), "l"(g_ptr) : "memory");
}

// 16-byte global -> shared asynchronous copy through L1 (data other warps of the CTA re-read).
// When `valid` is false nothing is read and the 16 shared bytes are zero-filled (src-size 0).
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async
__device__ __forceinline__ void cp_async_ca_16_zfill(uint32_t s_addr, const void* g_ptr,
                                                     bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(s_addr), "l"(g_ptr),
               "r"(valid ? 16 : 0)
               : "memory");
}

// 16-byte global -> shared asynchronous copy bypassing L1; when `valid` is false nothing is read
// and the 16 shared bytes are zero-filled (src-size 0).
__device__ __forceinline__ void cp_async_cg_16_zfill(uint32_t s_addr, const void* g_ptr, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s_addr), "l"(g_ptr), "r"(valid ? 16 : 0)
               : "memory");
}

// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async-commit-group
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Waits until at most kPending committed groups are still in flight.
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async-wait-group
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// ---- mbarrier + bulk asynchronous copies (SM90 and later: sm_90a, sm_120a, sm_121a) ----
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-mbarrier

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Makes initialized mbarriers visible to the async proxy (bulk copies); then __syncthreads.
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrives once and raises the barrier's expected transaction bytes by `bytes`.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Blocks until the phase with parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// `bytes` (multiple of 16, 16-byte aligned ends) global -> shared by the bulk-copy engine,
// completing as transaction bytes on mbarrier `bar`.
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async-bulk
__device__ __forceinline__ void bulk_copy_g2s(uint32_t s_dst, const void* g_src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(s_dst),
               "l"(g_src), "r"(bytes), "r"(bar)
               : "memory");
}

// A CUtensorMap (the driver's opaque 128-byte TMA descriptor, 64-byte aligned), passed to
// kernels inside a `__grid_constant__` parameter struct. Encoded on the host with
// `cuTensorMapEncodeTiled`.
struct alignas(64) TmaDescriptor {
  unsigned long long opaque[16];
};

// Pulls a descriptor (in the kernel's parameter space) into the descriptor cache early.
__device__ __forceinline__ void tma_prefetch_descriptor(const TmaDescriptor* desc) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(desc) : "memory");
}

// An L2 policy for data read once (weights streamed past the cache).
__device__ __forceinline__ uint64_t l2_policy_evict_first() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// An L2 policy for data every CTA re-reads (activations).
__device__ __forceinline__ uint64_t l2_policy_evict_last() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// One 2-D box of a tensor map (box origin: element c0 of the inner dimension, c1 of the outer)
// into shared memory at `s_dst` (1024-byte aligned for the 128-byte swizzle), completing as
// transaction bytes on mbarrier `bar`. Out-of-bounds elements are filled with zeros and still
// count: the transaction is always the full box.
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cp-async-bulk-tensor
__device__ __forceinline__ void tma_load_2d(uint32_t s_dst, const TmaDescriptor* desc, int c0, int c1, uint32_t bar,
                                            uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(s_dst),
      "l"(desc), "r"(c0), "r"(c1), "r"(bar), "l"(policy)
      : "memory");
}

// tma_load_2d without an L2 hint.
__device__ __forceinline__ void tma_load_2d(uint32_t s_dst, const TmaDescriptor* desc, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(s_dst),
      "l"(desc), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// Thread block clusters (sm_90+): this CTA's rank in its cluster, the cluster's size, a
// full cluster barrier (every thread of every CTA; release/acquire orders shared memory
// writes before it with reads after it), and a load from another CTA's shared memory at
// the address `s_local` has in this CTA.
__device__ __forceinline__ int cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return int(r);
}
__device__ __forceinline__ int cluster_size() {
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return int(n);
}
// The two halves of cluster_sync, for a phase whose arrival and wait are apart: arrive_relaxed
// orders nothing (a "have started" or "no longer reading" signal), arrive_release publishes this
// thread's earlier writes (shared::cluster included) to every thread past the matching wait.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive_release();
  cluster_wait();
}
// The address in the cluster's shared window of the variable at `s_local` in CTA `rank`.
__device__ __forceinline__ uint32_t mapa_shared(uint32_t s_local, int rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(s_local), "r"(rank));
  return remote;
}
// Stores to a cluster shared-window address (mapa_shared): fire and forget; a later
// cluster_arrive_release publishes them.
__device__ __forceinline__ void st_shared_cluster_v4_f32(uint32_t remote, float a, float b, float c, float d) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(remote), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}
__device__ __forceinline__ void st_shared_cluster_v2_f32(uint32_t remote, float a, float b) {
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" ::"r"(remote), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ void st_shared_f32(uint32_t s_addr, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(s_addr), "f"(v) : "memory");
}
__device__ __forceinline__ float ld_shared_cluster_f32(uint32_t s_local, int rank) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(mapa_shared(s_local, rank)) : "memory");
  return v;
}
// ld_shared_cluster_f32 for data a cluster barrier has already published and nobody writes any
// more: volatile only to stay after that barrier, no memory clobber, so independent loads stay
// in flight together.
__device__ __forceinline__ float ld_shared_cluster_f32_published(uint32_t s_local, int rank) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(mapa_shared(s_local, rank)));
  return v;
}

// Byte offset of 16-byte chunk `chunk` (0..7) of row `row` in a tile of 128-byte rows stored
// with the TMA 128-byte swizzle (tile 1024-byte aligned): the chunk index is XORed with row % 8.
__device__ __forceinline__ uint32_t swizzle128_offset(int row, int chunk) {
  return uint32_t(row * 128 + ((chunk ^ (row & 7)) << 4));
}

}  // namespace b12x
