// fp4_dequant_ref.cpp — the host build of b12x-core/include/b12x/fp4_dequant.cuh, printing its
// values for tests/fp4_dequant.rs. Lines:
//   "pair Q LO HI BITS": elements 2Q = LO, 2Q + 1 = HI (E2M1 codes) of a checkpoint-order word whose
//                        other nibbles are 0x5A3C.. filler, interleaved, converted: BITS (bf16x2)
//   "interleave W OUT": e2m1_interleave_word(W)
//   "scale CODE BITS": ue4m3_bf16_x2p119(CODE), CODE 0..126
//   "v2pair Q LO HI BITS": elements 2Q = LO, 2Q + 1 = HI of a checkpoint word (other nibbles filler),
//                        permuted to layout v2 and converted by e2m1_sm90_pair_bf16_2m126<Q>
//   "v2word W OUT BACK": e2m1_sm90_permute_word(W) and its inverse applied to that
//   "e4m3 Q LO HI BITS": bytes 2Q = LO, 2Q + 1 = HI (E4M3 codes) of a word whose other bytes are
//                        filler, converted by e4m3_pair_bf16_2m120<Q>: BITS (bf16x2)
//   "cont W C0 C1 S0 S1": checkpoint word W permuted to layout v2 and converted to its two E2M1
//                        container words C0, C1 (e2m1_sm90_containers<H>); S0, S1: the selectors
//                        of e2m1_container_x_selector applied (byte_perm) to the bytes 0..7
//   "nib W N X": checkpoint word W permuted to layout v2 and converted to kind::mxf4nvf4's packed
//                        nibbles (e2m1_sm90_nibbles): N; W itself in that nibble order
//                        (e2m1_nibble_x_word, x's staging): X
#include <cstdio>

#include "b12x/fp4_dequant.cuh"

using namespace b12x;

int main() {
  for (int q = 0; q < 4; ++q)
    for (uint32_t lo = 0; lo < 16; ++lo)
      for (uint32_t hi = 0; hi < 16; ++hi) {
        uint32_t w = 0x9E3779B9u;  // filler in the other nibbles
        w &= ~(0xFFu << (8 * q));
        w |= (lo | (hi << 4)) << (8 * q);
        const uint32_t il = e2m1_interleave_word(w);
        uint32_t r = 0;
        switch (q) {
          case 0: r = e2m1_pair_bf16_2m126<0>(il); break;
          case 1: r = e2m1_pair_bf16_2m126<1>(il); break;
          case 2: r = e2m1_pair_bf16_2m126<2>(il); break;
          default: r = e2m1_pair_bf16_2m126<3>(il); break;
        }
        std::printf("pair %d %u %u %u\n", q, lo, hi, r);
      }
  const uint32_t words[] = {0x76543210u, 0xFEDCBA98u, 0x9E3779B9u, 0x00000000u, 0xFFFFFFFFu, 0x12345678u};
  for (uint32_t w : words) std::printf("interleave %u %u\n", w, e2m1_interleave_word(w));
  for (int q = 0; q < 4; ++q)
    for (uint32_t lo = 0; lo < 16; ++lo)
      for (uint32_t hi = 0; hi < 16; ++hi) {
        uint32_t w = 0x6A09E667u;
        w &= ~(0xFFu << (8 * q));
        w |= (lo | (hi << 4)) << (8 * q);
        const uint32_t v2 = e2m1_sm90_permute_word(w);
        uint32_t r = 0;
        switch (q) {
          case 0: r = e2m1_sm90_pair_bf16_2m126<0>(v2); break;
          case 1: r = e2m1_sm90_pair_bf16_2m126<1>(v2); break;
          case 2: r = e2m1_sm90_pair_bf16_2m126<2>(v2); break;
          default: r = e2m1_sm90_pair_bf16_2m126<3>(v2); break;
        }
        std::printf("v2pair %d %u %u %u\n", q, lo, hi, r);
      }
  for (uint32_t i = 0; i < 64; ++i) {
    const uint32_t w = i < 6 ? words[i] : (i * 0x9E3779B9u) ^ (i << 7);
    const uint32_t o = e2m1_sm90_permute_word(w);
    std::printf("v2word %u %u %u\n", w, o, e2m1_sm90_unpermute_word(o));
  }
  for (int q = 0; q < 2; ++q)
    for (uint32_t lo = 0; lo < 256; ++lo)
      for (uint32_t hi = 0; hi < 256; ++hi) {
        uint32_t w = 0xC3A5F00Du;  // filler in the other two bytes
        w &= ~(0xFFFFu << (16 * q));
        w |= (lo | (hi << 8)) << (16 * q);
        const uint32_t r = q == 0 ? e4m3_pair_bf16_2m120<0>(w) : e4m3_pair_bf16_2m120<1>(w);
        std::printf("e4m3 %d %u %u %u\n", q, lo, hi, r);
      }
  for (uint32_t i = 0; i < 16 + 256; ++i) {
    // Every nibble value at every position (i < 16), then mixed words.
    const uint32_t w = i < 16 ? i * 0x11111111u : (i * 0x9E3779B9u) ^ (i << 11) ^ (i >> 3);
    const uint32_t v2 = e2m1_sm90_permute_word(w);
    uint32_t sel[2];
    for (int h = 0; h < 2; ++h) {
      // byte_perm(lo, hi, s) on the host: result byte j is byte (s >> 4 j) & 7 of {lo, hi}.
      const uint64_t bytes = 0x0706050403020100ull;
      const uint32_t s = e2m1_container_x_selector(h);
      uint32_t r = 0;
      for (int j = 0; j < 4; ++j) r |= (uint32_t)((bytes >> (8 * ((s >> (4 * j)) & 7u))) & 0xFFu) << (8 * j);
      sel[h] = r;
    }
    std::printf("cont %u %u %u %u %u\n", w, e2m1_sm90_containers<0>(v2), e2m1_sm90_containers<1>(v2), sel[0], sel[1]);
  }
  for (uint32_t i = 0; i < 16 + 32 + 256; ++i) {
    // Every nibble value at every position, every single bit, then mixed words.
    const uint32_t w = i < 16 ? i * 0x11111111u : i < 48 ? 1u << (i - 16) : (i * 0x9E3779B9u) ^ (i << 11) ^ (i >> 3);
    std::printf("nib %u %u %u\n", w, e2m1_sm90_nibbles(e2m1_sm90_permute_word(w)), e2m1_nibble_x_word(w));
  }
  for (uint32_t c = 0; c < 127; ++c) std::printf("scale %u %u\n", c, (uint32_t)ue4m3_bf16_x2p119(c));
  return 0;
}
