#!/bin/bash
# bench/stitch-identical.sh [DIR...]: mt-decode --stitch (and --segment-serial)
# against the pipe it replaces, `mt-decode | mt-segment --stitch`, on every
# perf.data it finds: the same exit status, the same records (mt-dump, the
# header's producer aside) and the same warnings (the program names aside).
# For the fuzz corpora, which tests/decode-segment.bats does not read.
#
#   DIR...  directories searched for inputs (every regular file is taken
#           for a perf.data and decoded with --partial; default: the
#           fuzz_ptwalkcpu and fuzz_perfdata seeds (build/fuzz, `make
#           fuzz-seeds`), fuzz/corpus-ptwalkcpu, tests/corrupt, tests/.cache/ptsim)
#
# Images: build/fuzz/ptsim/clean/images (the fuzz_ptwalkcpu seeds'), then a
# run's own images/ beside its perf.data.  Prints one line per difference and
# the counts; exit 1 on any difference.
set -u
cd "$(dirname "$0")/.." || exit 111
. mk/build-dir.sh
B=$(pwd)/bin
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if [ $# -eq 0 ]; then
	set -- "$MT_BUILD"/fuzz/seeds-ptwalkcpu "$MT_BUILD"/fuzz/seeds-perfdata fuzz/corpus-ptwalkcpu \
		tests/corrupt tests/.cache/ptsim
fi
n=0 bad=0
while IFS= read -r -d '' f; do
	imgs=(--images "$MT_BUILD/fuzz/ptsim/clean/images")
	[ -d "$(dirname "$f")/images" ] && imgs+=(--images "$(dirname "$f")/images")
	rp=0 rf=0 rs=0
	"$B/mt-decode" --partial "${imgs[@]}" -o "$T/dec.mt" "$f" 2>"$T/dec.err" || rp=$?
	: >"$T/seg.err"
	if [ "$rp" -le 1 ]; then
		"$B/mt-segment" --stitch "${imgs[@]}" -i "$T/dec.mt" -o "$T/pipe.mt" 2>"$T/seg.err" || rp=$((rp > $? ? rp : $?))
	fi
	"$B/mt-decode" --stitch --partial "${imgs[@]}" -o "$T/one.mt" "$f" 2>"$T/one.err" || rf=$?
	"$B/mt-decode" --stitch --segment-serial --partial "${imgs[@]}" -o "$T/ser.mt" "$f" 2>/dev/null || rs=$?
	n=$((n + 1))
	why=
	if [ "$rp" != "$rf" ] || [ "$rf" != "$rs" ]; then
		why="exit $rf (serial $rs), the pipe's $rp"
	elif [ "$rp" -le 1 ]; then
		if ! cmp -s <("$B/mt-dump" "$T/pipe.mt" | tail -n +2) <("$B/mt-dump" "$T/one.mt" | tail -n +2); then
			why="records differ"
		elif ! cmp -s "$T/one.mt" "$T/ser.mt"; then
			why="--segment-serial differs"
		elif ! cmp -s <(cat "$T/dec.err" "$T/seg.err" | sed 's/^mt-[a-z]*: //') <(sed 's/^mt-decode: //' "$T/one.err"); then
			why="warnings differ"
		fi
	fi
	if [ -n "$why" ]; then
		bad=$((bad + 1))
		echo "DIFF $f: $why"
	fi
done < <(find "$@" -type f \( -name perf.data -o ! -path '*/.cache/*' \) ! -name '*.mt' ! -name '*.txt' ! -name '*.pt' -print0 2>/dev/null | sort -z)
echo "stitch-identical.sh: $n inputs, $bad differ"
[ "$bad" = 0 ]
