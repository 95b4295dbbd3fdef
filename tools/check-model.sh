#!/bin/sh
# Check the Promela model of the breaker's protocol (lib/breaker.pml) with
# spin: an exhaustive safety search (assertions P1..P5, invalid end
# states) must find no error, and each of the two protocol variants from
# before the fixes (-DOLD_NO_QUIESCE, -DOLD_REJECT_ON_TRANSIT) must be
# caught, so the model itself is known to be able to fail.
# Usage: tools/check-model.sh [BUILD_DIR]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out="${1:-$top/build/model}"
mkdir -p "$out"
cd "$out"
cp "$top/lib/breaker.pml" .

run() { # run NAME [SPIN_DEFINES...]: prints pan's output to NAME.log
	name=$1
	shift
	spin -a "$@" breaker.pml >"$name.spin.log" 2>&1 ||
	    { cat "$name.spin.log" >&2; exit 1; }
	cc -O2 -DSAFETY -DMEMLIM=4096 -o "pan-$name" pan.c
	"./pan-$name" -m2000000 >"$name.log" 2>&1 || true
}

run model
if ! grep -q "errors: 0" model.log; then
	cat model.log >&2
	echo "model: the breaker protocol violates a property" >&2
	exit 1
fi
states=$(sed -n 's/^ *\([0-9][0-9]*\) states, stored.*/\1/p' model.log)
echo "model: breaker protocol: 0 errors in $states states (P1..P5)"

for variant in OLD_NO_QUIESCE OLD_REJECT_ON_TRANSIT; do
	run "$variant" "-D$variant"
	if grep -q "errors: 0" "$variant.log"; then
		echo "model: variant $variant was not caught: the model is too weak" >&2
		exit 1
	fi
	echo "model: variant $variant caught: $(grep -m1 'assertion violated' "$variant.log" | sed 's/^pan:[0-9]*: //')"
done

# Issue 42: the bulkhead that waits (lib/bulkhead_wait.pml): P1 and P3
# with waits that may end at any moment, P2 (no lost wake-up) with waits
# only a hand-over ends; the variant whose release ignores the waiters
# must be caught.
cp "$top/lib/bulkhead_wait.pml" .
runw() { # runw NAME [SPIN_DEFINES...]
	name=$1
	shift
	spin -a "$@" bulkhead_wait.pml >"$name.spin.log" 2>&1 ||
	    { cat "$name.spin.log" >&2; exit 1; }
	cc -O2 -DSAFETY -DMEMLIM=4096 -o "pan-$name" pan.c
	"./pan-$name" -m2000000 >"$name.log" 2>&1 || true
}
for v in wait_model:"" wait_model_no_timeout:-DNO_TIMEOUT; do
	name=${v%%:*}
	runw "$name" ${v#*:}
	if ! grep -q "errors: 0" "$name.log"; then
		cat "$name.log" >&2
		echo "model: the bulkhead wait protocol violates a property" >&2
		exit 1
	fi
	states=$(sed -n 's/^ *\([0-9][0-9]*\) states, stored.*/\1/p' "$name.log")
	echo "model: bulkhead wait protocol ($name): 0 errors in $states states"
done
runw OLD_RELEASE_IGNORES_WAITERS -DNO_TIMEOUT -DOLD_RELEASE_IGNORES_WAITERS
if grep -q "errors: 0" OLD_RELEASE_IGNORES_WAITERS.log; then
	echo "model: variant OLD_RELEASE_IGNORES_WAITERS was not caught" >&2
	exit 1
fi
echo "model: variant OLD_RELEASE_IGNORES_WAITERS caught: $(grep -m1 'invalid end state\|assertion violated' OLD_RELEASE_IGNORES_WAITERS.log | sed 's/^pan:[0-9]*: //')"
