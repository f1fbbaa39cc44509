#!/bin/sh
# seeds.sh BUILD TARGET... — assemble each fuzz target's seed corpus from the
# tests into BUILD/seeds-TARGET/ (rebuilt every time; small and cheap).
# Seeds: fuzz/seeds/TARGET/ (committed), the golden and corrupt test inputs,
# the Skylake fixture, and mt-ptsim runs cached in tests/.cache when present.
# Large files are cut to MAXSEED bytes: a cut stream is still a good seed
# (truncation is one of the things to survive).
cd "$(dirname "$0")/.." || exit 111
. mk/build-dir.sh
build=$1; shift
MAXSEED=${MAXSEED:-65536}
FIX=/work/shared/fixtures/intel_pt-skylake-4.14
[ -d "$FIX" ] || FIX=tests/fixtures/intel_pt-skylake-4.14

n=0
put() { # put DIR FILE [NAME]: copy, cut to MAXSEED
	n=$((n + 1))
	head -c "$MAXSEED" "$2" > "$1/${3:-$(basename "$2")}.$n" 2>/dev/null || true
}
cached() { # cached PATTERN: files in tests/.cache matching a find -name pattern
	[ -d tests/.cache ] && find tests/.cache -type f -name "$1" -size -64M 2>/dev/null | sort | head -200
}

for t in "$@"; do
	d=$build/seeds-$t
	rm -rf "$d" && mkdir -p "$d" || exit 111
	[ -d "fuzz/seeds/$t" ] && for f in fuzz/seeds/"$t"/*; do [ -f "$f" ] && put "$d" "$f"; done
	case $t in
	mtev)
		for f in tests/corrupt/*.mt tests/golden/*.mt; do [ -f "$f" ] && put "$d" "$f"; done
		for f in tests/golden/*.txt; do
			[ -f "$f" ] && bin/mt-undump -o "$d/$(basename "$f").mt" "$f" 2>/dev/null
		done
		for f in $(cached '*.mt'); do put "$d" "$f"; done
		;;
	mtev_text)
		for f in tests/golden/*.txt tests/corrupt/*.txt; do [ -f "$f" ] && put "$d" "$f"; done
		for f in $(cached '*.mt'); do
			n=$((n + 1))
			bin/mt-dump "$f" 2>/dev/null | head -c "$MAXSEED" > "$d/$(basename "$f").txt.$n"
		done
		;;
	perfdata)
		for f in "$FIX"/perf.data* tests/corrupt/perfdata-* tests/corrupt/*.data; do
			[ -f "$f" ] && MAXSEED=1048576 put "$d" "$f"
		done
		for f in $(cached 'perf.data*') $(cached '*.data'); do MAXSEED=1048576 put "$d" "$f"; done
		;;
	ptdecode | ptwalk | ptresync)
		[ "$t" != ptdecode ] && [ -d fuzz/seeds/ptdecode ] &&
			for f in fuzz/seeds/ptdecode/*; do [ -f "$f" ] && put "$d" "$f"; done
		for f in tests/corrupt/pt-* tests/corrupt/*.pt; do [ -f "$f" ] && put "$d" "$f"; done
		# the AUX data of mt-ptsim's recordings of the program the targets
		# map (fuzz/ptprog.c, mk/fuzz.mk): clean, windowed, faulted...
		for f in "$build"/ptsim/*/perf.data; do
			[ -f "$f" ] || continue
			n=$((n + 1))
			bin/mt-decode --records "$f" 2>/dev/null |
				awk '$2 == "AUXTRACE" { for (i = 3; i <= NF; i++) { split($i, kv, "=");
					if (kv[1] == "size") s = kv[2]; if (kv[1] == "aux_size") a = kv[2] }
					print $1, s, a }' |
				while read -r off hs len; do tail -c +$((off + hs + 1)) "$f" | head -c "$len"; done \
				> "$d/aux-$(basename "$(dirname "$f")").$n"
		done
		;;
	decstitch)
		# mt-ptsim's recordings of fuzz/ptprog.c (every variant, per-cpu
		# ones with thread switches among them: mk/fuzz.mk), whole, and the
		# damaged perf.data of the tests
		for f in "$build"/ptsim/*/perf.data; do
			[ -f "$f" ] && MAXSEED=1048576 put "$d" "$f" "$(basename "$(dirname "$f")")"
		done
		for f in tests/corrupt/*.data; do [ -f "$f" ] && put "$d" "$f"; done
		;;
	ptwalkcpu)
		# mt-ptsim's per-cpu recordings of fuzz/ptprog.c, with thread
		# switches (mk/fuzz.mk: pc*), whole
		for f in "$build"/ptsim/pc*/perf.data; do
			[ -f "$f" ] && MAXSEED=1048576 put "$d" "$f" "$(basename "$(dirname "$f")")"
		done
		;;
	dwcov)
		# small ELF files with and without DWARF, and their DWARF
		# sections in the target's raw form (five 2-byte lengths first)
		for f in $MT_BUILD/tests/segment/segfuncs $MT_BUILD/tests/segment-dwarf/segfuncs \
			$MT_BUILD/programs/dynamic $MT_BUILD/programs/sym_cxx $MT_BUILD/programs/exception; do
			[ -f "$f" ] || continue
			put "$d" "$f" "$(basename "$(dirname "$f")")-$(basename "$f")"
			for sec in info abbrev aranges ranges rnglists addr; do
				: > "$d/.$sec"
				objcopy --dump-section .debug_$sec="$d/.$sec" "$f" "$d/.elf" 2>/dev/null || : > "$d/.$sec"
			done
			[ -s "$d/.info" ] || continue
			n=$((n + 1))
			{
				for sec in info abbrev aranges ranges rnglists; do
					s=$(wc -c < "$d/.$sec")
					[ "$s" -lt 65536 ] || s=0
					printf "\\$(printf %o $((s & 255)))\\$(printf %o $((s >> 8)))"
				done
				for sec in info abbrev aranges ranges rnglists addr; do
					[ "$(wc -c < "$d/.$sec")" -lt 65536 ] && cat "$d/.$sec"
				done
			} > "$d/sections-$(basename "$f").$n"
		done
		rm -f "$d"/.info "$d"/.abbrev "$d"/.aranges "$d"/.ranges "$d"/.rnglists "$d"/.addr "$d/.elf"
		;;
	write | symtrace)
		for f in tests/corrupt/write-*.mt tests/golden/*.mt; do [ -f "$f" ] && put "$d" "$f"; done
		for f in tests/golden/*.txt; do
			[ -f "$f" ] && bin/mt-undump -o "$d/$(basename "$f").mt" "$f" 2>/dev/null
		done
		for f in $(cached '*span*.mt') $(cached '*stitch*.mt') $(cached '*sym*.mt') $(cached 'truth*.mt'); do
			put "$d" "$f"
		done
		;;
	esac
	# libFuzzer needs at least one input; an empty file is a fine start
	[ -n "$(ls -A "$d")" ] || : > "$d/empty"
done
