#!/usr/bin/env bats
# mt-segment, mt-stitch and mt-compare against mt-ptsim's ground truth, on
# every program of the cache (tests/.cache/ptsim, built by `make test`).
# Figures and the known differences: notes/segment.md.

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	C="$BATS_TEST_DIRNAME/.cache/ptsim"
	T="$BATS_TEST_TMPDIR"
	[ -d "$C/clean" ] || skip "no mt-ptsim cache (make ptsim-cache)"
}

# check VARIANT PROG SOURCE STAGES COMPARE-OPTIONS...: run SOURCE (truth|decode)
# through STAGES (seg|stitch) and compare with the truth; fails with the summary
check() {
	local v=$1 p=$2 src=$3 stages=$4
	shift 4
	local d="$C/$v/$p"
	if [ "$src" = truth ]; then
		cp "$d/truth.mt" "$T/in.mt"
	else
		"$BIN/mt-decode" --buildid-dir "$d/images" -o "$T/in.mt" "$d/perf.data" 2>/dev/null || true
		[ -s "$T/in.mt" ] || { echo "$v/$p: mt-decode wrote nothing"; return 1; }
	fi
	"$BIN/mt-segment" $SEGOPTS -i "$T/in.mt" -o "$T/seg.mt" 2>/dev/null || { echo "$v/$p: mt-segment failed"; return 1; }
	if [ "$stages" = stitch ]; then
		"$BIN/mt-stitch" -i "$T/seg.mt" -o "$T/out.mt" 2>/dev/null || { echo "$v/$p: mt-stitch failed"; return 1; }
	else
		mv "$T/seg.mt" "$T/out.mt"
	fi
	"$BIN/mt-compare" "$@" "$d/truth-spans.mt" "$T/out.mt" > "$T/cmp.txt" ||
		{ echo "$v/$p $src $stages: $(tail -1 "$T/cmp.txt")"; grep -m5 '^wrong:' "$T/cmp.txt"; return 1; }
}

EXACT="--min-precision 1 --min-recall 1 --max-wrong 0"

# Programs whose libraries (ld.so, libc.so, libgcc_s) have no .symtab: by default a
# jump there to an address an earlier call targeted is a tail call (what calls
# revealed); mt-ptsim's truth uses symbols only.  With --no-call-targets the
# rules are the same and every span matches.
STRIPPED="dynamic sym_inline"

@test "truth.mt of every clean and noretcomp run: every true span exactly, root frames included" {
	n=0
	for v in clean noretcomp; do
		for d in "$C/$v"/*/; do
			p=$(basename "$d")
			SEGOPTS=--no-call-targets check $v $p truth seg $EXACT
			case " $STRIPPED " in
			*" $p "*) SEGOPTS= check $v $p truth seg --min-precision 0.97 --min-recall 0.98 ;;
			*) SEGOPTS= check $v $p truth seg $EXACT ;;
			esac
			n=$((n + 1))
		done
	done
	[ "$n" -ge 10 ]
}

@test "mt-decode output of every clean and noretcomp run: every true span exactly" {
	for v in clean noretcomp; do
		for d in "$C/$v"/*/; do
			SEGOPTS=--no-call-targets check $v "$(basename "$d")" decode seg $EXACT
		done
	done
}

# A window that begins inside code without symbols cannot name the functions it
# returns into (dynamic, sym_inline: libc; exception: libgcc_s, where the window
# also begins inside the unwinder, under frames that end without a branch).
WINDOW_WEAK="dynamic sym_inline exception"

@test "--window snapshots (truth.mt and decoded): every true span exactly, root frames included" {
	for d in "$C/window"/*/; do
		p=$(basename "$d")
		case " $WINDOW_WEAK " in *" $p "*) continue ;; esac
		SEGOPTS= check window $p truth seg $EXACT
		SEGOPTS= check window $p decode seg $EXACT
	done
}

# exception: the decoder's times after the fault are off for a stretch (notes).
@test "overflow: after mt-stitch >= 95% of true frame-time covered and no wrong span" {
	for d in "$C/overflow"/*/; do
		p=$(basename "$d")
		case " $STRIPPED exception " in *" $p "*) continue ;; esac
		SEGOPTS=--no-call-targets check overflow $p decode stitch --min-coverage 0.95 --max-wrong 0
	done
}

# Everything inside the gap (to the next PSB) is lost: up to 8% of the
# frame-time of these short runs (notes/segment.md has every figure).
@test "corrupt: after mt-stitch no wrong span and >= 90% of true frame-time covered" {
	for d in "$C/corrupt"/*/; do
		p=$(basename "$d")
		case " $STRIPPED exception " in *" $p "*) continue ;; esac
		# Known issue (open): in longjmp the corrupt bytes land 0.88 of the way
		# from a PSB, so the gap alone loses > 10% of this short run; still no
		# wrong span allowed.
		if [ "$p" = longjmp ]; then
			SEGOPTS=--no-call-targets check corrupt $p decode stitch --min-coverage 0.85 --max-wrong 0
			continue
		fi
		SEGOPTS=--no-call-targets check corrupt $p decode stitch --min-coverage 0.90 --max-wrong 0
	done
}

@test "injected faults: before mt-stitch the same traces lose most of their frame-time" {
	SEGOPTS= check overflow recursion decode seg
	cov=$(tail -1 "$T/cmp.txt" | sed 's/.* coverage=\([0-9.]*\) .*/\1/')
	SEGOPTS= check overflow recursion decode stitch --min-coverage 0.95 --max-wrong 0
	cov2=$(tail -1 "$T/cmp.txt" | sed 's/.* coverage=\([0-9.]*\) .*/\1/')
	echo "before $cov after $cov2"
	awk -v a="$cov" -v b="$cov2" 'BEGIN { exit !(a < 0.95 && b > a) }'
}

@test "mt-stitch spilling to a temporary file (--mem-limit 256) writes the same bytes as in memory" {
	n=0
	for v in overflow corrupt; do
		for p in recursion threads dynamic exception; do
			d="$C/$v/$p"
			[ -d "$d" ] || continue
			"$BIN/mt-decode" --buildid-dir "$d/images" -o "$T/in.mt" "$d/perf.data" 2>/dev/null || true
			"$BIN/mt-segment" -i "$T/in.mt" -o "$T/seg.mt" 2>/dev/null
			"$BIN/mt-stitch" --stats -i "$T/seg.mt" -o "$T/a.mt" 2>"$T/a.err"
			TMPDIR="$T" "$BIN/mt-stitch" --mem-limit 256 -i "$T/seg.mt" -o "$T/b.mt" 2>/dev/null
			cmp "$T/a.mt" "$T/b.mt" || { echo "$v/$p: spilled output differs"; return 1; }
			grep -q 'gap_spans=[1-9]' "$T/a.err" || { echo "$v/$p: no gap to join"; return 1; }
			n=$((n + 1))
		done
	done
	[ "$n" -ge 6 ]
	# the temporary files are gone
	[ -z "$(ls "$T" | grep mt-stitch)" ]
}
