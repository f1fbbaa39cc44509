#!/bin/sh
# Window starts walked one instruction at a time: for every cached program
# (tests/.cache/ptsim/runs) and every --window size from FIRST to LAST, the
# snapshot's truth.mt and mt-decode's output, each through mt-segment, must
# match the truth exactly (mt-compare: precision and recall 1, no wrong span;
# the exception program's 6 unwound frames aside, docs/fidelity.md).  Prints
# each window that does not, then the count.  A check of the metric and of
# the truth at every place a snapshot can begin, outside `make test` (a few
# minutes a thousand windows a program).
#   sh bench/window-walk.sh [FIRST LAST [PROG...]]   (default 9800 10199, all)
set -u
FIRST=${1:-9800}
LAST=${2:-10199}
[ $# -ge 2 ] && shift 2 || shift $#
C=tests/.cache/ptsim
B=$(dirname "$0")/../bin
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
progs=${*:-$(ls "$C"/runs | sed 's/\.run$//')}
n=0 bad=0
for p in $progs; do
	u=0
	[ "$p" = exception ] && u=6
	w=$FIRST
	while [ "$w" -le "$LAST" ]; do
		rm -rf "$T/w"
		"$B/mt-ptsim" --replay "$C/runs/$p.run" --psb-period 2048 --window "$w" -o "$T/w" \
			>/dev/null 2>&1 || { echo "$p $w: replay failed"; bad=$((bad + 1)); w=$((w + 1)); continue; }
		for src in truth decode; do
			rm -f "$T/cmp.txt"
			if [ $src = truth ]; then
				cp "$T/w/truth.mt" "$T/in.mt"
			else
				"$B/mt-decode" --buildid-dir "$T/w/images" -o "$T/in.mt" "$T/w/perf.data" 2>/dev/null
			fi
			"$B/mt-segment" --images "$T/w/images" -i "$T/in.mt" -o "$T/seg.mt" 2>/dev/null &&
				"$B/mt-compare" --min-precision 1 --min-recall 1 --max-wrong 0 \
					"$T/w/truth-spans.mt" "$T/seg.mt" > "$T/cmp.txt" &&
				grep -q " unwound=$u\$" "$T/cmp.txt" ||
				{ echo "$p $w $src: $(tail -1 "$T/cmp.txt" 2>/dev/null || echo 'mt-segment failed')"; bad=$((bad + 1)); }
			n=$((n + 1))
		done
		w=$((w + 1))
	done
done
echo "window-walk: $bad of $n judged windows not exact ($FIRST..$LAST)"
[ "$bad" -eq 0 ]
