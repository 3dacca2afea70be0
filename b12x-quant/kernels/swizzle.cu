// swizzle.cu — quantization.swizzle_scales: block scales row-major [rows, cols] u8 <-> the
//   swizzled 128x4 layout of b12x_quant::layout (padded to ceil(rows/128)*128 x ceil(cols/4)*4,
//   padding bytes 0).   crate: b12x-quant
// Tensors: rm [rows, cols] u8 (row stride ld bytes)   sw [swizzled_len(rows, cols)] u8 contiguous.
// Strategy: to_swizzled: one thread per swizzled byte (padding included), inverse offset map,
//   one byte read from rm (or 0); from_swizzled: one thread per row-major byte. Both write every
//   output byte exactly once (no races, deterministic).
// Entry points: b12x_swizzle_scales_to, b12x_swizzle_scales_from.   Oracle: layout::to_swizzled / from_swizzled.
#include "b12x/common.cuh"

struct SwizzleParams {
  unsigned char* rm;       // [rows, cols]
  unsigned char* sw;       // swizzled
  long long ld;            // bytes between rows of rm
  long long total;         // bytes of the output (swizzled_len or rows * cols)
  int rows;
  int cols;
};
static_assert(sizeof(SwizzleParams) == 40, "mirror of SwizzleParams in src/swizzle.rs");

extern "C" __global__ void __launch_bounds__(256) b12x_swizzle_scales_to(const __grid_constant__ SwizzleParams p) {
  const long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= p.total) return;
  const int col_tiles = (p.cols + 3) >> 2;
  const long long tile = o >> 9;
  const int within = (int)(o & 511);
  const long long r = (tile / col_tiles) * 128 + ((within & 15) >> 2) * 32 + (within >> 4);
  const int c = (int)(tile % col_tiles) * 4 + (within & 3);
  p.sw[o] = (r < p.rows && c < p.cols) ? p.rm[r * p.ld + c] : (unsigned char)0;
}

extern "C" __global__ void __launch_bounds__(256) b12x_swizzle_scales_from(const __grid_constant__ SwizzleParams p) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.total) return;
  const int r = (int)(i / p.cols);
  const int c = (int)(i % p.cols);
  const int col_tiles = (p.cols + 3) >> 2;
  const long long o = ((long long)(r >> 7) * col_tiles + (c >> 2)) * 512 + (r & 31) * 16 + ((r & 127) >> 5) * 4 + (c & 3);
  p.rm[(long long)r * p.ld + c] = p.sw[o];
}
