#!/usr/bin/env bash
# b12x GPU bundle runner, written by `cargo xtask gpu-bundle` (DESIGN.md §8).
#
#   bash run.sh OUTDIR [--quick] [--only STEPS]
#
# STEPS is a comma list of: tests, prepare, sanitizer, peers, bench (default: all, in that order).
#   tests      nvidia-smi, then every CPU and GPU test binary (--test-threads 1)  -> OUTDIR/tests.log
#   prepare    `b12x-xtask prepare-gpu` twice, in two processes sharing a fresh cache dir, with
#              B12X_PRINT_COMPILE_PROGRESS=1: the second must select everything from the cache
#              (no race)  -> OUTDIR/prepare.log
#   sanitizer  B12X_TEST_PROFILE=reduced compute-sanitizer (memcheck, racecheck) on each gpu_*
#              -> OUTDIR/sanitizer.log; a sanitizer that refuses the device is recorded, not failed
#   peers      python3 peers.py OUTDIR/peers.json (PyTorch peers, same timing method)  -> peers.log
#   bench      every bench binary with B12X_PEER_JSON / B12X_BENCH_OUT  -> bench.log, bench-results/
# --quick: B12X_BENCH_QUICK=1 (fewer bench shapes), fewer peer samples.
# Env: B12X_STEP_TIMEOUT (s per binary, default 1800), B12X_SANITIZER_TOOLS (default "memcheck racecheck"),
#   B12X_BINS (space-separated shell globs, e.g. "gpu_mx bench_mx cpu_*": only the binaries matching
#   one of them run in every step; default: all).
# Every step runs even when an earlier one failed; the exit status is 1 if anything failed.
# Everything is archived into OUTDIR/results.tar.gz; OUTDIR/summary.txt has one line per binary.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="$HERE/bin"
usage() {
  echo "usage: $0 OUTDIR [--quick] [--only tests,prepare,sanitizer,peers,bench]" >&2
  exit 2
}
[[ $# -ge 1 ]] || usage
OUT="$1"
shift
QUICK=0
ONLY="tests,prepare,sanitizer,peers,bench"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --only) [[ $# -ge 2 ]] || usage; ONLY="$2"; shift ;;
    *) usage ;;
  esac
  shift
done
mkdir -p "$OUT/bench-results" "$OUT/cache"
OUT="$(cd "$OUT" && pwd)"

export B12X_ALLOW_PARTIAL_ARCHS=1
export B12X_CACHE_DIR="$OUT/cache"
B12X_COMMIT="$(cat "$HERE/COMMIT" 2>/dev/null || echo unknown)"
export B12X_COMMIT
if [[ $QUICK == 1 ]]; then export B12X_BENCH_QUICK=1; fi
STEP_TIMEOUT="${B12X_STEP_TIMEOUT:-1800}"
SAN_TOOLS="${B12X_SANITIZER_TOOLS:-memcheck racecheck}"

RESULTS=()
FAILED=0
record() { # step binary status detail...
  local line
  line="$(printf '%-10s %-34s %-8s %s' "$1" "$2" "$3" "${4:-}")"
  RESULTS+=("$line")
  echo "$line" >>"$OUT/summary.txt"
  if [[ $3 == FAIL ]]; then FAILED=1; fi
}
want() { [[ ",$ONLY," == *",$1,"* ]]; }
bins() {
  local b g
  for b in $( (cd "$BIN" 2>/dev/null && ls -1 $1 2>/dev/null) || true); do
    if [[ -z "${B12X_BINS:-}" ]]; then echo "$b"; continue; fi
    for g in $B12X_BINS; do
      # shellcheck disable=SC2053  # $g is a glob on purpose
      if [[ $b == $g ]]; then echo "$b"; break; fi
    done
  done
}
# Runs "$@" with the per-binary timeout (when `timeout` exists); output goes to $LOGTMP.
LOGTMP="$(mktemp)"
trap 'rm -f "$LOGTMP"' EXIT
run_logged() {
  if command -v timeout >/dev/null 2>&1; then
    timeout -k 10 "$STEP_TIMEOUT" "$@" >"$LOGTMP" 2>&1
  else
    "$@" >"$LOGTMP" 2>&1
  fi
}
banner() { echo; echo "=== $*"; }

echo "# run $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $B12X_COMMIT arch $(cat "$HERE/ARCH" 2>/dev/null) steps=$ONLY quick=$QUICK" >>"$OUT/summary.txt"
cd "$BIN" || { echo "no bin/ folder next to run.sh" >&2; exit 2; }

# tests
if want tests; then
  banner "nvidia-smi"
  { nvidia-smi; nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm --format=csv; } 2>&1 | tee "$OUT/nvidia-smi.log"
  : >"$OUT/tests.log"
  for b in $(bins 'cpu_*') $(bins 'gpu_*'); do
    banner "tests: $b"
    echo "=== $b" >>"$OUT/tests.log"
    run_logged "./$b" --test-threads 1
    rc=$?
    cat "$LOGTMP" | tee -a "$OUT/tests.log" | tail -n 40
    res="$(grep -E '^test result:' "$LOGTMP" | tail -n 1)"
    if [[ $rc == 0 ]]; then
      if grep -qE 'test result: .* 0 passed;.*[1-9][0-9]* ignored' "$LOGTMP" && [[ $b == gpu_* ]]; then
        record tests "$b" FAIL "all GPU tests ignored (no CUDA device visible?) $res"
      else
        record tests "$b" PASS "$res"
      fi
    else
      record tests "$b" FAIL "exit $rc ${res}"
    fi
  done
fi

# prepare (twice: the second process must reuse the cached selections)
if want prepare && [[ -x "$BIN/b12x-xtask" ]]; then
  : >"$OUT/prepare.log"
  rm -rf "$OUT/prepare-cache"
  for i in 1 2; do
    banner "prepare-gpu, process $i"
    echo "=== prepare-gpu process $i" >>"$OUT/prepare.log"
    B12X_CACHE_DIR="$OUT/prepare-cache" B12X_PRINT_COMPILE_PROGRESS=1 run_logged ./b12x-xtask prepare-gpu
    rc=$?
    tee -a "$OUT/prepare.log" <"$LOGTMP" | tail -n 60
    raced="$(grep -c 'Raced' "$LOGTMP")"
    cached="$(grep -c 'Cached' "$LOGTMP")"
    if [[ $rc != 0 ]]; then
      record prepare "process $i" FAIL "exit $rc"
    elif [[ $i == 2 && $raced != 0 ]]; then
      record prepare "process $i" FAIL "$raced selections raced again (cached: $cached)"
    else
      record prepare "process $i" PASS "raced $raced, cached $cached"
    fi
  done
fi

# sanitizer
if want sanitizer; then
  : >"$OUT/sanitizer.log"
  if ! command -v compute-sanitizer >/dev/null 2>&1; then
    echo "compute-sanitizer not found on PATH: sanitizer profile not run" | tee -a "$OUT/sanitizer.log"
    record sanitizer "-" REFUSED "compute-sanitizer not found"
  else
    for b in $(bins 'gpu_*'); do
      for tool in $SAN_TOOLS; do
        banner "sanitizer ($tool, reduced profile): $b"
        echo "=== $tool $b" >>"$OUT/sanitizer.log"
        B12X_TEST_PROFILE=reduced run_logged compute-sanitizer --tool "$tool" --error-exitcode 1 "./$b" --test-threads 1
        rc=$?
        cat "$LOGTMP" | tee -a "$OUT/sanitizer.log" | tail -n 20
        summary="$(grep -E '(ERROR|RACECHECK) SUMMARY' "$LOGTMP" | tail -n 1 | sed 's/^=* *//')"
        res="$(grep -E '^test result:' "$LOGTMP" | tail -n 1)"
        if [[ $rc == 0 ]]; then
          record sanitizer "$b:$tool" PASS "$summary $res"
        elif [[ $rc == 124 || $rc == 137 ]]; then
          last="$(grep -E '^test ' "$LOGTMP" | tail -n 1)"
          echo "SANITIZER TIMEOUT ($tool, after ${STEP_TIMEOUT}s; last: $last)" | tee -a "$OUT/sanitizer.log"
          record sanitizer "$b:$tool" TIMEOUT "after ${STEP_TIMEOUT}s, last: $last"
          FAILED=1
        elif [[ -z $summary ]]; then
          why="$(grep -m1 -iE 'error|not supported|unable|fail' "$LOGTMP" | sed 's/^=* *//' | cut -c1-160)"
          echo "SANITIZER REFUSED ($tool, exit $rc): $why" | tee -a "$OUT/sanitizer.log"
          record sanitizer "$b:$tool" REFUSED "exit $rc: $why"
        else
          record sanitizer "$b:$tool" FAIL "exit $rc: $summary $res"
        fi
      done
    done
  fi
fi

# peers
if want peers; then
  banner "peers (PyTorch)"
  peer_args=("$OUT/peers.json")
  if [[ $QUICK == 1 ]]; then peer_args+=(--quick); fi
  run_logged python3 "$HERE/peers.py" "${peer_args[@]}"
  rc=$?
  tee "$OUT/peers.log" <"$LOGTMP" | tail -n 80
  if [[ $rc == 0 ]]; then record peers peers.py PASS; else record peers peers.py FAIL "exit $rc"; fi
fi

# bench
if want bench; then
  : >"$OUT/bench.log"
  if [[ -f "$OUT/peers.json" ]]; then export B12X_PEER_JSON="$OUT/peers.json"; else echo "no peers.json: benches run without peer timings"; fi
  export B12X_BENCH_OUT="$OUT/bench-results"
  for b in $(bins 'bench_*'); do
    banner "bench: $b"
    echo "=== $b" >>"$OUT/bench.log"
    run_logged "./$b"
    rc=$?
    tee -a "$OUT/bench.log" <"$LOGTMP"
    if [[ $rc == 0 ]]; then record bench "$b" PASS; else record bench "$b" FAIL "exit $rc"; fi
  done
fi

# archive + summary
cd "$OUT" || exit 1
TMPTAR="$(mktemp /tmp/b12x-results.XXXXXX)"
tar -czf "$TMPTAR" --exclude='./results.tar.gz' . && mv "$TMPTAR" "$OUT/results.tar.gz"
echo
echo "=== summary (this run; all runs in $OUT/summary.txt)"
for l in "${RESULTS[@]+"${RESULTS[@]}"}"; do echo "$l"; done
if [[ $FAILED == 0 ]]; then echo "ALL PASSED"; else echo "SOME STEPS FAILED"; fi
echo "archive: $OUT/results.tar.gz"
exit "$FAILED"
