#!/bin/sh
# Count instructions per call of every benchmark body with callgrind
# (deterministic, unlike time on a shared machine). Each body runs ITERS
# times in one thread; only bench_measure() is counted.
# Usage: tools/bench-instructions.sh BUILD_DIR [ITERS] [ROWS] > instructions.txt
#   ROWS: an extended regular expression; only the rows whose whole name
#   matches it run (default: every row), e.g. 'balance/.*/1024' or
#   'registry/zookeeper_update/1000'. One row on a shared machine:
#   tools/bench-instructions.sh build/release 100000 'breaker/closed/count100'
set -eu
BIN="$1/bench/resil_bench_count"
ITERS="${2:-100000}"
ROWS="${3:-.*}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf '%-34s %12s\n' "benchmark" "instr/call"
for name in $("$BIN"); do
	printf '%s\n' "$name" | grep -Eqx "$ROWS" || continue
	# Rows whose one call is itself big (a whole directory push, a
	# registry update of 1000 providers, a fleet sync of many breakers over
	# Redis, a pick over 1024 endpoints) run
	# fewer calls: the count per call is the same.
	n="$ITERS"
	case "$name" in
	directory/push/* | registry/* | fleet/sync/* | fleet/sync_scripts/*) n=$((ITERS / 1000 > 0 ? ITERS / 1000 : 1)) ;;
	balance/*/1024) n=$((ITERS / 50 > 0 ? ITERS / 50 : 1)) ;;
	esac
	valgrind --tool=callgrind --toggle-collect=bench_measure \
	    --callgrind-out-file="$TMP/out" "$BIN" "$name" "$n" \
	    >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
	total=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$TMP/out")
	[ -n "$total" ] || total=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$TMP/out")
	awk -v n="$name" -v t="$total" -v i="$n" \
	    'BEGIN { printf "%-34s %12.1f\n", n, t / i }'
done
