#!/bin/bash
# bench/decode-identical.sh OLD NEW: decodes the test corpus with two
# mt-decode binaries and compares every byte they write (output file,
# stdout, stderr) and their exit codes.  For refactoring the decoder: the
# output must not change.
#
#   OLD, NEW  mt-decode binaries (e.g. one built from main, one from a branch)
#
# Inputs: every perf.data in tests/.cache (all mt-ptsim variants, with their
# images, without images, --records, -s), the saved mt-ptsim runs rewritten as
# per-cpu buffers with thread switches (mt-ptsim --per-cpu --fake-switch)
# and with MODE.TSX in every PSB+ (--tsx), clean and every fault kind, tests/corrupt/decode-*.data and the
# fuzz_perfdata corpus/seeds (--no-images, --partial, --records), the Skylake
# fixture (file, stdin, a real pipe, --records, with and without --cpu),
# raw mode (`--pt ... --image ...`: the fuzz_ptdecode seeds and corpus
# against build/programs/recursion, and the raw PT of a clean mt-ptsim run
# with its images).  Extra corpus directories: FUZZ_CORPUS="DIR..." (files
# ending in .pt or in a directory named *ptdecode* are raw PT, the rest
# perf.data).  Prints one line per difference and the counts; exit 1 on any
# difference, or on any input it could not make (counted, named).  The
# line `--decoder walk-check -s` adds (the trace segments
# it checked) is not compared.
set -u
cd "$(dirname "$0")/.." || exit 111
. mk/build-dir.sh
OLD=$(readlink -f "${1:?usage: decode-identical.sh OLD NEW}")
NEW=$(readlink -f "${2:?usage: decode-identical.sh OLD NEW}")
ROOT=$(pwd)
FIX=/work/shared/fixtures/intel_pt-skylake-4.14
[ -d "$FIX" ] || FIX=$ROOT/tests/fixtures/intel_pt-skylake-4.14
REC=$MT_BUILD/programs/recursion
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/a" "$T/b" "$T/old" "$T/new"
# the same name for both: messages start with it
cp "$OLD" "$T/old/mt-decode" && cp "$NEW" "$T/new/mt-decode" || exit 111
OLD=$T/old/mt-decode NEW=$T/new/mt-decode
n=0 same=0 diff=0 unmade=0 # unmade: inputs the corpus should hold that could not be made

# one INPUT-MODE ARGS...: runs both binaries in their own directory with
# the same arguments (output to ./out.mt), compares.  INPUT-MODE: "-" no
# stdin, "<FILE" FILE on stdin, "|FILE" FILE through a pipe.
one() {
	local in=$1 d
	shift
	for d in a b; do
		local bin=$OLD
		[ $d = b ] && bin=$NEW
		rm -f "$T/$d/out.mt"
		case $in in
		-) (cd "$T/$d" && timeout 300 "$bin" "$@" > stdout 2> stderr < /dev/null; echo $? > rc) ;;
		"<"*) (cd "$T/$d" && timeout 300 "$bin" "$@" > stdout 2> stderr < "${in#<}"; echo $? > rc) ;;
		"|"*) (cd "$T/$d" && cat "${in#|}" | timeout 300 "$bin" "$@" > stdout 2> stderr; echo $? > rc) ;;
		esac
		[ -f "$T/$d/out.mt" ] || echo none > "$T/$d/out.mt"
	done
	n=$((n + 1))
	local f bad=
	for d in a b; do # --decoder walk-check -s: its own count
		grep -v '^mt-decode: walk-check: checked=' "$T/$d/stderr" > "$T/$d/stderr.x"
		mv "$T/$d/stderr.x" "$T/$d/stderr"
	done
	for f in rc stdout stderr out.mt; do
		cmp -s "$T/a/$f" "$T/b/$f" || bad="$bad $f"
	done
	if [ -z "$bad" ]; then
		same=$((same + 1))
	else
		diff=$((diff + 1))
		echo "DIFFER ($bad ): $in $*"
	fi
}

# mt-ptsim runs: with images, without, records, stats
for p in $(find tests/.cache -name perf.data | sort); do
	d=$(dirname "$(readlink -f "$p")")
	one - --buildid-dir "$d/images" -o out.mt "$d/perf.data"
	one - --buildid-dir "$d/images" -s -o out.mt "$d/perf.data"
	one - --no-images -o out.mt "$d/perf.data"
	one - --symfs "$d/images" -o out.mt "$d/perf.data"
	one - --records "$d/perf.data"
	one "<$d/perf.data" --buildid-dir "$d/images" -o out.mt
done

# the saved mt-ptsim runs as per-cpu buffers, every cpu switching threads
# (the same process's and another's with other code) every 3 us of trace,
# clean and with each fault kind (mt-ptsim --per-cpu --fake-switch);
# and as a cpu with TSX writes them (MODE.TSX in every PSB+, mt-ptsim --tsx)
for r in $(ls tests/.cache/ptsim/runs/*.run 2>/dev/null); do
	for f in "" overflow@30% drop@40%:20 corrupt@50%:8 truncate-aux@60%; do
		for layout in "--per-cpu --fake-switch 3000" --tsx; do
			d=$T/rewritten
			rm -rf "$d"
			# shellcheck disable=SC2086 # the layout's words
			if ! bin/mt-ptsim --replay "$r" $layout ${f:+--inject "$f"} \
				--psb-period 2048 -o "$d" 2>/dev/null; then
				unmade=$((unmade + 1))
				echo "NOT MADE: mt-ptsim --replay $r $layout ${f:+--inject $f}"
				continue
			fi
			one - --buildid-dir "$d/images" -s -o out.mt "$d/perf.data"
		done
	done
done

# the corrupt corpus and perf.data fuzz inputs
perfinputs() {
	ls "$ROOT"/tests/corrupt/decode-*.data "$ROOT"/tests/corrupt/fuzz-perfdata-* 2>/dev/null
	[ -d fuzz/seeds/perfdata ] && ls -d "$ROOT"/fuzz/seeds/perfdata/*
	for c in ${FUZZ_CORPUS:-}; do
		case $c in *ptdecode*) ;; *) find "$(readlink -f "$c")" -type f ! -name '*.pt' | sort ;; esac
	done
}
for f in $(perfinputs); do
	one - --no-images -o out.mt "$f"
	one - --partial --no-images -o out.mt "$f"
	one - --no-images -s -o out.mt "$f"
	one - --records "$f"
	one "<$f" --no-images -o out.mt
done

# the Skylake fixture
if [ -d "$FIX" ]; then
	for f in "$FIX"/perf.data.intel_pt-4.14 "$FIX"/perf.data.piped.intel_pt-4.14; do
		one - --cpu 6/78/3 -o out.mt "$f"
		one - -o out.mt "$f"
		one - --cpu 6/78/3 --buildid-dir "$T/none" -o out.mt "$f"
		one - --cpu 6/78/3 --no-images -s -o out.mt "$f"
		one - --records "$f"
		one "<$f" --cpu 6/78/3 -o out.mt
		one "|$f" --cpu 6/78/3 -o out.mt
		one "|$f" --records
	done
fi

# raw mode
ptinputs() {
	ls "$ROOT"/tests/corrupt/fuzz-ptdecode-*.pt 2>/dev/null
	[ -d fuzz/seeds/ptdecode ] && ls -d "$ROOT"/fuzz/seeds/ptdecode/*
	for c in ${FUZZ_CORPUS:-}; do
		case $c in *ptdecode*) find "$(readlink -f "$c")" -type f | sort ;; *) find "$(readlink -f "$c")" -type f -name '*.pt' | sort ;; esac
	done
}
if [ -f "$REC" ]; then
	for f in $(ptinputs); do
		one - --cpu 6/94/3 --image "$REC:0x1000:0x78000@0x401000" --pt "$f" -o out.mt
		one - --image "$REC:0x1000:0x78000@0x401000" --pt "$f" --pid 7 --tid 8 -s -o out.mt
	done
fi
# raw PT of clean mt-ptsim runs, with their images (as tests/decode.bats does)
for p in $(find tests/.cache/ptsim -path '*clean*' -name perf.data | sort | head -4); do
	d=$(dirname "$(readlink -f "$p")")
	line=$("$OLD" --records "$d/perf.data" 2>/dev/null | grep ' AUXTRACE ' | head -1)
	[ -n "$line" ] || { unmade=$((unmade + 1)); echo "NOT MADE: raw PT of $d (no AUXTRACE)"; continue; }
	off=${line%% *}
	sz=$(echo "$line" | sed 's/.*aux_size=\([0-9]*\).*/\1/')
	tail -c +$((off + 48 + 1)) "$d/perf.data" | head -c "$sz" > "$T/raw.pt"
	args=
	while read -r k pid tm start len pgoff prot bid path; do
		path=${path#path=}; path=${path//\"/}
		f=$(ls "$d/images/$path/${bid#build_id=}/elf" "$d/images/$path/${bid#build_id=}/vdso" 2>/dev/null | head -1)
		[ -n "$f" ] && args="$args --image $f:${pgoff#pgoff=}:${len#len=}@${start#start=}"
	done < <("$OLD" --buildid-dir "$d/images" "$d/perf.data" 2>/dev/null | bin/mt-dump -k map)
	[ -n "$args" ] || { unmade=$((unmade + 1)); echo "NOT MADE: raw PT of $d (no image)"; continue; }
	one - --pt "$T/raw.pt" $args --cpu 6/106/6 -o out.mt
done

echo "decode-identical: $n runs, $same identical, $diff differ; $unmade inputs not made"
[ "$diff" -eq 0 ] && [ "$unmade" -eq 0 ]
