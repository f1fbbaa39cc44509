#!/usr/bin/env bats
# mt-decode --segment / --stitch: mt-segment's work in the decoder's process
# (docs/segment.md, "In mt-decode").  The judge is the pipe it replaces:
# `mt-decode | mt-segment [--stitch]` on the same input, the same records
# (every byte but the header's producer name), the same warnings, the same
# exit status.

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	C="$BATS_TEST_DIRNAME/.cache/ptsim"
	T="$BATS_TEST_TMPDIR"
}

# same_as_pipe NAME SEGOPTS -- DECODE-ARGS...: the pipe and the one process
# on DECODE-ARGS; fails naming NAME and what differs
same_as_pipe() {
	local name=$1 segopts=$2 src rp rf o sopts=""
	shift 3
	for o in $segopts; do # mt-segment's own options
		case $o in --segment | --segment-serial) ;; *) sopts="$sopts $o" ;; esac
	done
	rp=0 rf=0
	"$BIN/mt-decode" "$@" -o "$T/dec.mt" 2>"$T/dec.err" || rp=$?
	if [ "$rp" -le 1 ]; then
		"$BIN/mt-segment" $sopts -i "$T/dec.mt" -o "$T/pipe.mt" 2>"$T/seg.err" ||
			{ echo "$name: mt-segment failed: $(cat "$T/seg.err")"; return 1; }
	fi
	"$BIN/mt-decode" $segopts "$@" -o "$T/one.mt" 2>"$T/one.err" || rf=$?
	[ "$rp" = "$rf" ] || { echo "$name: exit $rf, the pipe's mt-decode $rp"; return 1; }
	[ "$rp" -le 1 ] || return 0 # refused input: no output either way
	[ -s "$T/one.mt" ] || { echo "$name: no output"; return 1; }
	# every record the same, and the files differ only by the producer's name
	cmp -s <("$BIN/mt-dump" "$T/pipe.mt" | tail -n +2) <("$BIN/mt-dump" "$T/one.mt" | tail -n +2) ||
		{ echo "$name: records differ"; diff <("$BIN/mt-dump" "$T/pipe.mt") <("$BIN/mt-dump" "$T/one.mt") | head -5; return 1; }
	local pp pf sp sf
	pp=$("$BIN/mt-dump" "$T/pipe.mt" | head -1 | sed 's/.*producer="\([^"]*\)".*/\1/')
	pf=$("$BIN/mt-dump" "$T/one.mt" | head -1 | sed 's/.*producer="\([^"]*\)".*/\1/')
	[ "$pf" = "mt-decode ${pp#mt-segment }" ] || [ "$pp $pf" = "mt-segment mt-decode --segment" ] ||
		{ echo "$name: producer '$pf' for '$pp'"; return 1; }
	sp=$(stat -c %s "$T/pipe.mt") sf=$(stat -c %s "$T/one.mt")
	[ $((sp - ${#pp})) = $((sf - ${#pf})) ] || { echo "$name: $sp bytes, the pipe's $sf"; return 1; }
	# the same warnings, in the same order (decoder's, then segmenter's)
	cmp -s <(cat "$T/dec.err" "$T/seg.err" | sed 's/^mt-[a-z]*: //') <(sed 's/^mt-decode: //' "$T/one.err") ||
		{ echo "$name: warnings differ"; diff <(cat "$T/dec.err" "$T/seg.err") "$T/one.err" | head -5; return 1; }
}

# check_runs SEGOPTS DIR...: same_as_pipe on every cached run DIR; counts
# the runs in n and those that differ in bad (the caller's locals)
check_runs() {
	local o=$1 d
	shift
	for d in "$@"; do
		d=${d%/}
		[ -f "$d/perf.data" ] || continue
		same_as_pipe "${d#"$C"/} $o" "$o" -- --buildid-dir "$d/images" "$d/perf.data" || bad=$((bad + 1))
		n=$((n + 1))
	done
}

@test "mt-decode --stitch writes what mt-decode | mt-segment --stitch writes: every cached mt-ptsim run, every fault kind" {
	[ -d "$C/clean" ] || skip "no mt-ptsim cache (make ptsim-cache)"
	local n=0 bad=0
	check_runs --stitch "$C"/*/*/
	echo "$n runs, $bad differ"
	[ "$n" -ge 60 ]
	[ "$bad" = 0 ]
}

@test "mt-decode --segment, --segment-serial and mt-segment's options: what the pipe writes" {
	[ -d "$C/clean" ] || skip "no mt-ptsim cache (make ptsim-cache)"
	local n=0 bad=0 o
	for o in --segment "--stitch --segment-serial" "--stitch --all-waypoints --mem-limit 4K"; do
		check_runs "$o" "$C"/clean/*/ "$C"/drop/*/
	done
	echo "$n runs, $bad differ"
	[ "$n" -ge 30 ]
	[ "$bad" = 0 ]
}

@test "mt-decode --stitch: the Skylake recording, raw PT, a sampling recording and damaged inputs as the pipe" {
	local fx=/work/shared/fixtures/intel_pt-skylake-4.14 f bad=0 n=0
	[ -d "$C/clean/fnptr" ] || skip "no mt-ptsim cache (make ptsim-cache)"
	[ -d "$fx" ] || fx=$BATS_TEST_DIRNAME/fixtures/intel_pt-skylake-4.14
	for f in "$fx/perf.data.intel_pt-4.14" "--no-images $fx/perf.data.piped.intel_pt-4.14"; do
		[ -f "${f##* }" ] || continue
		# shellcheck disable=SC2086
		same_as_pipe "skylake $f" --stitch -- $f || bad=$((bad + 1))
		# decoded, not refused (a refused input passes same_as_pipe)
		[ "$("$BIN/mt-dump" -k span "$T/one.mt" | wc -l)" -gt 5 ]
	done
	. "$BATS_TEST_DIRNAME/lib/rawpt.bash"
	raw_pt "$C/clean/fnptr" "$T/fnptr.pt"
	# shellcheck disable=SC2046
	same_as_pipe raw --stitch -- --pt "$T/fnptr.pt" $(image_args "$C/clean/fnptr") || bad=$((bad + 1))
	# samples (no PT): cpu-clock with frame-pointer callchains
	perf record -q -e cpu-clock -F 4000 --call-graph fp -o "$T/samp.data" -- \
		sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i + 1)); done' >/dev/null 2>&1
	[ "$("$BIN/mt-decode" -s "$T/samp.data" 2>&1 >/dev/null | sed -n 's/.* samples=\([0-9]*\).*/\1/p')" -gt 10 ]
	same_as_pipe sampling --stitch -- "$T/samp.data" || bad=$((bad + 1))
	n=4
	for f in "$BATS_TEST_DIRNAME"/corrupt/*.data; do
		same_as_pipe "$(basename "$f")" --stitch -- --partial "$f" || bad=$((bad + 1))
		n=$((n + 1))
	done
	echo "$n inputs, $bad differ"
	[ "$n" -ge 20 ]
	[ "$bad" = 0 ]
}

@test "mt-decode --stitch on mt-ptgen traces (many full batches; -j 2; four threads per cpu with switches) as the pipe" {
	. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"
	local b=$MT_BUILD/programs/fnptr bad=0
	"$BIN/mt-ptgen" -n 1M --seed 7 --no-spans -o "$T/g1" "$b" >/dev/null
	"$BIN/mt-ptgen" -n 1M --threads 4 --per-cpu --fake-switch 20000 --seed 8 --no-spans -o "$T/g4" "$b" >/dev/null
	[ "$("$BIN/mt-decode" -s --buildid-dir "$T/g1/images" "$T/g1/perf.data" 2>&1 >/dev/null | sed -n 's/.* branches=\([0-9]*\).*/\1/p')" -gt 100000 ]
	same_as_pipe g1 --stitch -- --buildid-dir "$T/g1/images" "$T/g1/perf.data" || bad=$((bad + 1))
	same_as_pipe g1-serial "--stitch --segment-serial" -- --buildid-dir "$T/g1/images" "$T/g1/perf.data" || bad=$((bad + 1))
	# decoded on two threads (libipt's path, chunks at PSBs), the segmenter on a third
	same_as_pipe g1-j2 --stitch -- -j 2 --chunk-bytes 4096 --buildid-dir "$T/g1/images" "$T/g1/perf.data" || bad=$((bad + 1))
	"$BIN/mt-decode" -s -j 2 --chunk-bytes 4096 --buildid-dir "$T/g1/images" "$T/g1/perf.data" 2>&1 >/dev/null | grep -q 'parallel: chunks=[1-9]'
	cmp -s <("$BIN/mt-dump" "$T/one.mt" | tail -n +2) <("$BIN/mt-decode" --stitch --buildid-dir "$T/g1/images" "$T/g1/perf.data" | "$BIN/mt-dump" | tail -n +2)
	same_as_pipe g4 --stitch -- --buildid-dir "$T/g4/images" "$T/g4/perf.data" || bad=$((bad + 1))
	same_as_pipe g4-segment --segment -- --buildid-dir "$T/g4/images" "$T/g4/perf.data" || bad=$((bad + 1))
	[ "$bad" = 0 ]
}

@test "mt-decode: mt-segment's options without --segment or --stitch, or with --records, are usage errors" {
	run "$BIN/mt-decode" --all-waypoints /nonexistent.data
	[ "$status" -eq 2 ]
	[[ "$output" == *"need --segment or --stitch"* ]]
	[ "$(echo "$output" | wc -l)" -eq 1 ]
	run "$BIN/mt-decode" --stitch --records /nonexistent.data
	[ "$status" -eq 2 ]
	[[ "$output" == *"--records"* ]]
	run "$BIN/mt-decode" --segment-serial /nonexistent.data
	[ "$status" -eq 2 ]
	[[ "$output" == *"need --segment or --stitch"* ]]
	run "$BIN/mt-decode" --segment --mem-limit 12 /nonexistent.data
	[ "$status" -eq 2 ]
	[[ "$output" == *"--mem-limit"* ]]
	"$BIN/mt-decode" --help | grep -q -- '--all-waypoints'
	"$BIN/mt-decode" --help | grep -q -- '--segment'
}

@test "mt-decode --stitch: a refused input leaves no file; a full disk is one line, exit 111" {
	local f="$BATS_TEST_DIRNAME/corrupt/decode-header-cut.data"
	mkdir "$T/o"
	run "$BIN/mt-decode" --stitch -o "$T/o/out.mt" "$f"
	[ "$status" -eq 2 ]
	[ -z "$(ls -A "$T/o")" ]
	[ -d "$C/clean/fnptr" ] || skip "no mt-ptsim cache (make ptsim-cache)"
	local s
	for s in "" --segment-serial; do # the writer fails in the segmenter's thread, or in the decoder's
		run bash -c "'$BIN/mt-decode' --stitch $s --buildid-dir '$C/clean/fnptr/images' '$C/clean/fnptr/perf.data' >/dev/full"
		[ "$status" -eq 111 ]
		[ "${#lines[@]}" -eq 1 ]
		[[ "$output" == *"No space left on device"* ]]
	done
}

@test "mt-decode --stitch's two threads under ThreadSanitizer: no race reported, clean and failing runs" {
	[ -d "$C/clean/threads" ] || skip "no mt-ptsim cache (make ptsim-cache)"
	local r="$BATS_TEST_DIRNAME/.." d
	# the tool and the library's sources, built for TSan alone (~15 s)
	cc -fsanitize=thread -O1 -g -std=gnu11 -D_GNU_SOURCE -I"$r/formats" -I"$r/libcommon" \
		-I"$r/libmagictrace" -o "$T/mt-decode" "$r/tools/mt-decode.c" "$r"/libcommon/*.c \
		"$r"/formats/*.c -lipt -ldw -lelf -ljansson -lcapstone -lzstd -lz -lpthread
	for d in "$C/clean/threads" "$C/drop/fnptr" "$C/overflow/exception"; do
		"$T/mt-decode" --stitch --buildid-dir "$d/images" -o "$T/out.mt" "$d/perf.data" 2>"$T/err" || [ $? -eq 1 ]
		! grep -q ThreadSanitizer "$T/err"
		"$BIN/mt-decode" --stitch --buildid-dir "$d/images" -o "$T/ref.mt" "$d/perf.data" 2>/dev/null || [ $? -eq 1 ]
		cmp "$T/out.mt" "$T/ref.mt"
	done
	# the writer fails in the segmenter's thread while the decoder waits
	run bash -c "'$T/mt-decode' --stitch --buildid-dir '$C/clean/threads/images' '$C/clean/threads/perf.data' >/dev/full"
	[ "$status" -eq 111 ]
	[[ "$output" != *ThreadSanitizer* ]]
}
