#!/bin/bash
# Proto call 4 (2026-12-03): FL2048 (LL merge: {value, launch tag} 64-bit words, no fence, no
# counter; c_last polls and sums), FL2560 = LL + stage 0 first (FL512), against FL0 / FL512 / FL4.
R=$OUT/r; mkdir -p $R
cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -I../../b12x-core/include -o /tmp/d bsgemv_decode_proto.cu > $R/build.txt 2>&1 || { grep -i error $R/build.txt; exit 1; }
timeout 100 env PROTO_CFG=3 PROTO_FLS=0,512,2048,2560,4 /tmp/d > $R/m1.txt 2>&1; echo "m1 rc=$?"
timeout 100 env PROTO_CFG=0 PROTO_FLS=0,512,2048,2560 /tmp/d > $R/m1_kb1.txt 2>&1; echo "kb1 rc=$?"
timeout 100 env PROTO_M=8 PROTO_CFG=3 PROTO_FLS=0,512,2048,2560 /tmp/d > $R/m8.txt 2>&1; echo "m8 rc=$?"
timeout 100 env PROTO_M=3 PROTO_FLS=0,2560 /tmp/d > $R/m3_all.txt 2>&1; echo "m3 rc=$?"
grep -v "^  read" $R/m1.txt | cut -c1-200; grep -E "==|FL|differ" $R/m1_kb1.txt $R/m8.txt $R/m3_all.txt | cut -c1-160
