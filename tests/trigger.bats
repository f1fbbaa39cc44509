#!/usr/bin/env bats
# mt-capture's trigger: fires from any thread (including threads created
# after the start and threads that existed before an attach), by symbol or
# address, and the snapshot ends at it.  Judged by the programs' documented
# calls and by perf's own reader.
. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"

setup() {
	ROOT="$BATS_TEST_DIRNAME/.."
	BIN="$ROOT/bin"
	T="$BATS_TEST_TMPDIR"
	[ "$(id -u)" -eq 0 ] || [ "$("$BIN/mt-capture" --help >/dev/null; echo $?)" -eq 0 ]
}

hits() { "$BIN/mt-dump" -k trigger "$1"; }

# Starts mt-capture ARGS in the background ($cap) and returns once it says it
# is recording (its -v line "attached to"). Its stderr goes through a fifo
# held open on fd 9, so it never blocks on a missing reader.
start_capture() {
	mkfifo "$T/caperr"
	exec 9<> "$T/caperr"
	"$BIN/mt-capture" "$@" 2> "$T/caperr" &
	cap=$!
	while read -r -t 30 l <&9; do
		echo "$l"
		[[ "$l" == *"attached to"* ]] && return 0
	done
	echo "mt-capture did not start"
	return 1
}

@test "a trigger fired from a worker thread created after the start stops the capture" {
	"$BIN/mt-capture" run -o "$T/d" -- "$ROOT/tests/programs/capture/mt_late_thread" 2> "$T/err"
	pid=$("$BIN/mt-dump" -k process "$T/d/hits.mt" | sed -n 's/^process pid=\([0-9]*\) .*/\1/p')
	hits "$T/d/hits.mt" > "$T/h"
	cat "$T/h"
	[ "$(wc -l < "$T/h")" -eq 1 ]
	grep -q "^trigger pid=$pid tid=[0-9]* .* arg1=0x2a " "$T/h"
	tid=$(sed -n 's/.* tid=\([0-9]*\) .*/\1/p' "$T/h")
	[ "$tid" -ne "$pid" ]
	ttime=$(sed -n 's/.* time=\([0-9]*\) .*/\1/p' "$T/h")
	# perf's reader: the worker's samples are there and the snapshot ends
	# at the trigger, not 400 ms later at the exit
	perf script -i "$T/d/perf.data" --ns -F tid,time > "$T/s" 2>/dev/null
	grep -q "^ *$tid " "$T/s"
	last=$(sed -n 's/.* \([0-9]*\)\.\([0-9]\{9\}\):.*/\1\2/p' "$T/s" | sort -n | tail -1)
	echo "trigger $ttime last sample $last"
	[ "$last" -le $((ttime + 150000000)) ]
}

@test "attach: threads that existed before and threads created after all fire (--multi-snapshot)" {
	mkfifo "$T/in" "$T/out"
	"$ROOT/tests/programs/capture/mt_calls" --wait < "$T/in" > "$T/out" &
	victim=$!
	exec 8> "$T/in"
	exec 7< "$T/out"
	read -r line <&7
	[ "$line" = ready ]
	start_capture attach -v --multi-snapshot -p "$victim" -o "$T/d"
	echo go >&8
	exec 8>&-
	cat <&7 > /dev/null
	exec 7<&-
	wait "$victim"
	wait "$cap"
	exec 9<&-
	hits "$T/d/hits.mt" > "$T/h"
	cat "$T/h"
	# mt_calls documents its calls: (50,60) from the thread that existed
	# before the attach, (1,3) (2,6) (3,9) from main, (101,201) .. (103,203)
	# from three new threads, and (TSC, 77) from main
	[ "$(wc -l < "$T/h")" -eq 8 ]
	args=$(sed 's/.* arg0=\(0x[0-9a-f]*\) arg1=\(0x[0-9a-f]*\) .*/\1 \2/' "$T/h")
	expect=$(printf '0x32 0x3c\n0x1 0x3\n0x2 0x6\n0x3 0x9\n0x65 0xc9\n0x66 0xca\n0x67 0xcb\n')
	[ "$(echo "$args" | head -7)" = "$expect" ]
	echo "$args" | tail -1 | grep -q ' 0x4d$'
	tids=$(sed 's/.* tid=\([0-9]*\) .*/\1/' "$T/h")
	[ "$(echo "$tids" | sed -n 1p)" -ne "$victim" ]
	[ "$(echo "$tids" | sed -n 2p)" -eq "$victim" ]
	[ "$(echo "$tids" | sed -n '5,7p' | sort -u | grep -vc "^$victim$")" -eq 3 ]
	[ -s "$T/d/perf.data" ]
}

@test "--trigger SYMBOL stops at that function" {
	"$BIN/mt-capture" run -t crunch -o "$T/d" -- "$ROOT/tests/programs/capture/mt_late_thread" 2> "$T/err"
	pid=$("$BIN/mt-dump" -k process "$T/d/hits.mt" | sed -n 's/^process pid=\([0-9]*\) .*/\1/p')
	hits "$T/d/hits.mt" > "$T/h"
	[ "$(wc -l < "$T/h")" -eq 1 ]
	grep -q "^trigger pid=$pid tid=$pid .* symbol=\"crunch\"" "$T/h"
	# the hit's address is crunch's: ELF value + where the program is mapped
	addr=$(sed -n 's/.* addr=\(0x[0-9a-f]*\) .*/\1/p' "$T/h")
	val=$(nm "$ROOT/tests/programs/capture/mt_late_thread" | awk '$3 == "crunch" {print $1}')
	[ $(( addr & 0xfff )) -eq $(( 0x$val & 0xfff )) ]
}

@test "--trigger addr:0x... (runtime address) while attached" {
	mkfifo "$T/in" "$T/out"
	"$ROOT/tests/programs/capture/mt_calls" --wait < "$T/in" > "$T/out" &
	victim=$!
	exec 8> "$T/in"
	exec 7< "$T/out"
	read -r line <&7
	# runtime address of the stop indicator, computed here from nm and the
	# maps: the PIE's first mapping (offset 0) + its ELF value
	exe=$(readlink /proc/$victim/exe)
	base=$(awk -v exe="$exe" '$6 == exe && $3 == "00000000" {split($1, a, "-"); print a[1]; exit}' /proc/$victim/maps)
	val=$(nm "$exe" | awk '$3 == "magic_trace_stop_indicator" {print $1}')
	addr=$(printf '0x%x' $(( 0x$base + 0x$val )))
	start_capture attach -v -t "addr:$addr" -p "$victim" -o "$T/d"
	echo go >&8
	exec 8>&-
	cat <&7 > /dev/null
	exec 7<&-
	wait "$cap"
	wait "$victim"
	exec 9<&-
	hits "$T/d/hits.mt" > "$T/h"
	cat "$T/h"
	# single snapshot: the first call, from the thread older than the attach
	[ "$(wc -l < "$T/h")" -eq 1 ]
	grep -q "addr=$addr arg0=0x32 arg1=0x3c" "$T/h"
}

@test "an unknown --trigger symbol: one clear error, exit 2, the program is not left behind" {
	# a copy with a name of its own, to look for it afterwards
	prog="$T/mt_calls_$$_$RANDOM"
	cp "$ROOT/tests/programs/capture/mt_calls" "$prog"
	"$BIN/mt-capture" run -t no_such_function -o "$T/d" -- "$prog" > "$T/out" 2> "$T/err" && return 1 || st=$?
	[ "$st" -eq 2 ]
	[ "$(wc -l < "$T/err")" -eq 1 ]
	grep -q "^mt-capture: fatal: trigger symbol 'no_such_function' is not defined" "$T/err"
	! pgrep -f "$prog"
	# it never ran: not one line of its output
	[ ! -s "$T/out" ]
}

# The call chain at the hit (docs/capture.md): the registers and a copy of the
# user stack the trigger's event records, unwound with the program's CFI.
# Judged by the program's own calls: snapshot.c's main calls interesting(),
# which calls the stop indicator; below main, static glibc's start code.
@test "the trigger's hit carries its call chain, unwound from the stack copy, every caller down to _start" {
	prog="$MT_BUILD/programs/snapshot"
	"$BIN/mt-capture" run --mode sample -o "$T/d" -- "$prog" 2> "$T/err" || { cat "$T/err"; return 1; }
	"$BIN/mt-dump" -k sample "$T/d/hits.mt" > "$T/s"
	cat "$T/s"
	[ "$(wc -l < "$T/s")" -eq 1 ]
	grep -q ' flags=1$' "$T/s"
	# the function of the ip, then of the byte before each return address
	k=0
	for a in $(sed -n 's/.* ips=\([^ ]*\) .*/\1/p' "$T/s" | tr , ' '); do
		[ $k -eq 0 ] && printf '0x%x\n' $((a)) || printf '0x%x\n' $((a - 1))
		k=1
	done > "$T/addrs"
	names=$(addr2line -f -e "$prog" < "$T/addrs" | awk 'NR % 2' | tr '\n' ' ')
	echo "$names"
	[ "$names" = "magic_trace_stop_indicator interesting main __libc_start_call_main __libc_start_main_impl _start " ]
	# a sampling recording's samples carry their own stacks: mt-segment
	# leaves the chain alone there, and says nothing of it
	"$BIN/mt-decode" -o "$T/dec.mt" "$T/d/perf.data" 2>/dev/null || [ $? -eq 1 ]
	"$BIN/mt-cat" -o "$T/in.mt" "$T/dec.mt" "$T/d/hits.mt"
	"$BIN/mt-segment" --stats -i "$T/in.mt" -o "$T/seg.mt" 2> "$T/seg.err"
	grep -q ' chains=1 chains_joined=0 chains_unjoined=0 chains_sampled=1 chain_frames=0 ' "$T/seg.err"
	! grep -q 'could not be joined' "$T/seg.err"
}
