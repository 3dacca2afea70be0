#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
cd bin
for t in gpu_rmsnorm_quant gpu_nvfp4 gpu_swizzle; do timeout 150 ./$t > $R/$t.log 2>&1; echo "$t rc=$? $(grep 'test result' $R/$t.log)"; done
cd $OUT && tar czf r.tgz r
