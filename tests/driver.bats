#!/usr/bin/env bats
# One stage driver, one exit policy (issue 18 item 2, docs/tools.md): the same
# bad input gives every stage the same exit code and the same message shape,
#   PROG: fatal: unable to open IN: REASON    (a missing file, a directory)
#   PROG: fatal: unable to read IN: REASON    (truncated, garbage, a read error)
# one line, and no output file.  Usage errors are one line pointing to --help.
# Every stage reads -i FILE (issue 18 item 7).
. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"

setup() {
	ROOT="$BATS_TEST_DIRNAME/.."
	BIN="$ROOT/bin"
	T="$BATS_TEST_TMPDIR"
	C="$BATS_TEST_DIRNAME/corrupt"
}

TOOLS="mt-decode mt-segment mt-stitch mt-symbolize mt-write mt-cat mt-dump mt-undump mt-compare"

# fixtures: a valid stream of records every stage passes through, the same
# cut inside a record, bytes that are nothing, a cut perf.data, cut text
fixtures() {
	{
		echo 'mtev version=1 producer="driver.bats" flags=0x0'
		echo 'clock zero=0 mult=1 shift=0 tsc_hz=0 flags=0'
		echo 'process pid=100 name="p"'
		for i in $(seq 1 200); do echo "thread pid=100 tid=$((1000 + i)) time=$i name=\"thread number $i\""; done
		echo end
	} > "$T/valid.txt"
	"$BIN/mt-undump" -o "$T/valid.mt" "$T/valid.txt"
	size=$(stat -c %s "$T/valid.mt")
	head -c $((size / 2)) "$T/valid.mt" > "$T/cut.mt"
	head -n 100 "$T/valid.txt" > "$T/cut.txt"
	head -c $(($(stat -c %s "$C/decode-base-ok.data") / 2)) "$C/decode-base-ok.data" > "$T/cut.data"
	yes 'garbage ~!@# 0x00 not a stream' | head -c 4096 > "$T/garbage"
	mkdir -p "$T/a-directory"
	# a span stream for mt-compare's other side
	printf 'mtev version=1 producer="d" flags=0x3\nspan tid=1 depth=0 begin=1 end=2 func=0x10 callsite=0x0 flags=0 name="f"\nend\n' |
		"$BIN/mt-undump" -o "$T/spans.mt"
}

# run_tool TOOL IN: TOOL on IN the way the pipeline runs it, output to $T/out
run_tool() {
	local tool=$1 in=$2
	rm -f "$T/out"
	case $tool in
	mt-decode) "$BIN/$tool" --no-images -o "$T/out" -i "$in" ;;
	mt-symbolize) "$BIN/$tool" --no-symbolizer --no-cache -o "$T/out" -i "$in" ;;
	mt-dump) "$BIN/$tool" -i "$in" > "$T/out" ;;
	mt-compare) "$BIN/$tool" "$in" "$T/spans.mt" > "$T/out" ;;
	*) "$BIN/$tool" -o "$T/out" -i "$in" ;;
	esac
}

# the input a tool gets for a "truncated" row
cut_for() {
	case $1 in
	mt-decode) echo "$T/cut.data" ;;
	mt-undump) echo "$T/cut.txt" ;;
	*) echo "$T/cut.mt" ;;
	esac
}

# expect TOOL IN STATUS REGEX: exactly one stderr line matching
# "^TOOL: fatal: REGEX", that status, and no output file left (mt-dump and
# mt-compare write text to stdout as they go: only the status and line count)
expect() {
	local tool=$1 in=$2 want=$3 re=$4 st
	run_tool "$tool" "$in" 2> "$T/err" && st=0 || st=$?
	[ "$st" -eq "$want" ] || { echo "$tool $in: exit $st, want $want"; cat "$T/err"; return 1; }
	[ "$(wc -l < "$T/err")" -eq 1 ] || { echo "$tool $in: not one line:"; cat "$T/err"; return 1; }
	grep -qE "^$tool: fatal: $re" "$T/err" || { echo "$tool $in: wrong shape:"; cat "$T/err"; return 1; }
	case $tool in mt-dump | mt-compare) ;; *)
		[ ! -e "$T/out" ] || { echo "$tool $in: left an output file"; return 1; }
		! ls "$T"/out.tmp.* 2> /dev/null || { echo "$tool $in: left a temporary file"; return 1; } ;;
	esac
}

@test "the same bad input gives every stage the same exit code and message shape" {
	fixtures
	for tool in $TOOLS; do
		[ -x "$BIN/$tool" ] || { echo "$tool not built"; return 1; }
		expect "$tool" "$T/no-such-file" 2 "unable to open $T/no-such-file: No such file or directory$"
		expect "$tool" "$T/a-directory" 2 "unable to open $T/a-directory: Is a directory$"
		cut=$(cut_for "$tool")
		expect "$tool" "$cut" 2 "unable to read $cut: .*truncat"
		expect "$tool" "$T/garbage" 2 "unable to read $T/garbage: .+"
	done
}

@test "a read error (EIO) is a system error, exit 111, from every MTEV stage (mt-cat tested -EIO as EIO)" {
	fixtures
	# reading /proc/self/mem at offset 0 fails with EIO (address 0 is not mapped)
	head -c 1 /proc/self/mem 2> /dev/null && skip "/proc/self/mem reads at 0 here"
	for tool in mt-segment mt-stitch mt-symbolize mt-write mt-cat mt-dump mt-undump mt-compare; do
		expect "$tool" /proc/self/mem 111 "unable to read /proc/self/mem: Input/output error$"
	done
}

@test "stdin is named stdin in the same messages" {
	fixtures
	for tool in mt-segment mt-stitch mt-symbolize mt-write mt-cat mt-dump; do
		a=""
		[ "$tool" = mt-cat ] && a=-
		[ "$tool" = mt-symbolize ] && a="--no-symbolizer --no-cache"
		# shellcheck disable=SC2086
		"$BIN/$tool" $a < "$T/garbage" > "$T/out" 2> "$T/err" && st=0 || st=$?
		[ "$st" -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] &&
			grep -q "^$tool: fatal: unable to read stdin: not an MTEV stream" "$T/err" ||
			{ echo "$tool: $st"; cat "$T/err"; return 1; }
	done
}

@test "usage errors: one line naming the problem and --help, exit 2, the tool's own name" {
	fixtures
	for tool in $TOOLS; do
		for args in "--no-such-option" "-Z" "-o"; do
			[ "$tool" = mt-compare ] && [ "$args" = -o ] && args=-t
			[ "$tool" = mt-dump ] && [ "$args" = -o ] && args=-k
			# shellcheck disable=SC2086
			"$BIN/$tool" $args < /dev/null > "$T/out" 2> "$T/err" && st=0 || st=$?
			[ "$st" -eq 2 ] || { echo "$tool $args: exit $st"; cat "$T/err"; return 1; }
			[ "$(wc -l < "$T/err")" -eq 1 ] || { echo "$tool $args: not one line:"; cat "$T/err"; return 1; }
			grep -q "^$tool: fatal: .*(see $tool --help)$" "$T/err" || { echo "$tool $args:"; cat "$T/err"; return 1; }
			! grep -q "bin/" "$T/err"
		done
	done
	# bad option values: one line, not the whole usage
	for cmd in "mt-stitch --mem-limit 12" "mt-segment --stitch --mem-limit x" "mt-write -f xml" \
		"mt-write -l 99" "mt-symbolize --timeout 0" "mt-symbolize --window -1" "mt-decode --cpu x" \
		"mt-decode --pt x --image nonsense" "mt-decode --pid 12x" "mt-compare --min-recall 2 a b" \
		"mt-dump -k nosuchkind" "mt-segment a b" "mt-cat" \
		"mt-decode a b" "mt-stitch a b" "mt-symbolize a b" "mt-write a b" "mt-dump a b" \
		"mt-undump a b" "mt-decode -i a b" "mt-stitch -i a b" "mt-write -i a b"; do
		# shellcheck disable=SC2086
		"$BIN"/$cmd < /dev/null > "$T/out" 2> "$T/err" && st=0 || st=$?
		tool=${cmd%% *}
		[ "$st" -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] &&
			grep -q "^$tool: fatal: .*(see $tool --help)$" "$T/err" || { echo "$cmd: $st"; cat "$T/err"; return 1; }
	done
}

@test "-i FILE reads the same as the FILE operand and stdin, in every stage" {
	fixtures
	for tool in mt-segment mt-stitch mt-symbolize mt-write mt-cat mt-dump; do
		a=""
		[ "$tool" = mt-symbolize ] && a="--no-symbolizer --no-cache"
		[ "$tool" = mt-write ] && a="-f json"
		# mt-symbolize and mt-write need spans; the others pass thread records through
		in="$T/valid.mt"
		case $tool in mt-symbolize | mt-write) in="$T/spans.mt" ;; esac
		# shellcheck disable=SC2086
		{
			"$BIN/$tool" $a -i "$in" > "$T/a" || [ $? -eq 1 ]
			"$BIN/$tool" $a "$in" > "$T/b" || [ $? -eq 1 ]
			if [ "$tool" = mt-cat ]; then "$BIN/$tool" - < "$in" > "$T/c"; else "$BIN/$tool" $a < "$in" > "$T/c" || [ $? -eq 1 ]; fi
		} 2> /dev/null || { echo "$tool failed"; return 1; }
		[ -s "$T/a" ] && cmp "$T/a" "$T/b" && cmp "$T/a" "$T/c" || { echo "$tool: -i differs"; return 1; }
	done
	"$BIN/mt-undump" -i "$T/valid.txt" > "$T/a"
	cmp "$T/a" "$T/valid.mt"
	"$BIN/mt-decode" --no-images -i "$C/decode-base-ok.data" > "$T/a" 2> /dev/null || [ $? -eq 1 ]
	"$BIN/mt-decode" --no-images "$C/decode-base-ok.data" > "$T/b" 2> /dev/null || [ $? -eq 1 ]
	[ -s "$T/a" ] && cmp "$T/a" "$T/b"
}

@test "mt-symbolize --partial: a cut stream writes what was read (exit 1), as mt-segment and mt-stitch do" {
	fixtures
	# spans, then a cut: by default refused, with --partial written
	{
		echo 'mtev version=1 producer="d" flags=0x3'
		for i in $(seq 1 300); do echo "span tid=1 depth=0 begin=$((i * 10)) end=$((i * 10 + 5)) func=0x10 callsite=0x0 flags=0 name=\"f\""; done
		echo end
	} | "$BIN/mt-undump" -o "$T/s.mt"
	head -c $(($(stat -c %s "$T/s.mt") * 3 / 4)) "$T/s.mt" > "$T/s-cut.mt"
	run "$BIN/mt-symbolize" --no-symbolizer --no-cache -o "$T/o.mt" "$T/s-cut.mt"
	[ "$status" -eq 2 ]
	[ ! -e "$T/o.mt" ]
	for tool in mt-stitch mt-symbolize; do
		a=""
		[ "$tool" = mt-symbolize ] && a="--no-symbolizer --no-cache"
		# shellcheck disable=SC2086
		"$BIN/$tool" $a --partial -o "$T/o.mt" "$T/s-cut.mt" 2> "$T/err" && st=0 || st=$?
		[ "$st" -eq 1 ] || { echo "$tool --partial: $st"; cat "$T/err"; return 1; }
		grep -q "truncated" "$T/err"
		# a complete stream, holding the spans before the cut and no more
		n=$("$BIN/mt-dump" -k span "$T/o.mt" | wc -l)
		echo "$tool: $n spans"
		[ "$n" -gt 100 ]
		[ "$n" -lt 300 ]
	done
}

@test "--stats: one format in every stage, PROG: key=value ... on stderr" {
	fixtures
	"$BIN/mt-undump" -o "$T/br.mt" <<-'TXT'
	mtev version=1 producer="d" flags=0x1
	branch tid=1 time=10 type=trace-start from=0x0 to=0x401000
	branch tid=1 time=11 type=call from=0x401010 to=0x402000
	branch tid=1 time=12 type=return from=0x402010 to=0x401015
	branch tid=1 time=13 type=trace-end from=0x401020 to=0x0
	end
	TXT
	{
		"$BIN/mt-decode" --no-images -s -o "$T/o1" "$C/decode-base-ok.data" || [ $? -eq 1 ]
		"$BIN/mt-segment" --no-symbols --stats -o "$T/o2" "$T/br.mt"
		"$BIN/mt-segment" --no-symbols --stitch --stats -o "$T/o3" "$T/br.mt"
		"$BIN/mt-stitch" --stats -o "$T/o4" "$T/o2"
		"$BIN/mt-symbolize" --no-symbolizer --no-cache -s -o "$T/o5" "$T/o4" || [ $? -eq 1 ]
		"$BIN/mt-write" -s -o "$T/o6.fxt" "$T/o5"
		"$BIN/mt-dump" -s "$T/o5" > "$T/o7"
	} 2> "$T/err"
	cat "$T/err"
	for tool in mt-decode mt-segment mt-stitch mt-symbolize mt-write mt-dump; do
		grep -q "^$tool: [a-z_]*=" "$T/err" || { echo "no stats from $tool"; return 1; }
	done
	# every stats line is PROG: followed by key=value pairs only
	! grep -E '^mt-[a-z]+: [a-z_]+=' "$T/err" | grep -vE '^mt-[a-z]+:( [a-z_]+=[0-9a-z.]+)+$'
}

# The oracles and the front tools take other inputs: mt-ptsim a run file
# (--replay), mt-ptgen an ELF binary, mt-summary a span stream read twice
# (a directory is DIR/symbolize.mt there, so that row does not apply).
@test "mt-ptsim, mt-ptgen, mt-summary: the same bad input, the same exit code and message shape" {
	fixtures
	run_other() {
		case $1 in
		mt-ptsim) "$BIN/mt-ptsim" --replay "$2" -o "$T/out" ;;
		mt-ptgen) "$BIN/mt-ptgen" -n 1000 -o "$T/out" "$2" ;;
		mt-summary) "$BIN/mt-summary" "$2" > /dev/null ;;
		esac
	}
	head -c 100000 "$MT_BUILD/programs/recursion" > "$T/cut.elf" 2> /dev/null ||
		head -c 100000 "$BIN/mt-cat" > "$T/cut.elf"
	printf 'MTPTSIM1\001\000' > "$T/cut.run"
	for tool in mt-ptsim mt-ptgen mt-summary; do
		case $tool in
		mt-ptsim) cut=$T/cut.run ;;
		mt-ptgen) cut=$T/cut.elf ;;
		mt-summary) cut=$T/cut.mt ;;
		esac
		rows=("$T/no-such-file|2|unable to open $T/no-such-file: No such file or directory$"
			"$cut|2|unable to read $cut: .+"
			"$T/garbage|2|unable to read $T/garbage: .+")
		[ $tool = mt-summary ] || rows+=("$T/a-directory|2|unable to open $T/a-directory: Is a directory$")
		for row in "${rows[@]}"; do
			IFS='|' read -r in want re <<< "$row"
			rm -rf "$T/out"
			run_other $tool "$in" 2> "$T/err" && st=0 || st=$?
			[ "$st" -eq "$want" ] || { echo "$tool $in: exit $st, want $want"; cat "$T/err"; return 1; }
			[ "$(wc -l < "$T/err")" -eq 1 ] || { echo "$tool $in: not one line:"; cat "$T/err"; return 1; }
			grep -qE "^$tool: fatal: $re" "$T/err" || { echo "$tool $in: wrong shape:"; cat "$T/err"; return 1; }
			[ ! -e "$T/out/perf.data" ] || { echo "$tool $in: wrote perf.data"; return 1; }
		done
	done
}

@test "mt-ptsim, mt-ptgen, mt-summary, mt-capture: usage errors are one line pointing to --help, exit 2" {
	for cmd in "mt-ptsim --no-such-option" "mt-ptsim -Z" "mt-ptsim -o" "mt-ptsim --window x -o d -- true" \
		"mt-ptsim --inject warp@1 -o d -- true" "mt-ptsim -o d" \
		"mt-ptgen --no-such-option" "mt-ptgen -o" "mt-ptgen --threads 99 -o d x" "mt-ptgen -o d" \
		"mt-summary --no-such-option" "mt-summary -n" "mt-summary -n x d" "mt-summary" \
		"mt-capture" "mt-capture warp" "mt-capture run --no-such-option -o d -- true" "mt-capture run -o" \
		"mt-capture run --mode warp -o d -- true"; do
		# shellcheck disable=SC2086
		"$BIN"/$cmd < /dev/null > "$T/out" 2> "$T/err" && st=0 || st=$?
		tool=${cmd%% *}
		[ "$st" -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] &&
			grep -q "^$tool: fatal: .*(see $tool --help)$" "$T/err" || { echo "$cmd: $st"; cat "$T/err"; return 1; }
	done
}

@test "on a terminal mt-segment, mt-stitch, mt-symbolize and mt-write show their progress on stderr (every 2^20 records; mt-symbolize's every 2^16, ended before a warning); nothing when stderr is not a terminal" {
	command -v script > /dev/null || skip "script(1) (util-linux) gives the terminal"
	# 1.1 M calls and returns of one thread: 2.2 M branch records, 1.1 M spans
	awk 'BEGIN { print "mtev version=1 producer=\"t\" flags=0x1"; print "process pid=1 name=\"p\""
		print "thread pid=1 tid=1 time=0 name=\"t\""; t = 1000
		print "branch tid=1 time=" t " type=trace-start from=0x0 to=0x401000"
		for (i = 0; i < 1100000; i++) {
			t += 2; print "branch tid=1 time=" t " type=call from=0x401004 to=0x402000"
			t += 3; print "branch tid=1 time=" t " type=return from=0x402010 to=0x401009"
		}
		print "end" }' | "$BIN/mt-undump" > "$T/b.mt"
	script -qec "'$BIN/mt-segment' --no-symbols -i '$T/b.mt' -o '$T/s.mt'" "$T/tty" > /dev/null
	tr '\r' '\n' < "$T/tty" | grep -q '^mt-segment: 2097[0-9]* records$'
	script -qec "'$BIN/mt-stitch' --no-symbols -i '$T/s.mt' -o '$T/st.mt'" "$T/tty" > /dev/null
	tr '\r' '\n' < "$T/tty" | grep -q '^mt-stitch: 1048576 records$'
	script -qec "'$BIN/mt-write' -o '$T/t.fxt' '$T/st.mt'" "$T/tty" > /dev/null
	tr '\r' '\n' < "$T/tty" | grep -q '^mt-write: [0-9]* spans$'
	# no binary is mapped: a warning after the first progress line, on a line of its own
	st=0
	script -qec "'$BIN/mt-symbolize' --no-symbolizer -i '$T/st.mt' -o '$T/sy.mt'" "$T/tty" > /dev/null || st=$?
	[ "$st" -eq 1 ] # names degraded (the warning)
	tr '\r' '\n' < "$T/tty" | grep -q '^mt-symbolize: [0-9]* records read$'
	tr '\r' '\n' < "$T/tty" | grep -q '^mt-symbolize: warning: address 0x401000 (thread 1) is in no mapped binary'
	run "$BIN/mt-symbolize" --no-symbolizer -i "$T/st.mt" -o "$T/sy2.mt"
	[ "$status" -eq 1 ] && [ "${#lines[@]}" -eq 1 ]
	cmp "$T/sy.mt" "$T/sy2.mt"
	"$BIN/mt-stitch" --no-symbols -i "$T/s.mt" -o "$T/st2.mt" 2> "$T/err"
	[ ! -s "$T/err" ]
	cmp "$T/st.mt" "$T/st2.mt"
}
