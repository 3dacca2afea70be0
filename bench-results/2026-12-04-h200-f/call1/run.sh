#!/bin/bash
# Session 39, call 1 (issue 6): the B = 1 attention with 16 splits. gpu_paged (the 8-row
# scratch merge now loads every split's partial of a float4 in rounds of 8), cluster occupancy
# up to the non-portable 16, the paged bench at B = 1 (PDL; default 8-split cluster, 16 splits
# through scratch at 3 and 6 stages), the layer bench's BF16 B = 1 PDL rows with 8 / 16 splits.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; ROOT=$PWD
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
(cd bench/proto && nvcc -std=c++17 -O3 -arch=sm_90a -o /tmp/cocc cluster_occupancy.cu && /tmp/cocc) > $R/cluster_occupancy.txt 2>&1
echo "cluster_occupancy rc=$? t=$SECONDS" >> $R/summary.txt
bash $ROOT/bench/sanitize_parallel.sh $B/bin/gpu_paged none $R/paged 8 200 > $R/paged_summary.txt 2>&1
echo "gpu_paged rc=$? t=$SECONDS $(tail -1 $R/paged_summary.txt)" >> $R/summary.txt; save
cd $B/bin
run_paged() { # tag, env...
  local tag=$1; shift
  env B12X_PAGED_BATCHES=1 B12X_PAGED_PDL=1 "$@" B12X_BENCH_OUT=$R/paged_$tag timeout 150 ./bench_paged > $R/paged_$tag.txt 2>&1
  echo "bench_paged $tag rc=$? t=$SECONDS" >> $R/summary.txt; save
}
run_paged default
run_paged s16 B12X_PAGED_SPLIT_CAP=16 B12X_PAGED_CLUSTER=0
run_paged s16r6 B12X_PAGED_SPLIT_CAP=16 B12X_PAGED_CLUSTER=0 B12X_PAGED_STAGES=6
for v in bf16_pdl/ bf16_pdl_s16/ bf16_pdl_s16_r6/; do
  t=${v%/}
  B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/layer_$t timeout 120 ./bench_decoder_layer > $R/layer_$t.txt 2>&1
  echo "layer $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt $R/cluster_occupancy.txt
for t in default s16 s16r6; do grep -E "B1_" $R/paged_$t/paged.md | awk -F'|' '{print $2, $3, $4}'; done
for t in bf16_pdl bf16_pdl_s16 bf16_pdl_s16_r6; do grep -E "/step|prefix/[345]|op/attention" $R/layer_$t/decoder_layer.md | awk -F'|' '{print $2, $4}'; done
cd $OUT && tar czf r.tgz r && rm -rf r
