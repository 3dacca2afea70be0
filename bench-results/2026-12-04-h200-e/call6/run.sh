#!/bin/bash
# Session 38, call 6 (issue 6): the decoder layer's GPU suite at 431f350 (the PDL step now
# loads the ring / direct GEMVs' first W before their wait and rope_kv_append reads the batch
# early), one trial at a time (its free-memory check is process-wide), then memcheck on the
# B = 1 trials (reduced profile, plain and PDL).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_decoder_layer none $R/layer 1 330 > $R/layer_none.txt 2>&1
echo "layer none (serial): $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_decoder_layer memcheck $R/layer 1 90 'bf16::b1|bf16_pdl::b1|nvfp4::b1' > $R/layer_memcheck.txt 2>&1
echo "layer memcheck b1 (serial): $(tail -1 $R/layer_memcheck.txt) t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
for f in $R/*/none.txt $R/*/memcheck.txt; do grep -v "passed=1" $f | head -6; done 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
