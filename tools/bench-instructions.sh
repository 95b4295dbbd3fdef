#!/bin/sh
# Count instructions per call of every benchmark body with callgrind
# (deterministic, unlike time on a shared machine). Each body runs ITERS
# times in one thread; only bench_measure() is counted.
# Usage: tools/bench-instructions.sh BUILD_DIR [ITERS] > instructions.txt
set -eu
BIN="$1/bench/resil_bench_count"
ITERS="${2:-100000}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf '%-34s %12s\n' "benchmark" "instr/call"
for name in $("$BIN"); do
	# Rows whose one call is itself big (a whole directory push, a scan of
	# 1024 endpoints) run fewer calls: the count per call is the same.
	n="$ITERS"
	case "$name" in
	directory/push/*) n=$((ITERS / 1000 > 0 ? ITERS / 1000 : 1)) ;;
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
