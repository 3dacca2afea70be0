#!/bin/bash
# Session 53, call 2 (commit d1e6c80: XAct::AddRmsScale / FoldNorms::FirstScale; bundle:
# cargo xtask gpu-bundle --targets gpu_bf16_gemv,gpu_qkv_rope,gpu_decoder_layer,bench_decoder_layer,
# xz into .gpu/bz): the `_addrms` GEMV trials, the `_addrms_rope` trials against `_addrms` +
# rope_kv_append, the layer's FirstScale trials; memcheck (reduced) and racecheck on the small
# ones; then the B = 1 x 4k step with and without FirstScale, alternating.
mkdir -p .gpu && python3 -c "import tarfile; tarfile.open('.gpu/bz/bundle.tar.xz').extractall('.gpu')"
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle; S=$PWD/bench/sanitize_parallel.sh
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT 2>/dev/null)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.memory --format=csv > $R/gpu.txt
timeout 120 ./gpu_bf16_gemv addrms > $R/gemv_addrms.txt 2>&1
echo "gpu_bf16_gemv addrms rc=$? t=$SECONDS: $(grep 'test result' $R/gemv_addrms.txt)" >> $R/summary.txt; save
timeout 60 ./gpu_qkv_rope qkv_rope > $R/qkv_rope.txt 2>&1
echo "gpu_qkv_rope rc=$? t=$SECONDS: $(grep 'test result' $R/qkv_rope.txt)" >> $R/summary.txt; save
timeout 120 ./gpu_decoder_layer first_scale > $R/layer_fs.txt 2>&1
echo "layer first_scale rc=$? t=$SECONDS: $(grep 'test result' $R/layer_fs.txt)" >> $R/summary.txt
timeout 60 ./gpu_decoder_layer norm2_errors > $R/layer_err.txt 2>&1
echo "layer norm2_errors rc=$? t=$SECONDS: $(grep 'test result' $R/layer_err.txt)" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_bf16_gemv memcheck $R/mc 6 60 'addrms' > $R/memcheck.txt 2>&1
echo "memcheck gemv addrms: $(tail -1 $R/memcheck.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_qkv_rope memcheck $R/mcq 4 40 'addrms' > $R/memcheck_q.txt 2>&1
echo "memcheck qkv addrms: $(tail -1 $R/memcheck_q.txt) t=$SECONDS" >> $R/summary.txt; save
B12X_TEST_PROFILE=reduced bash $S ./gpu_bf16_gemv racecheck $R/rc 6 60 'odd_addrms|small_addrms|addrms_bad' > $R/racecheck.txt 2>&1
echo "racecheck gemv addrms: $(tail -1 $R/racecheck.txt) t=$SECONDS" >> $R/summary.txt; save
i=0
for v in bf16_pdl_gs_s1_rq_n2/ bf16_pdl_gs_rq_n2/ bf16_pdl_gs_s1_rq_n2/ bf16_pdl_gs_rq_n2/; do
  i=$((i+1)); t=$(echo ${v%/} | tr '/' '_')_$i
  [ $SECONDS -lt 500 ] && B12X_BENCH_QUICK=1 B12X_BENCH_FILTER=$v B12X_BENCH_OUT=$R/bench_$t timeout 50 ./bench_decoder_layer > $R/bench_$t.txt 2>&1
  echo "bench $t rc=$? t=$SECONDS" >> $R/summary.txt; save
done
cat $R/summary.txt $R/gpu.txt
grep -E "FAIL|panicked|Error" $R/*.txt | cut -c1-250 | head -20
for f in $R/bench_*.txt; do echo "$(basename $f) $(grep -E '/step ' $f | awk '{print $2, $6}') x4 $(grep -E '/step_x4 ' $f | awk '{print $2, $6}') wo/norms $(grep -E 'without/norms' $f | awk '{print $2}')"; grep -E "prefix/" $f | awk '{print "   ", $1, $2}' | sed -E 's/decoder_layer\/[a-z0-9_]+\/B1_ctx4096//'; done
cd $OUT && tar czf r.tgz r && rm -rf r
