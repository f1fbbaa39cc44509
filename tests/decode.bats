#!/usr/bin/env bats
# mt-decode: perf.data reading checked against perf's own parser (perf script
# -D) on the real Skylake recording, decoding without its binaries, file vs
# pipe mode, and the corrupt-input corpus.
. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"
load lib/rawpt

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	T="$BATS_TEST_TMPDIR"
	FX=/work/shared/fixtures/intel_pt-skylake-4.14
	SK="$FX/perf.data.intel_pt-4.14"
	SKP="$FX/perf.data.piped.intel_pt-4.14"
}

# perf's list of records: "OFFSET TYPE", offsets as in the file.
perf_records() { # FILE [pipe]
	if [ "$2" = pipe ]; then
		# perf counts pipe offsets from after the 16-byte pipe header
		cat "$1" | perf script -D -i - 2>/dev/null |
			sed -n 's/^\(0x[0-9a-f]*\|0\)@pipe \[0x[0-9a-f]*\]: event: \([0-9]*\)$/\1 \2/p' |
			while read -r o t; do printf '0x%x %s\n' $((o + 16)) "$t"; done
	else
		perf script -D -i "$1" 2>/dev/null |
			sed -n 's/^\(0x[0-9a-f]*\|0\)@[^ ]* \[0x[0-9a-f]*\]: event: \([0-9]*\)$/\1 \2/p' |
			while read -r o t; do printf '0x%x %s\n' $((o)) "$t"; done
	fi
}
our_records() { # FILE
	"$BIN/mt-decode" --records "$1" | sed -n 's/^\(0x[0-9a-f]*\) [A-Z_0-9]* type=\([0-9]*\) .*/\1 \2/p'
}

@test "skylake file mode: every record perf sees, at the same offsets with the same types" {
	perf_records "$SK" | sort > "$T/perf"
	our_records "$SK" | sort > "$T/ours"
	[ "$(wc -l < "$T/perf")" -gt 200 ]
	diff "$T/perf" "$T/ours"
}

@test "skylake pipe mode: every record perf sees, at the same offsets with the same types" {
	perf_records "$SKP" pipe | sort > "$T/perf"
	cat "$SKP" | "$BIN/mt-decode" --records | sed -n 's/^\(0x[0-9a-f]*\) [A-Z_0-9]* type=\([0-9]*\) .*/\1 \2/p' | sort > "$T/ours"
	[ "$(wc -l < "$T/perf")" -gt 600 ]
	diff "$T/perf" "$T/ours"
}

# per queue (idx) AUXTRACE byte sums, and MMAP2/COMM/SWITCH counts
perf_counts() { # FILE [pipe]
	if [ "$2" = pipe ]; then cat "$1" | perf script -D -i - 2>/dev/null; else perf script -D -i "$1" 2>/dev/null; fi > "$T/perfD"
	sed -n 's/.*PERF_RECORD_AUXTRACE size: \(0x[0-9a-f]*\) .* idx: \([0-9]*\) .*/\2 \1/p' "$T/perfD" |
		while read -r idx sz; do echo "$idx $((sz))"; done |
		awk '{ q[$1] += $2 } END { for (x in q) print "aux" x, q[x] }'
	echo "mmap2 $(grep -c ' PERF_RECORD_MMAP2 ' "$T/perfD")"
	echo "comm $(grep -Ec ' PERF_RECORD_COMM[: ]' "$T/perfD")"
	echo "switch $(grep -Ec ' PERF_RECORD_SWITCH(_CPU_WIDE)? ' "$T/perfD")"
}
our_counts() { # FILE
	"$BIN/mt-decode" --records < "$1" > "$T/ours"
	sed -n 's/.* AUXTRACE .* idx=\([0-9]*\) aux_size=\([0-9]*\) .*/\1 \2/p' "$T/ours" |
		awk '{ q[$1] += $2 } END { for (x in q) print "aux" x, q[x] }'
	echo "mmap2 $(grep -c ' MMAP2 ' "$T/ours")"
	echo "comm $(grep -c ' COMM ' "$T/ours")"
	echo "switch $(grep -Ec ' SWITCH(_CPU_WIDE)? ' "$T/ours")"
}

@test "skylake: per-queue AUXTRACE bytes and MMAP2/COMM/SWITCH counts equal perf's (file and pipe)" {
	perf_counts "$SK" | sort > "$T/p1"; our_counts "$SK" | sort > "$T/o1"
	cat "$T/p1"
	grep -q '^aux3 137728$' "$T/p1" # the README's figure, so the awk above parsed perf
	diff "$T/p1" "$T/o1"
	perf_counts "$SKP" pipe | sort > "$T/p2"; our_counts "$SKP" | sort > "$T/o2"
	cat "$T/p2"
	grep -q '^switch [1-9]' "$T/p2"
	diff "$T/p2" "$T/o2"
}

@test "skylake without binaries: exit 1, gaps name the missing images, valid MTEV" {
	run "$BIN/mt-decode" --buildid-dir "$T/none" -o "$T/o.mt" "$SK"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q 'warning: image /lib64/ld-2.23.so (build-id a3f83cd3799ef4149d3763cee54dd18b967b7ddb): not found'
	echo "$output" | grep -q 'warning: 56 kernel images (\[kernel.kallsyms\]_text, ...) not found'
	[ "$(echo "$output" | grep -c 'ld-2.23.so')" -eq 1 ] # one warning per image
	"$BIN/mt-dump" "$T/o.mt" > "$T/o.txt"
	grep -q '^gap .*reason=no-image .*message="no memory mapped at this address: no image for /lib64/ld-2.23.so"' "$T/o.txt"
	grep -q '^gap .*message=".*no image for \[kernel.kallsyms\]_text"' "$T/o.txt"
	# every gap of the two queues is there: their offsets are inside the queue data
	[ "$(grep -c '^gap ' "$T/o.txt")" -ge 9 ]
	grep -q '^clock zero=18446744041015200657 mult=1789569706 shift=31' "$T/o.txt"
	[ "$(grep -c '^map ' "$T/o.txt")" -eq 66 ] # 56 MMAP + 10 MMAP2, all executable
	tail -1 "$T/o.txt" | grep -q '^end'
}

@test "skylake: the same recording in file mode, pipe mode and through a pipe decodes the same" {
	# piped fixture vs its file-mode conversion by perf inject: byte-identical
	cat "$SKP" | perf inject -i - -o "$T/conv.data"
	"$BIN/mt-decode" "$SKP" > "$T/a.mt" 2>/dev/null || [ $? -eq 1 ]
	"$BIN/mt-decode" "$T/conv.data" > "$T/b.mt" 2>/dev/null || [ $? -eq 1 ]
	cmp "$T/a.mt" "$T/b.mt"
	# and read from a real pipe
	cat "$SKP" | "$BIN/mt-decode" > "$T/c.mt" 2>/dev/null || [ $? -eq 1 ]
	cmp "$T/a.mt" "$T/c.mt"
	# file fixture vs perf inject's pipe-mode rendering, which carries no
	# BUILD_ID feature and this machine's CPUID instead of the recording's:
	# identical but for the maps' build-ids, given the cpu
	perf inject -i "$SK" -o - > "$T/conv.pipe"
	"$BIN/mt-decode" --cpu 6/78/3 "$SK" 2>/dev/null | "$BIN/mt-dump" | sed 's/ build_id=[0-9a-f-]*//' > "$T/d.txt"
	cat "$T/conv.pipe" | "$BIN/mt-decode" --cpu 6/78/3 2>/dev/null | "$BIN/mt-dump" | sed 's/ build_id=[0-9a-f-]*//' > "$T/e.txt"
	[ "$(grep -c '^gap' "$T/d.txt")" -ge 9 ]
	diff "$T/d.txt" "$T/e.txt"
	cat "$SK" | "$BIN/mt-decode" 2>/dev/null | cmp - <("$BIN/mt-decode" "$SK" 2>/dev/null)
}

# FILE EXIT REGEX: one line on stderr matching REGEX, exit EXIT, never a crash
check_corrupt() {
	run timeout 20 "$BIN/mt-decode" --no-images -o "$T/out.mt" "$BATS_TEST_DIRNAME/corrupt/decode-$1.data"
	echo "$1: status $status: $output"
	[ "$status" -eq "$2" ]
	[ "${#lines[@]}" -ge 1 ]
	echo "$output" | grep -Eq "$3"
	if [ "$2" -eq 2 ]; then
		[ "${#lines[@]}" -eq 1 ]
		echo "$output" | grep -q '^mt-decode: fatal: '
		[ ! -e "$T/out.mt" ]
	else
		"$BIN/mt-dump" "$T/out.mt" > /dev/null # complete, valid MTEV
	fi
	rm -f "$T/out.mt"
}

@test "corrupt perf.data: one clear line, documented exit code, no crash" {
	check_corrupt empty 2 'truncated'
	check_corrupt header-cut 2 'truncated'
	check_corrupt bad-magic 2 'not a perf.data file'
	check_corrupt other-endian 2 'other byte order'
	check_corrupt attr-size-zero 2 'impossible record or section size'
	check_corrupt zero-record-size 2 'impossible record or section size at offset 0x'
	check_corrupt huge-record-size 2 'impossible record or section size at offset 0x'
	check_corrupt auxtrace-past-end 2 'impossible record or section size at offset 0x29c0'
	check_corrupt data-offset-past-end 2 'truncated'
	check_corrupt truncated 2 'ends inside the AUXTRACE data at offset 0x29c0 \(4096 of 12240 bytes'
	# a killed recorder: refused unless --partial, which decodes what is there
	run timeout 20 "$BIN/mt-decode" --partial --no-images -o "$T/out.mt" "$BATS_TEST_DIRNAME/corrupt/decode-truncated.data"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q 'ends inside the AUXTRACE data at offset 0x29c0: 4096 of 12240 bytes'
	"$BIN/mt-dump" "$T/out.mt" > /dev/null
}

@test "garbage PT: decode errors become gaps, exit 1, no crash" {
	for f in garbage-pt all-garbage-pt; do
		run timeout 20 "$BIN/mt-decode" --no-images -o "$T/g.mt" "$BATS_TEST_DIRNAME/corrupt/decode-$f.data"
		echo "$f: $status $output"
		[ "$status" -le 1 ]
		"$BIN/mt-dump" "$T/g.mt" > "$T/g.txt"
		tail -1 "$T/g.txt" | grep -q '^end'
	done
	run "$BIN/mt-decode" --no-images -o "$T/g.mt" "$BATS_TEST_DIRNAME/corrupt/decode-garbage-pt.data"
	[ "$status" -eq 1 ]
	grep -q '^gap .*reason=decode-error' <("$BIN/mt-dump" "$T/g.mt")
}

@test "mt-decode --help, usage errors, terminal refusal" {
	run "$BIN/mt-decode" --help
	[ "$status" -eq 0 ]
	echo "$output" | grep -q 'Exit status: 0 ok; 1'
	run "$BIN/mt-decode" --bogus
	[ "$status" -eq 2 ]
	run "$BIN/mt-decode" --image foo@0x1000
	[ "$status" -eq 2 ]
	run "$BIN/mt-decode" --pt x --image nonsense
	[ "$status" -eq 2 ]
	run "$BIN/mt-decode" "$T/does-not-exist"
	[ "$status" -eq 2 ]
	echo "$output" | grep -q 'fatal: unable to open'
}

# mt-dump -k map,sample on stdin: samples with user-space ips made
# map-relative (ip - start + pgoff), which is how perf script prints them
relative_samples() {
	local nm=0 kind rest pid ips head out v ip i
	local -a mp ms ml mo
	while read -r kind rest; do
		if [ "$kind" = map ]; then
			eval "$(echo "$rest" | sed -n 's/^pid=\([0-9]*\) time=[0-9]* start=\(0x[0-9a-f]*\) len=\(0x[0-9a-f]*\) pgoff=\(0x[0-9a-f]*\) .*/mp[$nm]=\1 ms[$nm]=\2 ml[$nm]=\3 mo[$nm]=\4/p')"
			nm=$((nm + 1))
			continue
		fi
		pid=${rest#pid=}; pid=${pid%% *}
		ips=${rest##*ips=}; head=${rest% ips=*}
		out=""
		for ip in ${ips//,/ }; do
			v=$ip
			case $ip in 0xffff*) ;; *)
				for ((i = nm - 1; i >= 0; i--)); do
					if [ "${mp[$i]}" = "$pid" ] && ((ip >= ms[i] && ip < ms[i] + ml[i])); then
						printf -v v '0x%x' $((ip - ms[i] + mo[i]))
						break
					fi
				done ;;
			esac
			out="$out${out:+,}$v"
		done
		echo "sample $head ips=$out"
	done
}

# perf script -F pid,tid,time,ip,dso --ns on stdin -> the user callchain of
# each sample as mt-decode must write it.  perf's own attribution decides:
# kernel frames (dso [kernel.kallsyms] or a [module]) are not the user stack;
# after the user leaf, the stack ends at the first entry in no executable
# map (dso [unknown]: 0, the upper half, stack or data words: the kernel's
# frame-pointer walk went on through code without frame pointers).  Samples
# left with no user frame are dropped.
perf_user_samples() {
	awk '
	function flush() { if (h != "" && ips != "") print h " ips=" ips; h = "" }
	/^ *[0-9]+\/[0-9]+ / { flush(); split($1, a, "/"); t = $2; sub(":", "", t); sub("\\.", "", t); sub("^0+", "", t)
		h = "sample pid=" a[1] " tid=" a[2] " time=" t; ips = ""; stop = 0; next }
	/^[ \t]+[0-9a-f]+ \(/ {
		dso = $2
		if (dso ~ /^\(\[/ && dso !~ /^\(\[(unknown|vdso|vsyscall|uprobes)\]\)$/) next
		upper = $1 == "0" || (length($1) == 16 && $1 ~ /^[89a-f]/)
		if (ips == "" && upper) next # kernel context, not in a kernel map
		if (stop || (ips != "" && dso == "([unknown])") || upper) { stop = 1; next }
		ips = ips (ips == "" ? "" : ",") "0x" $1; next }
	END { flush() }'
}

@test "sampling: perf record -e cpu-clock --call-graph fp: samples are perf script's user callchains (no context markers, kernel frames or broken-walk entries)" {
	cat > "$T/spin.c" <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
__attribute__((noinline)) static long leaf(long x) { long s = 0; for (long i = 0; i < x; i++) s += i ^ (s >> 3); return s; }
__attribute__((noinline)) static long mid(long x) { return leaf(x) + leaf(x / 2); }
/* each part runs for a CPU-time budget, not a count of iterations: a
 * cpu-clock sample comes every 100 us of the task's CPU time, so the number
 * of samples does not depend on how fast the machine is */
static double cpu(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec / 1e9; }
__attribute__((noinline)) static long top(long x) { long s = 0; double end = cpu() + 0.2; for (int k = 0; k < 100 || cpu() < end; k++) s += mid(x + (k & 1)); return s; }
/* kernel frames: samples taken inside write(2) */
__attribute__((noinline)) static long sys(int fd) { static char buf[65536]; long s = 0; double end = cpu() + 0.05; for (int k = 0; k < 2000 || cpu() < end; k++) s += write(fd, buf, sizeof buf); return s; }
/* code without frame pointers: rbp points at words that are no frame, as in
 * libc; the kernel's walk stores each "return address" it finds there */
static unsigned long fz[2] = {0, 0x401234};                              /* next 0, returns to 0x401234 */
static unsigned long fa[2] = {(unsigned long)fz, 0};                     /* returns to 0, then fz */
static unsigned long fk[2] = {(unsigned long)fz, 0xf21e4e1e00bb8f10ul};  /* upper half, then fz */
static unsigned long fd[2] = {(unsigned long)fz, (unsigned long)fd};     /* a data address, then fz */
__attribute__((noinline)) static long spin_on(unsigned long *fp, long n)
{
	__asm__ volatile("mov %%rbp, %%r12\n\tmov %1, %%rbp\n"
			 "1:\tsub $1, %0\n\tjnz 1b\n\tmov %%r12, %%rbp"
			 : "+r"(n) : "r"(fp) : "r12", "cc");
	return n;
}
int main(void)
{
	int f = open("/dev/null", O_WRONLY);
	printf("%016lx\n", (unsigned long)fd);
	fflush(stdout);
	long n[3] = {0, 0, 0};
	unsigned long *fp[3] = {fa, fk, fd};
	for (int i = 0; i < 3; i++)
		for (double end = cpu() + 0.03; cpu() < end;)
			n[i] += spin_on(fp[i], 5000000);
	printf("%ld %ld %ld %ld %ld\n", top(20000), sys(f), n[0], n[1], n[2]);
	return 0;
}
C
	gcc -O1 -fno-omit-frame-pointer -o "$T/spin" "$T/spin.c"
	# cpu-clock without :u: kernel callchains too (root, or perf_event_paranoid < 2)
	perf record -q -e cpu-clock -c 100000 --call-graph fp -o "$T/perf.data" "$T/spin" > "$T/out.txt" 2> /dev/null
	data=$(head -1 "$T/out.txt")
	# the raw chains (perf's dump) have what this test is about: the
	# PERF_CONTEXT_KERNEL and _USER markers, kernel frames, and the broken
	# walks' 0, upper-half and data entries
	perf script -D -i "$T/perf.data" 2>/dev/null | awk '/^\.\.\.\.\. +[0-9]+: [0-9a-f]+$/ { print $3 }' > "$T/raw.txt"
	[ "$(grep -c '^ffffffffffffff80$' "$T/raw.txt")" -ge 10 ]
	[ "$(grep -c '^fffffffffffffe00$' "$T/raw.txt")" -ge 100 ]
	[ "$(grep -c '^ffffffff8' "$T/raw.txt")" -ge 10 ]
	[ "$(grep -c '^0000000000000000$' "$T/raw.txt")" -ge 10 ]
	[ "$(grep -c '^f21e4e1e00bb8f10$' "$T/raw.txt")" -ge 10 ]
	[ "$(grep -c "^$data\$" "$T/raw.txt")" -ge 10 ]
	perf script -i "$T/perf.data" -F pid,tid,time,ip,dso --ns 2>/dev/null | perf_user_samples > "$T/perf.txt"
	run "$BIN/mt-decode" -o "$T/s.mt" "$T/perf.data"
	[ "$status" -eq 0 ]
	"$BIN/mt-dump" "$T/s.mt" | head -1 | grep -q 'flags=0x11' # sorted, sampling
	# the kernel's frames (recorded without :u) come first, innermost first,
	# and only above a user frame: a kernel-only chain is no sample
	"$BIN/mt-dump" -k sample "$T/s.mt" | sed -E 's/ ips=(0x[89a-f][0-9a-f]{15},)*/ ips=/' > "$T/user.txt"
	[ -z "$(grep -vE ' ips=0x[0-7]?[0-9a-f]{1,15}(,|$)' "$T/user.txt")" ]
	# after them: no marker (>= PERF_CONTEXT_MAX), kernel address, 0 or data address
	[ -z "$(grep -E "[=,]0x([89a-f][0-9a-f]{15}|0|${data#"${data%%[1-9a-f]*}"})(,|\$)" "$T/user.txt")" ]
	# (a plain bash: bats' DEBUG trap makes the per-ip loop 20x slower)
	# (perf script's user callchains: our kernel frames left out)
	"$BIN/mt-dump" -k map,sample "$T/s.mt" | sed -E 's/ ips=(0x[89a-f][0-9a-f]{15},)*/ ips=/' |
		bash -c "$(declare -f relative_samples); relative_samples" > "$T/ours.txt"
	[ "$(wc -l < "$T/perf.txt")" -ge 1000 ]
	# the program's own frames are in there: leaf, top (mid may be a tail call), main, libc
	[ "$(grep -c ',0x[0-9a-f]*,0x[0-9a-f]*,0x[0-9a-f]*' "$T/ours.txt")" -ge 10 ]
	diff "$T/perf.txt" "$T/ours.txt"
}

# ---- against mt-ptsim's truth (cached runs, see docs/ptsim.md) ----
PTSIM_CACHE="$BATS_TEST_DIRNAME/.cache/ptsim"

ptsim_dirs() { # VARIANT-REGEX: cached run dirs holding perf.data and truth.mt
	local d
	for d in "$PTSIM_CACHE"/*/*/; do
		[ -f "$d/perf.data" ] && [ -f "$d/truth.mt" ] || continue
		basename "$(dirname "$d")" | grep -Eq "$1" && echo "${d%/}"
	done
}

decode_run() { # DIR -> DIR/decode.mt (images from the run's build-id cache)
	"$BIN/mt-decode" --buildid-dir "$1/images" -o "$T/decode.mt" "$1/perf.data"
}

@test "ptsim truth: every clean, --window and --noretcomp run decodes to exactly truth.mt's branches, times included" {
	# per thread: each thread's records in order (threads interleave by
	# time in the decode, by execution in the truth)
	local n=0 d
	for d in $(ptsim_dirs '^(clean|window|noretcomp)$'); do
		run decode_run "$d"
		echo "$d: status $status $output"
		[ "$status" -eq 0 ]
		"$BIN/mt-dump" -k branch "$d/truth.mt" | sort -s -k2,2 > "$T/truth.txt"
		"$BIN/mt-dump" -k branch "$T/decode.mt" | sort -s -k2,2 > "$T/decode.txt"
		[ -s "$T/truth.txt" ]
		diff "$T/truth.txt" "$T/decode.txt" > "$T/diff" || { head -20 "$T/diff"; return 1; }
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim runs cached in $PTSIM_CACHE"
	echo "$n runs equal"
	[ "$n" -ge 30 ] # 3 variants x every test program
}

# fault_decodes: every cached fault run (overflow, drop, corrupt, truncate)
# decoded once for the tests that judge them, into
# $BATS_FILE_TMPDIR/faults/N/{dir,status,out,decode.mt}; prints the N
fault_decodes() {
	local f=$BATS_FILE_TMPDIR/faults d i=0
	if [ ! -f "$f/done" ]; then
		rm -rf "$f"
		for d in $(ptsim_dirs '^(overflow|drop|corrupt|truncate)$'); do
			i=$((i + 1))
			mkdir -p "$f/$i"
			echo "$d" > "$f/$i/dir"
			"$BIN/mt-decode" --buildid-dir "$d/images" -o "$f/$i/decode.mt" "$d/perf.data" \
				> "$f/$i/out" 2>&1 && echo 0 > "$f/$i/status" || echo $? > "$f/$i/status"
		done
		mkdir -p "$f" && touch "$f/done"
	fi
	ls "$f" | grep -v '^done$' | sort -n
}

@test "ptsim faults: a gap where each fault is; outside the gaps equal to truth.mt, times included" {
	local n=0 ok=0 d r i F=$BATS_FILE_TMPDIR/faults
	for i in $(fault_decodes); do
		d=$(cat "$F/$i/dir") status=$(cat "$F/$i/status")
		[ "$status" -eq 1 ] || { echo "$d: status $status $(cat "$F/$i/out")"; return 1; }
		"$BIN/mt-dump" -k branch "$d/truth.mt" > "$T/truth.txt"
		"$BIN/mt-dump" -k branch,gap "$F/$i/decode.mt" > "$T/decode.txt"
		# the gap is there, with the fault's reason
		case $d in
		*/overflow/*) grep -q '^gap .*reason=overflow' "$T/decode.txt" ;;
		*/truncate/*) grep -q '^gap .*reason=lost' "$T/decode.txt" ;;
		*/drop/*) grep -Eq '^gap .*reason=(lost|decode-error)' "$T/decode.txt" ;;
		*) grep -q '^gap .*reason=decode-error' "$T/decode.txt" ;;
		esac
		r=$(awk -f "$BATS_TEST_DIRNAME/lib/gapcheck.awk" "$T/truth.txt" "$T/decode.txt" | head -3 | tr '\n' ' ')
		echo "$d: $r"
		n=$((n + 1))
		case $r in ok:*) ok=$((ok + 1)) ;; esac
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim fault runs cached in $PTSIM_CACHE"
	echo "$ok of $n fault runs equal the truth outside their gaps" >&3
	[ "$ok" -eq "$n" ]
}

# branch_semantics < mt-dump -k branch,gap: every record that breaks
# formats/mtev-semantics.md (syscall, interrupt, trace-end: to 0; sysret,
# iret, trace-start: from 0 and to not 0; call/return/jump/jcc: from set (a
# call through a NULL pointer goes to 0);
# a thread's first branch and its next after a trace-end are trace-starts, after a gap
# a trace-start or (tracing stopped before anything good came) a trace-end;
# a gap's end, when not its begin, is the time of the thread's next branch;
# a sysret/iret only right after its syscall/interrupt; each thread's
# records in time order, a gap lasting from its begin to its end);
# prints "checked N far M" last
branch_semantics() {
	awk '{ ty = ""; fr = ""; to = ""; tid = ""; tm = ""; gb = ""; ge = ""
		for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "type") ty = kv[2]; else if (kv[1] == "from") fr = kv[2]; else if (kv[1] == "to") to = kv[2]; else if (kv[1] == "tid") tid = kv[2]; else if (kv[1] == "time") tm = kv[2]; else if (kv[1] == "begin") gb = kv[2]; else if (kv[1] == "end") ge = kv[2] }
		# each thread in time order (a gap from its begin to its end;
		# rounding to doubles can hide a step back, never invent one)
		if ($1 == "gap") tm = gb
		if ((tid in last) && tm + 0 < last[tid] + 0) print "bad (time goes back from " last[tid] "): " $0
		last[tid] = $1 == "gap" ? ge : tm
		# the records of a thread begin with a trace-start (or a gap)
		if (!(tid in started)) { started[tid] = 1; restart[tid] = 1 }
		if ($1 == "gap") { restart[tid] = 2; prev[tid] = ""; gend[tid] = ge != gb ? ge : ""; next }
		if (restart[tid] == 1 && ty != "trace-start") print "bad (no trace-start first or after a trace-end): " $0
		if (restart[tid] == 2 && ty !~ /^(trace-start|trace-end)$/) print "bad (no trace-start after a gap): " $0
		if (gend[tid] != "" && tm != gend[tid]) print "bad (a gap ends at " gend[tid] ", the next branch is at " tm "): " $0
		gend[tid] = ""
		restart[tid] = ty == "trace-end"
		# a sysret (iret) only right after its syscall (interrupt), and
		# after those only their return, a trace-end or a trace-start
		if (ty == "sysret" && prev[tid] != "syscall") print "bad (sysret not after a syscall): " $0
		if (ty == "iret" && prev[tid] != "interrupt") print "bad (iret not after an interrupt): " $0
		if (prev[tid] == "syscall" && ty !~ /^(sysret|trace-end|trace-start)$/) print "bad (" ty " after a syscall): " $0
		if (prev[tid] == "interrupt" && ty !~ /^(iret|trace-end|trace-start)$/) print "bad (" ty " after an interrupt): " $0
		prev[tid] = ty
		n++
		if (ty ~ /^(syscall|interrupt|sysret|iret)$/) far++
		if (ty ~ /^(syscall|interrupt|trace-end)$/ && to != "0x0") print "bad: " $0
		else if (ty ~ /^(sysret|iret|trace-start)$/ && (fr != "0x0" || to == "0x0")) print "bad: " $0
		else if (ty ~ /^(call|return|jump|jcc)$/ && fr == "0x0") print "bad: " $0
		else if (ty == "syscall" && fr == "0x0") print "bad: " $0 }
		END { print "checked " n + 0 " far " far + 0 }'
}

@test "damaged traces keep the branch semantics: syscall/interrupt to 0, sysret/iret from 0 and only right after their syscall/interrupt, a trace-start after each gap (or a trace-end), a gap ending at the next branch, time order (every record of every cached fault run and of the fuzzer-found PT)" {
	local n=0 far=0 d f out i F=$BATS_FILE_TMPDIR/faults
	for i in $(fault_decodes); do
		d=$(cat "$F/$i/dir") status=$(cat "$F/$i/status")
		[ "$status" -le 1 ] || { echo "$d: $(cat "$F/$i/out")"; return 1; }
		out=$("$BIN/mt-dump" -k branch,gap "$F/$i/decode.mt" | branch_semantics)
		[ -z "$(grep '^bad' <<<"$out")" ] || { echo "$d:"; grep '^bad' <<<"$out" | head -5; return 1; }
		far=$((far + $(sed -n 's/^checked [0-9]* far //p' <<<"$out")))
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim fault runs cached in $PTSIM_CACHE"
	[ "$n" -ge 12 ]
	[ "$far" -gt 0 ] # syscalls and returns from them were checked
	# a trace that goes on through a far branch (int1 in the middle of an
	# instruction, then a plain TIP): found by fuzz_ptdecode
	ROOT="$BATS_TEST_DIRNAME/.."
	[ -f "$MT_BUILD/programs/recursion" ] || skip "$MT_BUILD/programs/recursion is not built"
	for f in "$BATS_TEST_DIRNAME"/corrupt/fuzz-ptdecode-*.pt; do
		# found against the image the fuzz targets map: fuzz/ptprog.c
		# since it exists (*-ptprog.pt), the recursion program before
		img=$MT_BUILD/programs/recursion:0x1000:0x78000@0x401000
		case $f in *-ptprog.pt) img=$MT_BUILD/fuzz/ptprog:0x1000@0x401000 ;; esac
		[ -f "${img%%:*}" ] || { echo "${img%%:*} is not built"; return 1; }
		run timeout 120 "$BIN/mt-decode" -o "$T/raw.mt" --cpu 6/94/3 --image "$img" --pt "$f"
		[ "$status" -le 1 ]
		out=$("$BIN/mt-dump" -k branch,gap "$T/raw.mt" | branch_semantics)
		[ -z "$(grep '^bad' <<<"$out")" ] || { echo "$f:"; grep '^bad' <<<"$out" | head -5; return 1; }
	done
}

@test "raw PT (ptxed style): --pt with --image FILE:OFFSET:SIZE@VADDR gives truth.mt's branches" {
	local d args
	d=$(ptsim_dirs '^clean$' | head -1)
	[ -n "$d" ] || skip "no mt-ptsim runs cached in $PTSIM_CACHE"
	raw_pt "$d" "$T/raw.pt"
	args=$(image_args "$d")
	run "$BIN/mt-decode" --pt "$T/raw.pt" $args --cpu 6/106/6 -o "$T/raw.mt"
	[ "$status" -eq 0 ]
	# raw mode knows no threads and no time conversion: compare the rest
	"$BIN/mt-dump" -k branch "$T/raw.mt" | sed 's/ time=[0-9]*//; s/tid=[0-9]* //' > "$T/a"
	"$BIN/mt-dump" -k branch "$d/truth.mt" | sed 's/ time=[0-9]*//; s/tid=[0-9]* //' > "$T/b"
	[ "$(wc -l < "$T/b")" -gt 1000 ]
	diff "$T/a" "$T/b"
	"$BIN/mt-dump" "$T/raw.mt" | grep -q '^clock zero=0 mult=1 shift=0'
}

@test "on a terminal mt-decode shows how much of the recording is written (plain and --stitch); nothing when stderr is not a terminal" {
	command -v script > /dev/null || skip "script(1) (util-linux) gives the terminal"
	local b="$MT_BUILD/programs/fnptr"
	[ -x "$b" ] || skip "$b is not built"
	# 1 M instructions: ~145 k branch records, so the merge reports (every
	# 256th step; the first report is shown at once)
	"$BIN/mt-ptgen" -n 1M --seed 7 --no-spans -o "$T/g" "$b" >/dev/null
	for s in "" --stitch; do
		script -qec "'$BIN/mt-decode' $s --buildid-dir '$T/g/images' -o '$T/o.mt' '$T/g/perf.data'" "$T/tty" > /dev/null
		tr '\r' '\n' < "$T/tty" | grep -q '^mt-decode: *[0-9]*% of the recording ([0-9.]* of [0-9.]* m*s)$'
		[ -s "$T/o.mt" ]
		"$BIN/mt-decode" $s --buildid-dir "$T/g/images" -o "$T/o2.mt" "$T/g/perf.data" 2> "$T/err"
		[ ! -s "$T/err" ]
		cmp "$T/o.mt" "$T/o2.mt"
	done
}
