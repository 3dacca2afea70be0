#!/bin/bash
R=$OUT/r; mkdir -p $R
cd .gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1
cat COMMIT > $R/commit.txt
cd bin
for t in gpu_fp8_block gpu_nvfp4; do timeout 120 ./$t > $R/$t.log 2>&1; echo "$t rc=$? $(grep 'test result' $R/$t.log)"; done
cd $OUT && tar czf r.tgz r
