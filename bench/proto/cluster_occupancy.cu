// Prototype (not part of the build): how many thread block clusters of a paged-decode-shaped
// kernel (128 threads, the given dynamic shared memory, the given CTAs per SM by registers)
// the device holds at once, by cudaOccupancyMaxActiveClusters, for cluster sizes 1-8 and the
// non-portable 12 and 16 (cudaFuncAttributeNonPortableClusterSizeAllowed).
//   nvcc -std=c++17 -O3 -arch=sm_90a -o /tmp/cocc cluster_occupancy.cu && /tmp/cocc
#include <cuda_runtime.h>
#include <cstdio>
#include "proto_launch.cuh"

template <int MINB>
__global__ void __launch_bounds__(128, MINB) dummy(int* p) {
  extern __shared__ int s[];
  if (p) s[threadIdx.x] = p[threadIdx.x];
}

template <int MINB>
void query(const char* name, int smem) {
  cudaFuncSetAttribute(dummy<MINB>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(dummy<MINB>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, dummy<MINB>, 128, smem);
  printf("%-28s smem %6d B: %d CTAs/SM by occupancy\n", name, smem, per_sm);
  for (int c : {1, 2, 3, 4, 6, 8, 12, 16}) {
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = launch_config(dim3(c, 1, 64), dim3(128, 1, 1), smem, nullptr, true, c, attr);
    int clusters = 0;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, dummy<MINB>, &cfg);
    printf("  cluster %d: %4d clusters = %4d CTAs at once (%s)\n", c, clusters, clusters * c, cudaGetErrorString(e));
  }
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  query<2>("bf16 d128 s3 n8 (2/SM)", 102784);
  query<3>("bf16 d128 s2 n8 (3/SM)", 70016);
  query<4>("e4m3 d128 s2 n8 (4/SM)", 37760);
  query<2>("any, 1/SM by smem", 200000);
  return 0;
}
