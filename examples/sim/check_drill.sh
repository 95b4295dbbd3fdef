#!/bin/sh
# The zone drill's test (ctest sim_drill): run resil-sim on BEFORE and
# AFTER with SCENARIO twice, require
# byte-identical output, and check issue 26's figures on the phase lines
#   phase NAME: calls N local P% p99 T ms errors E% attempts A
# - BEFORE, phase healthy (seed 002's load test): local 63-73%, p99
#   1200-2400 ms, errors 0.8-1.6%;
# - AFTER, every phase: p99 <= 400 ms, errors <= 0.1%, attempts <= 1.2;
#   local >= 99% in healthy and recovered; zone_down goes to sh (local
#   <= 1%);
# and the compare line. The first run also draws the picture, which must
# have both configurations' three panels, the phases and the faults.
# usage: check_drill.sh RESIL_SIM BEFORE AFTER SCENARIO OUTDIR
set -eu
sim=$1 before=$2 after=$3 scn=$4 out=$5
mkdir -p "$out"
# One run after the other: ctest runs other tests beside this one, and
# the thread tests among them need the second core.
"$sim" "$before" "$after" "$scn" --svg "$out/drill.svg" \
	>"$out/drill-1.txt" 2>"$out/drill-1.err" ||
	{ echo "sim_drill: first run failed"; cat "$out/drill-1.err"; exit 1; }
"$sim" "$before" "$after" "$scn" >"$out/drill-2.txt" 2>"$out/drill-2.err" ||
	{ echo "sim_drill: second run failed"; cat "$out/drill-2.err"; exit 1; }
# The picture: three panels (local share, p99, errors), one line each per
# configuration, the phases marked, the scenario's actions drawn.
for want in '>zone_down</text>' '>bad_rule</text>' ': push empty (line' \
	': push without (line' ': pause (line' ': rule => zone != hz (line' \
	'pushes reach hz 30000 ms late'; do
	if ! grep -qF "$want" "$out/drill.svg"; then
		echo "sim_drill: $out/drill.svg lacks $want"
		exit 1
	fi
done
if [ "$(grep -c '<polyline' "$out/drill.svg")" != 6 ]; then
	echo "sim_drill: $out/drill.svg lacks its six lines"
	exit 1
fi
if ! cmp -s "$out/drill-1.txt" "$out/drill-2.txt"; then
	echo "sim_drill: two runs differ:"
	diff "$out/drill-1.txt" "$out/drill-2.txt" || true
	exit 1
fi
cat "$out/drill-1.txt"
awk -v before="$before" -v after="$after" '
function out(what) { print "sim_drill: " conf ": " name ": " what; bad = 1 }
/^== / { conf = $2; next }
/^compare healthy: local 68% -> 93%, p99 1800 -> 400 ms, errors 1.2% -> 0.3% \(seed-002\); local / {
	compared = 1; next }
/^phase / {
	name = $2; sub(":", "", name)
	local = $6; sub("%", "", local); local += 0
	p99 = $8 + 0
	err = $11; sub("%", "", err); err += 0
	att = $13 + 0
	if ($3 != "calls" || $5 != "local" || $7 != "p99" || $9 != "ms" ||
	    $10 != "errors" || $12 != "attempts")
		out("malformed line: " $0)
	if (conf == before) {
		nb++
		if (name != "healthy")
			next
		seen_before = 1
		if (local < 63 || local > 73)
			out("local " local "% outside 63-73%")
		if (p99 < 1200 || p99 > 2400)
			out("p99 " p99 " ms outside 1200-2400 ms")
		if (err < 0.8 || err > 1.6)
			out("errors " err "% outside 0.8-1.6%")
		next
	}
	if (conf != after)
		out("a phase line outside the two configurations")
	na++
	if ((name == "healthy" || name == "recovered") && local < 99)
		out("local " local "% < 99%")
	if (name == "zone_down" && local > 1)
		out("local " local "% > 1%: zone_down stays in hz")
	if (p99 > 400)
		out("p99 " p99 " ms > 400 ms")
	if (err > 0.1)
		out("errors " err "% > 0.1%")
	if (att > 1.2)
		out("attempts " att " > 1.2")
}
END {
	if (nb != 4 || na != 4) {
		print "sim_drill: " nb " and " na " phase lines, expected 4 each"
		bad = 1 }
	if (!seen_before) { print "sim_drill: no healthy line before"; bad = 1 }
	if (!compared) { print "sim_drill: no compare line"; bad = 1 }
	if (bad) exit 1
	print "sim_drill: before in band, after on target, two runs " \
	    "byte-identical"
}' "$out/drill-1.txt"
