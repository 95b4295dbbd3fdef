#!/bin/sh
# Issue 43's hedging scenario (ctest sim_hedge): run resil-sim on
# hedge-before.conf (no hedging) and hedge.conf (one hedge after 6 ms)
# with hedge.scn twice; require byte-identical output and print
#   phase nohedge: p99 T ms attempts A
#   phase hedge: p99 T ms attempts A
# Bars, with hedging: p99 within 1.5x the fast endpoints' p99 (service
# exponential with mean 2 ms: 2 ln 100 = 9.21 ms, plus the 0.2 ms round
# trip: 9.41 ms, so 14.1 ms), at most 10% extra attempts (attempts per
# call <= 1.10).
# usage: hedge_check.sh RESIL_SIM DIR OUTDIR
set -eu
sim=$1 dir=$2 out=$3
mkdir -p "$out"
for i in 1 2; do
	"$sim" "$dir/hedge-before.conf" "$dir/hedge.conf" "$dir/hedge.scn" \
	    >"$out/hedge-$i.txt" 2>"$out/hedge-$i.err" ||
		{ echo "sim_hedge: run $i failed"; cat "$out/hedge-$i.err"
		  exit 1; }
done
if ! cmp -s "$out/hedge-1.txt" "$out/hedge-2.txt"; then
	echo "sim_hedge: two runs differ:"
	diff "$out/hedge-1.txt" "$out/hedge-2.txt" || true
	exit 1
fi
awk '
/^== / { n++; name = n == 1 ? "nohedge" : "hedge"; next }
/^phase run:/ {
	for (i = 1; i <= NF; i++) {
		if ($i == "p99") p99 = $(i + 1)
		if ($i == "attempts") att = $(i + 1)
	}
	printf "phase %s: p99 %s ms attempts %s\n", name, p99, att
	if (name == "hedge") { hp = p99 + 0; ha = att + 0 }
	if (name == "nohedge") np = p99 + 0
}
END {
	bad = 0
	if (n != 2) { print "sim_hedge: expected two configurations"; exit 1 }
	if (hp > 1.5 * 9.41) {
		printf "sim_hedge: p99 with hedging %.1f ms > 1.5 x 9.41 ms\n", hp
		bad = 1
	}
	if (ha > 1.10) {
		printf "sim_hedge: %.3f attempts per call > 1.10\n", ha
		bad = 1
	}
	if (hp >= np) {
		printf "sim_hedge: hedging did not lower p99 (%.1f -> %.1f)\n", np, hp
		bad = 1
	}
	exit bad
}' "$out/hedge-1.txt"
