// proto_launch.cuh — a cudaLaunchKernelEx configuration, optionally with a thread block cluster
// along x, for the prototype harnesses in bench/proto (not part of the build).
#pragma once
#include <cuda_runtime.h>

// `attr` must outlive the configuration's use; with `cluster` false it is not attached.
static cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t smem, cudaStream_t st, bool cluster,
                                        unsigned cluster_x, cudaLaunchAttribute& attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster_x;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = cluster ? 1 : 0;
  return cfg;
}

// Launches `fn` with `args`, with programmatic stream serialization (PDL) when `pdl`.
static void launch_maybe_pdl(const void* fn, dim3 grid, dim3 block, size_t smem, cudaStream_t st, void** args,
                             bool pdl) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelExC(&cfg, fn, args));
}
