#!/bin/bash
# Session 22, call 8: attention.paged's pushed split merge with its finish unrolled over the splits
# (the working tree on 454a544; new = .gpu/bundle/bin: gpu_paged and bench_paged, base =
# .gpu/base/bench_paged from 454a544; both B12X_CUDA_ARCHS=sm_90a cargo build --profile bundle).
# 1. the FULL gpu_paged suite, 16 processes in parallel (--exact per trial);
# 2. bench_paged B = 8 rows (2k / 8k / 32k, BF16 and E4M3), the plans' default configs
#    (B12X_AUTOTUNE=0), base then new;
# 3. racecheck over the whole reduced suite and memcheck over its merge_paths / eight_row_tiles /
#    pdl trials, 24 processes, slowest trials first (racecheck_order.txt: call 6's times).
R=$OUT/r; mkdir -p $R; B=$PWD/.gpu/bundle/bin; BASE=$PWD/.gpu/base; ORDER=$PWD/bench-results/2026-12-01-h200-l/paged-finish-unroll/racecheck_order.txt
export B12X_ALLOW_PARTIAL_ARCHS=1 B12X_COMMIT=$(cat $B/../COMMIT)
save() { (cd $OUT && tar czf r.tgz r); }
cd $B
./gpu_paged --list 2>/dev/null | sed -n 's/: test$//p' > $R/trials_full.txt
pool() { # name W jobfile: each line "tool trial" (tool: plain|memcheck|racecheck); deadline $DL
  local name=$1 W=$2 jobs=$3
  for w in $(seq 0 $((W - 1))); do (
    i=0
    while read -r tool t; do
      if [ $((i % W)) -eq $w ]; then
        if [ $SECONDS -gt $DL ]; then echo "$tool $t SKIPPED" >> $R/${name}_w$w.txt; else
          t0=$SECONDS
          if [ $tool = plain ]; then pre=""; else pre="compute-sanitizer --tool $tool --error-exitcode 1"; fi
          B12X_CACHE_DIR=/tmp/c-$name-$w timeout $((HARD - SECONDS)) $pre ./gpu_paged --exact "$t" --test-threads 1 > /tmp/${name}_$w.log 2>&1
          rc=$?
          echo "$tool $t rc=$rc $(grep -c '\.\.\. ok' /tmp/${name}_$w.log)ok $(grep 'ERROR SUMMARY\|RACECHECK SUMMARY' /tmp/${name}_$w.log | tail -1 | sed 's/=* *//') $((SECONDS - t0))s" >> $R/${name}_w$w.txt
          [ $rc -ne 0 ] && cp /tmp/${name}_$w.log $R/fail_${name}_${w}_$i.log
        fi
      fi
      i=$((i + 1))
    done < $jobs ) &
  done
  wait
  cat $R/${name}_w*.txt > $R/$name.txt; rm -f $R/${name}_w*.txt
  echo "$name t=$SECONDS: $(grep -c 'rc=0 1ok' $R/$name.txt) ok, $(grep -c SKIPPED $R/$name.txt) skipped, $(grep -v 'rc=0 1ok' $R/$name.txt | grep -vc SKIPPED) other" >> $R/summary.txt
  save
}
sed 's/^/plain /' $R/trials_full.txt > /tmp/jobs_plain.txt
DL=40 HARD=75 pool plain 16 /tmp/jobs_plain.txt
for who in base new; do
  d=$BASE; [ $who = new ] && d=$B
  [ $SECONDS -gt 190 ] && break
  o=$R/bench_${who}_$SECONDS; mkdir -p $o
  (cd $d && B12X_AUTOTUNE=0 B12X_BENCH_SAMPLES=30 B12X_BENCH_FILTER=paged_decode/B8_ctx B12X_BENCH_OUT=$o timeout 30 ./bench_paged > $o/bench.log 2>&1)
  echo "bench $who rc=$? t=$SECONDS" >> $R/summary.txt; save
done
export B12X_TEST_PROFILE=reduced
{ sed 's/^/racecheck /' $ORDER; grep -E 'merge_paths|eight_row_tiles|pdl' $ORDER | sed 's/^/memcheck /'; } > /tmp/jobs_san.txt
DL=$((SECONDS + 30)) HARD=$((SECONDS + 165)) pool san 24 /tmp/jobs_san.txt
cat $R/summary.txt; grep -hv 'rc=0 1ok' $R/plain.txt $R/san.txt | head -20
