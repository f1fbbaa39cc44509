#!/usr/bin/env bats
# mt-decode -j N (PSB-parallel decoding, docs/decode.md): the output, stderr
# and exit status are those of -j 1, the serial decoder (itself checked
# against mt-ptsim's truth and perf in decode.bats), on every kind of input.
# The test inputs are small, so --chunk-bytes cuts them into many chunks
# (1: a chunk at every PSB; 4096: a few PSBs each); --stats says how many
# chunks were decoded on other threads and switched to, so that a test
# cannot pass with the parallel path unused.

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	T="$BATS_TEST_TMPDIR"
	PTSIM_CACHE="$BATS_TEST_DIRNAME/.cache/ptsim"
	FX=/work/shared/fixtures/intel_pt-skylake-4.14
	J1="$BATS_FILE_TMPDIR/j1"
}

# -j 1 (the reference) is decoded once per cached mt-ptsim run for the whole
# file: output, stderr and exit status in $J1/VARIANT-PROG.{mt,err,rc}.
setup_file() {
	local d k rc
	mkdir -p "$BATS_FILE_TMPDIR/j1"
	for d in "$BATS_TEST_DIRNAME"/.cache/ptsim/*/*/; do
		[ -f "$d/perf.data" ] || continue
		d=${d%/}
		k=$BATS_FILE_TMPDIR/j1/$(basename "$(dirname "$d")")-$(basename "$d")
		rc=0
		"$BATS_TEST_DIRNAME/../bin/mt-decode" -j 1 -o "$k.mt" --buildid-dir "$d/images" \
			"$d/perf.data" 2>"$k.err" || rc=$?
		echo $rc > "$k.rc"
	done
}

# j1 RUNDIR: the cached -j 1 decode of a mt-ptsim run (path without suffix)
j1() { echo "$J1/$(basename "$(dirname "$1")")-$(basename "$1")"; }

# same ARGS...: -j 1 against -j 2 with a chunk at every PSB and -j 3 with
# chunks of 4096 bytes
# (output, stderr without the --stats lines, exit status); adds the chunks
# switched to (spliced=) to $T/spliced.
same() {
	local jc j c rc1=0 rc2
	rm -f "$T/a.mt"
	"$BIN/mt-decode" -j 1 -o "$T/a.mt" "$@" 2>"$T/a.err" || rc1=$?
	same_as "$T/a" $rc1 "$@"
}

# same_as REF RC ARGS...: REF.mt / REF.err and exit status RC are -j 1's
same_as() {
	local ref=$1 rc1=$2 jc j c rc2
	shift 2
	for jc in 2/1 3/4096; do
		j=${jc%/*} c=${jc#*/} rc2=0
		rm -f "$T/b.mt"
		"$BIN/mt-decode" -s -j $j --chunk-bytes $c -o "$T/b.mt" "$@" 2>"$T/b.err" || rc2=$?
		grep -v '^mt-decode: records=\|^mt-decode: parallel: ' "$T/b.err" > "$T/b.err2" || true
		if [ $rc1 -ne $rc2 ] || ! cmp -s "$ref.err" "$T/b.err2" ||
		   { [ -f "$ref.mt" ] && ! cmp -s "$ref.mt" "$T/b.mt"; }; then
			echo "-j $j --chunk-bytes $c differs from -j 1 (exit $rc1/$rc2): $*"
			diff "$ref.err" "$T/b.err2" | head -5
			return 1
		fi
		sed -n 's/.* spliced=\([0-9]*\).*/\1/p' "$T/b.err" >> "$T/spliced"
	done
}

spliced() { awk '{ s += $1 } END { print s + 0 }' "$T/spliced" 2>/dev/null || echo 0; }

ptsim_runs() { # VARIANT-REGEX
	local d
	for d in "$PTSIM_CACHE"/*/*/; do
		[ -f "$d/perf.data" ] || continue
		basename "$(dirname "$d")" | grep -Eq "$1" && echo "${d%/}"
	done
}

@test "-j 2/3: clean, --window and --noretcomp mt-ptsim runs decode as with -j 1" {
	local d k n=0
	for d in $(ptsim_runs '^(clean|window|noretcomp)$'); do
		k=$(j1 "$d")
		same_as "$k" "$(cat "$k.rc")" --buildid-dir "$d/images" "$d/perf.data"
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim runs cached in $PTSIM_CACHE"
	[ "$n" -ge 12 ]
	[ "$(spliced)" -gt 500 ] # the chunks were used, not only decoded
}

@test "-j 2/3: every mt-ptsim fault kind (overflow, drop, corrupt, truncate-aux) decodes as with -j 1" {
	local d k n=0
	for d in $(ptsim_runs '^(overflow|drop|corrupt|truncate)$'); do
		k=$(j1 "$d")
		same_as "$k" "$(cat "$k.rc")" --buildid-dir "$d/images" "$d/perf.data"
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim fault runs cached in $PTSIM_CACHE"
	[ "$n" -ge 40 ]
	[ "$(spliced)" -gt 500 ]
}

@test "-j 2/3: without images and with --records the output is -j 1's" {
	local d
	d=$(ptsim_runs '^threads$' | head -1)
	[ -n "$d" ] || d=$(ptsim_runs '^clean$' | head -1)
	[ -n "$d" ] || skip "no mt-ptsim runs cached in $PTSIM_CACHE"
	for d in $(ptsim_runs '^(clean|corrupt)$' | grep -E '/(threads|signal|fnptr)$'); do
		same --no-images "$d/perf.data"
		"$BIN/mt-decode" -j 1 --records "$d/perf.data" > "$T/r1"
		"$BIN/mt-decode" -j 3 --chunk-bytes 1 --records "$d/perf.data" > "$T/r3"
		cmp "$T/r1" "$T/r3"
	done
}

@test "-j 2: branch records decoded on the workers (bodies) join to -j 1's output on faulted and multi-thread runs; --par-answers too" {
	# by default a worker runs the fast loop's record logic itself past the
	# head of its chunk (docs/decode.md, "Records on the workers"); the
	# stepper joins those records at the PSBs (pending branch, time,
	# commit checks by the branch-block count, hand-backs to the merge).
	# --stats counts the records so joined: the test fails if none were
	local d n=0 recs=0 c k rc1 rc2
	for d in $(ptsim_runs '^(clean|overflow|drop|corrupt|truncate)$' | grep -E '/(threads|fnptr|signal|recursion)$'); do
		# --chunk-bytes 1 and 4096 (-j 2 and 3) are the tests above: bodies are the default
		rc1=$(cat "$(j1 "$d").rc")
		for k in 2048; do
			rc2=0
			"$BIN/mt-decode" -s -j 2 --chunk-bytes $k --buildid-dir "$d/images" -o "$T/b.mt" \
				"$d/perf.data" 2>"$T/b.err" || rc2=$?
			[ $rc1 -eq $rc2 ]
			cmp "$(j1 "$d").mt" "$T/b.mt" || { echo "bodies differ: $d --chunk-bytes $k"; return 1; }
			c=$(sed -n 's/.* body-records=\([0-9]*\).*/\1/p' "$T/b.err")
			recs=$((recs + ${c:-0}))
		done
		"$BIN/mt-decode" -j 2 --chunk-bytes 1 --par-answers --buildid-dir "$d/images" \
			-o "$T/b.mt" "$d/perf.data" 2>/dev/null || true
		cmp "$(j1 "$d").mt" "$T/b.mt" || { echo "--par-answers differs: $d"; return 1; }
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim runs cached in $PTSIM_CACHE"
	[ "$n" -ge 16 ]
	[ "$recs" -gt 30000 ]
}

@test "-j 2: the serial fallback (no chunk switched to) gives -j 1's output" {
	# --par-fallback refuses every switch between chunks: the queue's own
	# decoder is brought to where the stepper is from the chunk's PSB, by
	# the units it has had, and decodes the rest
	local d n=0 fb=0 rc
	for d in $(ptsim_runs '^(clean|overflow|drop|corrupt|truncate)$' | grep -E '/(threads|fnptr|signal|recursion|exception|longjmp)$'); do
		rc=0
		"$BIN/mt-decode" -s -j 2 --chunk-bytes 1 --par-fallback --buildid-dir "$d/images" \
			-o "$T/b.mt" "$d/perf.data" 2>"$T/b.err" || rc=$?
		[ $rc -le 1 ]
		cmp "$(j1 "$d").mt" "$T/b.mt" || { echo "fallback differs: $d"; return 1; }
		fb=$((fb + $(sed -n 's/.* fallbacks=\([0-9]*\).*/\1/p' "$T/b.err")))
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim runs cached in $PTSIM_CACHE"
	[ "$fb" -ge "$n" ]
}

@test "-j 2/3: the Skylake fixture (per-cpu, decoded serially) and the corrupt inputs decode as with -j 1" {
	local f
	if [ -f "$FX/perf.data.intel_pt-4.14" ]; then
		same "$FX/perf.data.intel_pt-4.14"
		same --cpu 6/78/3 "$FX/perf.data.intel_pt-4.14"
	fi
	for f in "$BATS_TEST_DIRNAME"/corrupt/decode-*.data "$BATS_TEST_DIRNAME"/corrupt/fuzz-perfdata-*.data; do
		same --no-images "$f"
		same --partial --no-images "$f"
	done
}

@test "-j 2/3: raw mode (--pt --image) decodes as with -j 1" {
	local ROOT="$BATS_TEST_DIRNAME/.." f
	[ -f "$ROOT/build/programs/recursion" ] || skip "build/programs/recursion is not built"
	for f in "$BATS_TEST_DIRNAME"/corrupt/fuzz-ptdecode-*.pt; do
		same --cpu 6/94/3 --image "$ROOT/build/programs/recursion:0x1000:0x78000@0x401000" --pt "$f"
	done
}

@test "mt-decode -j: usage errors" {
	run "$BIN/mt-decode" -j 0 /dev/null
	[ "$status" -eq 2 ]
	run "$BIN/mt-decode" --jobs x /dev/null
	[ "$status" -eq 2 ]
	run "$BIN/mt-decode" --chunk-bytes 0 /dev/null
	[ "$status" -eq 2 ]
	"$BIN/mt-decode" --help | grep -q -- '--jobs N'
}
