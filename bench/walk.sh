#!/bin/sh
# bench/walk.sh [REPS] — issue 20's cached walk, one run on the same files:
# the bare libipt block-decoder loop (build/bench/ptdecode_bench bare), its
# packet decoder alone (the floor of anything that parses packets with
# libipt), mt-decode --decoder libipt (the libipt stepper), --decoder
# walk-qry (the walk over libipt's query decoder) and --decoder walk (the
# walk over the project's query decoder, ptq.c).  CPU (user + sys) and wall seconds, median of REPS (default 5, env
# BENCH_REPS), peak RSS; ratios.  Inputs: the 50M mt-ptgen trace of
# build/programs/fnptr (bench/out/ptgen-50M, made as bench/pipeline.sh makes
# it), a 4-thread one (bench/out/ptgen-20M-t4), the same as per-cpu buffers
# with thread switches (mt-ptgen --per-cpu --fake-switch), the Skylake fixture
# (its packets: the walk leaves it to libipt), raw mode (the 50M trace's PT
# with --image), and real programs: five Debian programs nobody wrote for mt
# (perl's interpreter, sort, gzip, sed, mawk on a generated text), each
# single-stepped once by mt-ptsim for up to 2 M instructions (what `perf
# record -e intel_pt/cyc=1,mtc=0/u` writes; ~5 minutes the first time, cached
# in bench/out/ptsim-real/ until mt-ptsim changes), decoded from their perf.data
# and in raw mode (their PT with --image for each mapped file), each row and
# their sums.  Each walked input is checked byte-identical to --decoder
# libipt first, and decoded with --decoder walk-only (so the walk did run).
# BENCH_CG=1 adds callgrind instruction counts (the stable figure) on the 5M
# trace (CG_N=50M: on the 50M trace, ~15 min).
set -e
cd "$(dirname "$0")/.."
R=${1:-${BENCH_REPS:-5}}
FIX=/work/shared/fixtures/intel_pt-skylake-4.14
[ -d "$FIX" ] || FIX=tests/fixtures/intel_pt-skylake-4.14
N=50M
. bench/ptgen-trace
D50=$D
DT=bench/out/ptgen-20M-t4
if [ ! -f "$DT/perf.data" ] || [ bin/mt-ptgen -nt "$DT/perf.data" ] || [ "$BIN" -nt "$DT/perf.data" ]; then
	rm -rf "$DT"
	bin/mt-ptgen --threads 4 --no-spans -n 20M -o "$DT" "$BIN" >/dev/null 2>&1
fi
# the same threads as per-cpu buffers (perf's default, mt-capture's), each cpu
# handed to another thread for 0.5 ms of every 1 ms of its trace
DC=bench/out/ptgen-20M-t4-percpu
if [ ! -f "$DC/perf.data" ] || [ bin/mt-ptgen -nt "$DC/perf.data" ] || [ "$BIN" -nt "$DC/perf.data" ]; then
	rm -rf "$DC"
	bin/mt-ptgen --threads 4 --per-cpu --fake-switch 1000000 --no-spans -n 20M -o "$DC" "$BIN" >/dev/null 2>&1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# measure NAME CMD...: NAME.cpu, .wall (medians), .rss (KB, max)
# (REP > 1: each measurement runs the command REP times in a row and reports
# a run's share, for inputs decoded faster than /usr/bin/time's 10 ms)
measure() {
	name=$1
	shift
	: >"$TMP/$name.all"
	i=0
	while [ "$i" -lt "$R" ]; do
		/usr/bin/time -f '%e %U %S %M' -o "$TMP/t" sh -c 'n=$1; shift; while [ "$n" -gt 0 ]; do
			"$@" || [ $? -eq 1 ] || exit 2; n=$((n - 1)); done' sh "${REP:-1}" "$@" >/dev/null 2>"$TMP/$name.err" ||
			{ echo "walk.sh: $name failed:" >&2; cat "$TMP/$name.err" >&2; exit 1; }
		tail -1 "$TMP/t" >>"$TMP/$name.all"
		i=$((i + 1))
	done
	awk -v n="${REP:-1}" '{ printf "%.4g\n", ($2 + $3) / n }' "$TMP/$name.all" | median >"$TMP/$name.cpu"
	awk -v n="${REP:-1}" '{ printf "%.4g\n", $1 / n }' "$TMP/$name.all" | median >"$TMP/$name.wall"
	awk '{ print $4 }' "$TMP/$name.all" | sort -n | tail -1 >"$TMP/$name.rss"
}
v() { cat "$TMP/$1"; }
ratio() { awk -v a="$(v "$1")" -v b="$(v "$2")" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }

# row LABEL BAREARGS DECODEARGS...: one input
row() {
	label=$1 bareargs=$2
	shift 2
	bin/mt-decode --decoder libipt -o "$TMP/a.mt" "$@" 2>"$TMP/a.err" || [ $? -eq 1 ]
	bin/mt-decode --decoder walk -o "$TMP/b.mt" "$@" 2>"$TMP/b.err" || [ $? -eq 1 ]
	cmp -s "$TMP/a.mt" "$TMP/b.mt" && cmp -s "$TMP/a.err" "$TMP/b.err" ||
		{ echo "walk.sh: $label: --decoder walk differs from libipt" >&2; exit 1; }
	walked=walked
	bin/mt-decode --decoder walk-only -o /dev/null "$@" 2>/dev/null || [ $? -eq 1 ] || walked="libipt (fallback)"
	if [ -n "$bareargs" ]; then
		# shellcheck disable=SC2086
		measure bare "$BARE" bare $bareargs
		# shellcheck disable=SC2086
		measure pkt "$BARE" bare $bareargs packets
	else
		echo - >"$TMP/bare.cpu"; echo - >"$TMP/bare.wall"; echo - >"$TMP/pkt.cpu"
	fi
	measure libipt bin/mt-decode --decoder libipt -o /dev/null "$@"
	measure walkq bin/mt-decode --decoder walk-qry -o /dev/null "$@"
	measure walk bin/mt-decode --decoder walk -o /dev/null "$@"
	if [ -n "${SUM:-}" ]; then
		for x in bare pkt libipt walkq walk; do
			for y in cpu wall; do
				[ -f "$TMP/$x.$y" ] || continue
				awk -v a="$(cat "$TMP/sum-$SUM.$x.$y" 2>/dev/null || echo 0)" -v b="$(v $x.$y)" \
					'BEGIN { printf "%.4g\n", a + b }' >"$TMP/sum-$SUM.$x.$y.new"
				mv "$TMP/sum-$SUM.$x.$y.new" "$TMP/sum-$SUM.$x.$y"
			done
		done
		awk -v a="$(cat "$TMP/sum-$SUM.libipt.rss" 2>/dev/null || echo 0)" -v b="$(v libipt.rss)" \
			'BEGIN { print (a > b ? a : b) }' >"$TMP/sum-$SUM.libipt.rss.new"
		mv "$TMP/sum-$SUM.libipt.rss.new" "$TMP/sum-$SUM.libipt.rss"
		awk -v a="$(cat "$TMP/sum-$SUM.walk.rss" 2>/dev/null || echo 0)" -v b="$(v walk.rss)" \
			'BEGIN { print (a > b ? a : b) }' >"$TMP/sum-$SUM.walk.rss.new"
		mv "$TMP/sum-$SUM.walk.rss.new" "$TMP/sum-$SUM.walk.rss"
	fi
	printrow "$label" "$walked"
}

# printrow LABEL DECODED-BY: the row of the values in $TMP/{bare,pkt,libipt,walkq,walk}.*
printrow() {
	printf '%-22s %-18s %6s %6s | %6s %6s %6s %6s | %6s %6s | %7s %7s %7s | %6s %6s\n' "$1" "$2" \
		"$(v bare.cpu)" "$(v pkt.cpu)" "$(v libipt.cpu)" "$(v walkq.cpu)" "$(v walk.cpu)" \
		"$(ratio libipt.cpu walk.cpu)" "$(ratio bare.cpu walk.cpu)" "$(ratio bare.cpu libipt.cpu)" \
		"$(v bare.wall)" "$(v libipt.wall)" "$(v walk.wall)" \
		"$(awk -v k="$(v libipt.rss)" 'BEGIN { printf "%.1f", k / 1024 }')" \
		"$(awk -v k="$(v walk.rss)" 'BEGIN { printf "%.1f", k / 1024 }')"
}

# sumrow LABEL NAME: the sums a group of rows (SUM=NAME) left
sumrow() {
	for f in "$TMP"/sum-"$2".*; do
		cp "$f" "$TMP/${f##*/sum-$2.}"
	done
	printrow "$1" "walked"
}

. bench/rawargs

echo "bench/walk.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg), median of $R"
echo "CPU s: bare = ptdecode_bench bare (pt_blk_next + pt_blk_time), pkt = its packet decoder alone;"
echo "libipt / walk-q / walk = mt-decode --decoder libipt / walk-qry / walk, writing MTEV to /dev/null.  w/lib and"
echo "bare/walk: how many times faster the walk is; bare/libipt: today's path.  RSS MB: peak."
printf '%-22s %-18s %6s %6s | %6s %6s %6s %6s | %6s %6s | %7s %7s %7s | %6s %6s\n' input decoded-by bare pkt libipt walk-q walk \
	"w/lib" "bare/w" "bare/l" "wall-b" "wall-l" "wall-w" "rss-l" "rss-w"
row "ptgen 50M" "$D50/perf.data $D50/images" --buildid-dir "$D50/images" "$D50/perf.data"
row "ptgen 20M, 4 threads" "$DT/perf.data $DT/images" --buildid-dir "$DT/images" "$DT/perf.data"
row "the same, per-cpu" "$DC/perf.data $DC/images" --buildid-dir "$DC/images" "$DC/perf.data"
if [ -d "$FIX" ]; then
	row "skylake (no images)" "$FIX/perf.data.intel_pt-4.14 $TMP/none" --cpu 6/78/3 "$FIX/perf.data.intel_pt-4.14"
fi
# raw mode: the 50M trace's PT (its AUXTRACE payloads) and its one map
rawargs "$D50"
# shellcheck disable=SC2086
row "raw PT 50M (--pt)" "$D50/perf.data $D50/images" --pt "$TMP/raw.pt" $RAWARGS --cpu 6/106/6
# real programs: stepped once by mt-ptsim (cached), one thread each
DR=bench/out/ptsim-real
mkdir -p "$DR"
[ -f "$DR/in.txt" ] || seq 1 20000 | awk '{ printf "%d line%d %s\n", ($1 * 7919) % 10007, $1, ($1 % 3 ? "a" : "b") }' >"$DR/in.txt"
real() { # NAME COMMAND...
	name=$1
	shift
	if [ ! -f "$DR/$name/perf.data" ] || [ bin/mt-ptsim -nt "$DR/$name/perf.data" ]; then
		rm -rf "$DR/$name"
		# a run cut at --max-insns exits 1, its outputs cover the run to the cut
		rc=0
		bin/mt-ptsim --max-insns 2000000 -o "$DR/$name" -- "$@" </dev/null >/dev/null 2>"$DR/$name.err" || rc=$?
		[ "$rc" -le 1 ] && [ -f "$DR/$name/perf.data" ] ||
			{ echo "walk.sh: mt-ptsim $name failed:" >&2; cat "$DR/$name.err" >&2; exit 1; }
	fi
}
real perl /usr/bin/perl -e 'my %h; $h{$_ % 97} .= $_ for 1 .. 30000; print scalar(keys %h), "\n"'
real sort /usr/bin/sort -n "$DR/in.txt"
real gzip /usr/bin/gzip -c "$DR/in.txt"
real sed /usr/bin/sed -e 's/line\([0-9]*\)/\1 x/' "$DR/in.txt"
real mawk /usr/bin/mawk '{ s += $1; n[$3]++ } END { print s, n["a"] }' "$DR/in.txt"
SUM=real REP=20
for p in perl sort gzip sed mawk; do
	row "$p (2M insns)" "$DR/$p/perf.data $DR/$p/images" --buildid-dir "$DR/$p/images" "$DR/$p/perf.data"
done
sumrow "real programs: sum" real
SUM=realraw
for p in perl sort gzip sed mawk; do
	rawargs "$DR/$p"
	# shellcheck disable=SC2086
	row "$p raw (--pt)" "$DR/$p/perf.data $DR/$p/images" --pt "$TMP/raw.pt" $RAWARGS --cpu 6/106/6
done
sumrow "real programs raw: sum" realraw
SUM= REP=1
code=0
for l in $(bin/mt-decode --buildid-dir "$D50/images" "$D50/perf.data" 2>/dev/null | bin/mt-dump -k map |
	sed 's/.* len=\([^ ]*\) .*/\1/'); do
	code=$((code + l))
done
code=$(awk -v c="$code" 'BEGIN { printf "%.2f", c / 1048576 }')
echo "code mapped (50M trace): $code MB; the walk's caches: fixed, 4.9 MB (2^16 blocks x 64 B made in order and"
echo "their 2-way index, 512 KB; 2^13 instructions x 48 B; all queues) + libipt's block-cache map, 1 bit per code"
echo "byte (0.125 MB per MB)"
if [ "${BENCH_CG:-0}" = 1 ] && command -v valgrind >/dev/null 2>&1; then
	N=${CG_N:-5M}
	. bench/ptgen-trace
	for x in bare libipt walk-qry walk; do
		case $x in
		bare) set -- "$BARE" bare "$D/perf.data" "$D/images" ;;
		*) set -- bin/mt-decode --decoder $x --buildid-dir "$D/images" -o /dev/null "$D/perf.data" ;;
		esac
		valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
			sed -n 's/^==[0-9]*== I *refs: *//p' | tr -d , >"$TMP/$x.ir"
	done
	echo "instructions (callgrind, ${CG_N:-5M} trace): bare $(v bare.ir), libipt $(v libipt.ir)," \
		"walk-qry $(v walk-qry.ir), walk $(v walk.ir): bare/walk $(ratio bare.ir walk.ir)," \
		"libipt/walk $(ratio libipt.ir walk.ir), walk-qry/walk $(ratio walk-qry.ir walk.ir)"
fi
