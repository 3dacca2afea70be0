#!/bin/bash
# Session 22, call 6: compute-sanitizer racecheck over the WHOLE reduced gpu_paged suite (earlier
# sessions reached only subsets: one serial process takes far longer than a call). Commit 7404dff,
# gpu_paged built with B12X_CUDA_ARCHS=sm_90a cargo build --profile bundle -p b12x-attention --test
# gpu_paged. First the reduced suite without a sanitizer (fills the autotune cache), then 16
# workers, each running its share of the trials one by one (`--exact NAME`, its own copy of the
# cache) under racecheck; every trial's rc, hazard summary and seconds go to r/w*.txt.
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle/bin
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_TEST_PROFILE=reduced
save() { (cd $OUT && tar czf r.tgz r); }
cd $B
B12X_CACHE_DIR=/tmp/c-rc timeout 120 ./gpu_paged --test-threads 1 > $R/plain.log 2>&1
echo "plain rc=$? $(grep -c '\.\.\. ok' $R/plain.log) ok t=$SECONDS" >> $R/summary.txt
./gpu_paged --list 2>/dev/null | sed -n 's/: test$//p' > $R/trials.txt
echo "trials $(wc -l < $R/trials.txt)" >> $R/summary.txt; save
W=16
worker() {
  local w=$1 i=0
  cp -r /tmp/c-rc /tmp/c-w$w
  while read -r t; do
    if [ $((i % W)) -eq $w ]; then
      if [ $SECONDS -gt 280 ]; then echo "$t SKIPPED" >> $R/w$w.txt; else
        local t0=$SECONDS lim=$((390 - SECONDS))
        B12X_CACHE_DIR=/tmp/c-w$w timeout $lim compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu_paged --exact "$t" --test-threads 1 > /tmp/rc_$w.log 2>&1
        local rc=$?
        echo "$t rc=$rc $(grep -c '\.\.\. ok' /tmp/rc_$w.log)ok $(grep 'RACECHECK SUMMARY' /tmp/rc_$w.log | tail -1 | sed 's/=* *//') $((SECONDS - t0))s" >> $R/w$w.txt
        [ $rc -ne 0 ] && cp /tmp/rc_$w.log $R/fail_${w}_${i}.log
      fi
    fi
    i=$((i + 1))
  done < $R/trials.txt
}
for w in $(seq 0 $((W - 1))); do worker $w & done
while [ $(jobs -r | wc -l) -gt 0 ] && [ $SECONDS -lt 400 ]; do sleep 20; save; done
cat $R/w*.txt > $R/all.txt
echo "done t=$SECONDS: $(grep -c 'rc=0 1ok' $R/all.txt) clean, $(grep -c SKIPPED $R/all.txt) skipped, $(grep -v 'rc=0 1ok' $R/all.txt | grep -vc SKIPPED) other" >> $R/summary.txt
save; cat $R/summary.txt; grep -v 'rc=0 1ok' $R/all.txt | head -30
