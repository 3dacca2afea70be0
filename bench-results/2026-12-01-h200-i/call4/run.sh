#!/bin/bash
# Session 19, call 4 (from the repo root): attention.paged PDL with the later release (the CTA
# releases the next PDL kernel after streaming its keys): the full gpu_paged suite, memcheck and
# racecheck on the PDL trial, the x8 table without and with PDL alternating (off, on, on, off),
# and SDPA's x8 peers in the same job. Bundle of
# `cargo xtask gpu-bundle --packages b12x-core,b12x-attention` at COMMIT.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
timeout 80 python3 bench/peers.py $R/peers_paged_x8.json --only paged_decode_x8 > $R/peers_paged_x8.log 2>&1; echo "peers rc=$?" >> $R/rc.txt
cd $B/bin
timeout 200 ./gpu_paged --test-threads 1 > $R/gpu_paged.log 2>&1; echo "gpu_paged rc=$? $(grep -a 'test result' $R/gpu_paged.log)" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_paged --test-threads 1 pdl > $R/gpu_paged_memcheck_pdl.log 2>&1; echo "memcheck pdl rc=$? $(grep -a 'ERROR SUMMARY' $R/gpu_paged_memcheck_pdl.log | tail -1)" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 60 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged --test-threads 1 pdl > $R/gpu_paged_racecheck_pdl.log 2>&1; echo "racecheck pdl rc=$? $(grep -a 'RACECHECK SUMMARY' $R/gpu_paged_racecheck_pdl.log | tail -1)" >> $R/rc.txt
i=0
for pdl in 0 1 1 0; do
  i=$((i+1))
  B12X_PEER_JSON=$R/peers_paged_x8.json B12X_PAGED_PDL=$pdl B12X_PAGED_BATCHES=8,32 B12X_BENCH_FILTER=_x8 B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo$i timeout 70 ./bench_paged > $R/bench_paged_x8_run${i}_pdl$pdl.log 2>&1; echo "bench x8 run $i pdl=$pdl rc=$?" >> $R/rc.txt
done
rm -rf $R/cache $R/bo*; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r && rm -rf r  # only the archive comes back (the return caps the file count)
