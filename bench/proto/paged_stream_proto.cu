// Prototype harness (not part of the build, not the source of any reported library number): can
// a stream-K schedule read attention.paged's decode cache at >= 90% of the read ceiling where the
// library's per-request splits do not (8 x 8k and 32 x 2k, 256 MB: 81% and 86%)? Issue 4's open
// decode rows; paged/README.md "What to try next" item 2.
//
// Read-only kernels over the library's layout (K and V caches [num_pages, P = 16, Hkv = 8,
// D = 128], bf16 or 1-byte E4M3 codes, every request's pages a seeded permutation of the cache),
// with the library kernel's start chain (seq_lens -> page-table row -> first block) and a 16-key
// block of one KV head as the unit of work. 4 warps per CTA; each warp streams its blocks (K and V
// rows of the block's 16 keys) through its own STAGES-deep cp.async ring and XOR-reduces one word
// per block so no load is dead.
//   split S: the library's schedule — one CTA per (split, request x KV head); the pair's blocks
//            cut into S equal ranges; warps take the range's blocks in turn.
//   stream C: C CTAs per SM, one wave; the batch's (request x KV head, block) units in pair-major
//            order cut into equal contiguous shares, one per CTA (a CTA's share may span several
//            pairs and a pair several CTAs, as stream-K / LeanAttention decode does). Every CTA
//            reads all B lengths and scans them (what a device-side schedule costs); at each pair
//            it enters, a warp also loads that pair's q row (the Q tile the real kernel needs).
// What a read-only probe leaves out: the attention math and the merge of partial rows (for
// stream: at most 2 partial rows per CTA, against the split schedule's S per pair).
//
// Times: one launch per graph replay, the project's L2 flush, median of 30 (proto_common.cuh);
// `read` is the project's read probe on the same byte count (the size-matched ceiling).
//   cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include \
//     -o /tmp/pstream paged_stream_proto.cu && /tmp/pstream
// `clust` (PS_SHAPES runs): the split schedule in clusters of its S splits (up to the
// non-portable 16) with a DSMEM merge stand-in, and the number of SMs the grid landed on.
// `split8w`: the split schedule with 8 warps per CTA (grids of at most one CTA per SM).
// `pagemaj`: the stream schedule over a page-major unit list (a page's KV heads consecutive).
// PS_TRACE_ONLY=1 instead times the split schedule (S = 3 and 6) with per-CTA stamps, in the
// phases paged_trace_proto.cu reports for the library kernel: entry -> first block landed ->
// ring drained (warp 0), the span and the time outside it.
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <vector>
#include "../../b12x-core/kernels/read_bw.cu"
using b12x::Vec16;
using b12x::bf16;
#include "proto_common.cuh"
#include "proto_launch.cuh"
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

constexpr int P = 16, HKV = 8, D = 128, WARPS = 4;

__device__ __forceinline__ void cp16(uint32_t s, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_pending() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ uint32_t saddr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// Per-CTA stamps of the traced split runs (thread 0: entry, first block landed in warp 0, warp 0's
// ring drained) and the CTA's SM.
__device__ unsigned long long g_tr[8192][4];
__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct Args {
  const uint8_t* k;
  const uint8_t* v;
  const int* page_table;  // [B, max_pages]
  const int* seq_lens;    // [B]
  const uint8_t* q;       // [B, H, D] bf16 (only its first 256 bytes per KV-head pair are read)
  int batch, max_pages, splits;
  unsigned* sink;
};

// One 16-key block (= one page: P = 16) of KV head g: K and V, 16 rows of D * ES bytes at a
// stride of Hkv * D * ES, into ring stage dst (K rows, then V rows).
template <int ES>
__device__ __forceinline__ void issue_block(const Args& a, int page, int g, uint8_t* dst, int lane) {
  constexpr int kRow = D * ES, kChunks = kRow / 16;
  const size_t page_bytes = (size_t)P * HKV * kRow;
  const uint8_t* kp = a.k + page * page_bytes + g * kRow;
  const uint8_t* vp = a.v + page * page_bytes + g * kRow;
#pragma unroll
  for (int i = lane; i < 16 * kChunks; i += 32) {
    const int key = i / kChunks, c = i % kChunks;
    const size_t off = (size_t)key * HKV * kRow + c * 16;
    cp16(saddr(dst + key * kRow + c * 16), kp + off);
    cp16(saddr(dst + 16 * kRow + key * kRow + c * 16), vp + off);
  }
}

template <int ES, int STAGES, int W = WARPS>
struct Ring {
  static constexpr int kBlock = 2 * 16 * D * ES;
  static constexpr int kSmem = W * STAGES * kBlock;
};

// A warp's stream of blocks: unit(j) gives (page, g) of its j-th block; n blocks.
template <int ES, int STAGES, bool kTrace = false, typename Unit>
__device__ __forceinline__ unsigned stream_blocks(const Args& a, uint8_t* ring, int lane, int n, Unit&& unit) {
  using R = Ring<ES, STAGES>;
  unsigned acc = 0;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n) {
      int page, g;
      unit(s, page, g);
      issue_block<ES>(a, page, g, ring + s * R::kBlock, lane);
    }
    commit();
  }
  for (int j = 0; j < n; ++j) {
    const int nj = j + STAGES - 1;
    if (nj < n) {
      int page, g;
      unit(nj, page, g);
      issue_block<ES>(a, page, g, ring + (nj % STAGES) * R::kBlock, lane);
    }
    commit();
    wait_pending<STAGES - 1>();
    __syncwarp();
    acc ^= reinterpret_cast<const unsigned*>(ring + (j % STAGES) * R::kBlock)[lane];
    if (kTrace && j == 0 && threadIdx.x == 0) {
      asm volatile("" ::"r"(acc));
      g_tr[blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)][1] = now_ns();
    }
    __syncwarp();
  }
  wait_pending<0>();
  return acc;
}

// Every CTA of the clustered split runs records its SM here (the harness counts the SMs a grid used).
__device__ unsigned g_sm[8192];

// split S: grid (S, 1, B * HKV). kTrace: stamps into g_tr. W warps per CTA.
// kCluster: launched as clusters of its S splits (grid x = S = cluster x, up to the non-portable
// 16), ending with a stand-in of the library's cluster merge: each CTA leaves a 4-row x D f32
// partial (2 KB) in its shared memory, one cluster barrier, each CTA sums its 1/S share of the
// elements over every peer's partial through distributed shared memory, a second barrier; each
// CTA's SM goes to g_sm.
template <int ES, int STAGES, bool kTrace = false, int W = WARPS, bool kCluster = false>
__global__ void __launch_bounds__(32 * W) split_probe(const __grid_constant__ Args a) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if ((kTrace || kCluster) && threadIdx.x == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    if (kCluster) g_sm[cta] = sm;
    if (kTrace) {
      g_tr[cta][0] = now_ns();
      g_tr[cta][1] = g_tr[cta][2] = 0;
      g_tr[cta][3] = sm;
    }
  }
  const int b = blockIdx.z / HKV, g = blockIdx.z % HKV;
  const int len = __ldg(a.seq_lens + b);
  const int blocks = (len + P - 1) / P;
  const int per = (blocks + a.splits - 1) / a.splits;
  const int lo = blockIdx.x * per, hi = min(blocks, lo + per);
  const int* pt = a.page_table + (size_t)b * a.max_pages;
  unsigned acc = __ldg(reinterpret_cast<const unsigned*>(a.q + ((size_t)b * 32 + g * 4) * D * 2) + lane);
  const int n = hi - lo > warp ? (hi - lo - warp + W - 1) / W : 0;
  acc ^= stream_blocks<ES, STAGES, kTrace>(a, smem + warp * STAGES * Ring<ES, STAGES>::kBlock, lane, n,
                                           [&](int j, int& page, int& gg) {
                                             page = __ldg(pt + lo + warp + j * W);
                                             gg = g;
                                           });
  if (kTrace && threadIdx.x == 0) {
    asm volatile("" ::"r"(acc));
    g_tr[cta][2] = now_ns();
  }
  if constexpr (kCluster) {
    __syncthreads();  // the ring is free: the partial overlays it
    cg::cluster_group cluster = cg::this_cluster();
    float* part = reinterpret_cast<float*>(smem);
    for (int i = threadIdx.x; i < 4 * D; i += blockDim.x) part[i] = (float)(acc ^ (unsigned)i);
    cluster.sync();
    const int S = (int)cluster.num_blocks(), rank = (int)cluster.block_rank();
    const int share = (4 * D + S - 1) / S;
    float sum = 0.0f;
    for (int e = rank * share + threadIdx.x; e < min(4 * D, (rank + 1) * share); e += blockDim.x)
      for (int q = 0; q < S; ++q) sum += cluster.map_shared_rank(part, q)[e];
    cluster.sync();  // no CTA leaves while a peer may read its shared memory
    if (sum == 1.2345f) acc = 0x12345678u;
  }
  if (acc == 0x12345678u) a.sink[0] = acc;
}

// stream C: grid C * SMs; CTA w takes units [w U / W, (w + 1) U / W) of the pair-major list
// (kPageMajor: of the page-major list — unit u of request b is (block u / HKV, KV head u % HKV),
// so consecutive units read one page's heads, 2 KB token rows read whole).
template <int ES, int STAGES, bool kPageMajor = false>
__global__ void __launch_bounds__(32 * WARPS) stream_probe(const __grid_constant__ Args a) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ int s_start[129];  // block prefix over requests (per KV head), B <= 128
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // Every CTA scans the lengths: s_start[b] = sum of blocks of requests < b (one KV head).
  if (warp == 0) {
    int carry = 0;
    for (int base = 0; base < a.batch; base += 32) {
      const int b = base + lane;
      const int blocks = b < a.batch ? (__ldg(a.seq_lens + b) + P - 1) / P : 0;
      int x = blocks;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xFFFFFFFFu, x, o);
        if (lane >= o) x += y;
      }
      if (b < a.batch) s_start[b] = carry + x - blocks;
      carry += __shfl_sync(0xFFFFFFFFu, x, 31);
    }
    if (lane == 0) s_start[a.batch] = carry;
  }
  __syncthreads();
  // Units: pair (b, g) in order b * HKV + g holds blocks [0, blocks_b); its first unit is
  // HKV * s_start[b] + g * blocks_b.
  const long long total = (long long)HKV * s_start[a.batch];
  const long long lo = total * blockIdx.x / gridDim.x, hi = total * (blockIdx.x + 1) / gridDim.x;
  // Warp w takes units lo + w, lo + w + 4, ...: walk pairs with a cursor.
  int b = 0;  // the request of the warp's current unit (advanced monotonically)
  unsigned acc = 0;
  int cur_pair = -1;
  const int n = hi - lo > warp ? (int)((hi - lo - warp + WARPS - 1) / WARPS) : 0;
  acc ^= stream_blocks<ES, STAGES>(a, smem + warp * STAGES * Ring<ES, STAGES>::kBlock, lane, n,
                                   [&](int j, int& page, int& g) {
                                     const long long uj = lo + warp + (long long)j * WARPS;
                                     while (b + 1 < a.batch && (long long)HKV * s_start[b + 1] <= uj) ++b;
                                     const int blocks = s_start[b + 1] - s_start[b];
                                     const long long off = uj - (long long)HKV * s_start[b];
                                     int blk;
                                     if constexpr (kPageMajor) {
                                       blk = (int)(off / HKV);
                                       g = (int)(off % HKV);
                                     } else {
                                       g = (int)(off / blocks);
                                       blk = (int)(off - (long long)g * blocks);
                                     }
                                     page = __ldg(a.page_table + (size_t)b * a.max_pages + blk);
                                     const int pair = b * HKV + g;
                                     if (pair != cur_pair) {  // the Q row of a pair this warp enters
                                       cur_pair = pair;
                                       acc ^= __ldg(reinterpret_cast<const unsigned*>(
                                                        a.q + ((size_t)b * 32 + g * 4) * D * 2) +
                                                    lane);
                                     }
                                   });
  if (acc == 0x12345678u) a.sink[0] = acc;
}

template <int ES, int STAGES, bool kStream, bool kPageMajor = false, int W = WARPS>
double run(cudaStream_t st, Args a, dim3 grid) {
  static_assert(W == WARPS || !kStream, "the stream schedule has WARPS warps");
  constexpr int smem = Ring<ES, STAGES, W>::kSmem;
  auto kern = kStream ? stream_probe<ES, STAGES, kPageMajor> : split_probe<ES, STAGES, false, W>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  return time_graph(st, [&] { kern<<<grid, 32 * W, smem, st>>>(a); }, 30);
}

// The cluster probe at S splits (cluster x = S); prints nothing, returns the median and the
// number of distinct SMs the last sample's grid ran on (through `sms_used`).
template <int ES, int STAGES, int W = WARPS>
double run_cluster(cudaStream_t st, Args a, dim3 grid, int* sms_used) {
  constexpr int smem = Ring<ES, STAGES, W>::kSmem;
  auto kern = split_probe<ES, STAGES, false, W, true>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = launch_config(grid, dim3(32 * W), smem, st, true, grid.x, attr);
  int clusters = 0;
  CK(cudaOccupancyMaxActiveClusters(&clusters, kern, &cfg));
  if ((unsigned)clusters * grid.x < grid.x * grid.y * grid.z) {  // more than one wave: say so
    printf("  (cluster %u, %d stages: only %d clusters fit at once)\n", grid.x, STAGES, clusters);
  }
  const double t = time_graph(st, [&] { CK(cudaLaunchKernelEx(&cfg, kern, a)); }, 30);
  const int n = grid.x * grid.y * grid.z;
  static unsigned h[8192];
  CK(cudaMemcpyFromSymbol(h, g_sm, sizeof(unsigned) * n));
  std::vector<unsigned> v(h, h + n);
  std::sort(v.begin(), v.end());
  *sms_used = (int)(std::unique(v.begin(), v.end()) - v.begin());
  return t;
}

static double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(q * v.size()))];
}

// The split schedule traced (the last sample's stamps): per CTA, entry -> warp 0's first block
// landed, -> warp 0's ring drained; the grid's span against the event time.
template <int ES, int STAGES>
void traced_split(cudaStream_t st, Args a, int B, int ctx) {
  constexpr int smem = Ring<ES, STAGES>::kSmem;
  auto kern = split_probe<ES, STAGES, true>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(a.splits, 1, B * HKV);
  const double ev = time_graph(st, [&] { kern<<<grid, 32 * WARPS, smem, st>>>(a); }, 30);
  const int n = grid.x * grid.z;
  static unsigned long long h[8192][4];
  CK(cudaMemcpyFromSymbol(h, g_tr, sizeof(h[0]) * n));
  unsigned long long s0 = ~0ull, e1 = 0;
  std::vector<double> first, ring;
  for (int c = 0; c < n; ++c) {
    s0 = std::min(s0, h[c][0]);
    e1 = std::max(e1, h[c][2]);
    if (h[c][1]) first.push_back((h[c][1] - h[c][0]) * 1e-3);
    if (h[c][1] && h[c][2]) ring.push_back((h[c][2] - h[c][1]) * 1e-3);
  }
  printf("trace %s %4d %6d split %d st %d: event %6.2f us, span %6.2f, outside %5.2f | first block %5.2f/%5.2f | ring %6.2f/%6.2f (median/p90 us)\n",
         ES == 2 ? "bf16" : "e4m3", B, ctx, a.splits, STAGES, ev, (e1 - s0) * 1e-3, ev - (e1 - s0) * 1e-3, pct(first, 0.5),
         pct(first, 0.9), pct(ring, 0.5), pct(ring, 0.9));
}

template <int ES, int STAGES>
int ctas_per_sm(bool stream) {
  int n = 0;
  constexpr int smem = Ring<ES, STAGES>::kSmem;  // the opt-in must precede the query (> 48 KB)
  CK(cudaFuncSetAttribute(stream_probe<ES, STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(split_probe<ES, STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  if (stream)
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, stream_probe<ES, STAGES>, 32 * WARPS, Ring<ES, STAGES>::kSmem));
  else
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, split_probe<ES, STAGES>, 32 * WARPS, Ring<ES, STAGES>::kSmem));
  return n;
}

static double read_probe(cudaStream_t st, const void* buf, size_t bytes) {
  double best = 1e30;
  ReadBwParams rp{(const Vec16*)buf, g_sink, bytes / 16, 0x9e3779b9u, 0};
  for (int per_sm : {1, 2, 4}) best = std::min(best, time_graph(st, [&] { b12x_read_bw<<<132 * per_sm, 512, 0, st>>>(rp); }, 20));
  return best;
}

template <int ES>
void shape(cudaStream_t st, const cudaDeviceProp& prop, int B, int ctx) {
  const int sms = prop.multiProcessorCount;
  const int max_pages = ctx / P;
  const size_t num_pages = (size_t)B * max_pages;
  const size_t cache = num_pages * P * HKV * D * ES;
  uint8_t* kv;
  CK(cudaMalloc(&kv, 2 * cache));
  CK(cudaMemset(kv, 0x3c, 2 * cache));
  std::vector<int> pages(num_pages);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(ctx + B));
  std::vector<int> lens(B, ctx);
  int *pt, *sl;
  uint8_t* q;
  CK(cudaMalloc(&pt, num_pages * 4));
  CK(cudaMalloc(&sl, B * 4));
  CK(cudaMalloc(&q, (size_t)B * 32 * D * 2));
  CK(cudaMemset(q, 0x11, (size_t)B * 32 * D * 2));
  CK(cudaMemcpy(pt, pages.data(), num_pages * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(sl, lens.data(), B * 4, cudaMemcpyHostToDevice));
  Args a{kv, kv + cache, pt, sl, q, B, max_pages, 1, g_sink};
  const double bytes = 2.0 * cache;
  const double rd = read_probe(st, kv, 2 * cache);
  const char* es = ES == 2 ? "bf16" : "e4m3";
  auto row = [&](const char* who, int stages, int par, double us) {
    printf("%-5s %4d %6d  %-7s %d %4d %9.2f %7.3f %6.1f%%\n", es, B, ctx, who, stages, par, us, bytes / us * 1e-6,
           100.0 * rd / us);
  };
  printf("%-5s %4d %6d  %-7s %d %4s %9.2f %7.3f %6.1f%%\n", es, B, ctx, "read", 0, "-", rd, bytes / rd * 1e-6, 100.0);
  const int pairs = B * HKV;
  if (getenv("PS_TRACE_ONLY")) {
    for (int S : {3, 6}) {
      a.splits = S;
      traced_split<ES, 2>(st, a, B, ctx);
      traced_split<ES, 3>(st, a, B, ctx);
    }
    CK(cudaFree(kv));
    CK(cudaFree(pt));
    CK(cudaFree(sl));
    CK(cudaFree(q));
    return;
  }
  for (int S : {1, 2, 3, 4, 6, 8, 12, 16, 32}) {
    if (S > max_pages) continue;
    a.splits = S;
    row("split", 2, S, run<ES, 2, false>(st, a, dim3(S, 1, pairs)));
    row("split", 3, S, run<ES, 3, false>(st, a, dim3(S, 1, pairs)));
    if (pairs * S <= sms) {  // one CTA per SM at most: 8 warps (twice the blocks in flight)
      row("split8w", 2, S, run<ES, 2, false, false, 8>(st, a, dim3(S, 1, pairs)));
      row("split8w", 3, S, run<ES, 3, false, false, 8>(st, a, dim3(S, 1, pairs)));
    }
    // Clusters of the S splits with the DSMEM merge stand-in (PS_SHAPES runs only: the B = 1
    // question), and the SMs the grid used (the library's B = 1 default is S = 8, 3 stages).
    if (getenv("PS_SHAPES") && S >= 2 && S <= 16) {
      int used = 0;
      double t = run_cluster<ES, 2>(st, a, dim3(S, 1, pairs), &used);
      row("clust", 2, S, t);
      printf("      (%d SMs for %d CTAs)\n", used, S * pairs);
      t = run_cluster<ES, 3>(st, a, dim3(S, 1, pairs), &used);
      row("clust", 3, S, t);
      printf("      (%d SMs for %d CTAs)\n", used, S * pairs);
    }
  }
  for (int c : {1, 2, 3, 4}) {
    if (c <= ctas_per_sm<ES, 2>(true)) row("stream", 2, c, run<ES, 2, true>(st, a, dim3(c * sms)));
    if (c <= ctas_per_sm<ES, 3>(true)) row("stream", 3, c, run<ES, 3, true>(st, a, dim3(c * sms)));
    if (c <= ctas_per_sm<ES, 3>(true)) row("pagemaj", 3, c, run<ES, 3, true, true>(st, a, dim3(c * sms)));
  }
  CK(cudaFree(kv));
  CK(cudaFree(pt));
  CK(cudaFree(sl));
  CK(cudaFree(q));
}

int main() {
  cudaDeviceProp prop;
  cudaStream_t st = proto_init(prop);
  printf("%s, %d SMs; graph replay, project flush, median of 30; %%: of the read probe on the same bytes\n", prop.name,
         prop.multiProcessorCount);
  printf("occupancy (CTAs/SM): split bf16 s2 %d s3 %d, stream bf16 s2 %d s3 %d, e4m3 s2 %d s3 %d\n", ctas_per_sm<2, 2>(false),
         ctas_per_sm<2, 3>(false), ctas_per_sm<2, 2>(true), ctas_per_sm<2, 3>(true), ctas_per_sm<1, 2>(true),
         ctas_per_sm<1, 3>(true));
  printf("%-5s %4s %6s  %-7s %s %4s %9s %7s %7s\n", "kv", "B", "ctx", "sched", "st", "par", "us", "TB/s", "of read");
  // PS_SHAPES="B:ctx,B:ctx" (bf16 only) replaces the default list, e.g. "1:4096,1:8192" for the
  // decoder layer's B = 1 attention (session 39: it reads at ~2.2 TB/s whatever its split count).
  if (const char* env = getenv("PS_SHAPES")) {
    int B, ctx, n = 0;
    for (const char* c = env; sscanf(c, "%d:%d%n", &B, &ctx, &n) == 2; c += n + (c[n] == ',')) {
      shape<2>(st, prop, B, ctx);
      if (!c[n]) break;
    }
    return 0;
  }
  const int shapes[][2] = {{8, 2048}, {8, 8192}, {32, 2048}, {128, 2048}};
  for (auto& s : shapes) shape<2>(st, prop, s[0], s[1]);
  for (auto& s : shapes) {
    if (s[0] == 128) continue;
    shape<1>(st, prop, s[0], s[1]);
  }
  return 0;
}
