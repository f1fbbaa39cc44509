#!/bin/sh
# The table of docs/sampling.md ("How good the stacks are"): sampled stacks of
# tests/programs/stacks/stk.c judged against mt-ptsim's truth of the same
# binary by tests/lib/stackcheck.awk, per recording, as recorded, repaired
# (mt-segment's rules), root-joined (mt-decode, fp + root stream) and both.
# Each line: recording, step, then stackcheck's five figures (samples, whole
# true stack, agreeing from main down, stacks with main, of those agreeing).
#   sh bench/stacks.sh            (needs perf; ~1 min, plus ~20 s of
#                                  single-stepping when the truth is not cached)
set -u
R=$(cd "$(dirname "$0")/.." && pwd)
B=$R/bin
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cc -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -static -o "$T/stk" \
	"$R/tests/programs/stacks/stk.c" || exit 2
h=$(sha1sum "$T/stk" | cut -c1-16)
c=$R/tests/.cache/stacks/$h
if [ ! -s "$c/truth.txt" ]; then
	mkdir -p "$c"
	"$B/mt-ptsim" -o "$c/pt" -- "$T/stk" 1 1 > /dev/null 2>&1 || exit 2
	"$B/mt-dump" "$c/pt/truth-spans.mt" > "$c/truth.tmp" && mv "$c/truth.tmp" "$c/truth.txt"
	rm -rf "$c/pt"
fi
main=$(printf '0x%x' "0x$(nm "$T/stk" | awk '$3 == "main" { print $1 }')")

# judge NAME DIR DECODE-OPTION SEGMENT-OPTION STEP
judge() {
	"$B/mt-decode" $3 "$2/perf.data" > "$2/d.mt" 2> /dev/null
	"$B/mt-segment" $4 -i "$2/d.mt" > "$2/s.mt"
	"$B/mt-dump" -k sample "$2/d.mt" > "$2/s.txt"
	"$B/mt-dump" -k span "$2/s.mt" > "$2/sp.txt"
	printf '%-34s %-12s %s\n' "$1" "$5" "$(awk -v main="$main" -f "$R/tests/lib/stackcheck.awk" \
		"$c/truth.txt" "$2/s.txt" "$2/sp.txt")"
}

# steps NAME DIR: the four steps (the last two only with a root stream)
steps() {
	judge "$1" "$2" --no-root-join --no-sample-repair recorded
	judge "$1" "$2" --no-root-join "" repaired
	if "$B/mt-decode" -s "$2/perf.data" 2>&1 > /dev/null | grep -q ' roots='; then
		judge "$1" "$2" "" --no-sample-repair root-joined
		judge "$1" "$2" "" "" joined+repair
	fi
}

# rec NAME PERF-RECORD-ARGS... -- STK-ARGS
rec() {
	n=$1
	shift
	mkdir -p "$T/$n"
	a=
	while [ "$1" != -- ]; do
		a="$a $1"
		shift
	done
	shift
	perf record -q -o "$T/$n/perf.data" $a -- "$T/stk" "$@" 2> /dev/null
	steps "$n ($*)" "$T/$n"
}

rec fp -e cpu-clock:u -F 5000 --call-graph fp -- 10000 0
rec fp -e cpu-clock:u -F 5000 --call-graph fp -- 10000 1
rec fp+roots -e cpu-clock/call-graph=fp,freq=5000/u \
	-e cpu-clock/call-graph=dwarf,stack-size=8192,freq=20/u -- 60000 0
rec fp+roots -e cpu-clock/call-graph=fp,freq=5000/u \
	-e cpu-clock/call-graph=dwarf,stack-size=8192,freq=20/u -- 30000 1
rec dwarf -e cpu-clock:u -F 5000 --call-graph dwarf -- 10000 0
rec dwarf -e cpu-clock:u -F 5000 --call-graph dwarf -- 10000 1
for a in "60000 0" "30000 1"; do
	"$B/mt-capture" run --mode sample -g fp -t none -o "$T/cap" -- "$T/stk" $a > /dev/null 2>&1
	steps "mt-capture -g fp ($a)" "$T/cap"
	rm -rf "$T/cap"
done
"$B/mt-capture" run --mode sample -t none -o "$T/auto" -- "$T/stk" 10000 1 2>&1 | grep 'call graph'
steps "mt-capture auto (10000 1)" "$T/auto"
