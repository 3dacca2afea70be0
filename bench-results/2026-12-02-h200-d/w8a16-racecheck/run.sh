#!/bin/bash
# Session 26, call 5: racecheck (reduced profile, 16 processes) on the 29 FP8 trials calls 3 and 4
# did not reach before their start deadlines.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT) B12X_TEST_PROFILE=reduced
cd $B/bin
bash $S ./gpu_blockscaled_gemv racecheck $R/san 16 45 '^(awkward_n1000_bias::BlockFp8_128_Ue8m0|awkward_n1000_bias::TensorFp8|awkward_n129_k96_f32::BlockFp8_128_F32|awkward_n129_k96_f32::Mxfp8|awkward_prime_n_f16::BlockFp8_128_F32|awkward_prime_n_f16::BlockFp8_128_Ue8m0|awkward_prime_n_f16::BlockFp8_32_F32|awkward_prime_n_f16::BlockFp8_32_Ue8m0|awkward_prime_n_f16::Mxfp8|awkward_prime_n_f16::TensorFp8|padded_rows::BlockFp8_128_F32|padded_rows::BlockFp8_128_Ue8m0|padded_rows::BlockFp8_32_F32|padded_rows::BlockFp8_32_Ue8m0|padded_rows::Mxfp8|padded_rows::TensorFp8|qwen3_30b_q_4096x2048::Mxfp8|small_scales_f32::BlockFp8_128_Ue8m0|small_scales_f32::TensorFp8|stream_k_three_row_blocks::BlockFp8_128_F32|stream_k_three_row_blocks::BlockFp8_128_Ue8m0|stream_k_three_row_blocks::BlockFp8_32_F32|stream_k_three_row_blocks::BlockFp8_32_Ue8m0|stream_k_three_row_blocks::Mxfp8|stream_k_three_row_blocks::TensorFp8|tiny_1x32::BlockFp8_128_Ue8m0|tiny_1x32::BlockFp8_32_F32|tiny_1x32::BlockFp8_32_Ue8m0|tiny_1x32::TensorFp8)$' > $R/san_racecheck.txt 2>&1
echo "racecheck: $(tail -1 $R/san_racecheck.txt) t=$SECONDS" | tee $R/summary.txt
grep -v "0 hazards" $R/san/racecheck.txt | head
cd $OUT && tar czf r.tgz r && rm -rf r
