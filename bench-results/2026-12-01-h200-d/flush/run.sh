#!/bin/bash
# Session 14, calls 2-5 (one per study; each on the device, from the repo root):
#   flush1.txt: gemv_flush_study.py      flush2.txt: gemv_flush_study2.py (run a)
#   flush3.txt: gemv_flush_study2.py b   flush4.txt: gemv_flush_study4.py
#   flush5.txt: gemv_flush_study5.py (a sixth call)   flush6.txt: gemv_flush_study5.py code (a seventh; run as gemv_flush_study6.py of b368189)
R=$OUT/r; mkdir -p $R
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -shared -Xcompiler -fPIC -I../../b12x-core/include -o /tmp/libgemv_ext.so gemv_torch_ext.cu > $R/build.txt 2>&1
timeout 500 python3 gemv_flush_study.py /tmp/libgemv_ext.so > $R/flush1.txt 2>&1
timeout 500 python3 gemv_flush_study2.py /tmp/libgemv_ext.so a > $R/flush2.txt 2>&1
timeout 500 python3 gemv_flush_study2.py /tmp/libgemv_ext.so b > $R/flush3.txt 2>&1
timeout 500 python3 gemv_flush_study4.py /tmp/libgemv_ext.so > $R/flush4.txt 2>&1
timeout 300 python3 gemv_flush_study5.py /tmp/libgemv_ext.so > $R/flush5.txt 2>&1
timeout 300 python3 gemv_flush_study5.py /tmp/libgemv_ext.so code > $R/flush6.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
