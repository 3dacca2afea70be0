#!/bin/bash
# Session 37, call 4 (issue 6): the whole gpu_decoder_layer suite one trial at a time (its
# free-memory check is process-wide: parallel trials fail it), then the example (B = 8, every
# format). The layer now runs attention.rope_kv_append, the small ops with PDL in the PDL
# trials, and attention.paged's new defaults.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
bash $S ./gpu_decoder_layer none $R/layer 1 420 > $R/layer_none.txt 2>&1
echo "layer none (serial): $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt; save
timeout 100 ./example_decoder_layer > $R/example.txt 2>&1; echo "example rc=$? t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
cat $R/layer/none.txt
tail -15 $R/example.txt
for f in $R/layer/*fail*.log; do echo "== $f"; grep -E "Error|error|panicked|differs|want|changed" $f | head -5; done 2>/dev/null | head -30
cd $OUT && tar czf r.tgz r && rm -rf r
