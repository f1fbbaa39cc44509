#!/bin/sh
# Fidelity table of mt-segment / mt-stitch against mt-ptsim's truth, over the
# cached runs (tests/.cache/ptsim, `make ptsim-cache`).  One line per
# variant, program, source and stage: mt-compare's precision, recall,
# coverage (of true frame-time by correct spans) and wrong spans.
#   sh bench/fidelity.sh [CACHE [VARIANT...]]
# SEGOPTS in the environment is passed to mt-segment, CMPOPTS to mt-compare
# (its default window is the honest one, the truth's; CMPOPTS=--actual-window
# gives the old one, which hides trace lost at a window's edges).
set -u
C=${1:-tests/.cache/ptsim}
[ $# -gt 0 ] && shift
VARIANTS=${*:-clean window noretcomp overflow drop corrupt truncate}
B=$(dirname "$0")/../bin
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf '%-10s %-11s %-6s %-6s %9s %7s %8s %6s\n' variant program source stage precision recall coverage wrong
for v in $VARIANTS; do
	for d in "$C/$v"/*/; do
		p=$(basename "$d")
		for src in truth decode; do
			case $v in clean|window|noretcomp) ;; *) [ $src = truth ] && continue ;; esac
			if [ $src = truth ]; then
				cp "$d/truth.mt" "$T/in.mt"
			else
				"$B/mt-decode" --buildid-dir "$d/images" -o "$T/in.mt" "$d/perf.data" 2>/dev/null
			fi
			"$B/mt-segment" ${SEGOPTS:-} -i "$T/in.mt" -o "$T/seg.mt" 2>/dev/null
			for st in seg stitch; do
				case $v in clean|window|noretcomp) [ $st = stitch ] && continue ;; esac
				f="$T/seg.mt"
				if [ $st = stitch ]; then
					"$B/mt-stitch" -i "$T/seg.mt" -o "$T/st.mt" 2>/dev/null
					f="$T/st.mt"
				fi
				"$B/mt-compare" ${CMPOPTS:-} "$d/truth-spans.mt" "$f" 2>/dev/null | tail -1 |
				sed 's/.*precision=\([^ ]*\) recall=\([^ ]*\) coverage=\([^ ]*\) .* wrong=\([^ ]*\) .*/\1 \2 \3 \4/' |
				{ read -r pr re co wr; printf '%-10s %-11s %-6s %-6s %9s %7s %8s %6s\n' $v $p $src $st "$pr" "$re" "$co" "$wr"; }
			done
		done
	done
done
