#!/usr/bin/env bash
# compare-outputs.sh OLD_BIN NEW_BIN: runs mt-symbolize and mt-write of two
# builds (directories holding mt-*) over the test corpus with the option sets
# the tests use, and compares every output byte, exit code and stderr line.
# For a refactoring that must not change behaviour: build main into one
# directory, the branch into another, then
#   bash bench/compare-outputs.sh /tmp/main-bin bin
# Inputs: every cached mt-ptsim run (tests/.cache/ptsim/*/*: its truth spans
# and its perf.data through the old mt-decode and mt-segment --stitch),
# tests/golden/mtev-all-kinds.txt, tests/corrupt/*.mt, a write-bench stream
# (tests/write/gen-spans.awk) and bench/symbolize's stream over mt-decode's
# own binary (and over bench/symbolize_big's program when it is built).
# The mt-ptsim runs go through mt-write in three forms (FXT, JSON, FXT
# --no-args), the other inputs in eight (compressed, --partial, both with
# and without mt-symbolize first).  Progress goes to stderr.
# Prints one line per difference and the counts; exit 1 if anything differs.
set -uo pipefail
cd "$(dirname "$0")/.."
OLD=$(cd "$1" && pwd) NEW=$(cd "$2" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export XDG_CACHE_HOME=$T/xdg
runs=0 same=0 diff=0
. bench/compare-lib.sh

# the symbolize option sets of the tests, then mt-write's of each result
sym_and_write() { # label input [mt-symbolize options...]
	local label=$1 in=$2
	shift 2
	one "$label" mt-symbolize --no-cache "$@" -o OUT "$in"
	one "$label" mt-symbolize --cache-dir CACHE "$@" -o OUT "$in"   # cold, then warm
	one "$label" mt-symbolize --cache-dir CACHE "$@" -o OUT "$in"
	one "$label" mt-symbolize --no-cache --window 1 "$@" -o OUT "$in"
	one "$label" mt-symbolize --no-cache --window 7 "$@" -o OUT "$in"
	one "$label" mt-symbolize --no-symbolizer --no-cache "$@" -o OUT "$in"
	one "$label" mt-symbolize --no-symbolizer --no-cache "$@" -o OUT
	one "$label" mt-symbolize --no-cache --partial "$@" -o OUT "$in"
	"$OLD/mt-symbolize" --no-cache "$@" -o "$T/sym.mt" "$in" 2> /dev/null
	if [ "${WRITE_FEW:-}" ]; then
		write_few "$label" "$T/sym.mt"
	else
		write_all "$label" "$T/sym.mt"
		write_all "$label(unsymbolized)" "$in"
	fi
}
write_few() { # label input: the formats only (for the many mt-ptsim runs)
	[ -s "$2" ] || return 0
	one "$1" mt-write -o OUT.fxt "$2"
	one "$1" mt-write -o OUT.json "$2"
	one "$1" mt-write -f fxt --no-args -o OUT "$2"
}
write_all() { # label input
	[ -s "$2" ] || return 0
	one "$1" mt-write -o OUT.fxt "$2"
	one "$1" mt-write -o OUT.json "$2"
	one "$1" mt-write -f json --no-args -o OUT "$2"
	one "$1" mt-write -f fxt --no-args -o OUT "$2"
	one "$1" mt-write --partial -o OUT.fxt "$2"
	one "$1" mt-write -o OUT.json.gz "$2"
	one "$1" mt-write -o OUT.fxt.zst "$2"
	one "$1" mt-write -z zstd -l 1 -f json -o OUT "$2"
}

# VARIANTS="clean window": only those mt-ptsim variants (default: all)
while read -r d label <&3; do
	echo "compare-outputs: $label ($runs so far)" >&2
	WRITE_FEW=1
	sym_and_write "$label/truth-spans" "$d/truth-spans.mt" --images "$d/images"
	"$OLD/mt-decode" --buildid-dir "$d/images" -o "$T/dec.mt" "$d/perf.data" 2> /dev/null
	"$OLD/mt-segment" --stitch -i "$T/dec.mt" -o "$T/st.mt" 2> /dev/null
	[ -s "$T/st.mt" ] && sym_and_write "$label/decoded" "$T/st.mt" --images "$d/images"
	"$OLD/mt-segment" --stitch --all-waypoints -i "$T/dec.mt" -o "$T/sta.mt" 2> /dev/null
	[ -s "$T/sta.mt" ] && one "$label/all-waypoints" mt-symbolize --no-cache --images "$d/images" -o OUT "$T/sta.mt"
	[ -s "$T/st.mt" ] && one "$label/symfs" mt-symbolize --no-cache --symfs "$d/images" -o OUT "$T/st.mt"
done 3< <(cached_runs)

WRITE_FEW=
"$OLD/mt-undump" tests/golden/mtev-all-kinds.txt > "$T/kinds.mt" 2> /dev/null
sym_and_write golden/mtev-all-kinds "$T/kinds.mt"
for f in tests/corrupt/*.mt; do
	one "corrupt/${f##*/}" mt-symbolize --no-cache -o OUT "$f"
	one "corrupt/${f##*/}" mt-symbolize --no-cache --partial -o OUT "$f"
	one "corrupt/${f##*/}" mt-write -o OUT.fxt "$f"
	one "corrupt/${f##*/}" mt-write --partial -o OUT.json "$f"
done

# write-bench's stream (200k spans) and write.bats' generator's variants
awk -v seed=9 -v threads=4 -v procs=2 -v spans=25000 -v pool=3000 -v named=0 \
	-f tests/write/gen-spans.awk | "$OLD/mt-undump" > "$T/wb.mt"
write_all write-bench "$T/wb.mt"
awk -v seed=3 -v threads=40 -v procs=3 -v spans=2000 -v pool=20000 -v named=1 \
	-f tests/write/gen-spans.awk | "$OLD/mt-undump" > "$T/wn.mt"
write_all write-named "$T/wn.mt"

# bench/symbolize.sh's streams
GEN=${BUILD:-build}/bench/symbolize_gen
if [ -x "$GEN" ]; then
	for bin in "$(pwd)/bin/mt-decode" "$(pwd)/${BUILD:-build}/bench/symbolize/big/big"; do
		[ -x "$bin" ] || continue
		"$GEN" "$bin" 200000 2000 > "$T/sb.mt"
		sym_and_write "symbolize-bench/${bin##*/}" "$T/sb.mt"
	done
fi

# the caches written by the old and the new build
if diff -r "$T/cache.old" "$T/cache.new" > /dev/null; then
	same=$((same + 1))
else
	diff=$((diff + 1))
	echo "DIFF caches"
fi
runs=$((runs + 1))
echo "compare-outputs: $runs comparisons, $same identical, $diff different"
[ "$diff" -eq 0 ]
