#!/bin/bash
# Runs the trials of one GPU test binary (libtest-mimic: `--list`, `--exact NAME`) in parallel
# processes, each trial alone, under a compute-sanitizer tool or none. Whole suites under racecheck
# take longer than a lent device's call in one process; the trials are independent, so
# ~16 processes on one GPU finish the reduced `gpu_paged` suite in ~200 s (session 22).
#
#   bench/sanitize_parallel.sh BINARY TOOL OUTDIR [WORKERS] [DEADLINE_S] [FILTER]
#
#   TOOL       memcheck | racecheck | synccheck | initcheck | none (plain runs)
#   WORKERS    processes at once (default 16)
#   DEADLINE_S no trial starts after this many seconds; each is killed at DEADLINE_S + 120
#              (default 400)
#   FILTER     extended regex: only trials whose names match (default: all)
#
# Each worker takes every WORKERS-th trial of the list, slowest first when OUTDIR/order.txt
# exists (names, one per line, e.g. the previous run's names sorted by seconds). A trial that
# failed with a clean sanitizer summary is rerun alone at the end: trials that compare the
# device's free memory (`run_allocates_nothing`) see the other processes' allocations come and
# go. Writes OUTDIR/TOOL.txt (one line per trial: name, rc, passed count, the tool's summary,
# seconds), OUTDIR/TOOL_fail_*.log for failures, and prints a one-line summary last.
# Killed (SIGTERM / SIGINT, e.g. by an outer `timeout`), it stops its running trials too — left
# running, their sanitizers kept the GPU busy under whatever the caller timed next (session 59) —
# and still writes TOOL.txt and a summary of the trials that finished.
# The caller's environment passes through (B12X_TEST_PROFILE=reduced for the sanitizer profile;
# each worker gets its own B12X_CACHE_DIR: a copy of $B12X_CACHE_DIR when that is set, else
# a fresh one under $TMPDIR, so no race run here lands in the shared default cache).
set -u
BIN=$(readlink -f "$1")
TOOL=$2
OUT=$3
W=${4:-16}
DEADLINE=${5:-400}
FILTER=${6:-.}
mkdir -p "$OUT"
START=$SECONDS
LIST=$OUT/$TOOL.list
if [ -f "$OUT/order.txt" ]; then
  # Slowest first, then any trial the order file does not name.
  "$BIN" --list 2>/dev/null | sed -n 's/: test$//p' > "$LIST.all"
  grep -xFf "$LIST.all" "$OUT/order.txt" > "$LIST.tmp"
  grep -vxFf "$OUT/order.txt" "$LIST.all" >> "$LIST.tmp"
  grep -E "$FILTER" "$LIST.tmp" > "$LIST"
  rm -f "$LIST.all" "$LIST.tmp"
else
  "$BIN" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E "$FILTER" > "$LIST"
fi
PRE=()
[ "$TOOL" != none ] && PRE=(compute-sanitizer --tool "$TOOL" --error-exitcode 1)
# The running trials' `timeout` processes (each forwards a TERM to its trial), for on_term.
PIDS=$OUT/.pids
: > "$PIDS"
on_term() {
  trap - TERM INT
  [ -s "$PIDS" ] && kill $(cat "$PIDS") 2>/dev/null
  kill $(jobs -p) 2>/dev/null
  wait 2>/dev/null
  cat "$OUT"/"$TOOL".w*.txt > "$OUT/$TOOL.txt" 2>/dev/null
  rm -f "$OUT"/"$TOOL".w*.txt "$OUT"/.w*.log "$PIDS"
  echo "$TOOL $(basename "$BIN"): $(wc -l < "$LIST") trials, cut off after $((SECONDS - START)) s with $(grep -cE " rc=0 passed=1 " "$OUT/$TOOL.txt") passed clean; the rest did not finish"
  exit 143
}
trap on_term TERM INT

# run_one NAME WORKER LIMIT_S: one trial, one line in $OUT/$TOOL.w$WORKER.txt.
run_one() {
  local t=$1 w=$2 lim=$3 t0=$SECONDS log=$OUT/.w$2.log
  # Each worker races into a cache of its own, never the shared default one: selections raced
  # under a sanitizer, or beside the other workers, would be read by later benches ("Cached")
  # and run configs picked on those timings (session 40, call 3).
  local cache=${B12X_CACHE_DIR:-}
  if [ -n "$cache" ]; then
    [ -d "$cache.w$w" ] || cp -r "$cache" "$cache.w$w" 2>/dev/null || mkdir -p "$cache.w$w"
    cache=$cache.w$w
  else
    cache=${TMPDIR:-/tmp}/b12x-cache.$$.$TOOL.w$w
    mkdir -p "$cache"
  fi
  local envv=("B12X_CACHE_DIR=$cache")
  env ${envv[@]+"${envv[@]}"} timeout "$lim" ${PRE[@]+"${PRE[@]}"} "$BIN" --exact "$t" --test-threads 1 > "$log" 2>&1 &
  local pid=$!
  echo "$pid" >> "$PIDS"
  wait "$pid"
  local rc=$?
  local summary
  summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY|INITCHECK SUMMARY' "$log" | tail -1 | sed 's/^=* *//')
  # libtest's summary line, not `... ok`: a trial's own stderr (e.g. the unprepared-run warning)
  # can land between `test NAME ...` and its `ok`.
  local passed
  passed=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' "$log" | tail -1)
  echo "$t rc=$rc passed=${passed:-0} ${summary:-no-summary} $((SECONDS - t0))s" >> "$OUT/$TOOL.w$w.txt"
  [ $rc -ne 0 ] && cp "$log" "$OUT/${TOOL}_fail_$(echo "$t" | tr -c 'A-Za-z0-9_\n' '_').log"
  return 0
}

for w in $(seq 0 $((W - 1))); do
  (
    i=0
    while read -r t; do
      if [ $((i % W)) -eq "$w" ]; then
        if [ $((SECONDS - START)) -gt "$DEADLINE" ]; then
          echo "$t SKIPPED" >> "$OUT/$TOOL.w$w.txt"
        else
          run_one "$t" "$w" $((DEADLINE + 120 - (SECONDS - START)))
        fi
      fi
      i=$((i + 1))
    done < "$LIST"
  ) &
done
wait
cat "$OUT"/"$TOOL".w*.txt > "$OUT/$TOOL.txt" 2>/dev/null
rm -f "$OUT"/"$TOOL".w*.txt "$OUT"/.w*.log

# Failures with a clean tool summary, rerun alone (the free-memory trials), while time is left.
clean='SUMMARY: 0 (errors|hazards)'
[ "$TOOL" = none ] && clean='no-summary'
grep -E " rc=[1-9][0-9]* " "$OUT/$TOOL.txt" | grep -E "$clean" | cut -d' ' -f1 | while read -r t; do
  [ $((SECONDS - START)) -gt $((DEADLINE + 60)) ] && break
  run_one "$t" alone 180
  sed -i "s|^$t rc=|$t (in parallel) rc=|" "$OUT/$TOOL.txt"
  cat "$OUT/$TOOL.walone.txt" >> "$OUT/$TOOL.txt"
  rm -f "$OUT/$TOOL.walone.txt" "$OUT/.walone.log"
done

rm -f "$PIDS"
total=$(wc -l < "$LIST")
ok=$(grep -v '(in parallel)' "$OUT/$TOOL.txt" | grep -cE " rc=0 passed=1 ")
skipped=$(grep -c ' SKIPPED$' "$OUT/$TOOL.txt")
echo "$TOOL $(basename "$BIN"): $total trials, $ok passed clean, $skipped not started (deadline), $((total - ok - skipped)) failed or cut off, $((SECONDS - START)) s"
