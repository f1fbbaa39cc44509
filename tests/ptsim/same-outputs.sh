#!/usr/bin/env bash
# same-outputs.sh OLD_BIN NEW_BIN: do two builds of the oracles write the same
# bytes?  For a refactor that must not change behaviour (issue 18): run both
# builds' mt-ptsim on every cached run (tests/.cache/ptsim*/runs/*.run) with
# every variant's options of mk/ptsim.mk (and --inline-truth on two), both
# builds' mt-compare on the results in each of its modes, and both builds'
# mt-ptgen on a test program; compare every output file, stdout, stderr and
# exit status.  Prints one line per difference and the counts; exit 1 on any
# difference.  Needs the cache (make ptsim-cache exact-cache) and bin/ built.
#
#   cp -a bin /tmp/old-bin; (change, rebuild); bash tests/ptsim/same-outputs.sh /tmp/old-bin bin
set -u
OLD=$(cd "$1" && pwd) NEW=$(cd "$2" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$ROOT" || exit 2
runs=0 same=0 diff=0

# args VARIANT: that variant's options, from mk/ptsim.mk
common=$(sed -n 's/^PTSIM_COMMON := //p' mk/ptsim.mk)
args() { sed -n "s/^PTSIM_ARGS_$1 :=[ ]*//p" mk/ptsim.mk; }
variants=$(sed -n 's/^PTSIM_VARIANTS := //p' mk/ptsim.mk)

# judge WHAT A B: compare two result directories (every file, links as links)
judge() {
	runs=$((runs + 1))
	if diff -r --no-dereference "$2" "$3" > "$T/d" 2>&1; then
		same=$((same + 1))
	else
		diff=$((diff + 1))
		echo "DIFFERENT: $1"
		head -5 "$T/d"
	fi
}

# both NAME CMD ARGS...: run $OLD/CMD and $NEW/CMD into $T/old/NAME and
# $T/new/NAME (the string @D in ARGS is that directory), stdout, stderr and
# status kept beside the outputs
both() {
	name=$1 cmd=$2
	shift 2
	for side in old new; do
		bin=$OLD
		[ $side = new ] && bin=$NEW
		d=$T/$side/$name
		rm -rf "$d"
		mkdir -p "$d"
		a=()
		for x in "$@"; do a+=("${x//@D/$d/out}"); done
		"$bin/$cmd" "${a[@]}" > "$d/stdout" 2> "$d/stderr"
		echo $? > "$d/status"
		# a temporary path in a message is no difference
		sed -i "s|$T/[a-z]*/|T/|g" "$d/stderr" "$d/stdout"
	done
	judge "$name" "$T/old/$name" "$T/new/$name"
}

for run in tests/.cache/ptsim/runs/*.run tests/.cache/ptsim-exact/runs/*.run; do
	[ -f "$run" ] || continue
	p=$(basename "$run" .run)
	c=$(basename "$(dirname "$(dirname "$run")")")
	for v in $variants; do
		# shellcheck disable=SC2046
		both "ptsim-$c-$v-$p" mt-ptsim --replay "$run" $common $(args "$v") -o @D
		# mt-compare on it, each mode, the truth against the product's spans
		r=$T/new/ptsim-$c-$v-$p/out
		[ -f "$r/perf.data" ] || continue
		"$NEW/mt-decode" --buildid-dir "$r/images" -o "$T/dec.mt" "$r/perf.data" 2> /dev/null
		"$NEW/mt-segment" -i "$T/dec.mt" -o "$T/seg.mt" 2> /dev/null
		"$NEW/mt-stitch" -i "$T/seg.mt" -o "$T/st.mt" 2> /dev/null
		for m in plain b actual keep; do
			case $m in
			plain) set -- -v -l 50 --min-recall 1 "$r/truth-spans.mt" "$T/seg.mt" ;;
			b) set -- -b "$r/truth.mt" "$r/truth-spans.mt" "$T/st.mt" ;;
			actual) set -- --actual-window --strict -t 5 --absolute-depth -l 1000 "$r/truth-spans.mt" "$T/st.mt" ;;
			keep) set -- --kept-branches "$r/truth.mt" "$T/dec.mt" ;;
			esac
			both "compare-$m-$c-$v-$p" mt-compare "$@"
		done
	done
done

# --inline-truth (llvm-symbolizer) and mt-compare --inline
for p in inline sym_inline; do
	run=tests/.cache/ptsim/runs/$p.run
	[ -f "$run" ] || continue
	for w in "" "--window 300"; do
		# shellcheck disable=SC2086
		both "inline-$p${w:+-w}" mt-ptsim --replay "$run" $common $w --inline-truth -o @D
		r=$T/new/inline-$p${w:+-w}/out
		"$NEW/mt-decode" --buildid-dir "$r/images" -o "$T/dec.mt" "$r/perf.data" 2> /dev/null
		"$NEW/mt-segment" -i "$T/dec.mt" -o "$T/seg.mt" 2> /dev/null
		"$NEW/mt-symbolize" --no-cache --symfs "$r/images" -o "$T/sym.mt" "$T/seg.mt" 2> /dev/null
		both "compare-inline-$p${w:+-w}" mt-compare --inline -l 1000 "$r/truth-inline.mt" "$T/sym.mt"
	done
done

# mt-ptgen on a real static binary, a few shapes
B=build/programs/fnptr
if [ -x "$B" ]; then
	both ptgen-a mt-ptgen -n 300k --seed 7 --threads 3 -o @D "$B"
	both ptgen-b mt-ptgen -n 200k --noretcomp --psb-period 512 --seed 5 --no-spans -o @D "$B"
	both ptgen-c mt-ptgen -n 100k --seed 42 --max-depth 6 --budget 200 -o @D "$B"
	both ptgen-d mt-ptgen -n 100k --root main -o @D "$B"
fi

echo "same-outputs: $runs runs, $same identical, $diff different"
[ "$diff" -eq 0 ]
