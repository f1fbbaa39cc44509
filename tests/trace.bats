#!/usr/bin/env bats
# `make trace` and the `mt` front end, judged by Perfetto's trace processor
# (tests/perfetto/tp.js) and by the trigger hit mt-capture recorded.
. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"

setup_file() {
	sh "$BATS_TEST_DIRNAME/perfetto/install.sh"
}

setup() {
	ROOT="$(cd "$BATS_TEST_DIRNAME/.." && pwd)"
	BIN="$ROOT/bin"
	T="$BATS_TEST_TMPDIR"
	TP="$BATS_TEST_DIRNAME/perfetto/tp.js"
	MT="$ROOT/pipelines/mt"
}

SPAN_NAMES="select distinct name from slice where category = 'span'"
SPAN_END="select max(ts + dur) from slice where category = 'span'"
# FXT instants land in the instant table, JSON ones in slice (dur 0)
TRIGGER_FXT="select ts from instant where name like 'trigger%'"

# trigger time (ns) of a capture directory's hits.mt
trigger_time() {
	"$BIN/mt-dump" -k trigger "$1/hits.mt" | sed -n 's/.* time=\([0-9]*\) .*/\1/p'
}

@test "make trace: the demo in sampling mode; Perfetto holds its functions and the trace ends at the trigger" {
	make -s -C "$ROOT" trace TRACE_DIR="$T/tr" > "$T/out" 2> "$T/err" || { cat "$T/out" "$T/err"; return 1; }
	cat "$T/out"
	grep -q "make trace: the trace is $T/tr/trace.fxt" "$T/out"
	grep -q "ui.perfetto.dev" "$T/out"
	[ -e /sys/bus/event_source/devices/intel_pt ] || grep -q "recording by stack sampling" "$T/err"
	for f in perf.data hits.mt decode.mt segment.mt stitch.mt symbolize.mt trace.fxt; do
		[ -s "$T/tr/$f" ] || { echo "no $f"; return 1; }
	done
	node "$TP" -c "$T/tr/trace.fxt" "$SPAN_NAMES" > "$T/names"
	# the demo's functions, its libc callback, and the helper inlined at -O2
	for f in main serve handle_tree handle_sort handle_text tree_sum compare_u64 mix; do
		grep -qx "$f\(\.[a-z0-9.]*\)\?" "$T/names" || { echo "no $f in the trace"; return 1; }
	done
	grep -q "^tree_insert" "$T/names"
	# the trigger is in the trace, at the time mt-capture recorded
	tt=$(trigger_time "$T/tr")
	[ -n "$tt" ]
	[ "$(node "$TP" -c "$T/tr/trace.fxt" "$TRIGGER_FXT")" = "$tt" ]
	# and the trace ends there: within 100 ms, while the demo served 200
	# more requests after it, ~0.5 s (a capture that missed it ends at the exit)
	end=$(node "$TP" -c "$T/tr/trace.fxt" "$SPAN_END")
	echo "trigger $tt, last span end $end"
	[ "$end" -le $((tt + 100000000)) ]
	[ "$end" -ge $((tt - 20000000)) ]
}

@test "make trace runs a swapped stage (it is mt run), and names a missing stage" {
	# a different stitch command: the one make trace runs
	printf '#!/bin/sh\ntouch "%s"\nexec "%s/mt-stitch" "$@"\n' "$T/my-stitch-ran" "$BIN" > "$T/my-stitch"
	chmod +x "$T/my-stitch"
	MT_STITCH="$T/my-stitch" make -s -C "$ROOT" trace TRACE_DIR="$T/tr" > /dev/null 2>&1
	[ -e "$T/my-stitch-ran" ]
	[ -s "$T/tr/trace.fxt" ]
	# a stage that does not exist: one clear message naming it
	MT_SEGMENT="$T/no-such-segment" make -C "$ROOT" trace TRACE_DIR="$T/tr" > "$T/out" 2>&1 && return 1
	grep -q "mt: fatal: stage segment: $T/no-such-segment is missing" "$T/out"
	grep -q "make trace: fatal: mt run failed (exit 111)" "$T/out"
	# and the run it failed left no trace behind
	[ ! -e "$T/tr/trace.fxt" ]
}

@test "mt run: the trace, where it is and how to open it; -o trace.json; CMD's exit status" {
	cd "$T"
	"$MT" run -o "$T/t.json" --dir "$T/cap" -- "$ROOT/examples/demo" 2> "$T/err"
	grep -q "mt: trace written to $T/t.json" "$T/err"
	grep -q "https://ui.perfetto.dev" "$T/err"
	node "$TP" -c "$T/t.json" "$SPAN_NAMES" > "$T/names"
	grep -qx serve "$T/names"
	# JSON: the trigger instant is a slice
	tt=$(trigger_time "$T/cap")
	[ "$(node "$TP" -c "$T/t.json" "select ts from slice where name like 'trigger%'")" = "$tt" ]
	# exit status and arguments with spaces and quotes go through
	# (a loop first, so that stack sampling has something to sample: a bare
	# printf can end before the first sample, and then there is no span)
	run "$MT" run --dir "$T/cap2" -t none -- sh -c 'i=0; while [ $i -lt 30000 ]; do i=$((i + 1)); done
		printf "<%s>" "$@"; exit 7' sh "a b" "it's" '"q"'
	[ "$status" -eq 7 ]
	[[ "$output" == *'<a b><it'"'"'s><"q">'* ]]
	[ -s "$T/cap2/trace.fxt" ]
}

@test "mt decode and mt replay --from: re-run the stages on a saved capture" {
	"$MT" run --dir "$T/cap" -- "$ROOT/examples/demo" 2> /dev/null
	node "$TP" -c "$T/cap/trace.fxt" "select count(*) from slice where category = 'span'" > "$T/n1"
	rm "$T/cap/trace.fxt"
	"$MT" decode "$T/cap" -o "$T/again.fxt" 2> "$T/err" || [ $? -eq 1 ]
	node "$TP" -c "$T/again.fxt" "select count(*) from slice where category = 'span'" > "$T/n2"
	[ "$(cat "$T/n1")" = "$(cat "$T/n2")" ]
	[ "$(cat "$T/n1")" -gt 100 ]
	# replay from symbolize: the earlier files are not rewritten
	before=$(stat -c %i "$T/cap/stitch.mt") # outputs are renamed into place: a new inode
	touch -d 2000-01-01 "$T/cap/symbolize.mt" # replay removes it first: its inode may come back
	"$MT" replay "$T/cap" --from symbolize -o "$T/r.json" 2> "$T/err" || [ $? -eq 1 ]
	[ "$(stat -c %i "$T/cap/stitch.mt")" = "$before" ]
	[ "$(stat -c %Y "$T/cap/symbolize.mt")" -gt 946684800 ]
	node "$TP" -c "$T/r.json" "$SPAN_NAMES" | grep -qx serve
	run "$MT" replay "$T/cap" --from nowhere
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	run "$MT" run -- 
	[ "$status" -eq 2 ]
	run "$MT" help
	[ "$status" -eq 0 ]
}

@test "mt run --mode singlestep: exactly the truth's spans (mt-compare), Perfetto loads the trace" {
	for p in snapshot fnptr; do
		"$MT" run --mode singlestep --dir "$T/$p" -- "$MT_BUILD/programs/$p" > /dev/null 2> "$T/err" ||
			{ cat "$T/err"; return 1; }
		[ -s "$T/$p/truth-spans.mt" ]
		"$BIN/mt-compare" --min-precision 1 --min-recall 1 --max-wrong 0 \
			"$T/$p/truth-spans.mt" "$T/$p/stitch.mt" > "$T/cmp"
		tail -1 "$T/cmp"
		matched=$(tail -1 "$T/cmp" | sed -n 's/.* matched=\([0-9]*\) truth=\([0-9]*\) .*/\1 \2/p')
		set -- $matched
		[ "$1" -gt 100 ]
		[ "$1" -eq "$2" ]
		n=$(node "$TP" -c "$T/$p/trace.fxt" "select count(*) from slice where category = 'span'")
		[ "$n" -ge "$1" ]
	done
	# snapshot.c calls magic_trace_take_snapshot(): the trace ends in the stop indicator
	end=$(node "$TP" -c "$T/snapshot/trace.fxt" "$SPAN_END")
	stop=$(node "$TP" -c "$T/snapshot/trace.fxt" "select ts from slice where name = 'magic_trace_stop_indicator'")
	[ -n "$stop" ]
	[ "$stop" -eq "$end" ]
}

@test "mt attach: a busy running process, --duration, the trace shows its thread" {
	sh -c 'while :; do :; done' &
	victim=$!
	"$MT" attach -p "$victim" --duration 0.5 -t none --dir "$T/att" -o "$T/att.json" 2> "$T/err" && st=0 || st=$?
	kill -0 "$victim"
	kill "$victim"
	cat "$T/err"
	[ "$st" -eq 0 ] || [ "$st" -eq 1 ]
	grep -q "mt: trace written to $T/att.json" "$T/err"
	[ "$(node "$TP" -c "$T/att.json" "select distinct t.tid from slice s join thread_track tt on s.track_id = tt.id join thread t using(utid)")" = "$victim" ]
	# a process that does not exist: mt-capture's one line, nothing else
	run "$MT" attach -p "$(cat /proc/sys/kernel/pid_max)" --dir "$T/none"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
}
