// rope.cu — rotary position embedding, in place on Q and K.                crate: b12x-attention
//   for row t (position pos = positions[t]), every head h of q (and of k), pair j < R/2:
//     NeoX:  (a, b) = (x[off + j], x[off + j + R/2])      GPT-J: (a, b) = (x[off + 2j], x[off + 2j + 1])
//     angle = RN(f32(pos) * inv_freq[j])                  (inv_freq: f32, from the plan)
//     c = RN(cos(angle)) * scale, s = RN(sin(angle)) * scale      (table mode: c, s from the table)
//     a' = RN(a*c) - RN(b*s), b' = RN(b*c) + RN(a*s)     (each op rounded to f32, no FMA), then
//     rounded once to the dtype. Dims outside [off, off + R) are neither read nor written.
// Tensors: q [T, H, D], k [T, Hkv, D] bf16|f16 (row strides q_stride / k_stride elements, heads
//   contiguous; may be column slices of one fused QKV buffer)   positions [T] i32
//   cos_sin [max_position, R] f32 = [cos(R/2) | sin(R/2)] per position (table mode; else null)
//   error [1] u32 (kFaultPosition when a position lies outside [0, max_position): its rows are
//   left unchanged).
// Constraints: R % 8 == 0, off % 8 == 0, off + R <= D, rows 16-byte aligned, R/2 <= kMaxPairs.
// Strategy: one thread per 4 pairs of one (row, head): NeoX loads 8 bytes from each half, GPT-J
//   16 bytes; inv_freq is staged in shared memory (the grid-constant array would serialize lanes
//   reading different entries).
// Entry points: b12x_rope_{bf16,f16}_{neox,gptj}{,_table}.   Oracle: src/rope/reference.rs
#include "rope.cuh"

// Each entry point first waits for the kernel before it (a PDL launch, `Plan::with_pdl`;
// launched plainly the wait returns at once), then lets a PDL-launched next kernel start (its
// own wait still waits for this grid).
#define B12X_ROPE(NAME, T, NEOX, TABLE)                                                   \
  extern "C" __global__ void __launch_bounds__(b12x::kRopeThreads)                        \
      b12x_rope_##NAME(const __grid_constant__ b12x::RopeParams p) {                      \
    b12x::rope<T, NEOX, TABLE>(p, blockIdx.x, false);                                     \
  }

B12X_ROPE(bf16_neox, b12x::bf16, true, false)
B12X_ROPE(bf16_gptj, b12x::bf16, false, false)
B12X_ROPE(f16_neox, b12x::fp16, true, false)
B12X_ROPE(f16_gptj, b12x::fp16, false, false)
B12X_ROPE(bf16_neox_table, b12x::bf16, true, true)
B12X_ROPE(bf16_gptj_table, b12x::bf16, false, true)
B12X_ROPE(f16_neox_table, b12x::fp16, true, true)
B12X_ROPE(f16_gptj_table, b12x::fp16, false, true)
