// frag_ref.cpp — prints every value of the fragment and scale-factor index functions of
// b12x-core/include/b12x/mma_sm120.cuh, compiled for the CPU (tests/sm120_fragments.rs builds and
// runs this and checks the table against the PTX ISA's formulas and CUTLASS's layouts).
// Output lines: "<fn> <lane> <reg> <elem> <row> <col>" for k32_a, k32_b, k64_a, k64_b, cd (reg 0),
// then "sfa <m> <lane>", "sfb <n> <lane>", "sfa_row <lane> <m>", "sfb_col <lane> <n>".
#include <cstdio>

#include "b12x/mma_sm120.cuh"

using namespace b12x::bsmma;

int main() {
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 4; ++j) {
        const Coord x = k32_a(lane, r, j);
        std::printf("k32_a %d %d %d %d %d\n", lane, r, j, x.row, x.col);
      }
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < 4; ++j) {
        const Coord x = k32_b(lane, r, j);
        std::printf("k32_b %d %d %d %d %d\n", lane, r, j, x.row, x.col);
      }
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 8; ++j) {
        const Coord x = k64_a(lane, r, j);
        std::printf("k64_a %d %d %d %d %d\n", lane, r, j, x.row, x.col);
      }
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < 8; ++j) {
        const Coord x = k64_b(lane, r, j);
        std::printf("k64_b %d %d %d %d %d\n", lane, r, j, x.row, x.col);
      }
    for (int i = 0; i < 4; ++i) {
      const Coord x = cd(lane, i);
      std::printf("cd %d 0 %d %d %d\n", lane, i, x.row, x.col);
    }
    std::printf("sfa_row %d %d\n", lane, sfa_row_of(lane));
    std::printf("sfb_col %d %d\n", lane, sfb_col_of(lane));
  }
  for (int m = 0; m < 16; ++m) std::printf("sfa %d %d\n", m, sfa_lane(m));
  for (int n = 0; n < 8; ++n) std::printf("sfb %d %d\n", n, sfb_lane(n));
  for (unsigned c = 0; c < 16; ++c) std::printf("e2m1_container %u %u\n", c, e2m1_container(c));
  return 0;
}
