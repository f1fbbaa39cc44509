#!/usr/bin/env bats
# mt-segment and mt-stitch on hand-written streams (tests/golden/segment:
# NAME.in.txt, and NAME.want.txt written by hand from the rules), bad input,
# and mt-compare on known differences.
. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	G="$BATS_TEST_DIRNAME/golden/segment"
	T="$BATS_TEST_TMPDIR"
	SYMFS="$MT_BUILD/tests/segment"
	[ -x "$SYMFS/segfuncs" ] || skip "$MT_BUILD/tests/segment/segfuncs not built (make test builds it)"
}

# golden NAME PIPELINE...: undump NAME.in.txt, run it through the stages, dump, diff
golden() {
	local name=$1
	shift
	"$BIN/mt-undump" "$G/$name.in.txt" > "$T/in.mt"
	eval "$*" < "$T/in.mt" > "$T/out.mt"
	"$BIN/mt-dump" "$T/out.mt" > "$T/out.txt"
	diff -u "$G/$name.want.txt" "$T/out.txt"
}

SEG='"$BIN/mt-segment" --symfs "$SYMFS" --no-waypoints'

@test "segment: a return with an empty stack promotes the callers to the segment start" {
	golden seg-empty-return "$SEG"
}

@test "segment: tail call chain, intra-function jcc, jump to a .cold part and back" {
	golden seg-tailcalls "$SEG"
}

@test "segment: recursion returns to the innermost matching call site" {
	golden seg-recursion "$SEG"
}

@test "segment: longjmp across four frames unwinds them without inventing any" {
	golden seg-longjmp "$SEG"
}

# A longjmp into a function on no frame of the stack: the window began below
# the setjmp (perl's die inside eval, the fifth probe corpus' perl-eval
# w200k: a new segment there, no common frame, 16 wrong spans).  The frames
# end, the landing function is revealed below the root, and their depths
# are lower bounds: one segment, no frame invented.
@test "segment: a longjmp to a caller above the root reveals it beneath, the unwound frames at lower-bound depths" {
	golden seg-longjmp-above "$SEG"
	grep -q 'depth=1 begin=4000 end=4060 func=0x401200 ' "$T/out.txt"
	[ "$(grep -c '^segment ' "$T/out.txt")" -eq 1 ]
}

@test "segment: a signal handler nests under the interrupted frame; rt_sigreturn resumes it" {
	golden seg-signal "$SEG"
}

@test "segment: a thread that starts and ends inside the trace" {
	golden seg-thread-life "$SEG"
}

@test "segment: calls sharing a timestamp are spread up to the next time" {
	golden seg-smear "$SEG"
}

@test "segment: a tail call at the root keeps the root's depth; a later return reveals the caller" {
	golden seg-root-tailcall "$SEG"
}

@test "segment: stack samples become spans (a frame in consecutive samples is one span)" {
	# the rule itself; the repairs of broken walks (which need real return
	# addresses after call instructions) are judged in stacks.bats
	golden seg-sampling "$SEG --no-sample-repair"
}

@test "segment: waypoints for every branch source and target" {
	golden wp-basic '"$BIN/mt-segment" --all-waypoints --symfs "$SYMFS"'
}

@test "segment: waypoints only in functions DWARF describes, and there only where the inline chain can change" {
	"$BIN/mt-undump" "$G/wp-basic.in.txt" > "$T/in.mt"
	# segfuncs has no DWARF: no waypoint, every other record the same
	"$BIN/mt-segment" --symfs "$SYMFS" --stats < "$T/in.mt" > "$T/a.mt" 2> "$T/a.err"
	"$BIN/mt-dump" "$T/a.mt" > "$T/a.txt"
	[ "$(grep -c '^waypoint' "$T/a.txt")" -eq 0 ]
	diff -u <(grep -v '^waypoint' "$G/wp-basic.want.txt") "$T/a.txt"
	n=$(grep -c '^waypoint' "$G/wp-basic.want.txt")
	grep -q "waypoints=0 waypoints_elided=$n " "$T/a.err"
	# assembled with -g: DWARF describes every function, but no inlined
	# subroutine, so every chain is the function alone.  Kept: the root's
	# first waypoint (a root's span may continue an earlier one's, whose
	# inline frames it closes) and the call site (the child hangs under the
	# frame open after it); left out: the rest
	"$BIN/mt-segment" --stats --symfs "$SYMFS/../segment-dwarf" < "$T/in.mt" 2> "$T/b.err" |
		"$BIN/mt-dump" > "$T/b.txt"
	diff -u <(grep -v -E '^waypoint .* addr=0x(401200|401210|401125|401130)$' "$G/wp-basic.want.txt") \
		"$T/b.txt"
	[ "$(grep -c '^waypoint' "$T/b.txt")" -eq 2 ]
	grep -q "waypoints=2 waypoints_elided=4 waypoints_elided_inline=4 " "$T/b.err"
	# --all-waypoints: all of them
	"$BIN/mt-segment" --all-waypoints --symfs "$SYMFS/../segment-dwarf" < "$T/in.mt" | "$BIN/mt-dump" > "$T/c.txt"
	diff -u "$G/wp-basic.want.txt" "$T/c.txt"
}

@test "stitch: a gap while only the root is live; the later segment reveals its caller" {
	golden stitch-gap-depth0 "$SEG | \"\$BIN/mt-stitch\""
}

@test "stitch: a trace-end from 0 right after a gap (tracing stopped at the gap's end) begins no segment; the next starts at the trace-start" {
	golden stitch-gap-trace-end "$SEG | \"\$BIN/mt-stitch\""
}

# A recursive frame (its function also an outer frame's) is not joined
# across a gap: it may have returned and been called again inside it, which
# this stream cannot tell.  The innermost frame, entered at the gap's begin,
# is a zero-length span that must come before the gap span (it lies under
# the frames that end there; write.bats loads this output).
@test "stitch: a decode error ten frames deep in a recursion: the three outer frames continue, the recursive ones end at the gap and begin again after it" {
	golden stitch-gap-depth10 "$SEG | \"\$BIN/mt-stitch\""
}

# A loop's callee (a, seen returning at depth 1 before) beneath the later
# segment's root (b, revealed by c's return) is not joined across the gap:
# it ends there, and a span of it begins after the gap (inferred-start, to
# the end: b is called from there either way), the gap span just above main,
# the last frame joined.  (Before, depth 1 stayed empty after the gap: in the
# corpus' bzip2 at 2M instructions, 82 % of two frames' time.)
@test "stitch: a split frame beneath the later root resumes after the gap" {
	golden stitch-gap-beneath "$SEG | \"\$BIN/mt-stitch\""
}

# A facing frame seen called again after the gap (a, returned to main at
# 8120 and called from the same main at 8130) may have been two calls across
# it, its first repetition inside the gap: joined when its start stack came
# (no completion of a before the gap), the join is undone when the second
# call arrives; a and b, above it, end at the gap and begin again after it,
# the gap span at a's depth.  (Before: a and b joined over the gap; the
# corpus' md5sum @50 %: 1 wrong span in each of three fault kinds.)
@test "stitch: a frame its caller calls again after the gap is not joined across it (the first repetition may lie inside the gap)" {
	golden stitch-gap-later-call "$SEG | \"\$BIN/mt-stitch\""
}

# A gap inside a recursion: the later root (rec, calling c) faces each of
# the earlier stack's three rec frames equally well.  The recursion may have
# returned any number of levels inside the gap and recurred (XML parsing:
# cppcheck's tinyxml2 ParseDeep, the probe corpus), so the later segment goes
# at the shallowest and its depths are lower bounds (min-depth), instead of
# the deepest as before (cppcheck drop@50 %: 22,209 wrong spans one level
# too deep; drop@25 %: 32,644, the best alignment one level too shallow).
@test "stitch: a later root that faces several frames of a recursion goes at the shallowest, its depths lower bounds" {
	golden stitch-gap-recursion "$SEG | \"\$BIN/mt-stitch\""
	grep -q 'func=0x401400 .*min-depth' "$T/out.txt"
}

# A trace that begins inside mmove's body, in the frame of mpcpy, which
# jumps there (glibc's mempcpy into memmove's body: the probe corpus' seq,
# a 20,000-instruction window, 1 wrong span): the return reveals the call
# at 0x401f10, whose next call enters mpcpy, so the root is mpcpy.
@test "segment: a root that returns to a call whose other calls enter a function jumping into the root's body is that function" {
	golden seg-jump-into-body "$SEG"
	grep -q 'depth=1 begin=8000 end=8010 func=0x401e00 ' "$T/out.txt"
}

# No common frame across a gap: the later root (obj) goes under dis, the
# deepest earlier frame whose code calls it, but ev, deeper, calls dis: a
# new dis called by that ev inside the gap may be obj's caller (python3's
# eval loop, recursive through its eval function: the probe corpus'
# py-except drop@25 %, 502 wrong spans nine levels too shallow), so obj's
# depth is a lower bound.
@test "stitch: a later root placed under an earlier caller that a deeper frame calls again has a lower-bound depth" {
	golden stitch-gap-reentered "$SEG | \"\$BIN/mt-stitch\" --symfs \"\$SYMFS\""
	grep -q 'depth=2 begin=8100 end=8150 func=0x401fc0 .*min-depth' "$T/out.txt"
}

# A frame revealed by its return (inferred-start) has the call site of the
# call it returns to when that call enters its function: dis, called from
# ev at 0x401f50 before the gap, returns after it to the call at 0x401f60,
# so it was called again inside the gap and is not joined (the probe
# corpus' fold overflow@25 %: ld.so's strcmp, 1 wrong span).
@test "stitch: a frame that returns after a gap to another call site than the earlier one's is another activation" {
	golden stitch-gap-callsite "$SEG | \"\$BIN/mt-stitch\""
	grep -q 'depth=1 begin=8100 end=8110 func=0x401f80 callsite=0x401f60 flags=inferred-start ' "$T/out.txt"
}

@test "segment | stitch equals stitch < saved segment output" {
	"$BIN/mt-undump" "$G/stitch-gap-depth10.in.txt" | "$BIN/mt-segment" --symfs "$SYMFS" > "$T/seg.mt"
	"$BIN/mt-stitch" < "$T/seg.mt" > "$T/a.mt"
	"$BIN/mt-undump" "$G/stitch-gap-depth10.in.txt" | "$BIN/mt-segment" --symfs "$SYMFS" | "$BIN/mt-stitch" > "$T/b.mt"
	cmp "$T/a.mt" "$T/b.mt"
}

@test "segment: spans as input: one fatal line, exit 2, no output file" {
	"$BIN/mt-undump" "$G/seg-recursion.in.txt" | "$BIN/mt-segment" > "$T/seg.mt"
	run "$BIN/mt-segment" -i "$T/seg.mt" -o "$T/out.mt"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "mt-segment: fatal: "*"already carries spans"* ]]
	[ ! -e "$T/out.mt" ]
	# span records in a stream whose header does not say so
	printf 'mtev version=1 producer="x" flags=0x1\nspan tid=1 depth=0 begin=1 end=2 func=0x10\nend\n' | "$BIN/mt-undump" > "$T/sp.mt"
	run "$BIN/mt-segment" -i "$T/sp.mt" -o "$T/out.mt"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "mt-segment: fatal: "*"span record"* ]]
	[ ! -e "$T/out.mt" ]
	! ls "$T"/out.mt.tmp.* 2>/dev/null
}

@test "segment and stitch: not MTEV, or truncated: clear error" {
	echo "hello" > "$T/junk"
	run "$BIN/mt-segment" -i "$T/junk" -o "$T/o.mt"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "mt-segment: fatal: "* ]]
	run "$BIN/mt-stitch" -i "$T/junk" -o "$T/o.mt"
	[ "$status" -eq 2 ]
	[[ "$output" == "mt-stitch: fatal: "* ]]
	# branch records given to mt-stitch
	"$BIN/mt-undump" "$G/seg-recursion.in.txt" > "$T/br.mt"
	run "$BIN/mt-stitch" -i "$T/br.mt" -o "$T/o.mt"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "mt-stitch: fatal: "*"run mt-segment first"* ]]
	[ ! -e "$T/o.mt" ]
	# a truncated branch stream (killed upstream): fatal, exit 2, no output;
	# with --partial: output for what was read, warning, exit 1
	size=$(stat -c %s "$T/br.mt")
	head -c $((size - 1)) "$T/br.mt" > "$T/cut.mt"
	run "$BIN/mt-segment" -i "$T/cut.mt" -o "$T/o.mt"
	[ "$status" -eq 2 ]
	[[ "$output" == "mt-segment: fatal: "*"truncated"* ]]
	[ ! -e "$T/o.mt" ]
	run "$BIN/mt-segment" --partial -i "$T/cut.mt" -o "$T/o.mt"
	[ "$status" -eq 1 ]
	[[ "$output" == "mt-segment: warning: "*"truncated"* ]]
	"$BIN/mt-dump" "$T/o.mt" > /dev/null
}

@test "tools: --help on stdout with exit 0; a bad option exits 2" {
	for t in mt-segment mt-stitch mt-compare; do
		run "$BIN/$t" --help
		[ "$status" -eq 0 ]
		[[ "$output" == *"Exit status"* ]]
		run "$BIN/$t" --no-such-option
		[ "$status" -eq 2 ]
	done
}

# The truth of a run whose recording holds [150, 350] (cmp-truth-window.txt,
# the truth's branches of the window: mt-compare's honest window); another
# truth or window by CMP_TRUTH, CMP_WINDOW.  cmp_run ACTUAL [ARGS...]
cmp_run() {
	"$BIN/mt-undump" "$G/${CMP_TRUTH:-cmp-truth.txt}" > "$T/truth.mt"
	"$BIN/mt-undump" "$G/${CMP_WINDOW:-cmp-truth-window.txt}" > "$T/window.mt"
	"$BIN/mt-undump" "$G/$1" > "$T/actual.mt"
	shift
	run "$BIN/mt-compare" --truth-branches "$T/window.mt" "$@" "$T/truth.mt" "$T/actual.mt"
}

@test "compare: the honest window (the truth's) counts trace lost at a window's edge; --actual-window hides it" {
	# the recording holds [140, 350]; the actual begins at 150: main and a
	# lost 10 of their 210 + 60 clipped ns (b: 50 more), and neither begins where the truth's
	# window does
	CMP_WINDOW=cmp-truth-window-early.txt cmp_run cmp-exact.txt
	echo "$output"
	[[ "${lines[-1]}" == *" coverage=0.937500 exact_coverage=0.156250 "*" wrong=0 matched=1 truth=3 judged=3 unwound=0" ]]
	# a truth named DIR/truth-spans.mt takes DIR/truth.mt as its branch stream
	mkdir "$T/run"
	cp "$T/truth.mt" "$T/run/truth-spans.mt"
	cp "$T/window.mt" "$T/run/truth.mt"
	run "$BIN/mt-compare" "$T/run/truth-spans.mt" "$T/actual.mt"
	[[ "${lines[0]}" == "window: from $T/run/truth.mt" ]]
	[[ "${lines[-1]}" == *" coverage=0.937500 exact_coverage=0.156250 "* ]]
	# the old window (the actual's segment) sees no loss
	run "$BIN/mt-compare" --actual-window "$T/run/truth-spans.mt" "$T/actual.mt"
	[[ "${lines[-1]}" == *"precision=1.000000 recall=1.000000 coverage=1.000000 "* ]]
	# without a branch stream: the truth spans' own extent [0, 1000]
	run "$BIN/mt-compare" "$T/truth.mt" "$T/actual.mt"
	[[ "${lines[0]}" == "window: from the truth's spans" ]]
	[[ "${lines[-1]}" == *" matched=0 "* ]]
	run "$BIN/mt-compare" --actual-window -b "$T/window.mt" "$T/truth.mt" "$T/actual.mt"
	[ "$status" -eq 2 ]
}

# c (cmp-edge-truth.txt) was called and returned at 150, the instant tracing
# began: with no traced branch at that instant but the trace-start, no
# recording holds it (it ran before the first traced instruction), so it
# is not judged; when its call and return are traced at 150, it is.
@test "compare: a span made and ended at the instant tracing began, before the first traced instruction, is outside the window; one whose call is traced is not" {
	CMP_TRUTH=cmp-edge-truth.txt cmp_run cmp-exact.txt --min-recall 1 --max-wrong 0
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "${lines[-1]}" == *"precision=1.000000 recall=1.000000 "*" wrong=0 matched=3 truth=3 judged=3 unwound=0" ]]
	CMP_TRUTH=cmp-edge-truth.txt CMP_WINDOW=cmp-edge-window-traced.txt cmp_run cmp-exact.txt --min-recall 1
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "${lines[-1]}" == *" recall=0.750000 "*" matched=3 truth=4 judged=3 unwound=0" ]]
}

@test "compare: a gap is no coverage; a span joined across it over two calls is wrong" {
	# f's two calls joined into one span across the gap [150, 350]: wrong,
	# and it covers nothing (the old score: coverage 1, 0 wrong); main, live
	# across the gap and joined across it, keeps its time there
	CMP_TRUTH=cmp-gap-truth.txt CMP_WINDOW=cmp-gap-window.txt cmp_run cmp-gap-joined.txt
	echo "$output"
	[[ "${lines[-1]}" == *" coverage=0.833333 "*" joins=2 wrong_joins=1 wrong=1 matched=1 truth=3 judged=2 unwound=0" ]]
	# not joined: each side covers what it recorded, none of the gap
	# (100 of f's 200 ns lie in it)
	CMP_TRUTH=cmp-gap-truth.txt CMP_WINDOW=cmp-gap-window.txt cmp_run cmp-gap-split.txt
	echo "$output"
	[[ "${lines[-1]}" == *" coverage=0.916667 "*" joins=1 wrong_joins=0 wrong=0 "* ]]
}

@test "compare: clipped truth, hidden outer frame, exact actual: all match" {
	cmp_run cmp-exact.txt --min-precision 1 --min-recall 1 --min-coverage 1 --max-wrong 0
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "${lines[-1]}" == "mt-compare: precision=1.000000 recall=1.000000 coverage=1.000000 exact_coverage=1.000000 "*" wrong=0 matched=3 truth=3 judged=3 unwound=0" ]]
	[[ "$output" == *"outer frames hidden: 1"* ]]
}

@test "compare: an outer frame whose children tail-call one another across the window (a jump of the truth's branches to each) executed nothing there: hidden; one they return to at the same time is not" {
	CMP_TRUTH=cmp-tail-truth.txt CMP_WINDOW=cmp-tail-window.txt cmp_run cmp-tail-actual.txt --max-wrong 0
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "${lines[-1]}" == *"precision=1.000000 recall=1.000000 coverage=1.000000 "*" wrong=0 matched=2 truth=2 judged=2 unwound=0" ]]
	[[ "$output" == *"outer frames hidden: 2"* ]]
	# a returned to main, which called b at the same time (no jump to b):
	# main ran in the window, so it stays, and the actual without it is one
	# level off
	CMP_TRUTH=cmp-tail-ret-truth.txt CMP_WINDOW=cmp-tail-ret-window.txt cmp_run cmp-tail-actual.txt --max-wrong 0
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"outer frames hidden: 1"* ]]
	[[ "${lines[-1]}" == *" wrong=2 matched=0 truth=3 judged=2 unwound=0" ]]
}

@test "compare: frames an unwinding removed before they ran in the window (no return to them) are unseen; frames returned to are not; --count-unwound keeps them" {
	CMP_TRUTH=cmp-unwind-truth.txt CMP_WINDOW=cmp-unwind-window.txt cmp_run cmp-unwind-actual.txt --min-recall 1 --max-wrong 0
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"outer frames hidden: 1; unwound unseen: 2; named by the code they run: 0)"* ]]
	[[ "${lines[-1]}" == *"precision=1.000000 recall=1.000000 coverage=1.000000 "*" matched=4 truth=4 judged=4 unwound=2" ]]
	CMP_TRUTH=cmp-unwind-truth.txt CMP_WINDOW=cmp-unwind-window.txt cmp_run cmp-unwind-actual.txt --count-unwound -v
	[[ "${lines[-1]}" == *" recall=0.666667 "*" matched=4 truth=6 judged=4 unwound=0" ]]
	[[ "$output" == *"missed: tid=1 depth=1 func=0x401200 "* ]]
	[[ "$output" == *"missed: tid=1 depth=2 func=0x401300 "* ]]
	# the same frames, each returned to at 250: they ran, so they count
	CMP_TRUTH=cmp-unwind-truth.txt CMP_WINDOW=cmp-unwind-ret-window.txt cmp_run cmp-unwind-actual.txt
	[[ "${lines[-1]}" == *" recall=0.666667 "*" truth=6 judged=4 unwound=0" ]]
	# and with --absolute-depth (the root kept): still unseen
	CMP_TRUTH=cmp-unwind-truth.txt CMP_WINDOW=cmp-unwind-window.txt cmp_run cmp-unwind-actual.txt --absolute-depth
	[[ "${lines[-1]}" == *" truth=5 judged=4 unwound=2" ]]
}

@test "compare: the frame running the window's first instruction in another function's body takes that function's name (the nearest entry the truth knows); not an address, not without the entry" {
	CMP_TRUTH=cmp-body-truth.txt CMP_WINDOW=cmp-body-window.txt cmp_run cmp-body-actual.txt --min-recall 1 --max-wrong 0
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"named by the code they run: 1)"* ]]
	[[ "${lines[-1]}" == *" wrong=0 matched=2 truth=2 judged=2 unwound=0" ]]
	# named by the first instruction's address: no function's entry
	CMP_TRUTH=cmp-body-truth.txt CMP_WINDOW=cmp-body-window.txt cmp_run cmp-body-actual-addr.txt -v
	[[ "$output" == *"named by the code they run: 0)"* ]]
	[[ "$output" == *"wrong: tid=1 depth=1 func=0x401247 "* ]]
	[[ "${lines[-1]}" == *" wrong=1 matched=1 truth=2 judged=2 unwound=0" ]]
	# B's entry known to no span of the truth: F keeps its name
	CMP_TRUTH=cmp-body-truth-noentry.txt CMP_WINDOW=cmp-body-window.txt cmp_run cmp-body-actual.txt -v
	[[ "$output" == *"missed: tid=1 depth=1 func=0x401200 "* ]]
	[[ "${lines[-1]}" == *" wrong=1 matched=1 truth=2 judged=2 unwound=0" ]]
}

# A min-depth span is given the depth of the truth span it matches in time,
# with the same tolerance as any span: b, zero-length at 300 in the truth,
# spread to 305 inside that timestamp (the probe corpus' py-except
# drop@25 %: 10 zero-length frames judged wrong at their claimed depth)
@test "compare: a zero-length min-depth span spread inside its timestamp takes the truth's depth" {
	CMP_TRUTH=cmp-zero-truth.txt CMP_WINDOW=cmp-zero-window.txt cmp_run cmp-zero-actual.txt --max-wrong 0
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "${lines[-1]}" == *" wrong=0 matched=3 truth=3 "* ]]
}

@test "compare: --absolute-depth keeps the unobservable root: nothing matches" {
	cmp_run cmp-exact.txt --absolute-depth --min-recall 1
	[ "$status" -eq 1 ]
	[[ "${lines[-1]}" == *" wrong=3 matched=0 truth=4 judged=3 unwound=0" ]]
}

@test "compare: wrong span, missing inferred-start flag, time within the truth's resolution" {
	cmp_run cmp-wrong.txt --max-wrong 0
	echo "$output"
	[ "$status" -eq 1 ]
	# main matches; a lacks inferred-start (truth began before the window);
	# b begins at 310, inside [300, 350): matches; e at depth 1 is invented
	[[ "${lines[-1]}" == *" wrong=1 matched=2 truth=3 judged=4 unwound=0" ]]
	[[ "$output" == *"wrong: tid=1 depth=1 func=0x401500 begin=220 end=240"* ]]
	cmp_run cmp-wrong.txt --strict
	[[ "${lines[-1]}" == *" wrong=1 matched=1 truth=3 judged=4 unwound=0" ]]
	# truth frame-time 200 + 50 + 50: a (flag missing) overlaps its truth fully
	# and b matches, so all of it is covered; exactly matched: 250/300
	cmp_run cmp-wrong.txt --min-coverage 1
	[ "$status" -eq 0 ]
	[[ "${lines[-1]}" == *" coverage=1.000000 exact_coverage=0.833333 "* ]]
	cmp_run cmp-wrong.txt --min-precision 0.6
	[ "$status" -eq 1 ]
}

@test "compare: bad input exits 2 with one line" {
	"$BIN/mt-undump" "$G/seg-recursion.in.txt" > "$T/br.mt"
	run "$BIN/mt-compare" "$T/br.mt" "$T/br.mt"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "mt-compare: fatal: "*"no span records"* ]]
	run "$BIN/mt-compare" "$T/br.mt"
	[ "$status" -eq 2 ]
	run "$BIN/mt-compare" --min-recall 2 "$T/br.mt" "$T/br.mt"
	[ "$status" -eq 2 ]
}

@test "stitch: --mem-limit below 256 bytes or not a size: usage error, exit 2" {
	for bad in 100 12Q -5 K ""; do
		run "$BIN/mt-stitch" --mem-limit "$bad" -i /dev/null -o "$T/o.mt"
		[ "$status" -eq 2 ]
		[[ "$output" == *"--mem-limit"* ]]
		run "$BIN/mt-segment" --stitch --mem-limit "$bad" -i /dev/null -o "$T/o.mt"
		[ "$status" -eq 2 ]
		[[ "$output" == *"--mem-limit"* ]]
	done
}

@test "segment --stitch on the golden gap streams: the records of segment | stitch" {
	for g in stitch-gap-depth0 stitch-gap-depth10 stitch-gap-trace-end; do
		"$BIN/mt-undump" "$G/$g.in.txt" | "$BIN/mt-segment" --symfs "$SYMFS" | "$BIN/mt-stitch" > "$T/a.mt"
		"$BIN/mt-undump" "$G/$g.in.txt" | "$BIN/mt-segment" --stitch --symfs "$SYMFS" > "$T/b.mt"
		diff <("$BIN/mt-dump" "$T/a.mt" | sed 1d) <("$BIN/mt-dump" "$T/b.mt" | sed 1d)
		"$BIN/mt-dump" "$T/b.mt" | grep -q 'flags=.*stitched'
	done
}

@test "stitch: a temporary file that cannot be made: one line naming the directory, exit 111, no output" {
	# a loop in one function: 600 waypoints, more than 256 bytes of log
	{
		head -4 "$G/stitch-gap-depth10.in.txt"
		echo "branch tid=1 time=7000 type=trace-start from=0x0 to=0x401110"
		awk 'BEGIN { for (i = 1; i <= 300; i++) printf "branch tid=1 time=%d type=jcc from=0x401120 to=0x401110\n", 7000 + i }'
		echo end
	} | "$BIN/mt-undump" > "$T/in.mt"
	"$BIN/mt-segment" --all-waypoints --symfs "$SYMFS" -i "$T/in.mt" -o "$T/seg.mt"
	"$BIN/mt-stitch" --mem-limit 256 -i "$T/seg.mt" -o "$T/ok.mt"
	[ "$("$BIN/mt-dump" "$T/ok.mt" | grep -c '^waypoint')" -eq 601 ]
	TMPDIR="$T/nonexistent" run "$BIN/mt-stitch" --mem-limit 256 -i "$T/seg.mt" -o "$T/o.mt"
	[ "$status" -eq 111 ]
	[[ "$output" == "mt-stitch: fatal: temporary file failed in $T/nonexistent: "* ]]
	[ "${#lines[@]}" -eq 1 ]
	[ ! -e "$T/o.mt" ]
	TMPDIR="$T/nonexistent" run "$BIN/mt-segment" --stitch --all-waypoints --mem-limit 256 --symfs "$SYMFS" -i "$T/in.mt" -o "$T/o.mt"
	[ "$status" -eq 111 ]
	[[ "$output" == "mt-segment: fatal: temporary file failed in $T/nonexistent: "* ]]
	[ ! -e "$T/o.mt" ]
}
