#!/usr/bin/env bats
# Where a stage writes (issue 17 items 8-10, docs/tools.md "Outputs"):
#  - `-o PATH` of a regular file (or a new path) appears only complete, through
#    a temporary file created with O_EXCL (never through a planted link);
#  - a symbolic link is followed (its target is written, the link stays);
#  - a device, a FIFO, /dev/stdout, a process substitution is written in place
#    and never replaced; a full device is one fatal line, exit 111;
#  - SIGINT, SIGTERM and SIGHUP leave no temporary file behind.
# Never a test output at /dev/null: a test-owned FIFO or device node, or /dev/full.

setup() {
	ROOT="$BATS_TEST_DIRNAME/.."
	BIN="$ROOT/bin"
	T="$BATS_TEST_TMPDIR"
	C="$BATS_TEST_DIRNAME/corrupt"
	{
		echo 'mtev version=1 producer="outputs.bats" flags=0x0'
		echo 'process pid=100 name="p"'
		for i in $(seq 1 3000); do echo "thread pid=100 tid=$((1000 + i)) time=$i name=\"thread number $i\""; done
		echo end
	} > "$T/valid.txt"
	"$BIN/mt-undump" -o "$T/valid.mt" "$T/valid.txt"
	{
		echo 'mtev version=1 producer="outputs.bats" flags=0x3'
		for i in $(seq 1 3000); do echo "span tid=1 depth=0 begin=$((i * 10)) end=$((i * 10 + 5)) func=0x10 callsite=0x0 flags=0 name=\"f$((i % 7))\""; done
		echo end
	} | "$BIN/mt-undump" -o "$T/spans.mt"
}

TOOLS="mt-decode mt-segment mt-stitch mt-symbolize mt-write mt-cat mt-undump"

# run_stage TOOL OUT [IN]: TOOL on a valid input writing OUT ("-": stdout)
run_stage() {
	local tool=$1 out=$2 in=$3
	case $tool in
	mt-decode) "$BIN/$tool" --no-images -o "$out" "${in:-$C/decode-base-ok.data}" ;;
	mt-symbolize) "$BIN/$tool" --no-symbolizer --no-cache -f -o "$out" "${in:-$T/spans.mt}" ;;
	mt-write) "$BIN/$tool" -f fxt --force -o "$out" "${in:-$T/spans.mt}" ;;
	mt-undump) "$BIN/$tool" -f -o "$out" "${in:-$T/valid.txt}" ;;
	*) "$BIN/$tool" -f -o "$out" "${in:-$T/valid.mt}" ;;
	esac
}

# stage TOOL OUT [IN]: the same, which must succeed (0, or 1: degraded data)
stage() {
	local st
	run_stage "$@" && st=0 || st=$?
	[ "$st" -le 1 ]
}

# expected TOOL: what TOOL writes on stdout, in $T/want-TOOL
expected() {
	stage "$1" - > "$T/want-$1" 2> /dev/null
	[ -s "$T/want-$1" ]
}

@test "-o a full device: one fatal line, exit 111, the device is still a device" {
	devs=()
	# a device node of our own first (as root): if a stage replaced it, the
	# test ends before /dev/full is ever given to it
	if [ "$(id -u)" = 0 ] && mknod "$T/full" c 1 7 2> /dev/null && [ -c "$T/full" ] &&
		! echo x 2> /dev/null > "$T/full"; then
		devs+=("$T/full")
	fi
	devs+=(/dev/full)
	for dev in "${devs[@]}"; do
		for tool in $TOOLS; do
			run_stage "$tool" "$dev" 2> "$T/err" && st=0 || st=$?
			[ -c "$dev" ] || { echo "$tool replaced $dev"; ls -l "$dev"; return 1; }
			[ "$st" -eq 111 ] || { echo "$tool -o $dev: exit $st"; cat "$T/err"; return 1; }
			[ "$(grep -c ': fatal: ' "$T/err")" -eq 1 ] &&
				tail -n 1 "$T/err" | grep -q "^$tool: fatal: unable to write $dev: .*No space left on device$" ||
				{ echo "$tool -o $dev:"; cat "$T/err"; return 1; }
			! ls "$dev".tmp.* 2> /dev/null
		done
	done
}

@test "-o a symbolic link: its target is written (atomically, mode kept), the link stays a link" {
	mkdir "$T/d"
	for tool in $TOOLS; do
		expected "$tool"
		echo old > "$T/d/target"
		chmod 640 "$T/d/target"
		ln -sfn d/target "$T/link"
		stage "$tool" "$T/link" 2> /dev/null
		[ -L "$T/link" ] && [ "$(readlink "$T/link")" = d/target ] || { echo "$tool replaced the link"; return 1; }
		cmp "$T/d/target" "$T/want-$tool" || { echo "$tool: target not written"; return 1; }
		[ "$(stat -c %a "$T/d/target")" = 640 ]
		! ls "$T"/d/target.tmp.* "$T"/link.tmp.* 2> /dev/null
		# a dangling link: its target is created
		rm -f "$T/d/target"
		stage "$tool" "$T/link" 2> /dev/null
		[ -L "$T/link" ] && cmp "$T/d/target" "$T/want-$tool"
	done
}

@test "-o a FIFO, /dev/stdout, a process substitution: written in place, never replaced" {
	mkfifo "$T/fifo"
	for tool in $TOOLS; do
		expected "$tool"
		cat "$T/fifo" > "$T/got" &
		reader=$!
		stage "$tool" "$T/fifo" 2> "$T/err" && st=0 || st=$?
		# a stage that replaced the FIFO never opened it: the reader waits still
		[ -p "$T/fifo" ] || { echo "$tool replaced the FIFO"; kill "$reader"; return 1; }
		[ "$st" -eq 0 ] || { echo "$tool -o fifo failed"; cat "$T/err"; return 1; }
		wait "$reader"
		cmp "$T/got" "$T/want-$tool"
		! ls "$T"/fifo.tmp.* 2> /dev/null
		# /dev/stdout: into a file (the shell's redirection decides) and a pipe
		stage "$tool" /dev/stdout > "$T/got" 2> /dev/null
		cmp "$T/got" "$T/want-$tool"
		stage "$tool" /dev/stdout 2> /dev/null | cat > "$T/got"
		cmp "$T/got" "$T/want-$tool"
		# a process substitution: /dev/fd/N
		stage "$tool" >(cat > "$T/ps") 2> /dev/null
		wait $!
		cmp "$T/ps" "$T/want-$tool" || { echo "$tool -o >(...) differs"; return 1; }
	done
}

@test "a link planted at the old predictable temporary name is never followed; new files get 0666 & ~umask" {
	for tool in $TOOLS; do
		echo "precious" > "$T/victim"
		rm -f "$T/out" "$T"/out.tmp.*
		# the stage's pid is the subshell's: exec keeps it
		(
			ln -s "$T/victim" "$T/out.tmp.$BASHPID"
			umask 027
			exec "$BIN/$tool" $(case $tool in mt-decode) echo --no-images "$C/decode-base-ok.data" ;;
				mt-symbolize) echo --no-symbolizer --no-cache "$T/spans.mt" ;; mt-write) echo "$T/spans.mt" ;;
				mt-undump) echo "$T/valid.txt" ;; *) echo "$T/valid.mt" ;; esac) -o "$T/out"
		) 2> /dev/null || [ $? -eq 1 ]
		[ "$(cat "$T/victim")" = precious ] || { echo "$tool wrote through the planted link"; return 1; }
		[ -f "$T/out" ] && [ ! -L "$T/out" ] || { echo "$tool: out is not a regular file"; return 1; }
		[ "$(stat -c %a "$T/out")" = 640 ] || { echo "$tool: mode $(stat -c %a "$T/out")"; return 1; }
		# the only temporary name left is the planted link
		[ "$(ls "$T"/out.tmp.* | wc -l)" -eq 1 ]
		[ -L "$T"/out.tmp.* ]
	done
}

# signal_case TOOL SIG: TOOL blocked reading a FIFO with its temporary file
# created, then SIG: it dies of SIG and leaves neither OUT nor a temporary file
signal_case() {
	local tool=$1 sig=$2 pid st n i
	rm -f "$T/in" "$T/out" "$T"/out.tmp.*
	mkfifo "$T/in"
	# background jobs of a non-interactive shell ignore SIGINT: reset it
	case $tool in
	mt-symbolize) env --default-signal "$BIN/$tool" --no-symbolizer --no-cache -o "$T/out" -i "$T/in" 2> /dev/null & ;;
	mt-cat) env --default-signal "$BIN/$tool" -o "$T/out" "$T/in" 2> /dev/null & ;;
	*) env --default-signal "$BIN/$tool" -o "$T/out" -i "$T/in" 2> /dev/null & ;;
	esac
	pid=$!
	# the stream's beginning (header and a few records, never the end), so
	# that the stage opens its output and blocks reading the rest
	exec 7<> "$T/in" # read-write: never blocks, even if the stage died first
	case $tool in
	mt-undump) head -n 50 "$T/valid.txt" >&7 ;;
	mt-symbolize | mt-write) head -c 300 "$T/spans.mt" >&7 ;;
	*) head -c 300 "$T/valid.mt" >&7 ;;
	esac
	for i in $(seq 1 1000); do
		ls "$T"/out.tmp.* > /dev/null 2>&1 && break
		read -r -t 0.01 <> <(:) || true
	done
	ls "$T"/out.tmp.* > /dev/null 2>&1 || { echo "$tool made no temporary file"; kill -9 "$pid"; return 1; }
	kill -s "$sig" "$pid"
	wait "$pid" && st=0 || st=$?
	exec 7>&-
	n=$(kill -l "$sig")
	[ "$st" -eq $((128 + n)) ] || { echo "$tool SIG$sig: exit $st"; return 1; }
	[ ! -e "$T/out" ] || { echo "$tool SIG$sig: left OUT"; return 1; }
	! ls "$T"/out.tmp.* 2> /dev/null || { echo "$tool SIG$sig: left its temporary file"; return 1; }
}

@test "SIGINT, SIGTERM, SIGHUP while a stage is blocked reading: no temporary file is left" {
	env --default-signal true 2> /dev/null || skip "env has no --default-signal"
	for tool in mt-segment mt-stitch mt-symbolize mt-write mt-cat mt-undump; do
		for sig in INT TERM HUP; do
			signal_case "$tool" "$sig"
		done
	done
}

@test "a signal ignored by the caller (nohup) stays ignored" {
	env --default-signal true 2> /dev/null || skip "env has no --default-signal"
	rm -f "$T/in"
	mkfifo "$T/in"
	env --ignore-signal=HUP "$BIN/mt-cat" -o "$T/out" "$T/in" 2> /dev/null &
	pid=$!
	exec 7<> "$T/in" # read-write: never blocks, even if the stage died first
	head -c 300 "$T/valid.mt" >&7
	for i in $(seq 1 1000); do
		ls "$T"/out.tmp.* > /dev/null 2>&1 && break
		read -r -t 0.01 <> <(:) || true
	done
	kill -s HUP "$pid"
	tail -c +301 "$T/valid.mt" >&7
	exec 7>&-
	wait "$pid"
	"$BIN/mt-dump" "$T/out" > /dev/null
}

# ---- mt and make trace: a run owns its directory (issue 17 items 11-13) ----

@test "mt run: a second run into a --dir in use is refused with one line; the first is unharmed" {
	MT="$ROOT/pipelines/mt"
	mkfifo "$T/started" "$T/go"
	# a capture that says it started, then waits for the test
	printf '#!/bin/sh\necho started > "%s"\nread -r _ < "%s"\nexit 3\n' "$T/started" "$T/go" > "$T/cap1"
	printf '#!/bin/sh\ntouch "%s"\nexit 4\n' "$T/second-ran" > "$T/cap2"
	chmod +x "$T/cap1" "$T/cap2"
	MT_CAPTURE="$T/cap1" "$MT" run --dir "$T/d" -- true 2> "$T/err1" &
	first=$!
	read -r _ < "$T/started" # the first run is in its capture now
	MT_CAPTURE="$T/cap2" "$MT" run --dir "$T/d" -- true 2> "$T/err2" && st=0 || st=$?
	echo go > "$T/go"
	wait "$first" && st1=0 || st1=$?
	cat "$T/err2"
	[ "$st" -eq 2 ]
	[ "$(wc -l < "$T/err2")" -eq 1 ]
	grep -q "^mt: fatal: $T/d is in use by another mt run" "$T/err2"
	[ ! -e "$T/second-ran" ]
	[ "$st1" -eq 3 ] # the first run's capture status, passed through
	# the lock goes with the run that held it
	MT_CAPTURE="$T/cap2" "$MT" run --dir "$T/d" -- true 2> /dev/null && st=0 || st=$?
	[ "$st" -eq 4 ]
	[ -e "$T/second-ran" ]
}

@test "a run owns its directory: earlier outputs go before it starts; a failed stage leaves no trace" {
	MT="$ROOT/pipelines/mt"
	mkdir "$T/d"
	for f in perf.data hits.mt perf.log decode.mt segment.mt stitch.mt symbolize.mt trace.fxt trace.json; do
		echo "stale $f" > "$T/d/$f"
	done
	echo mine > "$T/d/keep.txt"
	echo "old trace" > "$T/elsewhere.fxt"
	# a capture that fails without a recording: nothing of the last run is left
	printf '#!/bin/sh\nexit 3\n' > "$T/cap"
	chmod +x "$T/cap"
	MT_CAPTURE="$T/cap" "$ROOT/pipelines/mt" run --dir "$T/d" -o "$T/elsewhere.fxt" -- true 2> /dev/null && st=0 || st=$?
	[ "$st" -eq 3 ]
	[ "$(cd "$T/d" && ls)" = keep.txt ] || { ls -la "$T/d"; return 1; }
	[ ! -e "$T/elsewhere.fxt" ]
	# replay from segment with a write stage that fails: the earlier
	# trace.fxt must not stay beside the new files
	cp "$T/valid.mt" "$T/d/decode.mt"
	echo "old trace" > "$T/d/trace.fxt"
	printf '#!/bin/sh\necho "my-write: fatal: refused" >&2\nexit 2\n' > "$T/my-write"
	chmod +x "$T/my-write"
	MT_WRITE="$T/my-write" "$MT" replay "$T/d" --from segment 2> "$T/err" && st=0 || st=$?
	[ "$st" -eq 2 ] && grep -q "stage write failed" "$T/err" || { cat "$T/err"; return 1; }
	[ -s "$T/d/segment.mt" ]
	[ -s "$T/d/stitch.mt" ]
	[ -s "$T/d/symbolize.mt" ]
	[ ! -e "$T/d/trace.fxt" ]
	cmp "$T/d/decode.mt" "$T/valid.mt" # what replay starts from is kept
}

@test "a read-only --dir: one line about the directory, no perf.log named" {
	[ "$(id -u)" = 0 ] && command -v setpriv > /dev/null || skip "needs root and setpriv (to run as nobody)"
	pub=$(mktemp -d /tmp/mt-outputs.XXXXXX)
	chmod 755 "$pub"
	mkdir "$pub/ro"
	chmod 555 "$pub/ro"
	as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	as_nobody test -x "$BIN/mt-capture" || { rm -rf "$pub"; skip "nobody cannot run bin/"; }
	for cmd in "$ROOT/pipelines/mt run --dir" "$BIN/mt-capture run -o"; do
		# shellcheck disable=SC2086
		as_nobody $cmd "$pub/ro" -- true > "$T/out" 2> "$T/err" && st=0 || st=$?
		cat "$T/err"
		[ "$st" -eq 111 ] && [ "$(wc -l < "$T/err")" -eq 1 ] &&
			grep -q "fatal: unable to write to $pub/ro: Permission denied" "$T/err" &&
			! grep -q perf.log "$T/err" || { rm -rf "$pub"; return 1; }
	done
	rm -rf "$pub"
}

@test "make trace: PROG, ARGS, TRIGGER reach mt-capture verbatim; nothing in them runs" {
	# a capture that writes the arguments it got, one a line, and fails
	printf '#!/bin/sh\nfor a in "$@"; do printf "<%%s>\\n" "$a"; done > "%s"\nexit 3\n' "$T/argv" > "$T/cap"
	chmod +x "$T/cap"
	cd "$T"
	args='p; touch PWNED1 `touch PWNED2` $(touch PWNED3) it'"'"'s *  "q" $HOME'
	MT_CAPTURE="$T/cap" make -s -C "$ROOT" trace TRACE_DIR="$T/tr" PROG="$T/my prog" \
		ARGS="$args" TRIGGER='a b' > "$T/out" 2>&1 && st=0 || st=$?
	cat "$T/out"
	[ "$st" -ne 0 ]
	grep -q "make trace: fatal: mt run failed (exit 3)" "$T/out"
	! ls "$T"/PWNED* "$ROOT"/PWNED* 2> /dev/null
	printf '<%s>\n' run -o "$T/tr" --mode auto --trigger 'a b' -- "$T/my prog" \
		'p;' touch PWNED1 '`touch' 'PWNED2`' '$(touch' 'PWNED3)' "it's" '*' '"q"' '$HOME' > "$T/want"
	diff "$T/want" "$T/argv"
}

@test "a plain make installs nothing (no deps, no apt-get)" {
	make -n -C "$ROOT" all > "$T/plan" 2>&1
	! grep -E "deps\.sh|apt-get" "$T/plan"
	make -n -C "$ROOT" deps > "$T/plan" 2>&1
	grep -q "deps.sh install" "$T/plan" # what `make deps` does, so the check above can fail
}
