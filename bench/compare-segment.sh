#!/usr/bin/env bash
# compare-segment.sh OLD_BIN NEW_BIN: runs mt-segment and mt-stitch of two
# builds (directories holding mt-*) over the test corpus and the benchmark
# traces with the option sets the tests and the pipeline use, and compares
# every output byte, exit code and stderr line (bench/compare-outputs.sh does
# the same for mt-symbolize and mt-write).  For a speed change that must not
# change behaviour:
#   bash bench/compare-segment.sh /tmp/main-bin bin
# Inputs: every cached mt-ptsim run (tests/.cache/ptsim/*/*: its perf.data
# through the old mt-decode, and its truth.mt), the golden segment and stitch
# inputs (tests/golden/segment/*.in.txt, with the segfuncs ELF files of
# $MT_BUILD/tests/segment*, without symbols too), tests/corrupt/*.mt and the
# benchmark traces present in bench/out/ptgen-* (mt-ptgen's; make them with
# bench/instructions.sh or bench/pipeline.sh).  Progress goes to stderr.
# Prints one line per difference and the counts; exit 1 if anything differs.
set -uo pipefail
cd "$(dirname "$0")/.."
. mk/build-dir.sh
OLD=$(cd "$1" && pwd) NEW=$(cd "$2" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
runs=0 same=0 diff=0
. bench/compare-lib.sh

# seg LABEL INPUT [options...]: the option sets of the tests and the pipeline
seg() {
	local label=$1 in=$2
	shift 2
	one "$label" mt-segment --stats "$@" -o OUT "$in"
	one "$label" mt-segment --stats --stitch "$@" -o OUT "$in"
	one "$label" mt-segment --stitch --all-waypoints "$@" -o OUT "$in"
	one "$label" mt-segment --no-waypoints --stitch "$@" -o OUT "$in"
	one "$label" mt-segment --no-smear --no-call-targets "$@" -o OUT "$in"
	one "$label" mt-segment --stitch --mem-limit 256 "$@" -o OUT "$in"
	one "$label" mt-segment --partial --stitch "$@" -o OUT "$in"
	"$OLD/mt-segment" "$@" -o "$T/seg.mt" "$in" 2> /dev/null
	if [ -s "$T/seg.mt" ]; then
		one "$label" mt-stitch --stats "$@" -o OUT "$T/seg.mt"
		one "$label" mt-stitch --mem-limit 256 "$@" -o OUT "$T/seg.mt"
	fi
}

while read -r d label <&3; do
	echo "compare-segment: $label ($runs so far)" >&2
	"$OLD/mt-decode" --buildid-dir "$d/images" -o "$T/dec.mt" "$d/perf.data" 2> /dev/null
	[ -s "$T/dec.mt" ] && seg "$label/decoded" "$T/dec.mt" --images "$d/images"
	[ -s "$T/dec.mt" ] && one "$label/decoded" mt-segment --stitch --no-symbols -o OUT "$T/dec.mt"
	[ -s "$d/truth.mt" ] && one "$label/truth" mt-segment --stitch --images "$d/images" -o OUT "$d/truth.mt"
done 3< <(cached_runs)

echo "compare-segment: golden and corrupt ($runs so far)" >&2
for f in tests/golden/segment/*.in.txt; do
	"$OLD/mt-undump" "$f" > "$T/g.mt" 2> /dev/null || continue
	b=${f##*/}
	seg "golden/$b" "$T/g.mt" --no-symbols
	for sym in "$MT_BUILD/tests/segment" "$MT_BUILD/tests/segment-dwarf"; do
		[ -d "$sym" ] && seg "golden/$b" "$T/g.mt" --images "$sym"
	done
done
for f in tests/corrupt/*.mt; do
	one "corrupt/${f##*/}" mt-segment -o OUT "$f"
	one "corrupt/${f##*/}" mt-segment --partial --stitch -o OUT "$f"
	one "corrupt/${f##*/}" mt-stitch --partial -o OUT "$f"
done

for D in bench/out/ptgen-*/; do
	[ -f "$D/perf.data" ] || continue
	echo "compare-segment: $D ($runs so far)" >&2
	"$OLD/mt-decode" --buildid-dir "$D/images" -o "$T/dec.mt" "$D/perf.data" 2> /dev/null
	one "$D" mt-segment --stats --images "$D/images" -o OUT "$T/dec.mt"
	one "$D" mt-segment --stats --stitch --images "$D/images" -o OUT "$T/dec.mt"
	one "$D" mt-segment --stitch --all-waypoints --images "$D/images" -o OUT "$T/dec.mt"
	"$OLD/mt-segment" --images "$D/images" -o "$T/seg.mt" "$T/dec.mt" 2> /dev/null
	one "$D" mt-stitch --stats --images "$D/images" -o OUT "$T/seg.mt"
done
echo "compare-segment: $runs comparisons, $same identical, $diff different"
[ "$diff" -eq 0 ]
