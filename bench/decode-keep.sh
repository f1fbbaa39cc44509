#!/bin/sh
# What mt-decode keeps of a faulted recording: for every cached program
# (tests/.cache/ptsim/runs), whole runs and --window 10000 snapshots, every
# --inject kind at several positions: the decoded branches (trace-start/-end
# aside), how many of them the truth has not (mt-compare --kept-branches;
# the goal is 0) and the truth's count.
#   sh bench/decode-keep.sh [CACHE [OLD-MT-DECODE]]
# With OLD-MT-DECODE (another build's mt-decode) its kept and wrong counts
# are shown too.  DECODE_OPTS: options for this build's mt-decode (e.g.
# --resync; OLD-MT-DECODE may then be bin/mt-decode itself); WINDOWS: the
# configurations, "whole" and --window sizes (default: "whole 10000");
# FAULTS: the --inject list (default: every kind but garble at several
# places; e.g. FAULTS="garble@10%:16 garble@50%:16" for corruption that
# parses as packets); PSB: mt-ptsim's --psb-period (default 2048, empty: its
# own).  CACHE may be any directory with runs/*.run (a corpus' saved runs).
set -u
C=${1:-tests/.cache/ptsim}
OLD=${2:-}
B=$(dirname "$0")/../bin
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf '%-10s %-7s %-22s %7s %6s %7s %8s %9s\n' program window fault kept wrong truth old-kept old-wrong
tk=0 tw=0 tt=0 to=0 tow=0
PSB=${PSB-2048}
for r in "$C"/runs/*.run; do
	p=$(basename "$r" .run)
	for w in ${WINDOWS:-whole 10000}; do
		[ "$w" = whole ] && w=
		for f in ${FAULTS:-overflow@10% overflow@50% overflow@90% drop@10%:64 drop@50%:64 drop@90%:64 \
			corrupt@10%:16 corrupt@50%:16 corrupt@90%:16 corrupt@99%:16 \
			truncate-aux@10% truncate-aux@50% truncate-aux@90%}; do
			rm -rf "$T/d"
			nice "$B/mt-ptsim" --replay "$r" ${PSB:+--psb-period $PSB} ${w:+--window $w} --inject "$f" \
				-o "$T/d" >/dev/null 2>&1
			[ -f "$T/d/truth.mt" ] || continue
			# shellcheck disable=SC2086
			"$B/mt-decode" ${DECODE_OPTS:-} --buildid-dir "$T/d/images" -o "$T/dec.mt" "$T/d/perf.data" 2>/dev/null
			set -- $("$B/mt-compare" --kept-branches "$T/d/truth.mt" "$T/dec.mt" | tail -1 |
				sed 's/.*kept=\([0-9]*\) wrong=\([0-9]*\) truth=\([0-9]*\)/\1 \2 \3/')
			o=- ow=-
			if [ -n "$OLD" ]; then
				"$OLD" --buildid-dir "$T/d/images" -o "$T/old.mt" "$T/d/perf.data" 2>/dev/null
				set -- "$@" $("$B/mt-compare" --kept-branches "$T/d/truth.mt" "$T/old.mt" | tail -1 |
					sed 's/.*kept=\([0-9]*\) wrong=\([0-9]*\) .*/\1 \2/')
				o=$4 ow=$5
				to=$((to + o)) tow=$((tow + ow))
			fi
			printf '%-10s %-7s %-22s %7s %6s %7s %8s %9s\n' "$p" "${w:-whole}" "$f" "$1" "$2" "$3" "$o" "$ow"
			tk=$((tk + $1)) tw=$((tw + $2)) tt=$((tt + $3))
		done
	done
done
printf '%-10s %-7s %-22s %7s %6s %7s %8s %9s\n' total - - $tk $tw $tt $to $tow
