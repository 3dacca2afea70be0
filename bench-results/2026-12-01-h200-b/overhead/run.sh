#!/bin/bash
# Session 12, call b: graph-replay overhead of the two timing harnesses.
mkdir -p $OUT/r
cd bench/proto
nvcc -std=c++17 -O3 -arch=sm_90a -I../../b12x-core/include -o /tmp/overhead graph_overhead_proto.cu > $OUT/r/build.txt 2>&1
/tmp/overhead > $OUT/r/overhead_c.txt 2>&1
python3 graph_overhead_torch.py > $OUT/r/overhead_torch.txt 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $OUT/r/overhead_torch.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
