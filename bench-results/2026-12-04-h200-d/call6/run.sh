#!/bin/bash
# Session 37, call 6 (issue 6, review mends): kv_append_slot reports a bad packing from the
# first K/V CTA of the fused grid; kv_append's and rope_kv_append's new aliasing checks;
# gpu_rope_kv_append's new trials (NeoX offsets, untrusted indices, aliasing); kv_append's suite
# after the kernel change; gpu_paged's PDL trial (deep_ring_default needs >= 2 splits); the
# layer's B = 1 and B = 8 BF16 trials, one at a time.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
bash $S ./gpu_rope_kv_append none $R/rka 16 40 > $R/rka_none.txt 2>&1
echo "rope_kv_append none: $(tail -1 $R/rka_none.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_rope_kv_append memcheck $R/rka 16 60 > $R/rka_memcheck.txt 2>&1
echo "rope_kv_append memcheck: $(tail -1 $R/rka_memcheck.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_kv_append none $R/kv_append 16 40 > $R/kv_append_none.txt 2>&1
echo "kv_append none: $(tail -1 $R/kv_append_none.txt) t=$SECONDS" >> $R/summary.txt
B12X_TEST_PROFILE=reduced bash $S ./gpu_kv_append memcheck $R/kv_append 16 60 > $R/kv_append_memcheck.txt 2>&1
echo "kv_append memcheck: $(tail -1 $R/kv_append_memcheck.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_paged none $R/paged 4 30 'pdl|stages6' > $R/paged_none.txt 2>&1
echo "paged pdl|stages6 none: $(tail -1 $R/paged_none.txt) t=$SECONDS" >> $R/summary.txt
bash $S ./gpu_decoder_layer none $R/layer 1 60 'bf16::b1|bf16_pdl::b1|bf16_pdl::b8' > $R/layer_none.txt 2>&1
echo "layer (3 trials, serial): $(tail -1 $R/layer_none.txt) t=$SECONDS" >> $R/summary.txt
cat $R/summary.txt
for f in $R/*/none.txt $R/*/memcheck.txt; do grep -v "passed=1" $f | head -6; done 2>/dev/null
for f in $R/*/*fail*.log; do echo "== $f"; grep -E "Error|error|panicked|differs|want|changed" $f | head -4; done 2>/dev/null | head -30
cd $OUT && tar czf r.tgz r && rm -rf r
