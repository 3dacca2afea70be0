// fp_ref.cu — CUDA's own host conversions, compiled for the CPU: the reference the CPU codecs of
// b12x-quant are checked against (tests/cuda_host_reference.rs builds and runs this).
//
//   fp_ref IN.f32 OUT.bin
//   fp_ref --exhaustive-e2m1      (prints the first few, then the number, of the checks on the
//                                  2^32 f32 inputs in which b12x's kernel E2M1 differs from
//                                  __nv_cvt_float_to_fp4: e2m1_rne, the magic form of
//                                  e2m1_mag_bits_not_nan, e2m1_mag_bits_below7 on [0, 7))
//
// IN: n little-endian f32. OUT: n bytes of E4M3 codes, n of E5M2, n of E2M1 (all
// __nv_cvt_float_to_fp8/_fp4 with __NV_SATFINITE / cudaRoundNearest), n of E2M1 from b12x's
// own kernel code (b12x-core/include/b12x/e2m1.cuh, compiled here for the CPU), then the decode of every code
// as f32 through the header's halfraw conversions: 256 E4M3, 256 E5M2, 16 E2M1.
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cuda_fp16.h>

#include "../../../b12x-core/include/b12x/e2m1.cuh"

#include <cstdio>
#include <cstring>
#include <vector>

static float half_to_float(__half_raw h) {
  // IEEE binary16 -> binary32 by hand (host code; every half value is exact in f32).
  const unsigned s = (h.x >> 15) & 1u, e = (h.x >> 10) & 0x1Fu, m = h.x & 0x3FFu;
  unsigned bits;
  if (e == 0x1F) {
    bits = (s << 31) | 0x7F800000u | (m << 13);
  } else if (e != 0) {
    bits = (s << 31) | ((e - 15 + 127) << 23) | (m << 13);
  } else if (m == 0) {
    bits = s << 31;
  } else {
    // subnormal half: m * 2^-24
    float v = (float)m / 16777216.0f;
    std::memcpy(&bits, &v, 4);
    bits |= s << 31;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Every f32 bit pattern through b12x::e2m1_rne and CUDA's conversion; for every non-NaN input,
// e2m1_mag_bits_not_nan is 1.5 * 2^23 + a code 0..7 (the form pack_e2m1_nibbles adds up); and
// for every f32 in [0, 7), e2m1_mag_bits_below7 (the unclamped form) is 1.5 * 2^23 + CUDA's code.
static int exhaustive_e2m1() {
  const unsigned magic = 0x4B400000u;  // 1.5 * 2^23
  const unsigned seven = 0x40E00000u;  // 7.0f
  unsigned long long bad = 0;
  for (unsigned long long i = 0; i < (1ull << 32); ++i) {
    const unsigned u = (unsigned)i;
    float x;
    std::memcpy(&x, &u, 4);
    const unsigned cuda = __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest);
    const unsigned ours = b12x::e2m1_rne(x);
    if (ours != cuda && bad++ < 8) std::printf("%08x: b12x %x, CUDA %x\n", u, ours, cuda);
    if (x != x) continue;
    const unsigned mag = b12x::e2m1_mag_bits_not_nan(x) - magic;
    if (mag != (cuda & 7u) && bad++ < 8) std::printf("%08x: e2m1_mag_bits_not_nan - magic %x, CUDA %x\n", u, mag, cuda);
    if (u < seven) {  // 0 <= x < 7
      const unsigned below = b12x::e2m1_mag_bits_below7(x) - magic;
      if (below != cuda && bad++ < 8) std::printf("%08x: e2m1_mag_bits_below7 - magic %x, CUDA %x\n", u, below, cuda);
    }
  }
  std::printf("%llu\n", bad);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--exhaustive-e2m1") == 0) return exhaustive_e2m1();
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN.f32 OUT.bin\n", argv[0]);
    return 2;
  }
  FILE* in = std::fopen(argv[1], "rb");
  if (!in) return 3;
  std::vector<float> x;
  float v;
  while (std::fread(&v, 4, 1, in) == 1) x.push_back(v);
  std::fclose(in);
  const size_t n = x.size();
  std::vector<unsigned char> out(4 * n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3);
    out[n + i] = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E5M2);
    out[2 * n + i] = __nv_cvt_float_to_fp4(x[i], __NV_E2M1, cudaRoundNearest);
    out[3 * n + i] = (unsigned char)b12x::e2m1_rne(x[i]);
  }
  std::vector<float> dec;
  for (int c = 0; c < 256; ++c) dec.push_back(half_to_float(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3)));
  for (int c = 0; c < 256; ++c) dec.push_back(half_to_float(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E5M2)));
  for (int c = 0; c < 16; ++c) dec.push_back(half_to_float(__nv_cvt_fp4_to_halfraw((__nv_fp4_storage_t)c, __NV_E2M1)));
  FILE* o = std::fopen(argv[2], "wb");
  if (!o) return 4;
  std::fwrite(out.data(), 1, out.size(), o);
  std::fwrite(dec.data(), 4, dec.size(), o);
  std::fclose(o);
  return 0;
}
