#!/usr/bin/env bats
# Sampling traces on a machine without Intel PT (issue 16): names that
# survive the overwritten ring, every thread under its process with its
# name, clear errors, Ctrl-C, every snapshot, messages, the kernel.
# Judged by Perfetto's trace processor (tests/perfetto/tp.js) and perf.
# Assertions hold whatever the load: cpu-clock samples follow CPU time, and
# no test counts samples exactly.
. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"

setup_file() {
	P="$BATS_FILE_TMPDIR/prog"
	mkdir -p "$P"
	for p in deep workers spin_fifo syscalls forks; do
		cc -std=gnu11 -O1 -g -fno-omit-frame-pointer -pthread -o "$P/$p" \
			"$BATS_TEST_DIRNAME/programs/sampling/$p.c" || return 1
	done
	# inputs for real programs (deterministic content)
	awk 'BEGIN { for (i = 1; i <= 300000; i++) print (i * 7919) % 100003, i, "line", i * 3 }' \
		> "$BATS_FILE_TMPDIR/lines.txt"
}

setup() {
	ROOT="$BATS_TEST_DIRNAME/.."
	BIN="$ROOT/bin"
	MT="$ROOT/pipelines/mt"
	TP="$ROOT/tests/perfetto/tp.js"
	P="$BATS_FILE_TMPDIR/prog"
	T="$BATS_TEST_TMPDIR"
	IN="$BATS_FILE_TMPDIR"
}

q() { node "$TP" "$@"; }

# named TRACE: ">= 95 % of the sampled frames are named", and at least one.
# A sampled frame is one frame of one sample: a slice covers every sample of
# its thread from its start to its end, so each sample counts once for every
# slice it falls in (a frame seen in 30 samples weighs 30, one seen once
# weighs 1; counting slices instead would let a one-sample frame weigh as
# much as the whole run). The sample times come from decode.mt, the
# recording's own samples, in the trace's time base.
named_95() {
	local dir unk all
	dir=$(dirname "$1")
	q "$1" "select t.tid, s.ts, s.ts + s.dur, s.name like '[unknown%' from slice s
		join thread_track tt on s.track_id = tt.id join thread t using(utid)" > "$dir/slices.tsv"
	"$BIN/mt-dump" -k sample "$dir/decode.mt" |
		sed -n 's/.* tid=\([0-9]*\) time=\([0-9]*\).*/\1 \2/p' > "$dir/samples.txt"
	read -r unk all < <(awk -F'\t' 'NR == FNR { n++; tid[n] = $1; lo[n] = $2; hi[n] = $3; u[n] = $4; next }
		{ split($0, a, " ");
		  for (i = 1; i <= n; i++)
			if (tid[i] == a[1] && lo[i] <= a[2] && a[2] <= hi[i]) { all++; unk += u[i] } }
		END { print unk + 0, all + 0 }' "$dir/slices.tsv" "$dir/samples.txt")
	echo "unknown $unk of $all sampled frames"
	[ "$all" -gt 0 ]
	[ $((unk * 100)) -le $((all * 5)) ]
}

# samples DIR/perf.data: how many samples perf's own reader sees
samples() { perf script -i "$1" -F tid 2> /dev/null | grep -c .; }

@test "mt run --help, mt attach --help, mt decode --help: help on stdout, exit 0" {
	for c in run attach decode replay; do
		run "$MT" "$c" --help
		[ "$status" -eq 0 ]
		[[ "$output" == *"usage: mt run"* ]]
	done
	run "$MT" run -v --help
	[ "$status" -eq 0 ]
}

@test "no trigger, a ring wrapped many times (-s 512): the program's and libc's names survive" {
	"$MT" run --dir "$T/d" -s 512 -- "$P/deep" 0.6 2> "$T/err" || { cat "$T/err"; return 1; }
	# 0.6 s of CPU at 10 kHz is ~6000 samples. The call graph is dwarf here
	# (libc has no frame pointers): 8 KiB a sample, so a 2 MiB ring holds
	# ~250 of them, wrapped ~24 times. (A 32 KiB ring held 3: whether all of
	# main, outer, middle and inner were among 3 samples was luck, and one CI
	# run lost it.)
	grep -q 'call graph: dwarf' "$T/err"
	n=$(samples "$T/d/perf.data")
	echo "samples kept: $n"
	[ "$n" -ge 100 ]
	[ "$n" -lt 2000 ]
	# the maps of the whole run are in the capture
	"$BIN/mt-dump" -k map "$T/d/decode.mt" > "$T/maps"
	grep -q 'path=".*/deep"' "$T/maps"
	grep -q 'path=".*libc.so.6"' "$T/maps"
	named_95 "$T/d/trace.fxt"
	for f in main outer middle inner; do
		[ "$(q "$T/d/trace.fxt" "select count(*) from slice where name = '$f'")" -gt 0 ]
	done
}

@test "no trigger, the ring wrapped: gzip, sort and python3 have >= 95 % of their frames named" {
	# -s 64: a 256 KiB ring, still wrapped many times over (dwarf samples are
	# 8 KiB each), yet enough slices that one frame is not 5 %
	# and every thread with samples under its process, with its name
	"$MT" run --dir "$T/g" -s 64 -- gzip -9 -c "$IN/lines.txt" > /dev/null 2> "$T/err" || { cat "$T/err"; return 1; }
	named_95 "$T/g/trace.fxt"
	all_threads_under "$T/g/trace.fxt" "$(pid_of "$T/g")"
	"$BIN/mt-dump" -k map "$T/g/decode.mt" | grep -q 'path="/usr/bin/gzip"'
	"$MT" run --dir "$T/s" -s 64 -- sort -n "$IN/lines.txt" > /dev/null 2> "$T/err" || { cat "$T/err"; return 1; }
	named_95 "$T/s/trace.fxt"
	all_threads_under "$T/s/trace.fxt" "$(pid_of "$T/s")"
	printf 'import json\nfor i in range(800):\n    json.dumps(list(range(2000)))\n' > "$T/load.py"
	# the interpreter itself, not a wrapper script around it (pyenv's shims
	# run a stripped bash first)
	py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)
	"$MT" run --dir "$T/p" -s 64 -- "$py" "$T/load.py" > /dev/null 2> "$T/err" || { cat "$T/err"; return 1; }
	named_95 "$T/p/trace.fxt"
	all_threads_under "$T/p/trace.fxt" "$(pid_of "$T/p")"
}

# pid_of DIR: the recorded program's pid
pid_of() { "$BIN/mt-dump" -k process "$1/hits.mt" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1; }

# threads TRACE PID: every thread with slices is a thread of process PID
# and has a name
all_threads_under() {
	q "$1" "select t.tid, t.name, p.pid from thread t left join process p using(upid)
		where t.utid in (select distinct utid from thread_track tt join slice s on s.track_id = tt.id)" > "$T/thr"
	cat "$T/thr"
	[ -s "$T/thr" ]
	! awk -F'\t' -v pid="$2" '$3 != pid || $2 == "NULL" || $2 == ""' "$T/thr" | grep -q .
}

@test "threads created while recording: each worker has samples, its name and its process (own program, with and without a trigger)" {
	for trig in "" "--trigger none"; do
		rm -rf "$T/w"
		# shellcheck disable=SC2086
		"$MT" run --dir "$T/w" $trig -- "$P/workers" > "$T/out" 2> "$T/err" || { cat "$T/err"; return 1; }
		pid=$("$BIN/mt-dump" -k process "$T/w/hits.mt" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
		all_threads_under "$T/w/trace.fxt" "$pid"
		# each worker ran 0.3 s of CPU: it has slices (spin_work) and its name
		for w in worker-0 worker-1; do
			[ "$(q "$T/w/trace.fxt" "select count(*) from slice s join thread_track tt on s.track_id = tt.id
				join thread t using(utid) where t.name = '$w' and s.name = 'spin_work'")" -gt 0 ]
		done
	done
}

@test "children forked while recording: each its own process, named (prctl name or its parent's), with its samples" {
	"$MT" run --dir "$T/f" -- "$P/forks" > /dev/null 2> "$T/err" || { cat "$T/err"; return 1; }
	q "$T/f/trace.fxt" "select p.pid, p.name, t.tid, t.name from thread t join process p using(upid)
		where t.utid in (select distinct utid from thread_track tt join slice s on s.track_id = tt.id)
		order by p.pid" | tee "$T/pt"
	# three processes with slices: the parent, the renamed child, the plain one
	[ "$(cut -f1 "$T/pt" | sort -u | wc -l)" -eq 3 ]
	# every thread named as its process (none of them renames a thread alone)
	! awk -F'\t' '$2 != $4 || $2 == "" || $2 == "NULL" || $1 != $3' "$T/pt" | grep -q .
	n() { q "$T/f/trace.fxt" "select count(*) from slice s join thread_track tt on s.track_id = tt.id
		join thread t using(utid) join process p using(upid) where p.name = '$1' and s.name = '$2'"; }
	[ "$(n renamed-kid child_work)" -gt 0 ]
	[ "$(n forks plain_child)" -gt 0 ]
	[ "$(n forks parent_work)" -gt 0 ]
	[ "$(n forks child_work)" -eq 0 ]
	# --kernel: the children's kernel frames are named too (their timer
	# reads are system calls)
	[ "$(id -u)" -eq 0 ] || return 0
	"$MT" run --dir "$T/k" --kernel -- "$P/forks" > /dev/null 2> "$T/err" || { cat "$T/err"; return 1; }
	k() { q "$T/k/trace.fxt" "select count(*) from slice s join thread_track tt on s.track_id = tt.id
		join thread t using(utid) join process p using(upid) where p.name = '$1' and ($2)"; }
	[ "$(k renamed-kid "s.name like 'entry_SYSCALL_64%'")" -gt 0 ]
	[ "$(k renamed-kid "s.name like '[unknown @ 0xffff%'")" -eq 0 ]
	[ "$(k forks "s.name like '[unknown @ 0xffff%'")" -eq 0 ]
}

@test "xz -T2: its worker threads are threads of the xz process, named, not separate processes" {
	# 1 MiB blocks: 3 MB of input is 3 blocks, so both workers compress (one -6
	# block of 24 MiB would be one worker)
	head -c 3000000 "$IN/lines.txt" > "$T/x.txt"
	"$MT" run --dir "$T/x" -- xz -T2 -6 --block-size=1MiB -c "$T/x.txt" > /dev/null 2> "$T/err" ||
		{ cat "$T/err"; return 1; }
	pid=$("$BIN/mt-dump" -k process "$T/x/hits.mt" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
	all_threads_under "$T/x/trace.fxt" "$pid"
	# the compressing threads (not the main thread) have samples
	[ "$(awk -F'\t' -v pid="$pid" '$1 != pid' "$T/thr" | wc -l)" -ge 1 ]
	# >= 95 % of its frames named
	named_95 "$T/x/trace.fxt"
	# one process only
	[ "$(q "$T/x/trace.fxt" "select count(*) from process where pid = $pid")" -eq 1 ]
	[ "$(q "$T/x/trace.fxt" "select count(*) from process where pid is not null and pid != 0 and pid != $pid")" -eq 0 ]
}

@test "-g lbr without LBR: one line saying what is missing and what to use, no perf.data, no decode" {
	run "$MT" run --dir "$T/l" -g lbr -- true
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "${lines[0]}" == "mt-capture: fatal: -g lbr needs last branch records"*"use -g fp"* ]]
	[ ! -e "$T/l/perf.data" ]
	# where the PMU claims LBR but perf refuses: perf's reason, no perf.data, mt stops
	mkdir -p "$T/sys/cpu/caps"
	touch "$T/sys/cpu/caps/branches"
	MT_SYSFS_EVENT_SOURCE="$T/sys" run "$MT" run --dir "$T/l2" -g lbr -- true
	[ "$status" -eq 111 ]
	[[ "$output" == *"perf record failed: "*"branch stack"* ]]
	[[ "$output" != *"truncated"* ]]
	[ ! -e "$T/l2/perf.data" ]
}

@test "Ctrl-C (SIGINT to the whole process group) on mt run writes the trace" {
	mkfifo "$T/ready"
	# job control on: a background job of a shell without it ignores
	# SIGINT (and so would mt), as no terminal's Ctrl-C would
	set -m
	# and SIGINT/SIGQUIT back to their default: bats may run with them
	# ignored (started in the background of a shell without job control),
	# and an ignored signal stays ignored in every child
	setsid -w env --default-signal=INT,QUIT "$MT" run --dir "$T/c" -- "$P/spin_fifo" "$T/ready" > "$T/out" 2> "$T/err" &
	mpid=$!
	set +m
	read -r line pgid < "$T/ready" # the program spun 0.2 s and is spinning on
	[ "$line" = ready ]
	[ "$(ps -o comm= -p "$pgid")" = mt ] # the group of mt, mt-capture and the program
	kill -INT -- "-$pgid"
	st=0
	wait "$mpid" || st=$?
	cat "$T/err"
	[ "$st" -eq 130 ] # spin_fifo's own SIGINT death, passed through
	grep -q "interrupted: writing the trace" "$T/err"
	[ -s "$T/c/trace.fxt" ]
	[ "$(q "$T/c/trace.fxt" "select count(*) from slice where name = 'spin_loop'")" -gt 0 ]
}

@test "Ctrl-C (SIGINT to the whole process group) on mt attach writes the trace" {
	mkfifo "$T/ready"
	"$P/spin_fifo" "$T/ready" &
	spid=$!
	read -r line _ < "$T/ready"
	# mt attach in its own process group, its stderr read here until
	# mt-capture says perf records; then SIGINT to that group
	mkfifo "$T/errf"
	set -m # see the test above
	setsid -w env --default-signal=INT,QUIT "$MT" attach --dir "$T/a" -p "$spid" -v > "$T/out" 2> "$T/errf" &
	mpid=$!
	set +m
	exec 8< "$T/errf" # (bats uses 3)
	while IFS= read -r l <&8; do
		echo "$l" >> "$T/err"
		[[ "$l" == *"perf is recording (pid "* ]] && break
	done
	# perf's own group is its own; mt-capture's group is mt's
	perfpid=$(sed -n 's/.*perf is recording (pid \([0-9]*\)).*/\1/p' "$T/err")
	pgid=$(ps -o pgid= -p "$(ps -o ppid= -p "$perfpid" | tr -d ' ')" | tr -d ' ')
	[ "$(ps -o comm= -p "$pgid")" = mt ]
	kill -INT -- "-$pgid"
	cat <&8 >> "$T/err"
	exec 8<&-
	st=0
	wait "$mpid" || st=$?
	[ "$st" -eq 0 ]
	kill "$spid"
	cat "$T/err"
	grep -q "interrupted: writing the trace" "$T/err"
	[ "$(q "$T/a/trace.fxt" "select count(*) from slice where name = 'spin_loop'")" -gt 0 ]
}

@test "--multi-snapshot: every snapshot decoded, one trace each (trace.fxt, trace.2.fxt, ...)" {
	"$MT" run --dir "$T/m" --multi-snapshot -- "$ROOT/examples/demo" > /dev/null 2> "$T/err" || { cat "$T/err"; return 1; }
	n=$(ls "$T/m"/perf.data* | wc -l)
	[ "$n" -ge 2 ]
	[ -s "$T/m/trace.fxt" ]
	for k in $(seq 2 "$n"); do
		[ -s "$T/m/trace.$k.fxt" ]
		[ "$(q "$T/m/trace.$k.fxt" "select count(*) from slice where name = 'main'")" -gt 0 ]
	done
	grep -q "$n snapshots, one trace each" "$T/err"
	# mt decode does the same again
	rm "$T/m/trace.2.fxt"
	"$MT" decode "$T/m" 2> /dev/null
	[ -s "$T/m/trace.2.fxt" ]
}

@test "an idle attached process: 'no samples: the process did not run', and still a trace" {
	sleep 60 &
	spid=$!
	run "$MT" attach --dir "$T/i" -p "$spid" --duration 0.3
	kill "$spid"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"no samples: the process did not run while recorded"* ]]
	[[ "$output" != *"stage write failed"* ]]
	[ "$(q "$T/i/trace.fxt" "select count(*) from thread where tid = $spid")" -eq 1 ]
}

@test "too short for sampling: said, with --mode singlestep suggested" {
	run "$MT" run --dir "$T/s" -- true
	[[ "$output" == *"too briefly for sampling"*"--mode singlestep"* ]]
	# the trigger fired before the first sample
	# (mt_calls reaches it within a millisecond: none or next to none before)
	run "$BIN/mt-capture" run -o "$T/s2" -- "$ROOT/tests/programs/capture/mt_calls"
	[[ "$output" == *"before the trigger"*"--mode singlestep"* || "$output" == *"few samples"*"--mode singlestep"* ]]
	# a long enough run says nothing of the kind
	run "$BIN/mt-capture" run -o "$T/s3" -- "$P/deep" 0.1
	[[ "$output" != *"singlestep"* ]]
}

@test "--kernel: kernel call chains under the system call's user frame, named from /proc/kallsyms" {
	[ "$(id -u)" -eq 0 ] || skip "the kernel's addresses need root"
	for cg in fp dwarf; do
		"$MT" run --dir "$T/k" --kernel -g $cg -- "$P/syscalls" 2> "$T/err" || { cat "$T/err"; return 1; }
		# the kernel's entry under the user frames that made the system
		# call: write() under do_writes() (most of the program's time)
		[ "$(q "$T/k/trace.fxt" "select count(*) from slice s join slice p on s.parent_id = p.id
			join slice pp on p.parent_id = pp.id where s.name like 'entry_SYSCALL_64%'
			and p.name = 'write' and pp.name = 'do_writes'")" -gt 0 ]
		# never a kernel frame without the user stack under it
		[ "$(q "$T/k/trace.fxt" "select count(*) from slice where depth = 0 and (name like 'entry_%' or name like 'asm_%')")" -eq 0 ]
		# deeper kernel frames are named too
		[ "$(q "$T/k/trace.fxt" "select count(*) from slice where name like 'do_syscall_64%'")" -gt 0 ]
		rm -rf "$T/k"
	done
	# where the kernel hides its addresses: one line, and the user frames
	awk '{ print "0000000000000000", $2, $3 }' /proc/kallsyms > "$T/hidden"
	MT_KALLSYMS="$T/hidden" "$BIN/mt-capture" run --kernel -o "$T/k2" -- "$P/syscalls" 2> "$T/err2"
	grep -c "hides the kernel's addresses" "$T/err2" | grep -qx 1
}

@test "singlestep on a terminal shows progress: instructions, rate, time to --max-insns; nothing when not a terminal" {
	command -v script > /dev/null || skip "script(1) (util-linux) gives the terminal"
	# 60000 of fnptr's instructions: over a second of stepping, so a progress
	# line is due (every 0.5 s); the run stops there (exit 1, said once)
	script -qec "'$MT' run --mode singlestep --ptsim-args '--max-insns 60000' --dir '$T/ss' -- '$MT_BUILD/programs/fnptr'" "$T/tty" > /dev/null ||
		[ $? -eq 1 ]
	tr '\r' '\n' < "$T/tty" | grep -q '^mt-ptsim: [0-9]* instructions, [0-9]*/s; --max-insns 60000 in <= [0-9]* s'
	tr '\r' '\n' < "$T/tty" | grep -q 'still running after 60000 instructions'
	"$MT" run --mode singlestep --ptsim-args '--max-insns 60000' --dir "$T/ss2" -- "$MT_BUILD/programs/fnptr" 2> "$T/err" > /dev/null ||
		[ $? -eq 1 ]
	grep -q 'still running after 60000 instructions' "$T/err"
	! grep -q 'instructions, ' "$T/err"
}
