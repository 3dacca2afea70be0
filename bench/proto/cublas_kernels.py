"""Which cuBLAS kernels torch.nn.functional.linear runs for the bf16_gemv shapes where cuBLAS
is close (prototype, not part of the build): run under Nsight Compute, e.g.

    ncu --clock-control none --cache-control all --metrics launch__grid_dim_x,launch__grid_dim_y,\
      launch__cluster_dim_x,launch__shared_mem_per_block,gpu__time_duration.sum,dram__bytes_read.sum \
      python3 cublas_kernels.py

and read each kernel's name, grid, cluster shape and shared memory.
"""
import torch, torch.nn.functional as F
torch.manual_seed(0)
for (n, k, m) in [(7168, 4096, 16), (18432, 7168, 16), (18432, 7168, 8), (7168, 4096, 8)]:
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    for _ in range(2): F.linear(x, w)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(f"lin_{n}x{k}_m{m}")
    F.linear(x, w)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
