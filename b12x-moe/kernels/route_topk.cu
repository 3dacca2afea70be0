// route_topk.cu — moe.route_topk: router scores, top-k (or hash-table) selection, weights.  crate: b12x-moe
//   The kernel body, its math and constraints: route_topk.cuh.
// Entry points: b12x_route_topk_{softmax,sigmoid,sqrtsoftplus}.   Oracle: src/route_topk/reference.rs
#include "route_topk.cuh"

B12X_ROUTE_TOPK_ENTRIES(b12x_route_topk_)
