#!/bin/sh
# The README's install, for real, in two variants.
#
# readme_install.sh BUILD_DIR CONSUMER_C (ctest install_readme): install
# into /usr/local (what `make install PREFIX=/usr/local` does: cmake
# --install of an optimised tree; here the tree under test), then build a
# program the README's way, `cc app.c $(pkg-config --cflags --libs
# resil)`, and run it with no LD_LIBRARY_PATH. It runs in a private mount
# namespace in which /usr/local is an empty tmpfs and /etc an overlay
# whose changes (the linker cache) go to a scratch directory, so the
# machine is left as it was. That needs root, unshare (util-linux) and
# the kernel's leave to make a mount namespace and mount in it, which a
# container or a chroot often refuses ("unshare: cannot change root
# filesystem propagation"): without one of them it prints the reason and
# exits 77 (ctest: skipped), never a failure.
#
# readme_install.sh --prefix BUILD_DIR CONSUMER_C (ctest
# install_readme_prefix, which needs no right and always runs): install
# into a scratch prefix, which the install says the dynamic linker does
# not search (LD_LIBRARY_PATH=<libdir>), then build the same program with
# pkg-config from that prefix and run it with that LD_LIBRARY_PATH, as
# the README tells a user of another prefix to.
#
# RESIL_TEST_UNSHARE names the unshare program (default: unshare); a test
# sets it to a stand-in that refuses as a container does.
set -eu
MODE=namespace
if [ "${1:-}" = "--prefix" ]; then
	MODE=prefix
	shift
fi
BUILD=$1
APP=$2
UNSHARE=${RESIL_TEST_UNSHARE:-unshare}

skip() {
	echo "readme_install: skipped: $*"
	exit 77
}

if [ "$MODE" = prefix ]; then
	# The real path: the install names the libdir's (a /tmp that is a
	# link would not match otherwise).
	WORK=$(cd "$(mktemp -d)" && pwd -P)
	trap 'rm -rf "$WORK"' EXIT
	unset DESTDIR # staged for a package, the install says nothing
	cmake --install "$BUILD" --prefix "$WORK/prefix" >"$WORK/install.log"
	LIBDIR=$(sed -n 's/.*LD_LIBRARY_PATH=\([^ ,]*\).*/\1/p' \
	    "$WORK/install.log" | head -n 1)
	case "$LIBDIR" in
	"$WORK"/prefix/*) ;;
	*)
		cat "$WORK/install.log"
		echo "readme_install: the install into $WORK/prefix did not" \
		    "name LD_LIBRARY_PATH=<its libdir>"
		exit 1
		;;
	esac
	cd "$WORK"
	unset LD_LIBRARY_PATH
	PKG_CONFIG_PATH=$LIBDIR/pkgconfig
	export PKG_CONFIG_PATH
	cc "$APP" $(pkg-config --cflags --libs resil) -o app
	LD_LIBRARY_PATH=$LIBDIR ./app
	exit 0
fi

[ "$(id -u)" -eq 0 ] || skip "needs root to install into /usr/local" \
    "(uid $(id -u)); install_readme_prefix tests the install"
command -v "$UNSHARE" >/dev/null 2>&1 || skip "no $UNSHARE (util-linux)"
# The right to a private mount namespace, asked first: a refusal is the
# machine's, not the install's.
if ! why=$("$UNSHARE" --mount --propagation private true 2>&1); then
	skip "no private mount namespace here ($why);" \
	    "install_readme_prefix tests the install"
fi
exec "$UNSHARE" --mount --propagation private sh -eu -c '
	BUILD=$1 APP=$2
	WORK=$(mktemp -d)
	trap "rm -rf $WORK" EXIT
	mkdir "$WORK/upper" "$WORK/ovl"
	refused() {
		echo "readme_install: skipped: $1 refused ($(cat "$WORK/err"));" \
		    "install_readme_prefix tests the install"
		exit 77
	}
	mount -t tmpfs none /usr/local 2>"$WORK/err" ||
	    refused "a tmpfs on /usr/local"
	mount -t overlay overlay \
	    -o "lowerdir=/etc,upperdir=$WORK/upper,workdir=$WORK/ovl" /etc \
	    2>"$WORK/err" || refused "an overlay on /etc"
	cmake --install "$BUILD" --prefix /usr/local >"$WORK/install.log"
	grep -q "ldconfig updated" "$WORK/install.log" || {
		cat "$WORK/install.log"; echo "no ldconfig at install"; exit 1; }
	cd "$WORK"
	unset LD_LIBRARY_PATH PKG_CONFIG_PATH
	cc "$APP" $(pkg-config --cflags --libs resil) -o app
	./app
' sh "$BUILD" "$APP"
