#!/usr/bin/env bats
# Sampled traces without Intel PT: whole stacks and readable names (issue 16,
# items 3, 4, 8, 9).  Stacks are judged against mt-ptsim's truth of the same
# deterministic program; names against the files' own symbol tables.

# The deterministic program, built static (the same addresses in every run),
# and mt-ptsim's truth of one round of it (single-stepped: ~20 s, cached by
# the binary's hash in tests/.cache/stacks/).
setup_file() {
	local root="$BATS_TEST_DIRNAME/.." p="$BATS_FILE_TMPDIR/stk"
	cc -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -static \
		-o "$p" "$root/tests/programs/stacks/stk.c"
	local h c
	h=$(sha1sum "$p" | cut -c1-16)
	c="$root/tests/.cache/stacks/$h"
	if [ ! -s "$c/truth.txt" ]; then
		mkdir -p "$c"
		"$root/bin/mt-ptsim" -o "$c/pt" -- "$p" 1 1 > /dev/null 2>&1
		"$root/bin/mt-dump" "$c/pt/truth-spans.mt" > "$c/truth.tmp"
		mv "$c/truth.tmp" "$c/truth.txt"
		rm -rf "$c/pt"
	fi
	cp "$c/truth.txt" "$BATS_FILE_TMPDIR/truth.txt"
}

setup() {
	ROOT="$BATS_TEST_DIRNAME/.."
	BIN="$ROOT/bin"
	T="$BATS_TEST_TMPDIR"
	LIBC=/usr/lib/x86_64-linux-gnu/libc.so.6
}

# map_of FILE PID START: a map record of FILE's executable segment, laid out
# so that runtime = START + vaddr.
map_of() {
	local f=$1 pid=$2 base=$3 off va sz
	read -r off va sz < <(readelf -lW "$f" | awk '$1 == "LOAD" && / R E / { print $2, $3, $5; exit }')
	printf 'map pid=%s time=0 start=0x%x len=0x%x pgoff=0x%x prot=0x5 build_id=- path="%s"\n' \
		"$pid" $((base + va)) $((sz)) $((off)) "${4:-$f}"
}

# span_at TID BEGIN ADDR
span_at() {
	printf 'span tid=%s depth=0 begin=%s end=%s func=0x%x callsite=0x0 flags=0 name=""\n' "$1" "$2" $(($2 + 5)) "$3"
}

names() { "$BIN/mt-dump" -k span "$1" | sed -n 's/.* name="\(\([^"\\]\|\\.\)*\)".*/\1/p'; }

dynaddr() { printf '0x%x\n' "0x$(nm -D "$1" | awk -v s="$2" '{ n = $3; sub(/@.*/, "", n) } n == s { print $1; exit }')"; }

# symz ARGS...: mt-symbolize, where 1 (degraded: --no-symbolizer, a stripped
# file) is expected too
symz() { "$BIN/mt-symbolize" "$@" || [ $? -eq 1 ]; }

# ---- item 8: triggers on libc functions ----

@test "a trigger on a libc function (write, malloc, close, fflush, qsort) resolves to the exported function" {
	cat > "$T/p.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static int cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }
int main(void)
{
	int v[3] = {3, 1, 2};
	char *p = malloc(64);
	qsort(v, 3, sizeof v[0], cmp);
	if (write(1, "x\n", 2) != 2)
		return 1;
	fflush(stdout);
	close(0);
	free(p);
	return 0;
}
C
	cc -O1 -o "$T/p" "$T/p.c"
	# resolved to the exported function in the libc the program mapped
	# (whether the hit then arrives is the trigger's business: a uprobe on
	# malloc also fires in every other process of the machine)
	for f in write malloc close fflush qsort; do
		run "$BIN/mt-capture" run -v --mode sample -o "$T/d-$f" --trigger "$f" -- "$T/p"
		echo "$f: $output"
		[ "$status" -eq 0 ]
		want=$(dynaddr "$LIBC" "$f")
		[ -n "$want" ]
		echo "$output" | grep -q "trigger: $f at 0x[0-9a-f]* ($LIBC+$want)"
	done
}

# ---- item 9: readable names ----

@test "one address, one name: a libc alias is named by its exported name, with and without llvm-symbolizer" {
	base=$((0x7f0000000000))
	setb=$(dynaddr "$LIBC" _IO_setb)
	mal=$(dynaddr "$LIBC" malloc)
	{
		echo 'process pid=7 name="x"'
		echo 'thread pid=7 tid=7 time=0 name="x"'
		map_of "$LIBC" 7 $base
		span_at 7 10 $((base + setb))
		span_at 7 20 $((base + mal))
	} > "$T/in.txt"
	"$BIN/mt-undump" "$T/in.txt" > "$T/in.mt"
	symz --no-cache --no-symbolizer "$T/in.mt" > "$T/a.mt"
	symz --no-cache "$T/in.mt" > "$T/b.mt"
	names "$T/a.mt" > "$T/a"
	names "$T/b.mt" > "$T/b"
	cat "$T/a" "$T/b"
	printf '_IO_setb\nmalloc\n' > "$T/want"
	diff "$T/want" "$T/a"
	diff "$T/want" "$T/b"
}

@test "a stripped binary found in a build-id cache is named after its file, not the cache's folder" {
	exe=/usr/bin/mawk
	[ -x "$exe" ] || exe=$(command -v gzip)
	bid=$(readelf -n "$exe" | sed -n 's/.*Build ID: //p')
	[ -n "$bid" ]
	nm "$exe" 2>&1 | grep -q "no symbols"
	mkdir -p "$T/img/.build-id/${bid:0:2}/${bid:2}"
	cp "$exe" "$T/img/.build-id/${bid:0:2}/${bid:2}/elf"
	# the first function start of its .eh_frame that .dynsym does not name
	base=$((0x555500000000))
	{
		echo 'process pid=7 name="x"'
		echo 'thread pid=7 tid=7 time=0 name="x"'
		map_of "$exe" 7 $base | sed "s/build_id=-/build_id=$bid/"
	} > "$T/in.txt"
	# 12 bytes into the tenth function its .eh_frame describes
	fde=$(readelf --debug-dump=frames "$exe" | sed -n 's/.* FDE .*pc=\([0-9a-f]*\)\.\..*/\1/p' | sed -n 10p)
	[ -n "$fde" ]
	span_at 7 10 $((base + 0x$fde + 12)) >> "$T/in.txt"
	"$BIN/mt-undump" "$T/in.txt" > "$T/in.mt"
	MT_DEBUGINFO_DIR= symz --no-cache --no-symbolizer --images "$T/img" "$T/in.mt" > "$T/o.mt"
	names "$T/o.mt" | tee "$T/n"
	name=$(basename "$exe")
	grep -q "^$name+0x[0-9a-f]*" "$T/n"
	! grep -q "^\[${bid:0:2}+" "$T/n"
}

@test "Rust names: legacy (hash, \$LT\$ escapes) and v0 both demangled" {
	rustc=$(command -v rustc || echo "$HOME/.cargo/bin/rustc")
	[ -x "$rustc" ] || skip "no rustc"
	cat > "$T/r.rs" <<'R'
struct W<T>(T);
impl<T: Copy + Into<u64>> W<T> {
    #[inline(never)]
    fn spin(&self, n: u64) -> u64 { let mut a = 0u64; for i in 0..n { a = a.wrapping_add(i ^ self.0.into()); std::hint::black_box(a); } a }
}
fn main() { let w = W(7u32); println!("{}", w.spin(std::hint::black_box(1000))); }
R
	"$rustc" -O -g -o "$T/r" "$T/r.rs"
	leg=$(nm "$T/r" | awk '$3 ~ /^_ZN.*4spin17h[0-9a-f]*E$/ { print "0x" $1; exit }')
	v0=$(nm "$T/r" | awk '$2 ~ /^[tT]$/ && $3 ~ /^_R/ { print "0x" $1; exit }')
	[ -n "$leg" ]
	[ -n "$v0" ]
	base=$((0x555500000000))
	{
		echo 'process pid=7 name="r"'
		echo 'thread pid=7 tid=7 time=0 name="r"'
		map_of "$T/r" 7 $base
		span_at 7 10 $((base + leg))
		span_at 7 20 $((base + v0))
	} > "$T/in.txt"
	"$BIN/mt-undump" "$T/in.txt" > "$T/in.mt"
	symz --no-cache "$T/in.mt" > "$T/o.mt"
	names "$T/o.mt" | tee "$T/n"
	[ "$(sed -n 1p "$T/n")" = "r::W<T>::spin" ]
	# v0: a readable path, no mangled prefix, no escapes
	sed -n 2p "$T/n" | grep -q '::'
	! grep -q '^_R\|\$LT\$\|::h[0-9a-f]\{16\}$' "$T/n"
	# the ELF symbol table fallback: legacy names too
	symz --no-cache --no-symbolizer "$T/in.mt" > "$T/o.mt"
	[ "$(names "$T/o.mt" | sed -n 1p)" = "r::W<T>::spin" ]
	# and v0 names, as llvm-cxxfilt demangles them: every v0 function of a
	# program built with -C symbol-mangling-version=v0 that is alone at its
	# address (generics, closures, shims, trait impls, const arguments,
	# punycode)
	cat > "$T/v.rs" <<'R'
#![allow(uncommon_codepoints)]
use std::hint::black_box as bb;
trait Tr<'a> { type Out; fn t(&self) -> u8; }
impl<'a> Tr<'a> for u8 { type Out = &'a str; #[inline(never)] fn t(&self) -> u8 { bb(*self) } }
#[inline(never)] fn grüße<const C: char, const B: bool, const I: i64>(x: u32) -> u32 { bb(x) + C as u32 + B as u32 + I as u32 }
#[inline(never)] fn dynb(x: &dyn for<'a> Tr<'a, Out = &'a str>, y: Box<dyn Iterator<Item = (i8, u128)> + Send>) -> u8 { bb(x.t()) + bb(y.count() as u8) }
struct S<const N: usize, T>([T; N]);
impl<const N: usize, T: Copy> S<N, T> { #[inline(never)] fn get(&self) -> T { bb(self.0[0]) } }
fn main() {
    println!("{} {}", grüße::<'ü', true, -5>(bb(2)), grüße::<'\'', false, 1234>(bb(2)));
    println!("{}", dynb(&5u8, Box::new(vec![(1i8, 2u128)].into_iter())));
    println!("{}", S::<3, i128>([1, 2, 3]).get());
}
R
	"$rustc" -O -C symbol-mangling-version=v0 -o "$T/v" "$T/v.rs"
	nm "$T/v" | awk '$2 ~ /^[tTwW]$/ { n[$1]++; s[$1] = $3 } END { for (a in n) if (n[a] == 1 && s[a] ~ /^_R/) print a, s[a] }' |
		sort > "$T/v0"
	[ "$(wc -l < "$T/v0")" -ge 100 ]
	{
		echo 'process pid=7 name="v"'
		echo 'thread pid=7 tid=7 time=0 name="v"'
		map_of "$T/v" 7 $base
		t=10
		while read -r a _; do
			span_at 7 $t $((base + 0x$a))
			t=$((t + 10))
		done < "$T/v0"
	} > "$T/in.txt"
	"$BIN/mt-undump" "$T/in.txt" > "$T/in.mt"
	symz --no-cache --no-symbolizer "$T/in.mt" > "$T/o.mt"
	names "$T/o.mt" > "$T/got"
	# (mt-dump writes \\, \" and the bytes outside ASCII as \xNN)
	awk '{ print $2 }' "$T/v0" | llvm-cxxfilt |
		LC_ALL=C perl -pe 's/([\\"])/\\$1/g; s/([\x80-\xff])/sprintf("\\x%02x", ord($1))/ge' > "$T/want"
	diff "$T/want" "$T/got"
	grep -qxF "v::gr\\xc3\\xbc\\xc3\\x9fe::<'\\\\u{fc}', true, -5>" "$T/got"
	grep -qx '<u8 as v::Tr>::t' "$T/got"
	grep -qx '<v::S<3, i128>>::get' "$T/got"
}

@test "a JIT function of a perf map is one name, whatever the sampled address inside it" {
	mkdir -p "$T/pm"
	printf '7f0000001000 200 jit_fn\n7f0000001200 100 _ZN3foo3barEv\n' > "$T/pm/perf-9.map"
	{
		echo 'process pid=9 name="j"'
		echo 'thread pid=9 tid=9 time=0 name="j"'
		span_at 9 10 $((0x7f0000001000))
		span_at 9 20 $((0x7f00000010f8))
		span_at 9 30 $((0x7f0000001208))
	} > "$T/in.txt"
	"$BIN/mt-undump" "$T/in.txt" > "$T/in.mt"
	symz --no-cache --perf-map-dir "$T/pm" "$T/in.mt" 2>/dev/null > "$T/o.mt" || true
	names "$T/o.mt" | tee "$T/n"
	printf 'jit_fn\njit_fn\nfoo::bar()\n' | diff - "$T/n"
}

# ---- items 3 and 4: whole stacks, judged against mt-ptsim's truth ----

STK() { echo "$BATS_FILE_TMPDIR/stk"; }
main_addr() { printf '0x%x\n' "0x$(nm "$(STK)" | awk '$3 == "main" { print $1 }')"; }

# judge DIR [segment options]: decode DIR/perf.data, segment, compare with
# the truth; prints "samples full from_main with_main with_main_ok"
judge() {
	local d=$1
	shift
	"$BIN/mt-decode" "$d/perf.data" > "$d/decode.mt" 2> /dev/null
	"$BIN/mt-segment" "$@" -i "$d/decode.mt" > "$d/seg.mt"
	"$BIN/mt-dump" -k sample "$d/decode.mt" > "$d/s.txt"
	"$BIN/mt-dump" -k span "$d/seg.mt" > "$d/sp.txt"
	awk -v main="$(main_addr)" -f "$ROOT/tests/lib/stackcheck.awk" \
		"$BATS_FILE_TMPDIR/truth.txt" "$d/s.txt" "$d/sp.txt"
}

# at_least A B PCT: A >= PCT % of B (and B > 0)
at_least() { [ "$2" -gt 0 ] && [ $(($1 * 100)) -ge $(($2 * $3)) ]; }

@test "fp: a frameless leaf's hidden caller is restored; stacks under main agree with the truth (>= 99 %)" {
	mkdir -p "$T/fp"
	perf record -q -e cpu-clock:u -F 5000 --call-graph fp -o "$T/fp/perf.data" -- "$(STK)" 20000 0 2> /dev/null
	read -r n full0 fm wm before < <(judge "$T/fp" --no-sample-repair)
	read -r n full fm wm after < <(judge "$T/fp")
	echo "fp: $n samples, $wm under main: $before agree as recorded, $after repaired;" \
		"whole true stack: $full0 as recorded, $full repaired (glibc's frames under main" \
		"have no frame pointers: docs/sampling.md)"
	[ "$n" -ge 100 ]
	at_least "$wm" "$n" 90
	at_least "$after" "$wm" 99
	# most samples are in spin, whose caller the walk skips: it was wrong before
	[ "$before" -lt $((wm * 3 / 4)) ]
	# the restored frames are marked
	grep -q 'flags=.*stitched' "$T/fp/sp.txt"
}

# judge_dec DIR DECODE-OPTIONS... -- SEGMENT-OPTIONS...: judge with options
# for mt-decode too
judge_dec() {
	local d=$1 o=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		o+=("$1")
		shift
	done
	shift
	"$BIN/mt-decode" "${o[@]}" "$d/perf.data" > "$d/decode.mt" 2> /dev/null
	"$BIN/mt-segment" "$@" -i "$d/decode.mt" > "$d/seg.mt"
	"$BIN/mt-dump" -k sample "$d/decode.mt" > "$d/s.txt"
	"$BIN/mt-dump" -k span "$d/seg.mt" > "$d/sp.txt"
	awk -v main="$(main_addr)" -f "$ROOT/tests/lib/stackcheck.awk" \
		"$BATS_FILE_TMPDIR/truth.txt" "$d/s.txt" "$d/sp.txt"
}

@test "fp: each thread's root frames, from a stack-copy stream beside, complete the stacks: >= 99 % whole (no qsort)" {
	# mt-capture -g fp records a sparse stream of stack copies beside the
	# fp samples; mt-decode unwinds them to the thread's root (_start under
	# glibc's start code, which keeps no frame pointer) and joins that root
	# chain to the fp chains at the same return address
	run "$BIN/mt-capture" run --mode sample -g fp -t none -o "$T/r" -- "$(STK)" 60000 0
	echo "$output"
	[ "$status" -eq 0 ]
	read -r n full0 fm0 wm0 ok0 < <(judge_dec "$T/r" --no-root-join -- )
	read -r n full fm wm ok < <(judge_dec "$T/r" -- )
	echo "fp + root stream: $n samples, whole true stack: $full0 without the root join, $full with it"
	[ "$n" -ge 500 ]
	# before: no fp walk reaches _start
	[ "$full0" -lt $((n / 100)) ]
	at_least "$full" "$n" 99
	# the joined frames are marked (callchain: from the thread's root chain)
	grep -q '^span .* depth=0 .*callchain' "$T/r/sp.txt"
	# mt-decode says how many whole root stacks it learned from
	"$BIN/mt-decode" -s "$T/r/perf.data" 2>&1 > /dev/null | tee "$T/r/st"
	rw=$(sed -n 's/.* roots_whole=\([0-9]*\).*/\1/p' "$T/r/st")
	[ "${rw:-0}" -ge 2 ]
}

@test "fp + root stream through qsort: the stacks that show main are whole; none inside qsort is joined by a guess" {
	run "$BIN/mt-capture" run --mode sample -g fp -t none -o "$T/q" -- "$(STK)" 20000 1
	[ "$status" -eq 0 ]
	read -r n full fm wm ok < <(judge_dec "$T/q" -- )
	echo "fp + root stream, qsort: $n samples, $full with the whole true stack, $wm show main" \
		"(the others are inside qsort, below msort_with_tmp: docs/sampling.md)"
	[ "$n" -ge 500 ]
	[ "$wm" -gt 0 ]
	# (a few in qsort's own code before it changes rbp show main but miss
	# qsort: the walk skips two frameless frames, rule 2 restores one)
	at_least "$full" "$wm" 97
	# the comparator's samples: msort_with_tmp keeps no frame pointer and
	# recurses, so no root chain is joined under it (at depth 0 it stays)
	ms=$(printf '0x%x' "0x$(nm "$(STK)" | awk '$3 ~ /^msort_with_tmp/ { print $1; exit }')")
	grep -q "^span .* depth=0 .* func=$ms " "$T/q/sp.txt"
	! grep -q "^span .* func=$ms .*callchain" "$T/q/sp.txt"
}

@test "fp + root stream: a thread's stacks reach clone3 (libc's start_thread keeps no frame pointer), the main thread's _start" {
	cat > "$T/thr.c" <<'C'
#include <pthread.h>
static volatile unsigned long sink;
__attribute__((noinline)) static void work(int n) { for (int i = 0; i < n; i++) sink += i; }
__attribute__((noinline)) static void level2(void) { for (int i = 0; i < 6000; i++) work(20000); }
static void *run(void *a) { (void)a; level2(); return 0; }
int main(void)
{
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], 0, run, 0);
	level2();
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], 0);
	return 0;
}
C
	cc -O1 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -pthread -o "$T/thr" "$T/thr.c"
	run "$BIN/mt-capture" run --mode sample -g fp -t none -o "$T/t" -- "$T/thr"
	[ "$status" -eq 0 ]
	"$BIN/mt-decode" "$T/t/perf.data" > "$T/t/d.mt" 2> /dev/null
	"$BIN/mt-segment" -i "$T/t/d.mt" > "$T/t/s.mt"
	symz --no-cache "$T/t/s.mt" > "$T/t/y.mt"
	"$BIN/mt-dump" -k span "$T/t/y.mt" > "$T/t/sp.txt"
	pid=$("$BIN/mt-dump" -k process "$T/t/d.mt" | sed -n 's/.* pid=\([0-9]*\) name="thr".*/\1/p' | head -1)
	[ -n "$pid" ]
	# each thread's longest root span (it goes on through the thread's
	# life; each thread runs ~0.15 s: a few of the 40 Hz stack copies)
	awk -v pid="$pid" '$1 == "span" && $3 == "depth=0" {
		split($2, a, "="); split($4, b, "="); split($5, e, "=")
		if (e[2] - b[2] > len[a[2]]) { len[a[2]] = e[2] - b[2]; line[a[2]] = $0 }
	} END { for (t in line) print (t == pid ? "main " : "thread ") line[t] }' "$T/t/sp.txt" | tee "$T/t/roots"
	[ "$(grep -c '^thread .* name="\(__\)\?clone3"' "$T/t/roots")" -eq 2 ]
	grep -q '^main .* name="_start"' "$T/t/roots"
	# found from the root chain (marked), not shown by the walk itself
	[ "$(grep -c 'callchain' "$T/t/roots")" -eq 3 ]
}

@test "dwarf: the user stack copies are unwound (not leaf-only); >= 99 % of samples have the whole true stack" {
	mkdir -p "$T/dw"
	perf record -q -e cpu-clock:u -F 5000 --call-graph dwarf -o "$T/dw/perf.data" -- "$(STK)" 10000 1 2> /dev/null
	read -r n full fm wm ok < <(judge "$T/dw")
	echo "dwarf: $n samples, $full with the full true stack, $wm under main, $ok of them agree"
	[ "$n" -ge 100 ]
	at_least "$full" "$n" 99
	# through libc's qsort (no frame pointers) into the comparator
	cmp=$(printf '0x%x' "0x$(nm "$(STK)" | awk '$3 == "cmp" { print $1 }')")
	grep -q "func=$cmp " "$T/dw/sp.txt"
	# mt-decode says how many it unwound
	"$BIN/mt-decode" -s "$T/dw/perf.data" 2>&1 > /dev/null | tee "$T/dw/st"
	grep -q " unwound=[1-9]" "$T/dw/st"
}

@test "auto: picks dwarf for a program whose libc has no frame pointers, says why in one line; its stacks agree with the truth" {
	run "$BIN/mt-capture" run --mode sample -t none -o "$T/a" -- "$(STK)" 1 0
	echo "$output"
	[ "$status" -eq 0 ]
	line=$(echo "$output" | grep "call graph:")
	[ "$(echo "$line" | wc -l)" -eq 1 ]
	if [ -e /sys/bus/event_source/devices/cpu/caps/branches ]; then
		echo "$line" | grep -q "call graph: lbr"
		return 0
	fi
	echo "$line" | grep -q "call graph: dwarf (stk has no frame pointers"
	# a program that keeps frame pointers everywhere (no libc): fp
	cat > "$T/nolibc.c" <<'C'
__attribute__((noinline)) static unsigned long work(unsigned long n)
{
	unsigned long a = 0;
	for (unsigned long i = 0; i < n; i++)
		a += i ^ (a >> 3);
	return a;
}
__attribute__((noinline)) static unsigned long twice(unsigned long n) { return work(n) + work(n / 2); }
void _start(void)
{
	volatile unsigned long r = twice(1000);
	(void)r;
	__asm__ volatile("mov $60, %eax; xor %edi, %edi; syscall");
}
C
	cc -O1 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fno-inline -nostdlib -static -o "$T/nolibc" "$T/nolibc.c"
	run "$BIN/mt-capture" run --mode sample -t none -o "$T/b" -- "$T/nolibc"
	echo "$output"
	echo "$output" | grep -q "call graph: fp (the program and its libraries keep frame pointers"
	# what auto chose for stk, judged like the others
	mkdir -p "$T/au"
	perf record -q -e cpu-clock:u -F 5000 --call-graph dwarf -o "$T/au/perf.data" -- "$(STK)" 10000 1 2> /dev/null
	read -r n full fm wm ok < <(judge "$T/au")
	echo "auto (dwarf): $n samples, $full with the full true stack"
	at_least "$full" "$n" 99
}

@test "a sample whose chain lost its root frames continues the previous sample's stack, the taken frames marked" {
	mkdir -p "$T/al"
	perf record -q -e cpu-clock:u -F 5000 --call-graph dwarf -o "$T/al/perf.data" -- "$(STK)" 3000 0 2> /dev/null
	"$BIN/mt-decode" "$T/al/perf.data" > "$T/al/decode.mt" 2> /dev/null
	"$BIN/mt-dump" "$T/al/decode.mt" > "$T/al/d.txt"
	# the first sample with 6 frames or more; then the same chain without
	# its two outermost frames, 1 us later
	a=$(awk '/^sample / && split($0, x, ",") >= 6 { print; exit }' "$T/al/d.txt")
	[ -n "$a" ]
	b=$(echo "$a" | sed 's/,0x[0-9a-f]*,0x[0-9a-f]*$//')
	t=$(echo "$a" | sed 's/.* time=\([0-9]*\) .*/\1/')
	b=$(echo "$b" | sed "s/ time=$t / time=$((t + 1000)) /")
	nf=$(echo "$a" | tr , '\n' | wc -l)
	{ grep -v '^sample \|^end' "$T/al/d.txt"; echo "$a"; echo "$b"; echo end; } > "$T/al/in.txt"
	"$BIN/mt-undump" "$T/al/in.txt" > "$T/al/in.mt"
	"$BIN/mt-segment" -i "$T/al/in.mt" | "$BIN/mt-dump" -k span > "$T/al/sp.txt"
	cat "$T/al/sp.txt"
	# one span per frame of the first sample, all going on through the second
	[ "$(wc -l < "$T/al/sp.txt")" -eq "$nf" ]
	[ "$(grep -c " end=$((t + 1000)) " "$T/al/sp.txt")" -eq "$nf" ]
	# the two frames the second sample did not show are marked
	[ "$(grep -c 'stitched' "$T/al/sp.txt")" -eq 2 ]
	grep -q '^span .* depth=0 .*stitched' "$T/al/sp.txt"
	grep -q '^span .* depth=1 .*stitched' "$T/al/sp.txt"
	# without the repair the second sample starts a new stack
	"$BIN/mt-segment" --no-sample-repair -i "$T/al/in.mt" | "$BIN/mt-dump" -k span > "$T/al/raw.txt"
	[ "$(wc -l < "$T/al/raw.txt")" -gt "$nf" ]
}
