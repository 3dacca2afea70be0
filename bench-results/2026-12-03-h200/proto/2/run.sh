#!/bin/bash
# Proto call 2 (2026-12-03): FL16 (x loads only for live tokens), FL32 (arithmetic UE4M3 scales),
# FL48 = both, FL52 = both without merges; timings at M = 1 and 8; ncu --set full of the library
# kernel, FL2 (compute only) and FL48 at 18432 x 7168, M = 1, kb2 s2 c2.
R=$OUT/r; mkdir -p $R
cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -I../../b12x-core/include -o /tmp/d bsgemv_decode_proto.cu > $R/build.txt 2>&1 || { cat $R/build.txt | grep -i error; exit 1; }
PROTO_CFG=3 PROTO_FLS=0,16,32,48,52,4,1,2 /tmp/d > $R/m1.txt 2>&1
PROTO_CFG=0 PROTO_FLS=0,16,48 /tmp/d > $R/m1_kb1.txt 2>&1
PROTO_M=8 PROTO_CFG=3 PROTO_FLS=0,16,48 /tmp/d > $R/m8.txt 2>&1
cat $R/m1.txt | cut -c1-200
PROTO_NCU=1 PROTO_SHAPE=0 PROTO_CFG=3 PROTO_FLS=-1,2,48 timeout 300 ncu --clock-control none -k regex:"bsgemv|px" --set full --import-source no -o $R/prof /tmp/d > $R/ncu_log.txt 2>&1
echo "ncu rc=$?"; tail -3 $R/ncu_log.txt
ncu -i $R/prof.ncu-rep --page details > $R/ncu_details.txt 2>&1
ncu -i $R/prof.ncu-rep --page raw --csv > $R/ncu_raw.csv 2>&1
grep -E "Duration|Issue Slots Busy|Eligible Warps|Active Warps Per|Warp Cycles Per Issued|Shared.*Wavefront|Bank|Pipe|Stall" $R/ncu_details.txt | head -60
ls -la $R
