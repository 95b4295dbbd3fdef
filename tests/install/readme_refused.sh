#!/bin/sh
# ctest install_readme_refused: where the kernel refuses a private mount
# namespace (a container, a chroot), readme_install.sh's namespace
# variant (ctest install_readme) is skipped with its reason (exit 77),
# never failed. Twice: with a stand-in unshare that refuses as a
# container does ("cannot change root filesystem propagation"), and for
# real, under setpriv without CAP_SYS_ADMIN, where this machine lets a
# process drop it. Usage: readme_refused.sh SCRIPT BUILD_DIR CONSUMER_C
set -u
SCRIPT=$1
BUILD=$2
APP=$3
if [ "$(id -u)" -ne 0 ]; then
	echo "readme_refused: skipped: the namespace variant asks for root" \
	    "before the namespace (uid $(id -u))"
	exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cat >"$T/unshare" <<'STANDIN'
#!/bin/sh
echo "unshare: cannot change root filesystem propagation: Permission denied" >&2
exit 1
STANDIN
chmod +x "$T/unshare"

# expect WHAT RC OUT PATTERN: the run was skipped (77) with the reason.
expect() {
	if [ "$2" -ne 77 ] || ! printf '%s\n' "$3" | grep -q "$4"; then
		echo "readme_refused: $1: exit $2, not a skip with its reason:"
		printf '%s\n' "$3"
		exit 1
	fi
	echo "readme_refused: $1: skipped as it should: $3"
}

out=$(RESIL_TEST_UNSHARE="$T/unshare" sh "$SCRIPT" "$BUILD" "$APP" 2>&1)
expect "a refused propagation (stand-in unshare)" $? "$out" \
    "skipped: no private mount namespace here (unshare: cannot change root filesystem propagation"

if command -v setpriv >/dev/null 2>&1 &&
    setpriv --bounding-set=-sys_admin true 2>/dev/null; then
	out=$(setpriv --bounding-set=-sys_admin sh "$SCRIPT" "$BUILD" "$APP" 2>&1)
	expect "without CAP_SYS_ADMIN (setpriv)" $? "$out" \
	    "skipped: no private mount namespace here (unshare"
else
	echo "readme_refused: no setpriv, or no right to drop a capability:" \
	    "the stand-in refusal only"
fi
