#!/bin/bash
# Session 36, call 5: call 4's six layer trials that failed only the free-memory check while other
# trials ran in parallel (no time was left for their solo reruns), now one at a time.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
for t in nvfp4_pdl_s8::b1 bf16_pdl::b8 bf16_pdl_s8::b8 block_fp8_pdl_s8::b64 nvfp4_pdl_s8::b64 bf16_pdl_s8::b64; do
  timeout 100 ./gpu_decoder_layer --exact qwen3_8b::$t > $R/${t//::/_}.txt 2>&1
  echo "qwen3_8b::$t rc=$? $(grep 'test result' $R/${t//::/_}.txt) t=$SECONDS" >> $R/summary.txt
done
cat $R/summary.txt; grep -h "1-cos" $R/*.txt | cut -c1-160
cd $OUT && tar czf r.tgz r && rm -rf r
