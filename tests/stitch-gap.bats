#!/usr/bin/env bats
# mt-stitch across a gap joins a frame only when nothing says it may have
# returned and been called again inside the gap (docs/stitch.md), judged by
# mt-compare's honest score against mt-ptsim's truth (a span joined over two
# true activations is wrong: wrong_joins).  Faulted recordings replayed from
# the cached step logs (tests/.cache/ptsim/runs, `make ptsim-cache`).
# Measured over the corpus' faults: bench/resync.sh, docs/fidelity.md.

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	C="$BATS_TEST_DIRNAME/.cache/ptsim"
	T="$BATS_TEST_TMPDIR"
	[ -d "$C/runs" ] || skip "no mt-ptsim cache (make ptsim-cache)"
}

# stitched PROG FAULT: the replay's spans after mt-stitch, scored
stitched() {
	rm -rf "$T/d"
	"$BIN/mt-ptsim" --replay "$C/runs/$1.run" --psb-period 2048 --inject "$2" -o "$T/d" 2>/dev/null || true
	"$BIN/mt-decode" --buildid-dir "$T/d/images" -o "$T/dec.mt" "$T/d/perf.data" 2>/dev/null || true
	"$BIN/mt-segment" -i "$T/dec.mt" -o "$T/seg.mt"
	"$BIN/mt-stitch" --stats -i "$T/seg.mt" -o "$T/st.mt" 2>"$T/st.err"
	run "$BIN/mt-compare" "$T/d/truth-spans.mt" "$T/st.mt"
	echo "$1 $2: ${lines[-1]} / $(cat "$T/st.err")"
}

# (joined over two calls before: fnptr 3, dynamic 1; each gap lies in a loop
# calling the same function from the same call site)
@test "stitch: a loop's callee is not joined across a gap (fnptr drop@35%)" {
	stitched fnptr drop@35%:64
	[[ "${lines[-1]}" == *" wrong_joins=0 wrong=0 "* ]]
	[[ "${lines[-1]}" != *" joins=0 "* ]]
	[[ "$(cat "$T/st.err")" == *" split="[1-9]* ]]
}

@test "stitch: a loop's callee is not joined across a gap (dynamic drop@50%)" {
	stitched dynamic drop@50%:64
	[[ "${lines[-1]}" == *" wrong_joins=0 wrong=0 "* ]]
	[[ "$(cat "$T/st.err")" == *" split="[1-9]* ]]
}
