#!/bin/bash
# Proto call 6: FL8192 walk order (a CTA's first, shared, row block last) with the counter merge (FL8704 = + stage 0 first) and with the LL merge (FL10752 = LL + stage 0 first).
#
R=$OUT/r; mkdir -p $R
cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -I../../b12x-core/include -o /tmp/d bsgemv_decode_proto.cu > $R/build.txt 2>&1 || { grep -i error $R/build.txt; exit 1; }
timeout 100 env PROTO_CFG=3 PROTO_FLS=0,512,8704,2560,10752 /tmp/d > $R/m1.txt 2>&1; echo "m1 rc=$?"
timeout 100 env PROTO_M=8 PROTO_CFG=3 PROTO_FLS=0,512,8704,2560,10752 /tmp/d > $R/m8.txt 2>&1; echo "m8 rc=$?"
timeout 100 env PROTO_M=3 PROTO_CFG=0 PROTO_FLS=0,512,8704,2560,10752 /tmp/d > $R/m3_kb1.txt 2>&1; echo "m3 rc=$?"
grep -E "==|FL|differ" $R/m1.txt $R/m8.txt $R/m3_kb1.txt | cut -c1-175
