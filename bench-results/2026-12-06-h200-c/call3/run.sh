#!/bin/bash
# Session 52, call 3 (the call-2 bundle): B = 8 x 4k A/B of norm2_in_o_proj (alternating
# _pdl_gs, _pdl_gs_rq, _pdl_gs_rq_n2), then B = 1 x 4k _pdl_gs_n2 (the split norm alone) between
# _pdl_gs and _pdl_gs_rq_n2.
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
i=0
for v in bf16_pdl_gs/B8 bf16_pdl_gs_rq/B8 bf16_pdl_gs_rq_n2/B8 bf16_pdl_gs/B8 bf16_pdl_gs_rq/B8 bf16_pdl_gs_rq_n2/B8; do
  i=$((i+1)); t=$(echo $v | tr '/' '_')_$i
  [ $SECONDS -lt 300 ] && B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 70 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
for v in bf16_pdl_gs/ bf16_pdl_gs_n2/ bf16_pdl_gs_rq_n2/ bf16_pdl_gs_n2/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 420 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt $R/gpu.txt
for f in $R/bench_*.txt; do echo "$(basename $f) $(grep -E '/step ' $f | awk '{print $1, $2, $5}' | sed 's|decoder_layer/||') x4 $(grep -E '/step_x4 ' $f | awk '{print $2, $5}') lin $(grep -E '/linears_only ' $f | awk '{print $2}')"; grep -E "/prefix/" $f | awk '{print $1, $2}' | sed 's|decoder_layer/bf16[a-z0-9_]*/B[0-9]*_ctx4096/prefix/||' | tr '\n' ' '; echo; done
cd $OUT && tar czf r.tgz r && rm -rf r
