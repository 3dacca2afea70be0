// paging.cuh — what the attention kernels share about a paged batch.     crate: b12x-attention
//   The fault bits of the error word and the check of a batch's packing (src/paging.rs has
//   the rules and the host side).
#pragma once
#include <stdint.h>

namespace b12x {

// Fault bits (src/paging.rs: FAULT_PAGE_ID, FAULT_LENGTH, FAULT_QUERY_LAYOUT, FAULT_POSITION).
constexpr unsigned int kFaultPageId = 1;
constexpr unsigned int kFaultLength = 2;
constexpr unsigned int kFaultQueryLayout = 4;
constexpr unsigned int kFaultPosition = 8;

// Whether cu_seqlens_q packs `tokens` rows validly: 0 <= cu[0] <= ... <= cu[B] <= tokens, with
// cu(j) reading entry j (from global memory, or a copy in shared memory). Every thread of the
// CTA calls it (a CTA barrier inside).
template <typename Load>
__device__ __forceinline__ bool packing_ok_by(Load cu, int batch, int tokens) {
  bool bad = false;
  for (int j = threadIdx.x; j < batch; j += blockDim.x) bad |= cu(j) > cu(j + 1);
  if (threadIdx.x == 0) bad |= cu(0) < 0 || cu(batch) > tokens;
  return !__syncthreads_or(bad);
}

// packing_ok_by over the device array cu.
__device__ __forceinline__ bool packing_ok(const int32_t* cu, int batch, int tokens) {
  return packing_ok_by([cu](int j) { return __ldg(cu + j); }, batch, tokens);
}

}  // namespace b12x
