#!/usr/bin/env bats
# mt-capture: usage, errors (one line each), the perf command lines, and a
# real sampling capture of the demo judged by perf's own reader (perf script).

setup() {
	ROOT="$BATS_TEST_DIRNAME/.."
	BIN="$ROOT/bin"
	T="$BATS_TEST_TMPDIR"
}

# one line on stderr, starting "mt-capture: fatal: "
one_fatal_line() {
	[ "$(wc -l < "$1")" -eq 1 ] || { echo "stderr has $(wc -l < "$1") lines:"; cat "$1"; return 1; }
	grep -q '^mt-capture: fatal: ' "$1" || { cat "$1"; return 1; }
}

# waits until background job @1 runs program @2: between its fork and its
# exec it is still the shell (its name "bash"), which a capture attached then
# records (a loaded machine made --duration's test see that)
wait_exec() {
	local i
	for i in $(seq 2000); do
		[ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] && return 0
		sleep 0.01 # polling the condition above, not a synchronization by time
	done
	echo "process $1 never ran $2"
	return 1
}

@test "mt-capture --help: usage on stdout, exit 0, documents modes and exit codes" {
	run "$BIN/mt-capture" --help
	[ "$status" -eq 0 ]
	[[ "$output" == *"mt-capture run [options] -o DIR -- CMD"* ]]
	[[ "$output" == *"singlestep"* ]]
	[[ "$output" == *"Exit status"* ]]
}

@test "mt-capture misuse: no subcommand, unknown option, bad mode -> exit 2" {
	run "$BIN/mt-capture"
	[ "$status" -eq 2 ]
	run "$BIN/mt-capture" run --bogus -o "$T/d" -- true
	[ "$status" -eq 2 ]
	run "$BIN/mt-capture" run --mode warp -o "$T/d" -- true
	[ "$status" -eq 2 ]
	run "$BIN/mt-capture" run -- true
	[ "$status" -eq 2 ]
}

@test "a missing CMD: one clear error, exit 2" {
	"$BIN/mt-capture" run -o "$T/d" 2> "$T/err" && return 1 || st=$?
	[ "$st" -eq 2 ]
	one_fatal_line "$T/err"
	grep -q "needs a command" "$T/err"
}

@test "a CMD that does not exist: one clear error, exit 2" {
	"$BIN/mt-capture" run -o "$T/d" -- /no/such/program 2> "$T/err" && return 1 || st=$?
	[ "$st" -eq 2 ]
	one_fatal_line "$T/err"
	grep -q "cannot run '/no/such/program': No such file or directory" "$T/err"
}

@test "attach to a PID that does not exist: one clear error, exit 2" {
	pid_max=$(cat /proc/sys/kernel/pid_max)
	"$BIN/mt-capture" attach -p "$pid_max" -o "$T/d" 2> "$T/err" && return 1 || st=$?
	[ "$st" -eq 2 ]
	one_fatal_line "$T/err"
	grep -q "no process $pid_max" "$T/err"
	run "$BIN/mt-capture" attach -p 12x -o "$T/d"
	[ "$status" -eq 2 ]
}

@test "attach without permission (nobody against a root process): one clear error, exit 111" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to become nobody"
	command -v setpriv >/dev/null || skip "no setpriv"
	setpriv --reuid nobody --regid nogroup --clear-groups test -x "$BIN/mt-capture" ||
		skip "nobody cannot execute $BIN/mt-capture here"
	sleep 60 & victim=$!
	setpriv --reuid nobody --regid nogroup --clear-groups \
		"$BIN/mt-capture" attach -p "$victim" -o /tmp 2> "$T/err" && st=0 || st=$?
	kill "$victim"
	[ "$st" -eq 111 ]
	one_fatal_line "$T/err"
	grep -q "no permission to attach to process $victim" "$T/err"
}

@test "perf missing: one clear error, exit 111" {
	MT_PERF=/nonexistent/perf "$BIN/mt-capture" run -o "$T/d" -- true 2> "$T/err" && return 1 || st=$?
	[ "$st" -eq 111 ]
	one_fatal_line "$T/err"
	grep -q "perf not found" "$T/err"
}

@test "perf refused by perf_event_paranoid: one line naming the setting, exit 111" {
	# tests/fake/perf-paranoid prints what perf 6.1 prints at paranoid 3
	MT_PERF="$ROOT/tests/fake/perf-paranoid" "$BIN/mt-capture" run -t none -o "$T/d" -- true 2> "$T/err" && return 1 || st=$?
	[ "$st" -eq 111 ]
	one_fatal_line "$T/err"
	grep -q "perf_event_paranoid is 3" "$T/err"
}

@test "asking for PT on a machine without it: one clear message, exit 2" {
	[ -e /sys/bus/event_source/devices/intel_pt ] && skip "this machine has Intel PT"
	"$BIN/mt-capture" run --mode pt -o "$T/d" -- true 2> "$T/err" && return 1 || st=$?
	[ "$st" -eq 2 ]
	one_fatal_line "$T/err"
	grep -q "needs Intel PT" "$T/err"
	[ ! -e "$T/d/perf.data" ]
}

@test "PT mode: the perf command line that would run on an Intel host" {
	run "$BIN/mt-capture" attach --mode pt --dry-run --perf perf -p 1234,5678 -o /tmp/cap
	[ "$status" -eq 0 ]
	[ "$output" = "perf record --output=/tmp/cap/perf.data --event=intel_pt/cyc=1,cyc_thresh=1,mtc_period=0/u --timestamp --snapshot=e --delay=-1 --control=fd:3,4 --pid=1234,5678" ]
	# snapshot size, timing, kernel
	run "$BIN/mt-capture" run --mode pt -n --perf perf --snapshot-size 8M --timing high --kernel -o /tmp/cap -- ./prog
	[ "$status" -eq 0 ]
	[ "$output" = "perf record --output=/tmp/cap/perf.data --event=intel_pt/cyc=1,cyc_thresh=1,mtc_period=0,noretcomp=1/uk --timestamp --snapshot=e --mmap-pages=,8M --delay=-1 --control=fd:3,4 --pid=PID" ]
	run "$BIN/mt-capture" run --mode pt -n --perf perf --timing low -o /tmp/cap -- ./prog
	[ "$output" = "perf record --output=/tmp/cap/perf.data --event=intel_pt//u --timestamp --snapshot=e --delay=-1 --control=fd:3,4 --pid=PID" ]
}

@test "PT mode: this perf parses every option of that command line" {
	command -v perf >/dev/null || skip "no perf"
	run "$BIN/mt-capture" attach --mode pt -n --perf perf -s 8M -p 1 -o "$T/d"
	# Without Intel PT, swap in a software event: perf then gets past option
	# parsing and stops only because nothing produces AUX data to snapshot.
	cmd=$(echo "$output" | sed 's|--event=intel_pt/[^ ]*|--event=cpu-clock:u|; s|--control=fd:3,4 ||; s|--pid=1|-- true|')
	run sh -c "$cmd"
	[ "$status" -ne 0 ]
	[[ "$output" == *"No AUX area tracing to snapshot"* ]]
	[[ "$output" != *"unknown option"* ]]
}

@test "PT mode: --per-thread lists every thread of the process for -t" {
	mkfifo "$T/in" "$T/out"
	"$ROOT/tests/programs/capture/mt_calls" --wait < "$T/in" > "$T/out" &
	victim=$!
	exec 8> "$T/in"
	# "ready": by then it has its second thread
	read -r line < "$T/out"
	[ "$line" = ready ]
	run "$BIN/mt-capture" attach --mode pt -n --per-thread --perf perf -p "$victim" -o /tmp/cap
	tids=$(ls /proc/$victim/task | sort -n | paste -sd,)
	exec 8>&-
	exec 7<&-
	wait "$victim" || :
	[ "$status" -eq 0 ]
	got=$(echo "$output" | sed -n 's/.*--per-thread --tid=\([0-9,]*\)$/\1/p' | tr , '\n' | sort -n | paste -sd,)
	[ "$got" = "$tids" ]
	[ "$(echo "$tids" | tr , '\n' | wc -l)" -eq 2 ]
}

@test "sampling mode: the perf command line, printed with -v" {
	"$BIN/mt-capture" run -v --mode sample -g fp -t none -o "$T/d" -- true 2> "$T/err"
	grep -q -- "running: .*perf record --output=$T/d/perf.data --event=dummy:u --event=cpu-clock/overwrite,call-graph=fp,freq=10000/u --event=cpu-clock/overwrite,call-graph=dwarf,stack-size=8192,freq=40/u --timestamp\( --mmap-pages=[12]M\)\? --delay=-1 --control=fd:[0-9]*,[0-9]* --pid=[0-9]*$" "$T/err"
	# as root, a ring big enough for a few stack copies per thread
	[ "$(id -u)" -ne 0 ] || grep -q -- "--mmap-pages=[12]M " "$T/err"
	run "$BIN/mt-capture" run -n --mode sample --perf perf --multi-snapshot -F 2000 -g dwarf -s 1M -o /tmp/cap -- ./prog
	[ "$output" = "perf record --output=/tmp/cap/perf.data --event=dummy:u --event=cpu-clock/overwrite,call-graph=dwarf,stack-size=8192,freq=2000/u --timestamp --switch-output=signal --mmap-pages=1M --delay=-1 --control=fd:3,4 --pid=PID" ]
	# -g fp: the root stream beside (--root-freq, 0: none)
	run "$BIN/mt-capture" run -n --mode sample --perf perf -F 2000 -g fp --root-freq 5 -o /tmp/cap -- ./prog
	echo "$output" | grep -q -- "--event=cpu-clock/overwrite,call-graph=fp,freq=2000/u --event=cpu-clock/overwrite,call-graph=dwarf,stack-size=8192,freq=5/u "
	run "$BIN/mt-capture" run -n --mode sample --perf perf -g fp --root-freq 0 -o /tmp/cap -- ./prog
	! echo "$output" | grep -q -- "call-graph=dwarf"
}

@test "CMD with spaces and quotes in its arguments; its exit status is passed through" {
	run "$BIN/mt-capture" run -t none -o "$T/d" -- sh -c 'printf "<%s>" "$@"; exit 3' sh "a b" "it's" '"q"' '' '$HOME'
	[ "$status" -eq 3 ]
	[[ "$output" == *'<a b><it'"'"'s><"q"><><$HOME>'* ]]
	[ -s "$T/d/perf.data" ]
	run "$BIN/mt-capture" run -t none -o "$T/d" -- sh -c 'kill -TERM $$'
	[ "$status" -eq 143 ]
}

@test "the demo in sampling mode: snapshot at its trigger, the demo's functions in the samples" {
	make -C "$ROOT" -s examples/demo
	# -g fp: perf script unwinds every sample itself (auto may pick dwarf)
	"$BIN/mt-capture" run -g fp -o "$T/d" -- "$ROOT/examples/demo" 2> "$T/err"
	# the demo says which request triggered; hits.mt must hold that call
	req=$(sed -n 's/^demo: slow request \([0-9]*\): taking a snapshot$/\1/p' "$T/err")
	[ -n "$req" ]
	"$BIN/mt-dump" "$T/d/hits.mt" > "$T/hits.txt"
	[ "$(grep -c '^trigger ' "$T/hits.txt")" -eq 1 ]
	grep -q "^trigger .* arg1=$(printf '%#x' "$req") symbol=\"magic_trace_stop_indicator\"" "$T/hits.txt"
	ttime=$(sed -n 's/^trigger .* time=\([0-9]*\) .*/\1/p' "$T/hits.txt")
	# perf's own reader: samples of the demo's functions, up to the trigger
	perf script -i "$T/d/perf.data" --ns -F time,ip,sym > "$T/script.txt" 2>/dev/null
	for f in serve handle_tree handle_sort handle_text tree_insert main; do
		grep -q "\b$f\b" "$T/script.txt" || { echo "no $f"; return 1; }
	done
	# sample times in ns (perf prints s.ns:)
	sed -n 's/^ *\([0-9]*\)\.\([0-9]\{9\}\):.*/\1\2/p' "$T/script.txt" > "$T/times"
	last=$(tail -1 "$T/times")
	first=$(head -1 "$T/times")
	echo "first $first last $last trigger $ttime"
	# the snapshot reaches the trigger, and stops there (the demo ran on after it)
	[ "$last" -ge $((ttime - 2000000)) ]
	[ "$last" -le $((ttime + 100000000)) ]
	[ "$first" -lt "$ttime" ]
}

@test "--duration ends an attach capture" {
	sleep 60 & victim=$!
	wait_exec "$victim" sleep
	"$BIN/mt-capture" attach -d 0.3 -t none -o "$T/d" -p "$victim" 2> "$T/err"
	st=$?
	kill -0 "$victim" # still running: only the capture stopped
	kill "$victim"
	[ "$st" -eq 0 ]
	[ -e "$T/d/perf.data" ]
	"$BIN/mt-dump" "$T/d/hits.mt" | grep -q "^process pid=$victim name=\"sleep\""
}

@test "attach: a process that execs while traced is named by its new program in hits.mt" {
	mkfifo "$T/go" "$T/caperr"
	bash -c 'read -r x < "$1"; exec sleep 60' _ "$T/go" & victim=$!
	exec 9<> "$T/caperr"
	setsid "$BIN/mt-capture" attach -v -t none -o "$T/d" -p "$victim" 2> "$T/caperr" &
	cap=$!
	while read -r -t 30 l <&9; do
		echo "$l"
		[[ "$l" == *"perf is recording"* ]] && break
	done
	[ "$(cat "/proc/$victim/comm")" = bash ]
	echo go > "$T/go"
	wait_exec "$victim" sleep
	kill -INT -- -"$cap"
	wait "$cap" || true
	kill "$victim"
	"$BIN/mt-dump" "$T/d/hits.mt" | grep "^process"
	"$BIN/mt-dump" "$T/d/hits.mt" | grep -q "^process pid=$victim name=\"sleep\""
}

@test "Ctrl-C (SIGINT to the terminal's process group) takes the snapshot; CMD's status is passed through" {
	mkfifo "$T/caperr"
	exec 9<> "$T/caperr"
	# its own process group, as a shell gives a foreground job
	setsid "$BIN/mt-capture" run -v -t none -o "$T/d" -- sleep 60 2> "$T/caperr" &
	cap=$!
	while read -r -t 30 l <&9; do
		echo "$l"
		[[ "$l" == *"started sleep"* ]] && break
	done
	pgid=$(ps -o pgid= "$cap" | tr -d ' ')
	[ "$pgid" -eq "$cap" ]
	kill -INT -- "-$pgid"
	# (a background job of this non-interactive shell ignores SIGINT, so
	# sleep lives on: the snapshot must not wait for it)
	while read -r -t 30 l <&9; do
		echo "$l"
		[[ "$l" == *"wrote $T/d/perf.data"* ]] && break
	done
	[ -s "$T/d/perf.data" ]
	perf script -i "$T/d/perf.data" > /dev/null 2>&1
	child=$("$BIN/mt-dump" -k process "$T/d/hits.mt" | sed -n 's/^process pid=\([0-9]*\) .*/\1/p')
	kill -0 "$child"
	kill -TERM "$child"
	wait "$cap" && st=0 || st=$?
	exec 9<&-
	[ "$st" -eq 143 ]
}
