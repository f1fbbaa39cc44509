#!/bin/sh
# deps.sh check|install — the Debian packages mt needs.
# check:   exit 0 if all are present, else say what is missing and how to install.
# install: as root, apt-get install what is missing; otherwise print the command.
# libdw-dev: elfutils libdwfl, the unwinder of sampled user stacks (--call-graph dwarf).
# libc6-dbg: separate debug symbols of libc and ld.so (libcommon/elfinfo reads them
# for stripped files, as perf and gdb do; the mt-ptsim truth names libc functions by them)
PKGS="build-essential pkg-config libipt-dev libelf-dev libdw-dev libjansson-dev libcapstone-dev libzstd-dev zlib1g-dev llvm bats linux-perf jq libc6-dbg"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
case "$1" in
install)
	if [ "$(id -u)" = 0 ]; then
		echo "deps: installing:$missing" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq && apt-get install -y -qq $missing >/dev/null || {
			echo "deps: fatal: apt-get install failed" >&2; exit 111; }
	else
		echo "deps: run as root: apt-get install -y$missing" >&2
		exit 2
	fi ;;
*)
	echo "deps: missing:$missing — run 'make deps' (as root) or: apt-get install -y$missing" >&2
	exit 2 ;;
esac
