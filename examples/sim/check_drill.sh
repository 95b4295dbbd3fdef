#!/bin/sh
# The zone drill's test (ctest sim_drill): run resil-sim on CONFIG and
# SCENARIO twice, require byte-identical output, and check the targets of
# issue 13 on its phase lines:
#   phase NAME: calls N local P% p99 T ms errors E% attempts A
# healthy local >= 99%; in every phase p99 <= 400 ms, errors <= 0.1%,
# attempts <= 1.2. The first run also draws the picture, which must have
# its three panels and the phases.
# usage: check_drill.sh RESIL_SIM CONFIG SCENARIO OUTDIR
set -eu
sim=$1 conf=$2 scn=$3 out=$4
mkdir -p "$out"
"$sim" "$conf" "$scn" --svg "$out/drill.svg" >"$out/drill-1.txt"
"$sim" "$conf" "$scn" >"$out/drill-2.txt"
# The picture: three panels (local share, p99, errors), one line each,
# the phases marked.
if [ "$(grep -c '<polyline' "$out/drill.svg")" != 3 ] ||
	! grep -q '>zone_down</text>' "$out/drill.svg"; then
	echo "sim_drill: $out/drill.svg lacks its panels or phases"
	exit 1
fi
if ! cmp -s "$out/drill-1.txt" "$out/drill-2.txt"; then
	echo "sim_drill: two runs differ:"
	diff "$out/drill-1.txt" "$out/drill-2.txt" || true
	exit 1
fi
cat "$out/drill-1.txt"
awk '
/^phase / {
	n++
	name = $2; sub(":", "", name)
	local = $6; sub("%", "", local)
	p99 = $8
	err = $11; sub("%", "", err)
	att = $13
	if (name == "healthy" && local + 0 < 99) {
		print "sim_drill: " name ": local " local "% < 99%"; bad = 1 }
	if (p99 + 0 > 400) {
		print "sim_drill: " name ": p99 " p99 " ms > 400 ms"; bad = 1 }
	if (err + 0 > 0.1) {
		print "sim_drill: " name ": errors " err "% > 0.1%"; bad = 1 }
	if (att + 0 > 1.2) {
		print "sim_drill: " name ": attempts " att " > 1.2"; bad = 1 }
	if ($3 != "calls" || $5 != "local" || $7 != "p99" || $9 != "ms" ||
	    $10 != "errors" || $12 != "attempts") {
		print "sim_drill: malformed line: " $0; bad = 1 }
}
END {
	if (n != 3) { print "sim_drill: " n " phase lines, expected 3"; bad = 1 }
	if (bad) exit 1
	print "sim_drill: targets met, two runs byte-identical"
}' "$out/drill-1.txt"
