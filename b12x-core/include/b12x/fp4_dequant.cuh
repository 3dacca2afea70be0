// fp4_dequant.cuh — E2M1 (FP4) codes to BF16 without a conversion instruction, for the SM90
// dequantizing GEMM path (issue 5; bench/proto/w4a16_gemv_proto.cu measured this form, variants C,
// D and F). Host and device: the CPU suite checks every value (b12x-gemm/tests/fp4_dequant.rs).
//
// Bit placement: an E2M1 code s.e1e0.m (bias 1) with its magnitude bits e1 e0 m moved to BF16 bits
// 8..6 (the exponent's two low bits and the mantissa's top bit) and its sign to bit 15 is the BF16
// value code * 2^-126 exactly: for e >= 1 the BF16 exponent field is e (2^(e - 127) (1 + m/2) =
// 2^(e-1) (1 + m/2) * 2^-126), and for e = 0 it is BF16's subnormal m * 2^-127 = (m * 0.5) * 2^-126
// (E2M1's subnormal 0.5 on BF16's). One `mul.bf16x2` by a block scale s * 2^119 (ue4m3_bf16_x2^119,
// a normal BF16 for every finite UE4M3) then gives code * s * 2^-7 exactly (at most 6 significant
// bits, 2^-17 .. 2^4: normal), and the f32 epilogue multiplies by 2^7 / enc.
//
// Interleaved words: the packed weight's 32-bit words hold 8 consecutive k; with the nibbles of
// each pair (2q, 2q + 1) at nibbles q and q + 4 (e2m1_interleave_word) a pair converts to a bf16x2
// with two shifts, two masks and an OR (e2m1_pair_bf16_2m126<Q>).
#pragma once
#include <stdint.h>
#include <string.h>

#include "hostdevice.cuh"

namespace b12x {

// Reorders the 8 nibbles of w (element i at nibble i, the checkpoint order) so that element 2q is
// at nibble q and element 2q + 1 at nibble q + 4.
__host__ __device__ constexpr uint32_t e2m1_interleave_word(uint32_t w) {
  uint32_t o = 0;
  for (int q = 0; q < 4; ++q) {
    o |= ((w >> (8 * q)) & 0xFu) << (4 * q);
    o |= ((w >> (8 * q + 4)) & 0xFu) << (4 * q + 16);
  }
  return o;
}

// Pair Q (0..3) of an interleaved word as bf16x2 (element 2Q low, 2Q + 1 high) of code * 2^-126.
template <int Q>
__host__ __device__ __forceinline__ uint32_t e2m1_pair_bf16_2m126(uint32_t w) {
  static_assert(Q >= 0 && Q < 4, "four pairs per word");
#if defined(__CUDA_ARCH__)
  // Funnel shifts: SHF on the ALU pipe (ptxas turns plain left shifts into IMAD.SHL, which shares
  // the FMA pipe with the mul.bf16x2 that follows; measured in w4a16-proto-f).
  const uint32_t m = Q <= 1 ? __funnelshift_l(0u, w, 6 - 4 * Q) : __funnelshift_r(w, 0u, 4 * Q - 6);
  const uint32_t sg = Q == 3 ? w : __funnelshift_l(0u, w, 12 - 4 * Q);
#else
  const uint32_t m = Q <= 1 ? w << (6 - 4 * Q) : w >> (4 * Q - 6);
  const uint32_t sg = Q == 3 ? w : w << (12 - 4 * Q);
#endif
  return (sg & 0x80008000u) | (m & 0x01C001C0u);
}

// ---- pack_weight layout v2: bit-permuted words (gemm.blockscaled's SM90 W4A16 path) ----
// A packed 32-bit word holds the same 8 consecutive k as the checkpoint word (element i at nibble
// i there), with its 32 bits permuted so that the bf16x2 of code * 2^-126 of the adjacent pair
// (2Q, 2Q + 1) costs 1 (Q = 0), 2 (Q = 1, 2) or 4 (Q = 3) ALU instructions instead of ~4 each
// (9 per word instead of ~16, and no pairing of x: pair Q multiplies x's bf16x2 register Q).
// Target bit t of pair Q's output (t = 6, 7, 8: element 2Q's code bits 0, 1, 2 (m, e0, e1); 15: its
// sign; 22, 23, 24, 31: element 2Q + 1's) comes from bit (t + rot) mod 32 of the packed word,
// rot = 0, 4, 10 for Q = 0, 1, 2 and, for Q = 3, 14 at t = 6 and 22 and 6 elsewhere (the 32
// source positions are distinct: a bijection; tests/fp4_dequant.rs checks every value).
__host__ __device__ constexpr int e2m1_sm90_rot(int q, int t) {
  return q == 0 ? 0 : q == 1 ? 4 : q == 2 ? 10 : ((t == 6 || t == 22) ? 14 : 6);
}

// Target bit index j (0..7) of a pair's output: 6, 7, 8, 15, 22, 23, 24, 31.
__host__ __device__ constexpr int e2m1_sm90_target(int j) { return j < 3 ? 6 + j : j == 3 ? 15 : j < 7 ? 18 + j : 31; }

// The checkpoint word w (element i at nibble i) in layout v2.
__host__ __device__ constexpr uint32_t e2m1_sm90_permute_word(uint32_t w) {
  uint32_t o = 0;
  for (int q = 0; q < 4; ++q)
    for (int j = 0; j < 8; ++j) {
      const int elem = 2 * q + (j >> 2), bit = j & 3, t = e2m1_sm90_target(j);
      const uint32_t v = (w >> (4 * elem + bit)) & 1u;
      o |= v << ((t + e2m1_sm90_rot(q, t)) & 31);
    }
  return o;
}

// Inverse of e2m1_sm90_permute_word.
__host__ __device__ constexpr uint32_t e2m1_sm90_unpermute_word(uint32_t o) {
  uint32_t w = 0;
  for (int q = 0; q < 4; ++q)
    for (int j = 0; j < 8; ++j) {
      const int elem = 2 * q + (j >> 2), bit = j & 3, t = e2m1_sm90_target(j);
      w |= ((o >> ((t + e2m1_sm90_rot(q, t)) & 31)) & 1u) << (4 * elem + bit);
    }
  return w;
}

__host__ __device__ __forceinline__ uint32_t e2m1_rotr(uint32_t w, int n) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(w, w, n);  // SHF.R.W (ALU pipe)
#else
  return n == 0 ? w : (w >> n) | (w << (32 - n));
#endif
}

// Pair Q (elements 2Q low, 2Q + 1 high) of a layout-v2 word as bf16x2 of code * 2^-126.
template <int Q>
__host__ __device__ __forceinline__ uint32_t e2m1_sm90_pair_bf16_2m126(uint32_t w) {
  static_assert(Q >= 0 && Q < 4, "four pairs per word");
  constexpr uint32_t kM = 0x81C081C0u;
  if (Q == 0) return w & kM;
  if (Q == 1) return e2m1_rotr(w, 4) & kM;
  if (Q == 2) return e2m1_rotr(w, 10) & kM;
  constexpr uint32_t k14 = 0x00400040u;  // targets 6 and 22 come from rot 14
  return (e2m1_rotr(w, 6) & (kM & ~k14)) | (e2m1_rotr(w, 14) & k14);
}

// ---- layout-v2 words to kind::mxf8f6f4's E2M1 byte containers (SM120 W4A8, issue 5) ----
// The block-scaled FP8-shape MMA (m16n8k32, E2M1 weight x E4M3 x) takes each E2M1 code in bits
// [5:2] of a byte (padding zero). Its 32 k share one scale per operand row, so the k order inside
// a group is free as long as x follows it: container word H (0, 1) of a layout-v2 word holds, in
// bytes 0..3, elements (0, 4, 1, 5) for H = 0 and (2, 6, 3, 7) for H = 1 — the order whose bits
// need the fewest distinct rotations (four per word: an exhaustive search over the 8! orders),
// so a word of 8 codes costs 8 SHF + 8 LOP3. x's bytes take the same order with two PRMTs
// (e2m1_container_x_selector).
__host__ __device__ constexpr int e2m1_container_elem(int h, int byte) { return (byte >> 1) + 4 * (byte & 1) + 2 * h; }
// Right rotation that brings (element elem, code bit b) of a layout-v2 word to byte `byte`'s bit 2 + b.
__host__ __device__ constexpr int e2m1_container_rot(int h, int byte, int b) {
  const int elem = e2m1_container_elem(h, byte), q = elem >> 1, t = e2m1_sm90_target(4 * (elem & 1) + b);
  return (((t + e2m1_sm90_rot(q, t)) & 31) - (8 * byte + 2 + b) + 64) & 31;
}
// The target bits of container word h that rotation r supplies.
__host__ __device__ constexpr uint32_t e2m1_container_mask(int h, int r) {
  uint32_t m = 0;
  for (int byte = 0; byte < 4; ++byte)
    for (int b = 0; b < 4; ++b)
      if (e2m1_container_rot(h, byte, b) == r) m |= 1u << (8 * byte + 2 + b);
  return m;
}
// The four rotations of container word h (the search above found these; the static_assert below
// checks that they cover every target bit).
__host__ __device__ constexpr int e2m1_container_rots(int h, int i) {
  return h == 0 ? (i == 0 ? 4 : i == 1 ? 6 : i == 2 ? 10 : 12) : (i == 0 ? 2 : i == 1 ? 8 : i == 2 ? 10 : 14);
}
// The bits container word h's four rotations supply together (every code bit: 0x3C3C3C3C).
__host__ __device__ constexpr uint32_t e2m1_container_cover(int h) {
  uint32_t m = 0;
  for (int i = 0; i < 4; ++i) m |= e2m1_container_mask(h, e2m1_container_rots(h, i));
  return m;
}
static_assert(e2m1_container_cover(0) == 0x3C3C3C3Cu && e2m1_container_cover(1) == 0x3C3C3C3Cu,
              "each container word: four rotations cover every code bit");

// Container word H of a layout-v2 word (elements per e2m1_container_elem, each code << 2).
template <int H>
__host__ __device__ __forceinline__ uint32_t e2m1_sm90_containers(uint32_t w) {
  static_assert(H == 0 || H == 1, "two container words per word");
  constexpr int r0 = e2m1_container_rots(H, 0), r1 = e2m1_container_rots(H, 1), r2 = e2m1_container_rots(H, 2),
                r3 = e2m1_container_rots(H, 3);
  return (e2m1_rotr(w, r0) & e2m1_container_mask(H, r0)) | (e2m1_rotr(w, r1) & e2m1_container_mask(H, r1)) |
         (e2m1_rotr(w, r2) & e2m1_container_mask(H, r2)) | (e2m1_rotr(w, r3) & e2m1_container_mask(H, r3));
}
// The byte_perm selector that puts bytes (8 consecutive k of x: lo word, hi word) in container
// word H's element order.
__host__ __device__ constexpr uint32_t e2m1_container_x_selector(int h) { return h == 0 ? 0x5140u : 0x7362u; }

// ---- layout-v2 words to kind::mxf4nvf4's packed nibbles (SM120 NVFP4 x NVFP4, issue 5) ----
// The FP4-shape MMA (m16n8k64, E2M1 x E2M1, one UE4M3 per 16 k and operand row: scale_vec::4X)
// takes 8 packed E2M1 codes per register. A register's 8 k (lane t's word: 8 consecutive k, inside
// one 16-k scale block) share the scale of each operand row, so their order is free as long as x
// follows it: nibble n of the converted word holds element e2m1_nibble_elem(n) = (5, 0, 2, 6, 4,
// 1, 3, 7)[n] — an order in which the 32 bits of a layout-v2 word need only four distinct
// rotations, one of them zero (an exhaustive search over the 8! orders; the natural order needs
// 11 with this layout: ~22 ALU, and x would need nothing, but the weight is the hot operand): a
// word costs 3 SHF + 4 LOP3. x takes the same order when the native kernels' pre-pass stages it
// (e2m1_nibble_x_word), so the k loop spends nothing on x.
__host__ __device__ constexpr int e2m1_nibble_elem(int n) {
  return n == 0 ? 5 : n == 1 ? 0 : n == 2 ? 2 : n == 3 ? 6 : n == 4 ? 4 : n == 5 ? 1 : n == 6 ? 3 : 7;
}
// Right rotation that brings (element e2m1_nibble_elem(n), code bit b) of a layout-v2 word to bit
// 4 n + b.
__host__ __device__ constexpr int e2m1_nibble_rot(int n, int b) {
  const int elem = e2m1_nibble_elem(n), q = elem >> 1, t = e2m1_sm90_target(4 * (elem & 1) + b);
  return (((t + e2m1_sm90_rot(q, t)) & 31) - (4 * n + b) + 64) & 31;
}
// The bits of the converted word that rotation r supplies.
__host__ __device__ constexpr uint32_t e2m1_nibble_mask(int r) {
  uint32_t m = 0;
  for (int n = 0; n < 8; ++n)
    for (int b = 0; b < 4; ++b)
      if (e2m1_nibble_rot(n, b) == r) m |= 1u << (4 * n + b);
  return m;
}
static_assert((e2m1_nibble_mask(0) | e2m1_nibble_mask(2) | e2m1_nibble_mask(6) | e2m1_nibble_mask(8)) == 0xFFFFFFFFu,
              "rotations 0, 2, 6 and 8 supply every bit of the packed word");

// A layout-v2 word as kind::mxf4nvf4's packed E2M1 nibbles, element e2m1_nibble_elem(n) at
// nibble n.
__host__ __device__ __forceinline__ uint32_t e2m1_sm90_nibbles(uint32_t w) {
  return (w & e2m1_nibble_mask(0)) | (e2m1_rotr(w, 2) & e2m1_nibble_mask(2)) | (e2m1_rotr(w, 6) & e2m1_nibble_mask(6)) |
         (e2m1_rotr(w, 8) & e2m1_nibble_mask(8));
}
// A checkpoint-order word (element i at nibble i: NVFP4 x as b12x-quant writes it) in the same
// order: nibble n holds element e2m1_nibble_elem(n).
__host__ __device__ constexpr uint32_t e2m1_nibble_x_word(uint32_t w) {
  uint32_t o = 0;
  for (int n = 0; n < 8; ++n) o |= ((w >> (4 * e2m1_nibble_elem(n))) & 0xFu) << (4 * n);
  return o;
}

// The BF16 bits of ue4m3(code) * 2^119 (code 0..126: finite UE4M3; exact, normal).
__host__ __device__ inline uint16_t ue4m3_bf16_x2p119(uint32_t code) {
  const uint32_t e = (code >> 3) & 0xFu, m = code & 7u;
  if (e != 0) return (uint16_t)(((e + 239u) << 7) | (m << 4));  // 2^(e - 7) (1 + m/8) * 2^119
  if (m == 0) return 0;
  // Subnormal m * 2^-9 * 2^119 = m * 2^110: normalize the 3-bit m.
  const uint32_t top = m >= 4 ? 2u : m >= 2 ? 1u : 0u;  // m = 2^top (1 + f)
  const uint32_t frac = (m << (7 - top)) & 0x7Fu;         // the bits below the leading one, at 6..
  return (uint16_t)(((110u + top + 127u) << 7) | frac);
}

// E4M3 (FP8 weights of gemm.blockscaled's W8A16 path): bytes 2Q and 2Q + 1 of a little-endian
// word of four codes (k order) as a bf16x2 of code * 2^-120, exactly: the sign to bit 15 and the
// seven exponent-mantissa bits to bits 10..4 of each half. BF16's exponent field then holds
// E4M3's (bias 7 against 127: the 2^-120), and E4M3 subnormals (exponent 0) land on BF16
// subnormals of the same significand, so every finite code is exact; the kernels multiply by
// 2^120 or a block scale times it in BF16 (exact). The NaN codes 0x7F / 0xFF decode as +-480 *
// 2^-120: pack_weight refuses weights that hold them. Four instructions per pair on the device
// (PRMT, SHF, two LOP3).
template <int Q>
__host__ __device__ __forceinline__ uint32_t e4m3_pair_bf16_2m120(uint32_t w) {
  static_assert(Q == 0 || Q == 1, "two pairs per word");
#ifdef __CUDA_ARCH__
  const uint32_t p = __byte_perm(w, 0u, Q == 0 ? 0x1404u : 0x3424u);  // bytes 2Q, 2Q+1 to bytes 1, 3
#else
  const uint32_t lo = (w >> (16 * Q)) & 0xFFu, hi = (w >> (16 * Q + 8)) & 0xFFu;
  const uint32_t p = (lo << 8) | (hi << 24);
#endif
  return (p & 0x80008000u) | ((p >> 4) & 0x07F007F0u);
}

}  // namespace b12x
