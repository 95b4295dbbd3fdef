#!/bin/sh
# Issue 42's overload drill (ctest sim_overload, `make overload`): run
# resil-sim on overload-before.conf and overload.conf with overload.scn
# twice; require byte-identical output, equal to EXPECTED, and check the
# phase lines
#   phase NAME: offered X/s goodput Y/s (P% of capacity) critical Z% p99 T ms shed S%
# - before, overload: goodput collapses (below 25% of capacity);
# - after, overload: goodput >= 90% of capacity, critical >= 99% served,
#   p99 <= 2x the base phase's p99;
# - after, recovered (two throttle windows after the load fell): back to
#   the base figures: goodput within 1%, p99 within 10%, shed at most
#   0.1 point above base's.
# usage: overload_check.sh RESIL_SIM DIR EXPECTED OUTDIR [SVG]
set -eu
sim=$1 dir=$2 expected=$3 out=$4 svg=${5:-}
mkdir -p "$out"
for i in 1 2; do
	if [ "$i" = 1 ] && [ -n "$svg" ]; then set -- --svg "$svg"; else set --; fi
	"$sim" "$dir/overload-before.conf" "$dir/overload.conf" \
	    "$dir/overload.scn" "$@" \
	    >"$out/overload-$i.txt" 2>"$out/overload-$i.err" ||
		{ echo "sim_overload: run $i failed"; cat "$out/overload-$i.err"
		  exit 1; }
done
if ! cmp -s "$out/overload-1.txt" "$out/overload-2.txt"; then
	echo "sim_overload: two runs differ:"
	diff "$out/overload-1.txt" "$out/overload-2.txt" || true
	exit 1
fi
sed -e "s|^== .*/overload|== examples/sim/overload|" "$out/overload-1.txt" \
    >"$out/overload.txt"
cat "$out/overload.txt"
if [ -n "$expected" ] && ! cmp -s "$out/overload.txt" "$expected"; then
	echo "sim_overload: the output differs from $expected:"
	diff "$expected" "$out/overload.txt" || true
	exit 1
fi
awk '
function out(what) { print "sim_overload: " conf ": " name ": " what; bad = 1 }
function num(s) { gsub("[%/s(]", "", s); return s + 0 }
/^== / { conf = $2; sub(".*/", "", conf); next }
/^phase / {
	name = $2; sub(":", "", name)
	if ($3 != "offered" || $5 != "goodput" || $8 != "of" ||
	    $10 != "critical" || $12 != "p99" || $14 != "ms" || $15 != "shed")
		out("malformed line: " $0)
	good = num($6); cap = num($7); crit = num($11); p99 = $13 + 0
	shed = num($16)
	seen[conf "/" name] = 1
	if (conf == "overload-before.conf" && name == "overload" && cap >= 25)
		out("goodput " cap "% of capacity: no collapse")
	if (conf != "overload.conf")
		next
	if (name == "base") { bgood = good; bp99 = p99; bshed = shed }
	if (name == "overload") {
		if (cap < 90) out("goodput " cap "% of capacity < 90%")
		if (crit < 99) out("critical " crit "% < 99%")
		if (p99 > 2 * bp99) out("p99 " p99 " ms > 2 x " bp99 " ms")
	}
	if (name == "recovered") {
		if (good < 0.99 * bgood) out("goodput " good " < 99% of " bgood)
		if (p99 > 1.1 * bp99) out("p99 " p99 " ms > 1.1 x " bp99 " ms")
		if (shed > bshed + 0.1) out("shed " shed "% > " bshed "% + 0.1")
	}
}
END {
	if (!seen["overload-before.conf/overload"] ||
	    !seen["overload.conf/overload"] ||
	    !seen["overload.conf/recovered"]) {
		print "sim_overload: phases missing"; bad = 1
	}
	exit bad
}' "$out/overload.txt"
echo "sim_overload: ok"
