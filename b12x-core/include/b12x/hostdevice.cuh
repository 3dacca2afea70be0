// hostdevice.cuh — lets a header of __host__ __device__ functions compile as plain C++ for the
// CPU (the host-side tests build e2m1.cuh and mma_sm120.cuh with the system C++ compiler): the
// CUDA function qualifiers become nothing / `inline` outside nvcc.
#pragma once

#if !defined(__CUDACC__) && !defined(__host__)
#define __host__
#define __device__
#define __forceinline__ inline
#endif
