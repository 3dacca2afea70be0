// bsmma_probe.cu — one block-scaled warp MMA per launch, for tests (not an op).  crate: b12x-gemm
//   D[16, 8] = (A * SF_A)[16, K] . ((B * SF_B)[8, K])^T + C, f32,
//   SF_A[m][s] scaling A[m][k] for k in chunk s = k / (K / S), SF_B[n][s] likewise.
// Tensors (row-major bytes, one element code per byte, E2M1 codes in the low 4 bits):
//   a [16, K]  b [8, K] (B's columns as rows)  sfa [16, S]  sfb [8, S]  c, d [16, 8] f32.
// Forms (entry point: element x element, K, S, scale type):
//   b12x_bsmma_probe_mxf8_e4m3  E4M3 x E4M3, K 32, S 1, UE8M0    (kind::mxf8f6f4)
//   b12x_bsmma_probe_mxf8_e2m1  E2M1 x E2M1, K 32, S 1, UE8M0    (kind::mxf8f6f4, byte containers)
//   b12x_bsmma_probe_mxf4       E2M1 x E2M1, K 64, S 2, UE8M0    (kind::mxf4nvf4 2X, packed)
//   b12x_bsmma_probe_nvf4       E2M1 x E2M1, K 64, S 4, UE4M3    (kind::mxf4nvf4 4X, packed)
//   b12x_bsmma_probe_e2m1_e4m3  E2M1 x E4M3, K 32, S 1, UE8M0  (kind::mxf8f6f4: W4A8)
// sm_120a / sm_121a: the lanes gather their fragments and scale registers with the index
// functions of b12x/mma_sm120.cuh and run the hardware MMA (UNVALIDATED: no SM120 GPU here; on
// such a GPU the test gpu_bsmma_probe checks it against the CPU product). Other targets: each lane
// computes its D elements in f32 from the same tensors (the portable definition of the product,
// the one the H200 runs). One warp; launch <<<1, 32>>>.
// Oracle: tests/gpu_bsmma_probe.rs (f64 product of the decoded codes and scales).
#include "b12x/common.cuh"
#include "b12x/mma_sm120.cuh"

namespace b12x {

// Mirrored by tests/gpu_bsmma_probe.rs.
struct BsmmaProbeParams {
  const unsigned char* a;
  const unsigned char* b;
  const unsigned char* sfa;
  const unsigned char* sfb;
  const float* c;
  float* d;
};

constexpr int kFormMxf8E4m3 = 0;
constexpr int kFormMxf8E2m1 = 1;
constexpr int kFormMxf4 = 2;
constexpr int kFormNvf4 = 3;
constexpr int kFormMxf8E2m1E4m3 = 4;  // A E2M1 (byte containers), B E4M3

template <int kForm>
struct ProbeForm {
  static constexpr bool kK32 = kForm <= kFormMxf8E2m1 || kForm == kFormMxf8E2m1E4m3;
  static constexpr int K = kK32 ? 32 : 64;
  static constexpr int S = kForm == kFormNvf4 ? 4 : kForm == kFormMxf4 ? 2 : 1;
};

#if !B12X_SM120_FEATURES
// Decoders of the portable path (formats.md): E4M3, E2M1, UE8M0, UE4M3 as f32.
__device__ __forceinline__ float probe_e4m3(uint32_t c) {
  const uint32_t e = (c >> 3) & 0xF, m = c & 7;
  const float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), (int)e - 10);
  return (c & 0x80) ? -v : v;
}
__device__ __forceinline__ float probe_e2m1(uint32_t c) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = mag[c & 7];
  return (c & 8) ? -v : v;
}
#endif

template <int kForm>
__device__ __forceinline__ void bsmma_probe(const BsmmaProbeParams& p) {
  constexpr int K = ProbeForm<kForm>::K, S = ProbeForm<kForm>::S;
  const int lane = threadIdx.x & 31;
#if B12X_SM120_FEATURES
  uint32_t a[4] = {0u, 0u, 0u, 0u}, b[2] = {0u, 0u};
  if constexpr (ProbeForm<kForm>::kK32) {
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bsmma::Coord x = bsmma::k32_a(lane, r, j);
        const uint32_t v = p.a[x.row * K + x.col];
        a[r] |= (kForm == kFormMxf8E4m3 ? v : bsmma::e2m1_container(v)) << (8 * j);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bsmma::Coord x = bsmma::k32_b(lane, r, j);
        const uint32_t v = p.b[x.col * K + x.row];
        b[r] |= (kForm == kFormMxf8E2m1 ? bsmma::e2m1_container(v) : v) << (8 * j);
      }
  } else {
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const bsmma::Coord x = bsmma::k64_a(lane, r, j);
        a[r] |= (p.a[x.row * K + x.col] & 0xFu) << (4 * j);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const bsmma::Coord x = bsmma::k64_b(lane, r, j);
        b[r] |= (p.b[x.col * K + x.row] & 0xFu) << (4 * j);
      }
  }
  // Scale registers: chunk s in byte s, from the lanes the selectors (all zero) name.
  uint32_t sfa = 0u, sfb = 0u;
  const int ra = bsmma::sfa_row_of(lane), cb = bsmma::sfb_col_of(lane);
#pragma unroll
  for (int s = 0; s < S; ++s) {
    if (ra >= 0) sfa |= (uint32_t)p.sfa[ra * S + s] << (8 * s);
    if (cb >= 0) sfb |= (uint32_t)p.sfb[cb * S + s] << (8 * s);
  }
  float c[4], d[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const bsmma::Coord x = bsmma::cd(lane, i);
    c[i] = p.c[x.row * 8 + x.col];
  }
  if constexpr (kForm == kFormMxf8E4m3) {
    bsmma::mma_mxf8_e4m3(d, a, b, c, sfa, sfb);
  } else if constexpr (kForm == kFormMxf8E2m1) {
    bsmma::mma_mxf8_e2m1(d, a, b, c, sfa, sfb);
  } else if constexpr (kForm == kFormMxf8E2m1E4m3) {
    bsmma::mma_mxf8_e2m1_e4m3(d, a, b, c, sfa, sfb);
  } else if constexpr (kForm == kFormMxf4) {
    bsmma::mma_mxf4(d, a, b, c, sfa, sfb);
  } else {
    bsmma::mma_nvf4(d, a, b, c, sfa, sfb);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const bsmma::Coord x = bsmma::cd(lane, i);
    p.d[x.row * 8 + x.col] = d[i];
  }
#else
  // Portable: lane's D elements (the same ones as the MMA's), in f32, k in order.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const bsmma::Coord x = bsmma::cd(lane, i);
    float acc = p.c[x.row * 8 + x.col];
    for (int k = 0; k < K; ++k) {
      const int s = k / (K / S);
      const uint32_t ca = p.a[x.row * K + k], cb = p.b[x.col * K + k];
      const float va = kForm == kFormMxf8E4m3 ? probe_e4m3(ca) : probe_e2m1(ca);
      const float vb = kForm == kFormMxf8E4m3 || kForm == kFormMxf8E2m1E4m3 ? probe_e4m3(cb) : probe_e2m1(cb);
      const uint32_t ua = p.sfa[x.row * S + s], ub = p.sfb[x.col * S + s];
      // UE8M0: 2^(code - 127); UE4M3: E4M3 of a non-negative value.
      const float sa = kForm == kFormNvf4 ? probe_e4m3(ua) : ldexpf(1.0f, (int)ua - 127);
      const float sb = kForm == kFormNvf4 ? probe_e4m3(ub) : ldexpf(1.0f, (int)ub - 127);
      acc = fmaf(va * sa, vb * sb, acc);
    }
    p.d[x.row * 8 + x.col] = acc;
  }
#endif
}

}  // namespace b12x

#define B12X_BSMMA_PROBE(NAME, FORM)                                                                      \
  extern "C" __global__ void __launch_bounds__(32) b12x_bsmma_probe_##NAME(const __grid_constant__ b12x::BsmmaProbeParams p) { \
    b12x::bsmma_probe<FORM>(p);                                                                           \
  }
B12X_BSMMA_PROBE(mxf8_e4m3, b12x::kFormMxf8E4m3)
B12X_BSMMA_PROBE(mxf8_e2m1, b12x::kFormMxf8E2m1)
B12X_BSMMA_PROBE(mxf4, b12x::kFormMxf4)
B12X_BSMMA_PROBE(nvf4, b12x::kFormNvf4)
B12X_BSMMA_PROBE(e2m1_e4m3, b12x::kFormMxf8E2m1E4m3)
