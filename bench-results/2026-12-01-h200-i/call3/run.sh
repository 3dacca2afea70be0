#!/bin/bash
# Session 19, call 3 (from the repo root): attention.paged with PlanOptions::pdl (every paged
# entry point now reads PagedParams.flags): the full gpu_paged suite, memcheck on the reduced one,
# racecheck on the PDL trial, then the x8 table (8 back-to-back decode calls per replay) without
# and with PDL, alternating (off, on, on, off) in this one job. Bundle of
# `cargo xtask gpu-bundle --packages b12x-core,b12x-norm,b12x-attention` at COMMIT.
R=$OUT/r; mkdir -p $R; ROOT=$PWD; B=$ROOT/.gpu/bundle
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/COMMIT)
cd $B/bin
timeout 200 ./gpu_paged --test-threads 1 > $R/gpu_paged.log 2>&1; echo "gpu_paged rc=$? $(grep -a 'test result' $R/gpu_paged.log)" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 ./gpu_paged --test-threads 1 > $R/gpu_paged_memcheck.log 2>&1; echo "memcheck reduced rc=$? $(grep -a 'ERROR SUMMARY' $R/gpu_paged_memcheck.log | tail -1)" >> $R/rc.txt
B12X_TEST_PROFILE=reduced timeout 60 compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged --test-threads 1 pdl > $R/gpu_paged_racecheck_pdl.log 2>&1; echo "racecheck pdl rc=$? $(grep -a 'RACECHECK SUMMARY' $R/gpu_paged_racecheck_pdl.log | tail -1)" >> $R/rc.txt
i=0
for pdl in 0 1 1 0; do
  i=$((i+1))
  B12X_PAGED_PDL=$pdl B12X_PAGED_BATCHES=8,32 B12X_BENCH_FILTER=_x8 B12X_BENCH_SAMPLES=20 B12X_CACHE_DIR=$R/cache B12X_BENCH_OUT=$R/bo$i timeout 70 ./bench_paged > $R/bench_paged_x8_run${i}_pdl$pdl.log 2>&1; echo "bench x8 run $i pdl=$pdl rc=$?" >> $R/rc.txt
done
rm -rf $R/cache $R/bo*; echo done >> $R/rc.txt
cd $OUT && tar czf r.tgz r && rm -rf r  # only the archive comes back (the return caps the file count)
