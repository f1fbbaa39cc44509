#!/bin/sh
# The fidelity corpus: programs nobody wrote for mt, run as they are under
# mt-ptsim, each scored against mt-ptsim's truth in many configurations.
#
#   sh bench/corpus.sh [STAGE...]     STAGE: build step variants table (default: all)
#
# build     compile the C++/Rust programs (bench/corpus/*.cc, *.rs; -O2 -g) and
#           write the input files, under bench/out/corpus/
# step      one stepped mt-ptsim run per program (--save-run; the slow part:
#           ~7-37k instructions/s), its outputs are the "whole" configuration
# variants  replays of each saved run (cheap): windows of 2,000 / 20,000 /
#           200,000 instructions, every --inject kind at 25 %, 50 %, 75 %
# table     mt-decode | mt-segment | mt-stitch on every configuration (mt-decode
#           and mt-segment given the run's images, as mt run passes its
#           capture's: not whatever ~/.debug holds) and
#           mt-compare against the truth (its default, honest window):
#           precision, recall, frame-time coverage and exact coverage, wrong
#           spans; kept-w: decoded branches the truth has not (mt-compare
#           --kept-branches), kept/truth: decoded / true branches; inline
#           (whole run and windows): the truth's inline frames (mt-ptsim
#           --inline-truth) found in mt-symbolize's output (mt-compare
#           --inline), found/checked; gap (faults): the share of the true
#           frame-time that lies inside the decoder's gaps in frames that
#           begin or end there (mt-compare's gap=; no trace shows it:
#           coverage can reach at most 1 - gap, since mt-compare credits no
#           time inside a gap but a frame's joined across it that was one
#           activation).  bench/out/corpus/table.txt
# loss      (not in the default stages) from the table (CORPUS_TABLE, else
#           table.txt): every faulted row below 95 % frame-time coverage,
#           with its gap share and what is lost beyond it (1 - coverage -
#           gap: what mt loses that the recording holds, including the time
#           in a gap of frames live across it that mt-stitch did not join),
#           and the totals
# chain     (not in the default stages) every window with the trigger's call
#           chain (mt-ptsim's hits.mt appended to mt-decode's output, as mt
#           does): mt-compare --absolute-depth (the whole stack, root
#           included) without and with the chain, the chains joined and the
#           outer frames they added.  bench/out/corpus/chain.txt
#
# Every stage skips what already exists (delete bench/out/corpus/ to redo).
# CORPUS_LIST FILE takes the program list (the format below) from FILE
# instead (bench/holdout.txt: ten more programs, kept apart from the tuning;
# bench/probe.txt: fifteen more, a probe for new kinds of failure at 400,000
# instructions; bench/probe2.txt, probe3.txt, probe4.txt: 47 more at 1,000,000;
# bench/probe5.txt: threads, signals, longjmp and recursion in real programs;
# bench/probe6.txt: signal traps, sort callbacks, caught errors, regex engines;
# give each its own CORPUS_OUT).
# CORPUS_CONFIGS (a shell pattern, e.g. '*@*': the faulted rows) restricts
# the table to some configurations; CORPUS_ONLY="p1 p2" restricts to some programs (CORPUS_TABLE: the table file
# then, to run parts in parallel); CORPUS_MAX overrides every
# program's --max-insns; CORPUS_BIN the directory of the mt tools (default
# bin/: a copy keeps a long table run off a rebuild); CORPUS_INLINE=whole checks
# inline frames in the whole run only, none in no configuration (n/m; the
# inline check is most of a table line's cost).  Needs: g++, rustc (the Rust program is skipped
# without it), and the Debian packages sqlite3, python3, perl, gzip, bzip2,
# xz-utils, mawk, bc, jq, tar, findutils (`apt-get install sqlite3 bc jq`
# for the ones a minimal system lacks; a program whose binary is missing is
# skipped and listed as such).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${CORPUS_BIN:-$ROOT/bin}
O=${CORPUS_OUT:-$ROOT/bench/out/corpus}
IN=$O/in
NICE="nice -n 10"

# The program list: NAME, --max-insns, mt-ptsim options, command: words split
# at spaces, no shell quoting; in a word, ~ is a space, @IN@ the input
# directory and @O@ the output directory.
# A run that reaches --max-insns is cut there (mt-ptsim
# exits 1 and its outputs cover the run up to the cut): "whole" is that run.
programs() {
	if [ -n "${CORPUS_LIST:-}" ]; then
		cat "$CORPUS_LIST"
		return
	fi
	cat <<'EOF'
ls	2000000	-	/usr/bin/ls -l /usr/bin
sort	2000000	-	/usr/bin/sort @IN@/words.txt
gzip	2000000	-	/usr/bin/gzip -c @IN@/words.txt
gunzip	2000000	-	/usr/bin/gzip -dc @IN@/words-big.txt.gz
grep-r	2000000	-	/usr/bin/grep -r -n fo @IN@/tree
sed	2000000	-	/usr/bin/sed -e s/a/A/g -e /9/d @IN@/words.txt
awk	2000000	-	/usr/bin/awk {s+=length($0)}END{print(s)} @IN@/words.txt
find	2000000	-	/usr/bin/find @IN@/tree -name *.txt
tar	2000000	-	/usr/bin/tar -cf - -C $IN tree
bzip2	2000000	-	/usr/bin/bzip2 -c @IN@/words.txt
xz	2000000	-	/usr/bin/xz -c -0 @IN@/words.txt
md5sum	2000000	-	/usr/bin/md5sum @IN@/words.txt
diff	2000000	-	/usr/bin/diff @IN@/words.txt @IN@/words2.txt
bc	2000000	-	/usr/bin/bc -l @IN@/calc.bc
jq	2000000	-	/usr/bin/jq .a[2].b @IN@/doc.json
python3	2000000	--start-at PyRun_SimpleStringFlags	/usr/bin/python3.11 -c print(sorted({i*7%13:i~for~i~in~range(50)}.items())[:3])
perl	2000000	--start-at perl_run	/usr/bin/perl -e my%h;$h{$_%17}+=$_~for~1..2000;print(join(",",sort{$a<=>$b}keys%h),"\n")
sqlite3	2000000	-	/usr/bin/sqlite3 :memory: create~table~t(a,b);insert~into~t~values(1,2),(3,4);select~sum(a*b)~from~t;
cxx-containers	2000000	--start-at main	@O@/bin/cxx-containers 400
cxx-iostream	2000000	--start-at main	@O@/bin/cxx-iostream 400
cxx-except	2000000	--start-at main	@O@/bin/cxx-except 300
rust-collect	2000000	--start-at main	@O@/bin/rust-collect 300
EOF
}

want() { [ -z "${CORPUS_ONLY:-}" ] && return 0; case " $CORPUS_ONLY " in *" $1 "*) return 0 ;; esac; return 1; }

stage_build() {
	mkdir -p "$O/bin" "$IN/tree/a/b" "$IN/tree/c"
	for f in "$ROOT"/bench/corpus/*.cc; do
		p=$(basename "$f" .cc)
		[ -x "$O/bin/$p" ] || g++ -O2 -g -o "$O/bin/$p" "$f" || return 1
	done
	if command -v rustc >/dev/null 2>&1; then
		for f in "$ROOT"/bench/corpus/*.rs; do
			p=$(basename "$f" .rs)
			[ -x "$O/bin/$p" ] || rustc -O -g -o "$O/bin/$p" "$f" || return 1
		done
	fi
	if [ ! -f "$IN/words.txt" ]; then
		awk 'BEGIN { x = 7; for (i = 0; i < 300; i++) { x = (x * 1103515 + 12345) % 2147483648; printf "%s%d foo%d\n", substr("abcdefghij", x % 10 + 1, 3), x % 1000, i } }' >"$IN/words.txt"
		sed 's/7/seven/' "$IN/words.txt" >"$IN/words2.txt"
		gzip -c "$IN/words.txt" >"$IN/words.txt.gz"
		printf 'scale=20\na(1)*4\nsqrt(2)\n' >"$IN/calc.bc"
		printf '{"a":[{"b":1},{"b":2},{"b":[3,4,{"c":"five"}]}],"d":null}\n' >"$IN/doc.json"
		printf '<?xml version="1.0"?>\n<doc a="1"><!-- c --><item n="1">one &amp; two</item><item n="2"><![CDATA[<x>]]></item><empty/></doc>\n' >"$IN/doc.xml"
		for d in a a/b c; do
			for i in 1 2 3; do head -n $((i * 20)) "$IN/words.txt" >"$IN/tree/$d/f$i.txt"; done
			echo fo >"$IN/tree/$d/x.dat"
		done
	fi
	# tclsh's script (bench/probe.txt): recursion, a dict, string output
	if [ ! -f "$IN/t.tcl" ]; then
		printf '%s\n' 'proc fib {n} { if {$n < 2} { return $n }; return [expr {[fib [expr {$n-1}]] + [fib [expr {$n-2}]]}] }' \
			'set d [dict create]' 'foreach w {alpha beta gamma delta alpha beta} { dict incr d $w }' \
			'puts "[fib 12] [dict get $d alpha]"' >"$IN/t.tcl"
	fi
	# tcl-catch's script (bench/probe6.txt): errors caught in a loop
	[ -f "$IN/c.tcl" ] || printf '%s\n' 'set n 0' 'for {set i 0} {$i < 200} {incr i} { if {[catch {error "e$i"} m]} { incr n } }' 'puts $n' >"$IN/c.tcl"
	# bzip2-d's input (bench/probe5.txt)
	[ -f "$IN/words.txt.bz2" ] || bzip2 -c "$IN/words.txt" >"$IN/words.txt.bz2"
	# gunzip's input: long enough that its run reaches the 2M cap
	if [ ! -f "$IN/words-big.txt.gz" ]; then
		awk 'BEGIN { x = 11; for (i = 0; i < 3000; i++) { x = (x * 1103515 + 12345) % 2147483648; printf "%s%d bar%d\n", substr("klmnopqrst", x % 10 + 1, 4), x % 10000, i } }' | gzip -c >"$IN/words-big.txt.gz"
	fi
}

# The stepped run; its outputs are configuration "whole".
stage_step() {
	mkdir -p "$O/runs"
	programs | while IFS='	' read -r name max opts cmd; do
		want "$name" || continue
		[ -f "$O/runs/$name.run" ] && continue
		[ "$opts" = - ] && opts=
		set -f
		# shellcheck disable=SC2086
		set -- $(printf '%s' "$cmd" | sed "s|@IN@|$IN|g; s|@O@|$O|g")
		set +f
		for a; do shift; set -- "$@" "$(printf '%s' "$a" | tr '~' ' ')"; done
		if [ ! -x "$1" ]; then
			echo "corpus: $name: $1 missing, skipped" >&2
			continue
		fi
		rm -rf "$O/$name/whole"
		mkdir -p "$O/$name"
		# shellcheck disable=SC2086
		(cd "$IN" && $NICE "$B/mt-ptsim" --stats --max-insns "${CORPUS_MAX:-$max}" $opts \
			--save-run "$O/runs/$name.run.tmp" -o "$O/$name/whole" -- "$@" \
			</dev/null >"$O/$name/stdout.txt" 2>"$O/$name/ptsim.err")
		rc=$?
		if [ $rc -le 1 ] && [ -f "$O/$name/whole/truth-spans.mt" ]; then
			mv "$O/runs/$name.run.tmp" "$O/runs/$name.run"
		else
			echo "corpus: $name: mt-ptsim exit $rc: $(tail -1 "$O/$name/ptsim.err")" >&2
		fi
	done
}

configs() {
	echo "w2k --window 2000"
	echo "w20k --window 20000"
	echo "w200k --window 200000"
	for p in 25 50 75; do
		echo "overflow@$p --inject overflow@$p%"
		echo "drop@$p --inject drop@$p%:64"
		echo "corrupt@$p --inject corrupt@$p%:16"
		echo "truncate@$p --inject truncate-aux@$p%"
	done
}

stage_variants() {
	for r in "$O"/runs/*.run; do
		[ -f "$r" ] || continue
		name=$(basename "$r" .run)
		want "$name" || continue
		configs | while read -r c opts; do
			[ -f "$O/$name/$c/truth-spans.mt" ] && continue
			rm -rf "$O/$name/$c"
			# shellcheck disable=SC2086
			$NICE "$B/mt-ptsim" --replay "$r" $opts -o "$O/$name/$c" >/dev/null 2>"$O/$name/$c.err" ||
				[ -f "$O/$name/$c/truth-spans.mt" ] || echo "corpus: $name $c: $(tail -1 "$O/$name/$c.err")" >&2
		done
	done
}

# One line of the table: NAME CONFIG DIR.
score() {
	name=$1 c=$2 d=$3 T=$4
	$NICE "$B/mt-decode" --buildid-dir "$d/images" -o "$T/dec.mt" "$d/perf.data" 2>/dev/null
	kept=$("$B/mt-compare" --kept-branches "$d/truth.mt" "$T/dec.mt" 2>/dev/null | tail -1)
	kw=$(printf '%s' "$kept" | sed -n 's/.* wrong=\([0-9]*\).*/\1/p')
	kk=$(printf '%s' "$kept" | sed -n 's/.* kept=\([0-9]*\).*/\1/p')
	kt=$(printf '%s' "$kept" | sed -n 's/.* truth=\([0-9]*\).*/\1/p')
	$NICE "$B/mt-segment" --images "$d/images" -i "$T/dec.mt" -o "$T/seg.mt" 2>/dev/null
	$NICE "$B/mt-stitch" -i "$T/seg.mt" -o "$T/st.mt" 2>/dev/null
	line=$("$B/mt-compare" "$d/truth-spans.mt" "$T/st.mt" 2>/dev/null | tail -1)
	get() { printf '%s' "$line" | sed -n "s/.*[ :]$1=\\([^ ]*\\).*/\\1/p"; }
	# faults: the true frame-time inside the decoder's gaps in frames that
	# begin or end there (mt-compare's gap=; frames live across a gap are
	# not counted)
	gs=-
	case $c in *@*) gs=$(get gap | awk '{ printf "%.4f", $1 }') ;; esac
	inl=-
	case ${CORPUS_INLINE:-all}:$c in
	none:w*) inl=n/m ;;
	*:whole | all:w*)
		# the inline truth (mt-ptsim --inline-truth) of this configuration,
		# mt-symbolize's inline frames judged by mt-compare --inline
		if [ ! -f "$d/truth-inline.mt" ]; then
			o=$(configs | awk -v c="$c" '$1 == c { $1 = ""; print }')
			rm -rf "$T/inl"
			# shellcheck disable=SC2086
			$NICE "$B/mt-ptsim" --replay "$O/runs/$name.run" $o --inline-truth -o "$T/inl" \
				>/dev/null 2>&1
			[ -f "$T/inl/truth-inline.mt" ] && cp "$T/inl/truth-inline.mt" "$d/truth-inline.mt"
		fi
		if [ -f "$d/truth-inline.mt" ]; then
			$NICE "$B/mt-symbolize" --cache-dir "$O/symcache" --images "$d/images" -i "$T/st.mt" \
				-o "$T/sym.mt" 2>/dev/null
			il=$("$B/mt-compare" --inline "$d/truth-inline.mt" "$T/sym.mt" 2>/dev/null | tail -1)
			inl=$(printf '%s' "$il" | sed -n 's/.*inline_checked=\([0-9]*\) inline_matched=\([0-9]*\).*/\2\/\1/p')
		fi
		;;
	whole:w*) inl=n/m ;;
	esac
	printf '%-15s %-12s %9s %7s %8s %8s %6s %6s %13s %11s %6s\n' "$name" "$c" "$(get precision)" "$(get recall)" \
		"$(get coverage)" "$(get exact_coverage)" "$(get wrong)" "${kw:--}" "${kk:--}/${kt:--}" "${inl:--}" "$gs"
}

stage_table() {
	T=$(mktemp -d)
	trap 'rm -rf "$T"' EXIT
	{
		printf '%-15s %-12s %9s %7s %8s %8s %6s %6s %13s %11s %6s\n' program config precision recall coverage exact-cov wrong kept-w kept/truth inline gap
		for dir in "$O"/*/whole; do
			[ -d "$dir" ] || continue
			name=$(basename "$(dirname "$dir")")
			want "$name" || continue
			for c in whole $(configs | cut -d' ' -f1); do
				# shellcheck disable=SC2254
				case $c in ${CORPUS_CONFIGS:-*}) ;; *) continue ;; esac
				[ -f "$O/$name/$c/truth-spans.mt" ] && score "$name" "$c" "$O/$name/$c" "$T"
			done
		done
	} | tee "${CORPUS_TABLE:-$O/table.txt}"
}

# The faulted rows below 95 % coverage: the trace the recording lacks (gap)
# against what mt loses beyond it.
stage_loss() {
	awk -v lim=0.95 '
	$1 == "program" || $2 !~ /@/ { next }
	{ n++ }
	$5 < lim {
		low++; g = $11 == "-" ? 0 : $11; b = 1 - $5 - g
		if (b < 0 && b > -0.00005) b = 0
		printf "%-15s %-12s %8.4f %7.4f %9.4f %8.4f\n", $1, $2, $5, g, $5 + g, b
		if (b > worst) worst = b
		if (b > 0.005) over++
		if (b < -0.005) under++
	}
	BEGIN { printf "%-15s %-12s %8s %7s %9s %8s\n", "program", "config", "coverage", "gap", "cov+gap", "beyond" }
	END { printf "faulted rows: %d; below %.2f coverage: %d; beyond > 0.005: %d (largest %.4f); below -0.005: %d (coverage credited inside a gap: spans joined across it)\n",
		n, lim, low, over, worst, under }' "${CORPUS_TABLE:-$O/table.txt}"
}

# Windows judged with the whole stack: without and with the call chain.
stage_chain() {
	T=$(mktemp -d)
	trap 'rm -rf "$T"' EXIT
	{
		printf '%-15s %-6s %9s %9s %7s %6s %6s\n' program config wrong-no wrong-ch judged joined frames
		for d in "$O"/*/w*k; do
			[ -f "$d/hits.mt" ] || continue
			name=$(basename "$(dirname "$d")")
			want "$name" || continue
			$NICE "$B/mt-decode" --buildid-dir "$d/images" -o "$T/dec.mt" "$d/perf.data" 2>/dev/null
			"$B/mt-cat" -o "$T/in.mt" "$T/dec.mt" "$d/hits.mt"
			w=
			for i in dec in; do
				$NICE "$B/mt-segment" --stats --images "$d/images" -i "$T/$i.mt" -o "$T/seg.mt" 2>"$T/seg.err"
				$NICE "$B/mt-stitch" -i "$T/seg.mt" -o "$T/st.mt" 2>/dev/null
				l=$("$B/mt-compare" -b "$d/truth.mt" --absolute-depth "$d/truth-spans.mt" "$T/st.mt" 2>/dev/null | tail -1)
				w="$w $(printf '%s' "$l" | sed -n 's/.* wrong=\([0-9]*\).*/\1/p')"
			done
			j=$(printf '%s' "$l" | sed -n 's/.* judged=\([0-9]*\).*/\1/p')
			cj=$(sed -n 's/.* chains_joined=\([0-9]*\).*/\1/p' "$T/seg.err")
			cf=$(sed -n 's/.* chain_frames=\([0-9]*\).*/\1/p' "$T/seg.err")
			# shellcheck disable=SC2086
			printf '%-15s %-6s %9s %9s %7s %6s %6s\n' "$name" "$(basename "$d")" $w "$j" "${cj:--}" "${cf:--}"
		done
	} | tee "$O/chain.txt"
}

mkdir -p "$O"
STAGES=${*:-build step variants table}
for s in $STAGES; do
	case $s in
	build | step | variants | table | loss | chain) "stage_$s" || exit 1 ;;
	*) echo "usage: sh bench/corpus.sh [build|step|variants|table|loss|chain]..." >&2; exit 2 ;;
	esac
done
