// proto_trace.cuh — per-CTA timelines for the prototype harnesses in bench/proto (not part of
// the build): each traced kernel calls trace_start() first and trace_end() last; report() prints
// the last replay's launch skew, CTA durations and exits against the event-timed call;
// traced_read is the plain streaming read the harnesses compare against. Include after
// proto_common.cuh.
#pragma once
#include <algorithm>
#include <vector>

// [cta][0] start, [cta][1] end (ns, globaltimer), [cta][2] SM id.
__device__ unsigned long long g_trace[4096][3];

__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void trace_start() {
  if (threadIdx.x == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    g_trace[blockIdx.x][0] = gtimer();
    g_trace[blockIdx.x][1] = 0;
    g_trace[blockIdx.x][2] = sm;
  }
}
__device__ __forceinline__ void trace_end() {
  __syncwarp();
  if ((threadIdx.x & 31) == 0) atomicMax(&g_trace[blockIdx.x][1], gtimer());
}

// One CTA per SM (grid = SMs x c), each reading a contiguous slice with 16-byte loads, 4 in flight.
__global__ void __launch_bounds__(512) traced_read(const uint4* src, size_t n, uint32_t* sink) {
  trace_start();
  const size_t per = (n + gridDim.x - 1) / gridDim.x;
  const size_t lo = blockIdx.x * per, hi = lo + per < n ? lo + per : n;
  uint32_t acc = 0;
  for (size_t i = lo + threadIdx.x; i < hi; i += 4 * blockDim.x) {
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = i + j * blockDim.x < hi ? __ldcs(src + i + j * blockDim.x) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < 4; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  if (acc == 0x12345678) *sink = acc;
  trace_end();
}

__global__ void timer_resolution(unsigned long long* out) {
  unsigned long long a = gtimer(), b;
  do b = gtimer(); while (b == a);
  unsigned long long c;
  do c = gtimer(); while (c == b);
  *out = c - b;
}

// Prints the timeline of the last replay's trace for `grid` CTAs against the event time.
static void report(const char* what, int grid, double event_us) {
  static unsigned long long h[4096][3];
  CK(cudaMemcpyFromSymbol(h, g_trace, sizeof(unsigned long long) * 3 * grid));
  unsigned long long s0 = ~0ull, s1 = 0, e1 = 0;
  std::vector<double> dur, ends;
  for (int c = 0; c < grid; ++c) {
    s0 = std::min(s0, h[c][0]); s1 = std::max(s1, h[c][0]); e1 = std::max(e1, h[c][1]);
    dur.push_back((h[c][1] - h[c][0]) * 1e-3);
  }
  for (int c = 0; c < grid; ++c) ends.push_back((h[c][1] - s0) * 1e-3);
  std::sort(dur.begin(), dur.end()); std::sort(ends.begin(), ends.end());
  int sms_used = 0; { std::vector<int> seen(1024, 0); for (int c = 0; c < grid; ++c) if (!seen[h[c][2]]++) ++sms_used; }
  printf("  %-44s event %7.2f us | CTAs %4d on %3d SMs | start skew %5.2f | dur min %6.2f med %6.2f max %6.2f | "
         "ends p10 %6.2f p50 %6.2f p90 %6.2f last %6.2f | outside CTAs %5.2f\n",
         what, event_us, grid, sms_used, (s1 - s0) * 1e-3, dur.front(), dur[dur.size() / 2], dur.back(),
         ends[ends.size() / 10], ends[ends.size() / 2], ends[ends.size() * 9 / 10], (e1 - s0) * 1e-3, event_us - (e1 - s0) * 1e-3);
}

