// Prototype harness: per-CTA timelines of attention.paged decode (not part of the build, not the
// source of any reported number). Defines the kernel's B12X_PAGED_TRACE hooks to stamp
// %globaltimer at 7 points of each CTA (thread 0), builds the bench's decode case (Llama-3-8B
// heads: H 32, Hkv 8, D 128, P 16, B requests of ctx keys, pages scattered by a seeded
// permutation, random BF16 / E4M3 caches), replays one launch per graph with the project's L2
// flush (median of 30 samples) and prints, per config, the event time and where a CTA's time
// goes (medians and p90 over CTAs of the last sample):
//   t0 entry · t1 lengths and chunk known · t2 first 16-key block landed (warp 0) · t3 ring
//   drained · t4 warps merged · t5 split merge barrier passed (cluster) or arrival counted
//   (scratch) · t6 outputs written (t5 = exit for scratch splits that are not last); inside the
//   8-row tiles' pushed merge also t7 max of m over the splits · t8 weighted sum over the splits ·
//   t9 division, each with the SM clock (the finish's sub-phases, in cycles, below the phases);
//   and t10 every warp done with its ring (the CTA barrier after t3) · t11 warp partials in shared
//   memory: the warp merge's parts (t3 -> t10 is the warps' skew).
// Configs: the plan's choices for B = 8 ("plan": BF16 2 splits, E4M3 6, in clusters), session 11's
// (3 BF16 splits) and session 10's (scratch merge).
// PT_WARM=1 (environment) puts a 1-key launch of the same kernel, on data of its own, before
// each timed launch in the graph: the timed one then finds its code in L2 (cold-code test; the
// event then includes both launches, the phases are the timed one's). PT_WARM_KEYS=N gives that
// launch N keys per request (N > 512: it runs the split merge's code too). PT_CAPS="4,2" times
// only BF16 3-stage cluster runs at those split caps; PT_UNSPLIT=1 only BF16 at 1 split (both
// ring depths) and 2 splits in clusters.
// -DPT_PREFETCH=1 builds the variant that prefetches the page-table row at CTA entry
// (B12X_PAGED_ENTRY; compare the two binaries' rows in one job).
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include \
//     -o /tmp/ptrace paged_trace_proto.cu && /tmp/ptrace [B ctx]
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

constexpr int kTracePoints = 12;
__device__ unsigned long long g_ptrace[8192][kTracePoints + 1];  // + SM id
// SM clock at each point (the finish's sub-phases are shorter than %globaltimer's steps).
__device__ long long g_pclk[8192][kTracePoints];

__device__ __forceinline__ unsigned long long ptrace_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void ptrace_at(int point, int dep) {
  // The stamp waits for `dep` (a value the phase produced) to exist.
  asm volatile("" ::"r"(dep));
  const int cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  g_ptrace[cta][point] = ptrace_now();
  g_pclk[cta][point] = clock64();
  if (point == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    g_ptrace[cta][kTracePoints] = sm;
    for (int i = 1; i < kTracePoints; ++i) g_ptrace[cta][i] = 0;
  }
}
#define B12X_PAGED_TRACE(point, dep)             \
  do {                                           \
    if (threadIdx.x == 0) ptrace_at(point, (int)(dep)); \
  } while (0)

#ifndef PT_PREFETCH
#define PT_PREFETCH 0
#endif
// Entry experiment (session 12, not yet run): built with -DPT_PREFETCH=1, threads prefetch the
// request's page-table row into L2 at CTA entry (one 128-byte line each), so the page-id load
// that waits for the lengths hits L2. (A second binary, not a runtime flag: reading a flag at
// entry would itself add a round trip to the chain being measured.)
#if PT_PREFETCH
#define B12X_PAGED_ENTRY(p, b)                                                                   \
  do {                                                                                           \
    if ((int)threadIdx.x * 32 < (p).max_pages)                                                   \
      asm volatile("prefetch.global.L2 [%0];" ::"l"((p).page_table + (long long)(b) * (p).pt_stride + \
                                                   32 * threadIdx.x));                           \
  } while (0)
#endif

#include "../../b12x-attention/kernels/paged.cu"
#include "../../b12x-core/kernels/read_bw.cu"

using bf16 = b12x::bf16;
#include "proto_common.cuh"
#include "proto_launch.cuh"

template <bool kE4m3, int STAGES, int MINB>
__global__ void __launch_bounds__(128, MINB) traced_paged(const __grid_constant__ b12x::PagedParams p) {
  b12x::paged_attention<b12x::bf16, kE4m3, 128, 4, STAGES, true>(p);
}

static double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(q * v.size()))];
}

// The last sample's trace of `grid` CTAs against the event time.
static void report(const char* what, int grid, double event_us) {
  static unsigned long long h[8192][kTracePoints + 1];
  static long long ck[8192][kTracePoints];
  CK(cudaMemcpyFromSymbol(h, g_ptrace, sizeof(h[0]) * grid));
  CK(cudaMemcpyFromSymbol(ck, g_pclk, sizeof(ck[0]) * grid));
  std::vector<double> fin[4];  // finish sub-phases in SM cycles: 5->7, 7->8, 8->9, 9->6
  std::vector<double> wm[3];   // warp merge sub-phases in SM cycles: 3->10, 10->11, 11->4
  unsigned long long s0 = ~0ull, s1 = 0, e1 = 0;
  std::vector<double> ph[7];
  int active = 0, sms = 0;
  std::vector<int> seen(1024, 0);
  for (int c = 0; c < grid; ++c) {
    s0 = std::min(s0, h[c][0]);
    s1 = std::max(s1, h[c][0]);
    if (!seen[h[c][kTracePoints] & 1023]++) ++sms;
    const unsigned long long end = h[c][6] ? h[c][6] : h[c][5] ? h[c][5] : h[c][0];
    e1 = std::max(e1, end);
    if (!h[c][1]) continue;  // left at the top (no split to take)
    ++active;
    for (int i = 1; i < 7; ++i)
      if (h[c][i] && h[c][i - 1]) ph[i].push_back((h[c][i] - h[c][i - 1]) * 1e-3);
    if (h[c][3] && h[c][10] && h[c][11] && h[c][4]) {
      wm[0].push_back(double(ck[c][10] - ck[c][3]));
      wm[1].push_back(double(ck[c][11] - ck[c][10]));
      wm[2].push_back(double(ck[c][4] - ck[c][11]));
    }
    if (h[c][7] && h[c][8] && h[c][9] && h[c][6] && h[c][5]) {
      fin[0].push_back(double(ck[c][7] - ck[c][5]));
      fin[1].push_back(double(ck[c][8] - ck[c][7]));
      fin[2].push_back(double(ck[c][9] - ck[c][8]));
      fin[3].push_back(double(ck[c][6] - ck[c][9]));
    }
  }
  printf("  %-36s event %7.2f us | %4d CTAs (%d active) on %3d SMs | start skew %5.2f | span %6.2f | outside %5.2f\n",
         what, event_us, grid, active, sms, (s1 - s0) * 1e-3, (e1 - s0) * 1e-3, event_us - (e1 - s0) * 1e-3);
  const char* names[7] = {"", "lengths", "first block", "ring", "warp merge", "split barrier", "finish"};
  printf("  %-36s", "");
  for (int i = 1; i < 7; ++i) printf(" %s %5.2f/%5.2f |", names[i], pct(ph[i], 0.5), pct(ph[i], 0.9));
  printf(" (median/p90 us)\n");
  if (!wm[0].empty())
    printf("  %-36s warp merge (thread 0, SM cycles median/p90): warps' skew %.0f/%.0f | partials to shared %.0f/%.0f | "
           "merge and push %.0f/%.0f\n", "", pct(wm[0], 0.5), pct(wm[0], 0.9), pct(wm[1], 0.5), pct(wm[1], 0.9),
           pct(wm[2], 0.5), pct(wm[2], 0.9));
  if (!fin[0].empty())
    printf("  %-36s finish (pushed merge, thread 0, SM cycles median/p90): max m %.0f/%.0f | sum over splits %.0f/%.0f | "
           "division %.0f/%.0f | outputs stored %.0f/%.0f\n", "", pct(fin[0], 0.5), pct(fin[0], 0.9), pct(fin[1], 0.5),
           pct(fin[1], 0.9), pct(fin[2], 0.5), pct(fin[2], 0.9), pct(fin[3], 0.5), pct(fin[3], 0.9));
}

__global__ void fill_bytes(unsigned char* p, size_t n, uint32_t seed, bool e4m3) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    if (e4m3) {
      p[i] = (unsigned char)(h & 0x77u);  // |value| <= 240, never NaN
    } else if (i & 1) {
      p[i] = (unsigned char)(0x3Eu + ((h >> 8) & 1u) * 0x80u);  // bf16 high byte: +-[0.125, 0.5)
    } else {
      p[i] = (unsigned char)h;
    }
  }
}

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  const int B = argc > 2 ? atoi(argv[1]) : 8, ctx = argc > 2 ? atoi(argv[2]) : 2048;
  const int H = 32, HKV = 8, D = 128, P = 16;
  const int pages_per_req = ctx / P, num_pages = B * pages_per_req + 3;
  printf("%s, %d SMs; decode B = %d x ctx %d, H %d, Hkv %d, D %d, P %d, pages scattered%s\n", prop.name,
         prop.multiProcessorCount, B, ctx, H, HKV, D, P, PT_PREFETCH ? "; page-table row prefetched at entry" : "");
  const size_t cache_elems = (size_t)num_pages * P * HKV * D;
  unsigned char *kc, *vc, *q, *o;
  CK(cudaMalloc(&kc, cache_elems * 2));
  CK(cudaMalloc(&vc, cache_elems * 2));
  CK(cudaMalloc(&q, (size_t)B * H * D * 2));
  CK(cudaMalloc(&o, (size_t)B * H * D * 2));
  fill_bytes<<<1024, 256>>>(q, (size_t)B * H * D * 2, 7, false);
  std::vector<int> perm(num_pages);
  for (int i = 0; i < num_pages; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), std::mt19937(1));
  std::vector<int> pt((size_t)B * pages_per_req), lens(B, ctx), cu(B + 1);
  for (size_t i = 0; i < pt.size(); ++i) pt[i] = perm[i];
  for (int b = 0; b <= B; ++b) cu[b] = b;
  int *d_pt, *d_lens, *d_cu;
  unsigned* d_err;
  float *scales, *partials, *partial_ml;
  unsigned long long* counters;
  CK(cudaMalloc(&d_pt, pt.size() * 4));
  CK(cudaMalloc(&d_lens, B * 4));
  CK(cudaMalloc(&d_cu, (B + 1) * 4));
  CK(cudaMalloc(&d_err, 4));
  CK(cudaMalloc(&scales, 2 * B * HKV * 4));
  CK(cudaMalloc(&partials, (size_t)B * HKV * 64 * 16 * D * 4));
  CK(cudaMalloc(&partial_ml, (size_t)B * HKV * 64 * 32 * 4));
  CK(cudaMalloc(&counters, (size_t)B * HKV * 8));
  CK(cudaMemset(counters, 0, (size_t)B * HKV * 8));
  CK(cudaMemcpy(d_pt, pt.data(), pt.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_lens, lens.data(), B * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_cu, cu.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
  {
    std::vector<float> s(2 * B * HKV, 0.01f);
    CK(cudaMemcpy(scales, s.data(), s.size() * 4, cudaMemcpyHostToDevice));
  }
  const bool warm = getenv("PT_WARM") != nullptr;
  int *d_lens1, *d_pt_warm;
  unsigned char* q_warm;
  {
    // PT_WARM_KEYS=N: the warm-up batch's length (default 1: one split, so the split merges'
    // code stays cold; N > 2 * 256 keys runs them too).
    const int warm_keys = getenv("PT_WARM_KEYS") ? std::min(atoi(getenv("PT_WARM_KEYS")), ctx) : 1;
    std::vector<int> ones(B, warm_keys), spare(pt.size(), num_pages - 1);
    CK(cudaMalloc(&d_lens1, B * 4));
    CK(cudaMalloc(&d_pt_warm, pt.size() * 4));
    CK(cudaMalloc(&q_warm, (size_t)B * H * D * 2));
    CK(cudaMemset(q_warm, 0, (size_t)B * H * D * 2));
    CK(cudaMemcpy(d_lens1, ones.data(), B * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_pt_warm, spare.data(), spare.size() * 4, cudaMemcpyHostToDevice));
  }
  if (warm) printf("PT_WARM: a 1-key launch of the same kernel precedes each timed one in the graph (code in L2)\n");
  CK(cudaDeviceSynchronize());

  auto run = [&](auto kernel, bool e4m3, int stages, int cap, bool cluster, const char* what) {
    fill_bytes<<<1024, 256>>>(kc, cache_elems * (e4m3 ? 1 : 2), 1, e4m3);
    fill_bytes<<<1024, 256>>>(vc, cache_elems * (e4m3 ? 1 : 2), 2, e4m3);
    CK(cudaDeviceSynchronize());
    // The kernels timed are the 8-row (_n8) ones. -DPT_SMEM5: a kernel from before session 18,
    // whose PagedSmem had no kSwap parameter (A/B against an older paged.cu).
#ifdef PT_SMEM5
#define PT_N8
#else
#define PT_N8 , true
#endif
    using SmemS3 = b12x::PagedSmem<b12x::bf16, false, 128, 4, 3 PT_N8>;
    using SmemS2 = b12x::PagedSmem<b12x::bf16, false, 128, 4, 2 PT_N8>;
    using SmemE = b12x::PagedSmem<b12x::bf16, true, 128, 4, 2 PT_N8>;
    const int smem = e4m3 ? SmemE::kBytes : stages == 3 ? SmemS3::kBytes : SmemS2::kBytes;
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    b12x::PagedParams p{};
    p.q = q;
    p.k_cache = kc;
    p.v_cache = vc;
    p.k_scale = e4m3 ? scales : nullptr;
    p.v_scale = e4m3 ? scales + B * HKV : nullptr;
    p.page_table = d_pt;
    p.seq_lens = d_lens;
    p.cu_seqlens_q = d_cu;
    p.o = o;
    p.error = d_err;
    p.partials = partials;
    p.partial_ml = partial_ml;
    p.counters = counters;
    p.q_stride = H * D;
    p.o_stride = H * D;
    p.tokens = B;
    p.batch = B;
    p.max_pages = pages_per_req;
    p.pt_stride = pages_per_req;
    p.num_pages = num_pages;
    p.heads = H;
    p.kv_heads = HKV;
    p.page_size = P;
    p.tiles = 1;
    p.max_splits = cap;
    p.min_chunk = 256;
    p.scale_log2 = 1.4426950408889634f / sqrtf((float)D);
    p.window_left = -1;
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = launch_config(dim3(cap, 1, B * HKV), dim3(128, 1, 1), smem, st, cluster, cap, attr);
    // PT_WARM=1: the same kernel runs first in the graph (after the flush) on a 1-key batch of
    // its own (lengths, page table, q and the spare pages), so the timed launch finds the
    // kernel's code in L2 but none of its data.
    b12x::PagedParams pw = p;
    pw.seq_lens = d_lens1;
    pw.page_table = d_pt_warm;
    pw.q = q_warm;
    const double t = time_graph(st, [&] {
      if (warm) CK(cudaLaunchKernelEx(&cfg, kernel, pw));
      CK(cudaLaunchKernelEx(&cfg, kernel, p));
    });
    report(what, cap * B * HKV, t);
  };
  // PT_CAPS="a,b,...": only BF16 s3 cluster runs at these split caps (e.g. other batch sizes).
  if (const char* caps = getenv("PT_CAPS")) {
    printf("BF16 KV, 8-row tiles, PT_CAPS=%s\n", caps);
    for (const char* c = caps; *c;) {
      const int cap = atoi(c);
      char what[64];
      snprintf(what, sizeof what, "s3, %d splits, cluster", cap);
      run(traced_paged<false, 3, 2>, false, 3, cap, true, what);
      while (*c && *c != ',') ++c;
      if (*c) ++c;
    }
    return 0;
  }
  // PT_UNSPLIT=1: BF16 with 1 split (no merge; what B = 32 x 2k takes) at both ring depths,
  // and 2 splits in clusters of 2.
  if (getenv("PT_UNSPLIT")) {
    printf("BF16 KV, 8-row tiles, PT_UNSPLIT\n");
    run(traced_paged<false, 2, 3>, false, 2, 1, false, "s2, 1 split (B = 32 default)");
    run(traced_paged<false, 3, 2>, false, 3, 1, false, "s3, 1 split");
    run(traced_paged<false, 2, 3>, false, 2, 2, true, "s2, 2 splits, cluster");
    run(traced_paged<false, 3, 2>, false, 3, 2, true, "s3, 2 splits, cluster");
    return 0;
  }
  printf("BF16 KV, 8-row tiles\n");
  run(traced_paged<false, 3, 2>, false, 3, 3, true, "s3, 3 splits, cluster (session 11)");
  run(traced_paged<false, 3, 2>, false, 3, 2, true, "s3, 2 splits, cluster (plan, B = 8)");
  run(traced_paged<false, 3, 2>, false, 3, 4, false, "s3, 4 splits, scratch (session 10)");
  run(traced_paged<false, 2, 3>, false, 2, 3, true, "s2, 3 splits, cluster");
  printf("E4M3 KV, 8-row tiles\n");
  run(traced_paged<true, 2, 4>, true, 2, 6, true, "s2, 6 splits, cluster (plan, B = 8)");
  run(traced_paged<true, 2, 4>, true, 2, 8, false, "s2, 8 splits, scratch (session 10)");
  run(traced_paged<true, 2, 4>, true, 2, 4, true, "s2, 4 splits, cluster");
  return 0;
}
