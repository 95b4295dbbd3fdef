#!/bin/sh
# The README's install, for real: install into /usr/local (what
# `make install PREFIX=/usr/local` does: cmake --install of an optimised
# tree; here the tree under test), then build a program the README's way,
# `cc app.c $(pkg-config --cflags --libs resil)`, and run it with no
# LD_LIBRARY_PATH. It runs in a private mount namespace in which
# /usr/local is an empty tmpfs and /etc an overlay whose changes (the
# linker cache) go to a scratch directory, so the machine is left as it
# was. Needs root and unshare (util-linux); exits
# 77 (skipped) otherwise. Usage: readme_install.sh BUILD_DIR CONSUMER_C
set -eu
BUILD=$1
APP=$2
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null 2>&1; then
	echo "readme_install: needs root and unshare; skipped"
	exit 77
fi
exec unshare --mount --propagation private sh -eu -c '
	BUILD=$1 APP=$2
	WORK=$(mktemp -d)
	trap "rm -rf $WORK" EXIT
	mkdir "$WORK/upper" "$WORK/ovl"
	mount -t tmpfs none /usr/local
	mount -t overlay overlay \
	    -o "lowerdir=/etc,upperdir=$WORK/upper,workdir=$WORK/ovl" /etc
	cmake --install "$BUILD" --prefix /usr/local >"$WORK/install.log"
	grep -q "ldconfig updated" "$WORK/install.log" || {
		cat "$WORK/install.log"; echo "no ldconfig at install"; exit 1; }
	cd "$WORK"
	unset LD_LIBRARY_PATH PKG_CONFIG_PATH
	cc "$APP" $(pkg-config --cflags --libs resil) -o app
	./app
' sh "$BUILD" "$APP"
