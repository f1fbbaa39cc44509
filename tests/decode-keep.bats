#!/usr/bin/env bats
# A decode error costs no good trace: mt-decode keeps what it decoded up to
# the error (libcommon/ptd_step.c, err_keeps()), judged against mt-ptsim's
# truth.  The faulted recordings are replayed from the cached step logs
# (tests/.cache/ptsim/runs, `make ptsim-cache`): no stepping.
# Measured over every fault kind and many positions: bench/decode-keep.sh.

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	C="$BATS_TEST_DIRNAME/.cache/ptsim"
	T="$BATS_TEST_TMPDIR"
	[ -d "$C/runs" ] || skip "no mt-ptsim cache (make ptsim-cache)"
}

# branches of FILE (trace-start/-end aside) on thread TID before time BEFORE
count_before() {
	"$BIN/mt-dump" -k branch "$1" | awk -v tid="$2" -v b="$3" '
	{ for (i = 2; i <= NF; i++) { split($i, a, "="); v[a[1]] = a[2] } }
	v["type"] != "trace-start" && v["type"] != "trace-end" && v["tid"] == tid && v["time"] + 0 < b + 0 { n++ }
	END { print n + 0 }'
}

# keep PROG OPTIONS...: replay PROG with OPTIONS, decode; then every decoded
# branch is a true one, and every true branch before the decode error's gap
# (on its thread) is decoded
keep() {
	local p=$1
	shift
	rm -rf "$T/d"
	"$BIN/mt-ptsim" --replay "$C/runs/$p.run" --psb-period 2048 "$@" -o "$T/d" 2>/dev/null
	"$BIN/mt-decode" --buildid-dir "$T/d/images" -o "$T/dec.mt" "$T/d/perf.data" 2>/dev/null || true
	run "$BIN/mt-compare" --kept-branches --max-wrong 0 "$T/d/truth.mt" "$T/dec.mt"
	echo "$p $*: ${lines[-1]}"
	[ "$status" -eq 0 ]
	[[ "${lines[-1]}" == "mt-compare: kept="*" wrong=0 truth="* ]]
	# the decode error: one gap (corrupt: the bad opcode)
	gap=$("$BIN/mt-dump" -k gap "$T/dec.mt" | grep -m1 'reason=decode-error')
	[ -n "$gap" ]
	tid=$(printf '%s\n' "$gap" | sed 's/.* tid=\([0-9]*\) .*/\1/')
	begin=$(printf '%s\n' "$gap" | sed 's/.* begin=\([0-9]*\) .*/\1/')
	want=$(count_before "$T/d/truth.mt" "$tid" "$begin")
	got=$(count_before "$T/dec.mt" "$tid" "$begin")
	echo "  before the gap at $begin on $tid: truth $want, decoded $got"
	[ "$want" -gt 0 ]
	[ "$got" -eq "$want" ]
}

@test "corrupt near the end of a snapshot (one PSB per 2 KB): every true branch before the bad byte is kept, none wrong" {
	for p in fnptr recursion exception signal; do
		keep $p --window 10000 --inject corrupt@99%:16
	done
}

@test "corrupt in whole runs, single- and multi-threaded: kept up to the error, none wrong" {
	keep fnptr --inject corrupt@50%:16
	keep threads --inject corrupt@50%:16
	keep dynamic --inject corrupt@10%:16 --inject corrupt@75%:16
}

@test "every fault kind: no decoded branch differs from the truth" {
	for f in overflow@50% drop@50%:64 truncate-aux@50% corrupt@30%:16; do
		for w in "" "--window 10000"; do
			rm -rf "$T/d"
			"$BIN/mt-ptsim" --replay "$C/runs/signal.run" --psb-period 2048 $w --inject "$f" -o "$T/d" 2>/dev/null
			"$BIN/mt-decode" --buildid-dir "$T/d/images" -o "$T/dec.mt" "$T/d/perf.data" 2>/dev/null || true
			run "$BIN/mt-compare" --kept-branches --max-wrong 0 "$T/d/truth.mt" "$T/dec.mt"
			echo "signal $f $w: ${lines[-1]}"
			[ "$status" -eq 0 ]
			# most of the truth is kept: the faults lose at most one PSB interval
			set -- $(echo "${lines[-1]}" | sed 's/.*kept=\([0-9]*\) wrong=0 truth=\([0-9]*\)/\1 \2/')
			[ "$(( $1 * 100 / $2 ))" -ge 60 ]
		done
	done
}

@test "garbled bytes (garble@: pseudo-random, most parse as packets) before a decode error: no branch after the gap is wrong; a damaged TSC, MTC or CYC holds no later branch at its time" {
	# Before the fix, the queue's running time kept a damaged value after
	# the error and every later branch got it (on one machine's runs, 61 of
	# 324 such faults, up to 9,859 wrong branches after the gap).  Garbage
	# decoded before a bad opcode can still give a few wrong branches before
	# the gap (docs/fidelity.md, Weak): those are allowed here, none after.
	local n=0 gaps=0 before=0
	for r in "$C"/runs/*.run; do
		p=$(basename "$r" .run)
		for at in 20 50 80; do
			rm -rf "$T/d"
			"$BIN/mt-ptsim" --replay "$r" --inject "garble@$at%:4" -o "$T/d" 2>/dev/null
			"$BIN/mt-decode" --buildid-dir "$T/d/images" -o "$T/dec.mt" "$T/d/perf.data" 2>/dev/null || true
			"$BIN/mt-decode" --decoder libipt --buildid-dir "$T/d/images" -o "$T/lib.mt" "$T/d/perf.data" 2>/dev/null || true
			cmp "$T/dec.mt" "$T/lib.mt"
			n=$((n + 1))
			g=$("$BIN/mt-dump" -k gap "$T/dec.mt" | grep -m1 'reason=decode-error' | sed 's/.* begin=\([0-9]*\) .*/\1/')
			[ -n "$g" ] || continue
			gaps=$((gaps + 1))
			# the branches after the gap's begin alone (mt-compare lists only
			# the first wrong ones): none wrong
			"$BIN/mt-dump" "$T/dec.mt" | awk -v g="$g" '$1 != "branch" { print; next }
				{ for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == "time" && a[2] + 0 > g + 0) { print; next } } }' |
				"$BIN/mt-undump" > "$T/after.mt"
			run "$BIN/mt-compare" --kept-branches --max-wrong 0 "$T/d/truth.mt" "$T/after.mt"
			[ "$status" -eq 0 ] || { echo "$p garble@$at%:4, after the gap at $g: ${lines[-1]}"; return 1; }
			run "$BIN/mt-compare" --kept-branches "$T/d/truth.mt" "$T/dec.mt"
			w=$(echo "${lines[-1]}" | sed 's/.* wrong=\([0-9]*\) .*/\1/')
			before=$((before + w))
		done
	done
	echo "$n faults, $gaps with a decode error, $before wrong branches before a gap"
	[ "$gaps" -ge $((n / 2)) ]
}

@test "mt-compare --kept-branches: an invented branch is counted, a true one is not" {
	d="$C/clean/fnptr"
	"$BIN/mt-dump" "$d/truth.mt" > "$T/t.txt"
	# move one call's time by one ns: that branch is no longer a true one
	awk '!done && $1 == "branch" && / type=call / { sub(/ time=[0-9]+/, " time=1"); done = 1 } { print }' \
		"$T/t.txt" > "$T/bad.txt"
	"$BIN/mt-undump" "$T/bad.txt" > "$T/bad.mt"
	run "$BIN/mt-compare" --kept-branches "$d/truth.mt" "$d/truth.mt"
	[ "$status" -eq 0 ]
	[[ "${lines[-1]}" == *" wrong=0 "* ]]
	run "$BIN/mt-compare" --kept-branches --max-wrong 0 "$d/truth.mt" "$T/bad.mt"
	[ "$status" -eq 1 ]
	[[ "${lines[-1]}" == *" wrong=1 "* ]]
	[[ "${lines[0]}" == "wrong: tid="*" time=1 type=0 "* ]]
}

# resync PROG FAULT...: each fault decoded with and without --resync: none
# of the --resync decodes holds a branch that differs from the truth (times
# included), never fewer branches than without, and where a resync kept a
# stretch, more, inside the old gap.  Whether a resync point exists depends
# on the bytes of the stepped run (a fresh clone steps its own), so at least
# one of the faults must be recovered, not each.
resync() {
	local p=$1 f done=0
	shift
	for f in "$@"; do
		rm -rf "$T/d"
		"$BIN/mt-ptsim" --replay "$C/runs/$p.run" --psb-period 2048 --inject "$f" -o "$T/d" 2>/dev/null
		"$BIN/mt-decode" --buildid-dir "$T/d/images" -o "$T/old.mt" "$T/d/perf.data" 2>/dev/null || true
		"$BIN/mt-decode" --resync -s --buildid-dir "$T/d/images" -o "$T/new.mt" "$T/d/perf.data" 2>"$T/err" || true
		run "$BIN/mt-compare" --kept-branches --max-wrong 0 "$T/d/truth.mt" "$T/new.mt"
		echo "$p $f: ${lines[-1]}"
		[ "$status" -eq 0 ]
		grep -q 'resync before a PSB: tried=[0-9]* done=[1-9]' "$T/err" || continue
		new=$(echo "${lines[-1]}" | sed 's/.*kept=\([0-9]*\) .*/\1/')
		run "$BIN/mt-compare" --kept-branches --max-wrong 0 "$T/d/truth.mt" "$T/old.mt"
		echo "  without --resync: ${lines[-1]}"
		[ "$status" -eq 0 ]
		old=$(echo "${lines[-1]}" | sed 's/.*kept=\([0-9]*\) .*/\1/')
		# a stretch that failed later is dropped whole: never fewer
		[ "$new" -ge "$old" ]
		[ "$new" -gt "$old" ] || continue
		done=$((done + 1))
		# the old decode's first gap: the new one has true branches inside it
		gap=$("$BIN/mt-dump" -k gap "$T/old.mt" | head -1)
		tid=$(printf '%s\n' "$gap" | sed 's/.* tid=\([0-9]*\) .*/\1/')
		begin=$(printf '%s\n' "$gap" | sed 's/.* begin=\([0-9]*\) .*/\1/')
		end=$(printf '%s\n' "$gap" | sed 's/.* end=\([0-9]*\) .*/\1/')
		inside=$(( $(count_before "$T/new.mt" "$tid" "$end") - $(count_before "$T/new.mt" "$tid" "$begin") ))
		truth=$(( $(count_before "$T/d/truth.mt" "$tid" "$end") - $(count_before "$T/d/truth.mt" "$tid" "$begin") ))
		echo "  inside the old gap [$begin, $end): $inside of $truth true branches"
		[ "$inside" -gt 0 ]
	done
	echo "$p: $done fault(s) recovered"
	[ "$done" -gt 0 ]
}

@test "resync before the next PSB: the trace between a bad byte or lost data and the next PSB is recovered from the first TIP with a known address, every branch true" {
	# a static program: the address from the one mapping with its low 32 bits
	resync fnptr corrupt@30%:16 corrupt@50%:16 corrupt@70%:16
	# lost data: the segment begins mid-packet
	resync fnptr drop@50%:64 drop@90%:64
	resync dynamic corrupt@30%:16 corrupt@70%:16 corrupt@90%:16 drop@30%:64
}

@test "resync: a stretch that does not reach its PSB (a compressed return whose call came before the resync packet) is dropped whole: the output is the one without --resync" {
	# every such fault of a C++ program full of returns: tried, none kept
	# (which faults those are depends on the stepped run: at least one)
	local f n=0
	for f in corrupt@30%:16 corrupt@50%:16 corrupt@90%:16 drop@50%:64; do
		rm -rf "$T/d"
		"$BIN/mt-ptsim" --replay "$C/runs/exception.run" --psb-period 2048 --inject "$f" -o "$T/d" 2>/dev/null
		"$BIN/mt-decode" --buildid-dir "$T/d/images" -o "$T/old.mt" "$T/d/perf.data" 2>/dev/null || true
		"$BIN/mt-decode" --resync -s --buildid-dir "$T/d/images" -o "$T/new.mt" "$T/d/perf.data" 2>"$T/err" || true
		echo "$f: $(tail -1 "$T/err")"
		grep -q 'resync before a PSB: tried=[1-9][0-9]* done=0 ' "$T/err" || continue
		cmp "$T/old.mt" "$T/new.mt"
		n=$((n + 1))
	done
	[ "$n" -gt 0 ]
}
