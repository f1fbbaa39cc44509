#!/usr/bin/env bats
# mt-decode --decoder walk (issue 20's cached code walk, libcommon/ptd_walk.c)
# against the libipt stepper, its oracle: every byte written (MTEV output,
# stderr, exit status) must be the same, per-branch times included.  Inputs:
# the cached mt-ptsim runs (clean, window, noretcomp and every fault kind),
# the Skylake fixture, raw mode, the corrupt corpus and the fuzz_ptdecode
# regressions.  `--decoder walk-only` proves the walk itself ran (it exits 2
# where it would fall back to libipt).  bench/decode-walk.sh runs the same
# comparison on the whole corpus, fuzz corpora included.
load lib/rawpt

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	T="$BATS_TEST_TMPDIR"
	ROOT="$BATS_TEST_DIRNAME/.."
	PTSIM_CACHE="$BATS_TEST_DIRNAME/.cache/ptsim"
	FX=/work/shared/fixtures/intel_pt-skylake-4.14
	[ -d "$FX" ] || FX="$BATS_TEST_DIRNAME/fixtures/intel_pt-skylake-4.14"
}

ptsim_dirs() { # VARIANT-REGEX: cached run dirs holding perf.data
	local d v
	for d in "$PTSIM_CACHE"/*/*/; do
		d=$(readlink -f "$d")
		v=$(basename "$(dirname "$d")")
		[[ $v =~ $1 ]] && [ -f "$d/perf.data" ] && echo "$d"
	done
}

# the --image of a raw-PT fuzz input: fuzz/ptprog.c's for those found
# against it (*-ptprog.pt), the recursion program's before
fuzz_image() { # FILE
	case $1 in
	*-ptprog.pt) echo "$ROOT/build/fuzz/ptprog:0x1000@0x401000" ;;
	*) echo "$ROOT/build/programs/recursion:0x1000:0x78000@0x401000" ;;
	esac
}

# mt-decode ARGS... with --decoder libipt and --decoder $WALK (default
# walk): output, stderr and exit status equal
same() { # ARGS...
	local dec rc
	for dec in libipt walk; do
		rm -f "$T/$dec.mt"
		rc=0
		"$BIN/mt-decode" --decoder "$([ $dec = walk ] && echo "${WALK:-walk}" || echo libipt)" \
			-o "$T/$dec.mt" "$@" 2> "$T/$dec.err" || rc=$?
		echo "exit $rc" >> "$T/$dec.err"
		[ -f "$T/$dec.mt" ] || echo none > "$T/$dec.mt"
	done
	# walk-check's own line: how many trace segments it checked
	grep -v '^mt-decode: walk-check: checked=' "$T/walk.err" > "$T/walk.err2"
	cmp "$T/libipt.mt" "$T/walk.mt" && diff "$T/libipt.err" "$T/walk.err2"
}

@test "walk: byte-identical to libipt on every cached mt-ptsim run (clean, window, noretcomp, every fault kind); walked where no packet forbids it" {
	local d n=0 walked=0
	# four programs of every variant (bench/decode-walk.sh: all of them)
	for d in $(ptsim_dirs '.' | grep -E '/(fnptr|threads|signal|snapshot)$'); do
		case $d in
		*/corrupt/* | */overflow/*) WALK=walk ;; # packets it leaves to libipt
		*) WALK=walk-only walked=$((walked + 1)) ;;
		esac
		WALK=$WALK same --buildid-dir "$d/images" -s "$d/perf.data" || { echo "differ: $d"; return 1; }
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim runs cached in $PTSIM_CACHE"
	echo "runs $n, walked $walked"
	[ "$walked" -ge 20 ]
}

@test "walk: with the fuzz build's small caches (1,024 blocks, then all dropped; make fuzz, ASan) byte-identical to libipt on the dynamic program's runs, which walk more blocks than that" {
	local L="${MT_BUILD:-$ROOT/build}/fuzz/lsan/mt-decode" d n=0 most=0 k
	[ -x "$L" ] || skip "no clang/ASan build (make fuzz: $L)"
	grep -q '^TracerPid:[[:space:]]*0$' /proc/self/status || skip "traced: LeakSanitizer cannot run under ptrace"
	export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1
	for d in $(ptsim_dirs '.' | grep -E '/dynamic$'); do
		"$BIN/mt-decode" --decoder libipt --buildid-dir "$d/images" -s -o "$T/a.mt" "$d/perf.data" 2> "$T/a.err" || echo "exit $?" >> "$T/a.err"
		"$L" --buildid-dir "$d/images" -s -o "$T/b.mt" "$d/perf.data" 2> "$T/b.err" || echo "exit $?" >> "$T/b.err"
		cmp "$T/a.mt" "$T/b.mt" && diff "$T/a.err" "$T/b.err" || { echo "differ: $d"; return 1; }
		# every branch target begins a block: more targets than the cache
		# holds blocks means it was dropped and filled again
		k=$("$BIN/mt-dump" -k branch "$T/a.mt" | grep -o ' to=0x[0-9a-f]*' | sort -u | wc -l)
		[ "$k" -gt "$most" ] && most=$k
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim runs of dynamic cached in $PTSIM_CACHE"
	echo "runs $n, most branch targets $most"
	[ "$most" -gt 1024 ]
}

@test "walk: the same without images (every block a no-image gap)" {
	local d
	for d in $(ptsim_dirs '^(clean|drop)$' | head -6); do
		WALK=walk-only same --no-images "$d/perf.data" || { echo "differ: $d"; return 1; }
	done
	[ -n "$d" ] || skip "no mt-ptsim runs cached"
}

# hand-made raw PT FILE against IMG (--cpu 6/94/3): libipt's bytes, and
# --decoder walk-only walks it (WANT walked) or refuses it, exit 2 (refused)
raw_walked() { # FILE IMG WANT
	same -s --cpu 6/94/3 --image "$2" --pt "$1" || { echo "differ: $1"; return 1; }
	run "$BIN/mt-decode" --decoder walk-only --cpu 6/94/3 --image "$2" -o "$T/x.mt" --pt "$1"
	if [ "$3" = refused ]; then
		[ "$status" -eq 2 ] && [[ $output == *"cannot decode this recording"* ]] ||
			{ echo "$1: walked ($status): $output"; return 1; }
	else
		[ "$status" -ne 2 ] || { echo "$1: refused: $output"; return 1; }
	fi
}

@test "walk: per-cpu recordings with thread switches (mt-ptgen --per-cpu --fake-switch) decode as libipt does, walked" {
	local fnptr="$ROOT/build/programs/fnptr" i=0 th fs extra d
	[ -x "$fnptr" ] || skip "no build/programs/fnptr"
	# one thread per cpu, no switch: the per-thread recording's bytes
	"$BIN/mt-ptgen" --threads 2 -n 200k --seed 3 -o "$T/pt" "$fnptr" 2> /dev/null
	"$BIN/mt-ptgen" --threads 2 -n 200k --seed 3 --per-cpu -o "$T/pc" "$fnptr" 2> /dev/null
	"$BIN/mt-decode" --decoder walk-only --buildid-dir "$T/pt/images" -o "$T/pt.mt" "$T/pt/perf.data"
	WALK=walk-only same --buildid-dir "$T/pc/images" -s "$T/pc/perf.data"
	cmp "$T/pt.mt" "$T/walk.mt"
	# a cpu handed to another thread and back: from every few timing
	# packets to a few per trace; with and without return compression
	for th in 1 3; do
		for fs in 97 2000 50000; do
			for extra in "" --noretcomp; do
				i=$((i + 1))
				d=$T/s$i
				"$BIN/mt-ptgen" --threads $th -n 100k --seed $i --per-cpu --fake-switch $fs $extra \
					-o "$d" "$fnptr" 2> /dev/null
				WALK=walk-only same --buildid-dir "$d/images" -s "$d/perf.data" ||
					{ echo "differ: mt-ptgen --threads $th --seed $i --fake-switch $fs $extra"; return 1; }
				# the switches took effect: records of the threads that do not exist
				"$BIN/mt-dump" -k branch "$T/walk.mt" |
					awk '{ sub(/tid=/, "", $2) } $2 >= 4194304 { n++ } END { exit !n }' ||
					{ echo "no switch in $d"; return 1; }
			done
		done
	done
}

@test "walk: mt-ptsim's recordings as per-cpu buffers: one thread a cpu decodes to the per-thread bytes; with thread switches and faults, as libipt, walked where no packet forbids it" {
	local r n=0 walked=0 f d
	for r in "$PTSIM_CACHE"/runs/{threads,signal,exception,fnptr,dynamic}.run; do
		[ -f "$r" ] || continue
		n=$((n + 1))
		"$BIN/mt-ptsim" --replay "$r" -o "$T/pt" 2> /dev/null
		"$BIN/mt-ptsim" --replay "$r" --per-cpu -o "$T/pc" 2> /dev/null
		"$BIN/mt-decode" --buildid-dir "$T/pt/images" -o "$T/pt.mt" "$T/pt/perf.data"
		"$BIN/mt-decode" --buildid-dir "$T/pc/images" -o "$T/pc.mt" "$T/pc/perf.data"
		cmp "$T/pt.mt" "$T/pc.mt" || { echo "per-cpu != per-thread: $r"; return 1; }
		for f in "" overflow@30% drop@40%:20 corrupt@50%:8 truncate-aux@60%; do
			d=$T/f
			"$BIN/mt-ptsim" --replay "$r" --per-cpu --fake-switch 3000 ${f:+--inject "$f"} \
				--psb-period 2048 -o "$d" 2> /dev/null
			case $f in
			overflow* | corrupt*) WALK=walk ;; # packets it leaves to libipt
			*) WALK=walk-only walked=$((walked + 1)) ;;
			esac
			WALK=$WALK same --buildid-dir "$d/images" -s "$d/perf.data" ||
				{ echo "differ: $r ${f:-clean}"; return 1; }
		done
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim runs cached"
	echo "programs $n, walked $walked"
	[ "$walked" -ge 3 ]
}

@test "walk: walk-only refuses what it cannot walk (overflow) with one line, exit 2" {
	local d
	d=$(ptsim_dirs '^overflow$' | head -1)
	[ -n "$d" ] || skip "no overflow runs cached"
	run "$BIN/mt-decode" --decoder walk-only --buildid-dir "$d/images" -o "$T/x.mt" "$d/perf.data"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ $output == *"cannot decode this recording"* ]]
	[ ! -f "$T/x.mt" ]
	run "$BIN/mt-decode" --decoder nonsense "$d/perf.data"
	[ "$status" -eq 2 ]
}

@test "walk: the Skylake fixture (per-cpu, no binaries) in file and pipe mode" {
	[ -d "$FX" ] || skip "no Skylake fixture"
	same --cpu 6/78/3 "$FX/perf.data.intel_pt-4.14"
	same --cpu 6/78/3 --no-images "$FX/perf.data.piped.intel_pt-4.14"
}

@test "walk: raw mode (--pt --image) on a clean run's PT with its images, walked" {
	local d args
	d=$(ptsim_dirs '^clean$' | grep fnptr | head -1)
	[ -n "$d" ] || skip "no mt-ptsim runs cached"
	raw_pt "$d" "$T/raw.pt"
	args=$(image_args "$d")
	WALK=walk-only same --pt "$T/raw.pt" $args --cpu 6/106/6
	[ "$(wc -c < "$T/walk.mt")" -gt 10000 ]
}

@test "walk: the corrupt corpus and the fuzz_ptdecode regressions (raw mode) give the same bytes and exit codes" {
	local f rec="$ROOT/build/programs/recursion"
	for f in "$ROOT"/tests/corrupt/decode-*.data; do
		same --no-images "$f" || { echo "differ: $f"; return 1; }
		same --partial --no-images "$f" || { echo "differ: --partial $f"; return 1; }
	done
	[ -f "$rec" ] || skip "build/programs/recursion not built"
	for f in "$ROOT"/tests/corrupt/fuzz-ptdecode-*.pt "$ROOT"/fuzz/seeds/ptdecode/*; do
		[ -f "$f" ] || continue
		same --cpu 6/94/3 --image "$(fuzz_image "$f")" --pt "$f" || { echo "differ: $f"; return 1; }
	done
}

@test "walk: the fuzz_ptwalk regressions (raw mode) give the same bytes and statistics (-s)" {
	# fuzz-ptwalk-block-count.pt: a compressed return that fails on the
	# first walk of its block; libipt then knows the ret but not the
	# instructions before it, and the next walk there ends one block early.
	# fuzz-ptwalk-invalid64-opcode.pt: a walk into the middle of an
	# instruction meets 1f (pop ds), invalid in 64-bit mode, which libipt
	# sizes as one byte.
	# fuzz-ptwalk-not-emulated-warning.pt: a PSB+ whose FUP is not where
	# the code is, its MODE.Exec bound there: reached without trace, then
	# a query that fails (was a "does not emulate" internal error).
	# fuzz-ptwalk-far-jmp-64bit.pt: a corrupt TIP returns into a call's
	# displacement; the walk goes on through ff ff, ff 48 89, da 48 c1 (an
	# x87 escape) to ea, which libipt decodes as a 7-byte far jmp taking the
	# next TIP and the walk's own length decoder refused (a third gap,
	# "unknown instruction", 1,380 blocks short): lengths now come from
	# libipt's decoder.
	# fuzz-ptwalk-suppressed-tip-ret.pt: a cached block's ret takes an
	# ip-suppressed TIP; libipt's block decoder stays at the ret, so the
	# next block is the ret alone (the walk went back to the block's start:
	# 2 instructions more, and different bytes).
	# fuzz-ptwalk-unknown-mode-insn.pt: a TIP.PGE with no MODE.Exec since
	# the PSB; libipt decodes in an unknown mode (no block: the first
	# instruction does not decode), which the walk leaves to libipt.
	# fuzz-ptwalk-skd007-ovf*-ptprog.pt (campaign c12, against ptprog): a
	# 2-byte CYC whose last byte and the next are 02 f3, which libipt's
	# query decoder takes for an OVF on a Skylake (erratum SKD007), in the
	# trace and in a PSB+ (where an OVF ends the header as PSBEND does);
	# the walk met an overflow it does not emulate (an internal-error gap
	# where libipt had an overflow or a decode error): the pre-scan now
	# leaves such a queue to libipt (walk-only exits 2).
	# fuzz-ptwalk-truncated-mtc-at-end-ptprog.pt (c13): an MTC cut by the
	# end of the trace after a TIP.PGD; libipt's read-ahead reads it first
	# (end of trace), ptq answered "not emulated" (an internal-error gap).
	# fuzz-ptwalk-overlapping-psb-tsx-ptprog.pt (c13): a PSB+ broken by a
	# PSB; libipt's query decoder syncs again to a PSB that overlaps the one
	# the packet decoder read, and meets a MODE.TSX there, which the
	# pre-scan's linear read never saw (walk-check exit 3; without the
	# check an internal-error gap): the pre-scan now reads from every PSB
	# of libipt's sync chain.
	# fuzz-ptwalk-fup-unknown-mode-ptprog.pt (session 21's campaign): a PSB+
	# with no FUP and no MODE.Exec, then an FUP after its PSBEND: libipt
	# starts at that FUP's ip in an unknown mode (unknown instruction), the
	# walk met a mode it does not emulate (an internal-error gap): the
	# pre-scan now leaves an FUP outside PSB+ before a MODE.Exec to libipt
	local f rec="$ROOT/build/programs/recursion" n=0 img
	[ -f "$rec" ] || skip "build/programs/recursion not built"
	img="$rec:0x1000:0x78000@0x401000"
	for f in "$ROOT"/tests/corrupt/fuzz-ptwalk-*.pt; do
		same -s --cpu 6/94/3 --image "$(fuzz_image "$f")" --pt "$f" ||
			{ echo "differ: $f"; return 1; }
		case $f in
		*unknown-mode* | *in-psb-header* | *overlapping-psb*) grep -q 'blocks=0 instructions=0' "$T/walk.err" ;;
		*) grep -q 'blocks=[1-9]' "$T/walk.err" ;;
		esac
		case $f in
		*skd007* | *overlapping-psb* | *fup-unknown-mode*)
			run "$BIN/mt-decode" --decoder walk-only --cpu 6/94/3 --image "$(fuzz_image "$f")" \
				-o "$T/x.mt" --pt "$f"
			[ "$status" -eq 2 ] || { echo "walk-only walked $f"; return 1; } ;;
		esac
		n=$((n + 1))
	done
	[ "$n" -gt 0 ]
	run "$BIN/mt-decode" --decoder walk-only --cpu 6/94/3 --image "$img" -o "$T/x.mt" \
		--pt "$ROOT/tests/corrupt/fuzz-ptwalk-unknown-mode-insn.pt"
	[ "$status" -eq 2 ]
	[[ $output == *"cannot decode this recording"* ]]
}

@test "walk: the fuzz_ptwalkcpu regressions (per-cpu perf.data) give libipt's bytes, stderr and statistics (-s)" {
	# fuzz-ptwalkcpu-exec-old-image.data: an exec while the thread is traced;
	# the libipt stepper decodes on with the replaced image, whose sections
	# the walk read no more (a no-image gap for every block after it).
	# fuzz-ptwalkcpu-partly-known-run.data: a first walk stops at 1,024
	# instructions and the rest's query fails; the next walk ran the run as
	# known (one block, libipt two).
	# fuzz-ptwalkcpu-run-to-section-end.data: a run into the end of its
	# section, nothing mapped after it; libipt's block ends there.
	# fuzz-ptwalkcpu-insn-cut-at-section-end.data: an instruction cut there
	# is libipt's unknown instruction (was an internal error).
	# fuzz-ptwalkcpu-gap-ahead-of-queue.data: both decoders hung (below).
	# fuzz-ptwalkcpu-shared-section.data: two processes map the file at load
	# addresses 6 bytes apart; libipt shares one section, and its block
	# cache, between them: a branch one learnt in a failed query ends the
	# other's block one instruction early (the walk kept what it knew per
	# load address: 758 blocks, libipt 759).
	local img="$ROOT/build/fuzz/ptsim/clean/images" f n=0
	[ -d "$img" ] || skip "no fuzz/ptprog recording (make fuzz-seeds)"
	for f in "$ROOT"/tests/corrupt/fuzz-ptwalkcpu-*; do
		n=$((n + 1))
		same -s --buildid-dir "$img" "$f" || { echo "differ: $f"; return 1; }
	done
	[ "$n" -ge 6 ]
}

# fuzz_ptwalkcpu's campaign (2026-12-04, both invocations within minutes):
# a cpu's queue held a full batch whose first record, a gap, had its
# thread's time on the other cpu's queue, ahead of its own; the merge wrote
# nothing past the queue's time and stepped it no more, forever, on both
# decoders.  The batch's head now goes out at its own time.
@test "merge: a full batch whose head lies past its queue's time goes out (per-cpu; was a hang on both decoders)" {
	local img="$ROOT/build/fuzz/ptsim/clean/images" dec
	[ -d "$img" ] || skip "no fuzz/ptprog recording (make fuzz-seeds)"
	for dec in libipt walk-check; do
		run timeout 60 "$BIN/mt-decode" --decoder $dec --buildid-dir "$img" -o "$T/$dec.mt" \
			"$ROOT/tests/corrupt/fuzz-ptwalkcpu-gap-ahead-of-queue.data"
		echo "$dec: $status $output"
		[ "$status" -eq 1 ]
		[[ $output == *"lost trace data"* ]]
	done
	cmp "$T/libipt.mt" "$T/walk-check.mt"
	"$BIN/mt-dump" -k gap "$T/libipt.mt" | grep -q 'reason='
}

@test "walk: the pre-scan refuses TNT and TIP before a MODE.Exec and a TIP after an FUP outside PSB+, walks them after a MODE.Exec, and a TIP cut by the end (hand-made raw PT)" {
	# the pre-scan takes TNT-8, one-byte CYCs and TIPs without the packet
	# decoder (ptd_walk.c seg_walkable): the same decisions as scan_pkt
	local rec="$ROOT/build/programs/recursion" img f want
	[ -f "$rec" ] || skip "build/programs/recursion not built"
	img="$rec:0x1000:0x78000@0x401000"
	local psb='\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82'
	printf "$psb\x02\x23\x06\x04" > "$T/nomode-tnt.pt"
	printf "$psb\x02\x23\x03\x0d" > "$T/nomode-cyc-tip.pt"
	printf "$psb\x99\x01\x02\x23\x06\x03\x04" > "$T/mode-tnt.pt"
	printf "$psb\x99\x01\x02\x23\x0d\x2d\x00\x10" > "$T/mode-tip.pt"
	printf "$psb\x99\x01\x02\x23\x3d\x00\x10\x0d" > "$T/fup-tip.pt"
	printf "$psb\x99\x01\x02\x23\x06\x2d\x00" > "$T/mode-tip-cut.pt"
	for f in nomode-tnt nomode-cyc-tip mode-tnt mode-tip fup-tip mode-tip-cut; do
		case $f in
		nomode-* | fup-*) want=refused ;;
		*) want=walked ;;
		esac
		raw_walked "$T/$f.pt" "$img" $want
	done
}

@test "walk: MODE.TSX in every PSB+ (a cpu with TSX; mt-ptgen and mt-ptsim --tsx) decodes as libipt does and as without it, walked; one in a transaction, aborted or outside PSB+ goes to libipt" {
	local fnptr="$ROOT/build/programs/fnptr" rec="$ROOT/build/programs/recursion" r f d n=0 walked=0 want w
	[ -x "$fnptr" ] && [ -f "$rec" ] || skip "build/programs not built"
	# mt-ptgen: the bytes of the same trace without MODE.TSX, walked (walk-check:
	# ptq's events, MODE.TSX's included, are libipt's)
	"$BIN/mt-ptgen" --threads 2 -n 200k --seed 5 -o "$T/pt" "$fnptr" 2> /dev/null
	"$BIN/mt-ptgen" --threads 2 -n 200k --seed 5 --tsx -o "$T/tx" "$fnptr" 2> /dev/null
	"$BIN/mt-decode" --buildid-dir "$T/pt/images" -o "$T/pt.mt" "$T/pt/perf.data"
	WALK=walk-only same --buildid-dir "$T/tx/images" -s "$T/tx/perf.data"
	cmp "$T/pt.mt" "$T/walk.mt"
	WALK=walk-check same --buildid-dir "$T/tx/images" -s "$T/tx/perf.data"
	grep -q 'walk-check: checked=[1-9]' "$T/walk.err"
	"$BIN/mt-ptgen" --threads 3 -n 100k --seed 6 --tsx --per-cpu --fake-switch 2000 -o "$T/pc" "$fnptr" 2> /dev/null
	WALK=walk-only same --buildid-dir "$T/pc/images" -s "$T/pc/perf.data"
	# mt-ptsim's runs of real programs, clean and every fault kind, a PSB
	# every 2 KiB
	for r in "$PTSIM_CACHE"/runs/{threads,signal,exception,dynamic}.run; do
		[ -f "$r" ] || continue
		n=$((n + 1))
		for f in "" overflow@30% drop@40%:20 corrupt@50%:8 truncate-aux@60%; do
			d=$T/f
			"$BIN/mt-ptsim" --replay "$r" --tsx --psb-period 2048 ${f:+--inject "$f"} -o "$d" 2> /dev/null
			case $f in
			overflow* | corrupt*) w=walk-check ;; # packets it leaves to libipt
			*) w=walk-only walked=$((walked + 1)) ;;
			esac
			WALK=$w same --buildid-dir "$d/images" -s "$d/perf.data" ||
				{ echo "differ: $r ${f:-clean}"; return 1; }
			if [ -z "$f" ]; then
				"$BIN/mt-ptsim" --replay "$r" --psb-period 2048 -o "$T/g" 2> /dev/null
				"$BIN/mt-decode" --buildid-dir "$T/g/images" -o "$T/g.mt" "$T/g/perf.data"
				cmp "$T/g.mt" "$T/walk.mt" || { echo "--tsx changed the decode: $r"; return 1; }
			fi
		done
	done
	# hand-made raw PT: in PSB+ outside a transaction walked, else libipt's
	local img="$rec:0x1000:0x78000@0x401000"
	local psb='\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82'
	printf "$psb\x99\x20\x99\x01\x02\x23\x06\x03\x04" > "$T/tsx-psb.pt"
	printf "$psb\x99\x20\x99\x01\x3d\x00\x10\x02\x23\x06\x04" > "$T/tsx-psb-fup.pt"
	printf "$psb\x99\x21\x99\x01\x02\x23\x06\x04" > "$T/tsx-intx.pt"
	printf "$psb\x99\x22\x99\x01\x02\x23\x06\x04" > "$T/tsx-abort.pt"
	printf "$psb\x99\x01\x02\x23\x99\x20\x06\x04" > "$T/tsx-outside.pt"
	for f in tsx-psb tsx-psb-fup tsx-intx tsx-abort tsx-outside; do
		case $f in
		tsx-psb*) want=walked ;;
		*) want=refused ;;
		esac
		raw_walked "$T/$f.pt" "$img" $want
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim runs cached"
	echo "programs $n, walked $walked"
	[ "$walked" -ge 6 ]
}

@test "walk: the project's query decoder (ptq) answers every query as libipt's does, time and offset included (walk-check), and the walk over it writes libipt's bytes" {
	# --decoder walk-check runs ptq and libipt's query decoder in lockstep:
	# exit 3 at the first query whose status, bit, address, event, time
	# (with its lost-CYC count) or offset differs.  Cached runs of every
	# variant (the fault kinds included: errors, syncs, truncation; mt-ptsim
	# says Ice Lake: no errata), then the raw-PT regressions with a Skylake
	# CPU (errata BDM70 and SKD007 on).  Test 1 compares --decoder walk
	# (over ptq) with libipt on the cached runs.
	local d f rec="$ROOT/build/programs/recursion" n=0
	for d in $(ptsim_dirs '.' | grep -E '/(fnptr|signal)$'); do
		WALK=walk-check same --buildid-dir "$d/images" "$d/perf.data" || { echo "walk-check: $d"; cat "$T/walk.err"; return 1; }
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim runs cached"
	[ -f "$rec" ] || skip "build/programs/recursion not built"
	for f in "$ROOT"/tests/corrupt/fuzz-ptwalk-*.pt "$ROOT"/tests/corrupt/fuzz-ptdecode-*.pt "$ROOT"/fuzz/seeds/ptdecode/*; do
		[ -f "$f" ] || continue
		WALK=walk-check same -s --cpu 6/94/3 --image "$(fuzz_image "$f")" --pt "$f" ||
			{ echo "walk-check: $f"; cat "$T/walk.err"; return 1; }
	done
}

@test "walk: ptq answers as libipt's query decoder does on a trace with MTC and TMA (perf's default mtc): time after every query, calibration, SKL168; the walk over it writes libipt's bytes" {
	# mt-ptsim writes no MTC: tests/lib/addmtc.py adds perf's (a TMA after
	# each TSC, an MTC where the clock enters a new MTC period) to a clean
	# run's raw PT, and --pt-timing gives what AUXTRACE_INFO would: MTC
	# period 3 (the TMA holds every MTC bit) and 9 (it does not: the first
	# MTC estimates them; with a fast CTC, often across a wrap of its 16
	# bits), TSC:CTC 2:1, 5:3 and 1:64, the nominal ratio (CBR
	# calibrates) or none (MTCs calibrate); Skylake (SKL168 on) and Ice Lake.
	# walk-check must have checked the trace (ptq ran on it), find no query
	# whose answer or time differs, and write libipt's bytes.
	local d args cfg cpu n=0
	for d in $(ptsim_dirs '^clean$' | grep -E '/fnptr$'); do
		raw_pt "$d" "$T/raw.pt"
		args=$(image_args "$d")
		for cfg in 3,2,1,0 9,2,1,0 3,2,1,22 0,5,3,0 9,1,64,0; do
			IFS=, read -r f x y _ <<<"$cfg"
			python3 "$ROOT/tests/lib/addmtc.py" "$T/raw.pt" "$T/mtc.pt" "$f" "$x" "$y"
			# the packets are there: more bytes than the run's
			[ "$(wc -c < "$T/mtc.pt")" -gt "$(wc -c < "$T/raw.pt")" ]
			for cpu in 6/94/3 6/106/6; do
				WALK=walk-check same -s --cpu $cpu --pt-timing "$cfg" --pt "$T/mtc.pt" $args ||
					{ echo "walk-check: $d $cfg $cpu"; cat "$T/walk.err"; return 1; }
				grep -q '^mt-decode: walk-check: checked=1 ' "$T/walk.err" ||
					{ echo "ptq did not run: $d $cfg $cpu"; cat "$T/walk.err"; return 1; }
				n=$((n + 1))
			done
		done
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim runs cached"
}
