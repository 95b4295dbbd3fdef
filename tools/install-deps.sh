#!/bin/sh
# Install the Debian packages resil needs to build, test and benchmark.
# Does nothing when every package is already installed; otherwise runs one
# `apt-get update` and installs only the missing ones (as root, or through
# sudo when it is available). Usage: tools/install-deps.sh [extra-package...]
set -eu

PKGS="make gcc g++ cmake pkg-config libck-dev uthash-dev libcmocka-dev \
libbenchmark-dev libcjson-dev libcurl4-openssl-dev libhiredis-dev redis-server \
libzookeeper-mt-dev zookeeper libyaml-dev redis-sentinel prometheus \
$*"

missing=""
for p in $PKGS; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$status" in
	*"install ok installed"*) ;;
	*) missing="$missing $p" ;;
	esac
done

[ -z "$missing" ] && exit 0

echo "resil: installing missing packages:$missing"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "resil: need root (or sudo) to install:$missing" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q || echo "resil: apt-get update failed; trying the install anyway" >&2
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
