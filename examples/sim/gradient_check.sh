#!/bin/sh
# The gradient limit's load step (ctest sim_gradient, issue 28): run
# resil-sim on gradient-fixed.conf (a fixed bulkhead of 200),
# gradient-fixed50.conf (fixed at 50) and gradient.conf (the gradient
# limit) with gradient.scn twice; require byte-identical output, equal to
# EXPECTED, and check the phase lines
#   phase NAME: calls N local P% p99 T ms errors E% attempts A limit L settled LO..HI
# - fixed 200, step: the excess queues (p99 >= 35 ms);
# - fixed 50, step: it sheds (errors >= 43%), p99 <= 12 ms;
# - gradient, step: the limit settles (LO..HI within 50..65 over the
#   phase's second half), p99 <= 15 ms (less queued than the fixed 200:
#   under half its p99), errors at most one point above the fixed 200's
#   and below the fixed 50's (less shed).
# usage: gradient_check.sh RESIL_SIM DIR EXPECTED OUTDIR
#   (DIR holds gradient-fixed.conf, gradient-fixed50.conf, gradient.conf,
#   gradient.scn)
set -eu
sim=$1 dir=$2 expected=$3 out=$4
mkdir -p "$out"
for i in 1 2; do
	"$sim" "$dir/gradient-fixed.conf" "$dir/gradient-fixed50.conf" \
	    "$dir/gradient.conf" "$dir/gradient.scn" \
	    >"$out/gradient-$i.txt" 2>"$out/gradient-$i.err" ||
		{ echo "sim_gradient: run $i failed"; cat "$out/gradient-$i.err"
		  exit 1; }
done
if ! cmp -s "$out/gradient-1.txt" "$out/gradient-2.txt"; then
	echo "sim_gradient: two runs differ:"
	diff "$out/gradient-1.txt" "$out/gradient-2.txt" || true
	exit 1
fi
# The configurations' paths as given here, as in the expected file.
sed -e "s|^== .*/gradient|== examples/sim/gradient|" "$out/gradient-1.txt" \
    >"$out/gradient.txt"
if ! cmp -s "$out/gradient.txt" "$expected"; then
	echo "sim_gradient: the output differs from $expected:"
	diff "$expected" "$out/gradient.txt" || true
	exit 1
fi
cat "$out/gradient.txt"
awk '
function out(what) { print "sim_gradient: " conf ": " name ": " what; bad = 1 }
/^== / { conf = $2; sub(".*/", "", conf); next }
/^phase / {
	name = $2; sub(":", "", name)
	p99 = $8 + 0
	err = $11; sub("%", "", err); err += 0
	if ($3 != "calls" || $7 != "p99" || $10 != "errors" ||
	    $14 != "limit" || $16 != "settled")
		out("malformed line: " $0)
	split($17, band, "\\.\\.")
	if (name != "step")
		next
	n++
	if (conf == "gradient-fixed.conf") {
		p99_fixed = p99; err_fixed = err
		if (p99 < 35)
			out("p99 " p99 " ms < 35 ms: the fixed 200 should queue")
	} else if (conf == "gradient-fixed50.conf") {
		err_fixed50 = err
		if (err < 43)
			out("errors " err "% < 43%: the fixed 50 should shed")
		if (p99 > 12)
			out("p99 " p99 " ms > 12 ms")
	} else if (conf == "gradient.conf") {
		seen = 1
		if (band[1] + 0 < 50 || band[2] + 0 > 65)
			out("limit settled " $17 ", not within 50..65")
		if (p99 > 15 || p99 * 2 > p99_fixed)
			out("p99 " p99 " ms: not under 15 ms and half the fixed")
		if (err > err_fixed + 1 || err >= err_fixed50)
			out("errors " err "%: more shed than the fixed 50 or " \
			    "one point over the fixed 200")
	}
}
END {
	if (n != 3 || !seen) { print "sim_gradient: " n " step lines"; bad = 1 }
	if (bad) exit 1
	print "sim_gradient: the fixed 200 queues, the fixed 50 sheds, the " \
	    "gradient settles; two runs byte-identical"
}' "$out/gradient.txt"
