#!/bin/sh
# asan-bin.sh [GOAL]: `make asan` leaves the plain tools in bin/ afterwards
# (issue 18 item 8).  Runs `make asan ASAN_GOAL=GOAL` (default bin/mt-cat:
# one sanitized tool built into bin/ instead of the whole test run), then
# checks that no tool in bin/ carries the ASan runtime and that each answers
# --help.  Slow (the sanitized library is built): run by hand, not by
# `make test`.
set -eu
cd "$(dirname "$0")/.."
goal=${1:-bin/mt-cat}
make -s all
make -s asan ASAN_GOAL="$goal" > /dev/null
bad=0 n=0
for t in bin/mt-*; do
	n=$((n + 1))
	if nm -D "$t" 2> /dev/null | grep -q __asan_init || ldd "$t" | grep -q libasan; then
		echo "asan-bin: $t is the sanitized build" >&2
		bad=$((bad + 1))
	fi
	"$t" --help > /dev/null 2>&1 || { echo "asan-bin: $t --help failed" >&2; bad=$((bad + 1)); }
done
[ -f build-asan/tools/mt-cat.o ] || { echo "asan-bin: make asan built nothing" >&2; exit 1; }
echo "asan-bin: $n tools in bin/, $bad sanitized or broken"
[ "$bad" -eq 0 ]
