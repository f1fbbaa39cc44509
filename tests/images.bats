#!/usr/bin/env bats
# One image lookup (libcommon/imgfind.c, docs/images.md): mt-decode,
# mt-segment and mt-symbolize take the same --images DIR (also spelled
# --symfs and --buildid-dir) and find the same file for a mapped path and
# build-id in every layout: perf's build-id cache (mt-ptsim's images/), a
# root file system, a flat directory (by name or by build-id), a stripped
# file with a separate debug file.  The ground truth is the program itself:
# it was traced by mt-ptsim, then moved away from its path, so every stage
# must find a copy through DIR; the decode of every layout must equal the
# decode from mt-ptsim's own images, and the names (ELF symbol tables,
# --no-symbolizer) must be the program's.

setup_file() {
	export HOME="$BATS_FILE_TMPDIR"
	BIN="$BATS_TEST_DIRNAME/../bin"
	D="$BATS_FILE_TMPDIR"
	gcc -O2 -g -o "$D/prog" "$BATS_TEST_DIRNAME/inline/fallthrough.c"
	"$BIN/mt-ptsim" --start-at main -o "$D/run" -- "$D/prog" 2>/dev/null || true
	mv "$D/prog" "$D/prog.orig"
	"$BIN/mt-decode" --images "$D/run/images" -o "$D/ref.mt" "$D/run/perf.data" 2>/dev/null || true
}

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	D="$BATS_FILE_TMPDIR"
	T="$BATS_TEST_TMPDIR"
	export HOME="$T" # no ~/.debug: perf's cache is the last place looked at
	[ -s "$D/ref.mt" ] || skip "mt-ptsim run failed"
	HEX=$(readelf -n "$D/prog.orig" | awk '/Build ID/ { print $3 }')
	[ -n "$HEX" ] || skip "no build-id"
}

# stages SPELLING DIR: the three stages with the same option; outputs in $T.
# DIR gets the vdso's image too (perf's cache layout), as mt-ptsim wrote it.
stages() {
	local v
	[ "$2" = "$D/run/images" ] ||
	for v in "$D"/run/images/\[vdso\]/*/vdso; do
		v=${v%/vdso}
		v=${v##*/}
		mkdir -p "$2/.build-id/${v:0:2}"
		cp "$D/run/images/[vdso]/$v/vdso" "$2/.build-id/${v:0:2}/${v:2}"
	done
	"$BIN/mt-decode" "$1" "$2" -o "$T/dec.mt" "$D/run/perf.data" 2> "$T/dec.err" ||
		echo "exit $?" >> "$T/dec.err"
	"$BIN/mt-segment" "$1" "$2" -i "$T/dec.mt" -o "$T/seg.mt" 2> "$T/seg.err" ||
		echo "exit $?" >> "$T/seg.err"
	"$BIN/mt-stitch" -i "$T/seg.mt" -o "$T/st.mt"
	MT_DEBUGINFO_DIR= "$BIN/mt-symbolize" --no-cache --no-symbolizer "$1" "$2" -o "$T/sym.mt" \
		"$T/st.mt" 2> "$T/sym.err" || [ $? -eq 1 ] || echo "exit $?" >> "$T/sym.err"
}

# the frames mt-symbolize named in the program
names() {
	"$BIN/mt-dump" -k symbol "$T/sym.mt" | grep -o 'frame="[^"]*"' | sort -u
}

# every stage found the program, and decoded it as from mt-ptsim's images
agree() {
	# (mt-symbolize exits 1 for want of a symbolizer, as asked)
	! grep -i 'not found\|mismatch\|^exit' "$T/dec.err" "$T/seg.err" "$T/sym.err" || false
	cmp "$T/dec.mt" "$D/ref.mt"
	names | grep -qx "frame=\"${1:-}work\""
	names | grep -qx "frame=\"${1:-}main\""
	! names | grep 'unknown\|prog+0x' || false
}

@test "images: mt-ptsim's images/ (a build-id cache) under every spelling" {
	# before: mt-decode --symfs DIR looked only at DIR/PATH (a directory in
	# this layout), never at the build-id places, and reported it missing
	for o in --images --symfs --buildid-dir; do
		stages "$o" "$D/run/images"
		agree
	done
}

@test "images: a root file system (DIR/PATH)" {
	mkdir -p "$T/root$D"
	cp "$D/prog.orig" "$T/root$D/prog"
	stages --images "$T/root"
	agree
}

@test "images: a flat directory, by base name and by build-id" {
	# before: mt-decode looked at neither (mt-segment and mt-symbolize did)
	mkdir "$T/flat" "$T/byid"
	cp "$D/prog.orig" "$T/flat/prog"
	cp "$D/prog.orig" "$T/byid/$HEX"
	stages --images "$T/flat"
	agree
	stages --images "$T/byid"
	agree
}

@test "images: perf's older cache, .build-id/XX/REST a link to the file" {
	# before: mt-symbolize looked only for .build-id/XX/REST/elf
	mkdir -p "$T/c/.build-id/${HEX:0:2}" "$T/c/files"
	cp "$D/prog.orig" "$T/c/files/prog"
	ln -s ../../files/prog "$T/c/.build-id/${HEX:0:2}/${HEX:2}"
	stages --images "$T/c"
	agree
}

@test "images: a file of that name but another build is passed over" {
	mkdir -p "$T/two$D" "$T/two/.build-id/${HEX:0:2}"
	gcc -O0 -o "$T/two$D/prog" "$BATS_TEST_DIRNAME/inline/fallthrough.c"
	cp "$D/prog.orig" "$T/two/.build-id/${HEX:0:2}/${HEX:2}"
	stages --images "$T/two"
	agree
	rm "$T/two/.build-id/${HEX:0:2}/${HEX:2}"
	run "$BIN/mt-decode" --images "$T/two" -o "$T/x.mt" "$D/run/perf.data"
	[ "$status" -eq 1 ]
	[[ "$output" == *"build-id mismatch: $T/two$D/prog has build-id"* ]]
}

@test "images: a stripped file, its symbols from a debug file in the same directory" {
	# before: mt-segment and mt-symbolize looked for debug files only in
	# /usr/lib/debug ($MT_DEBUGINFO_DIR), so the names were .eh_frame ranges
	# (prog+0x...); the debug file's symbols are renamed here to tell them apart
	mkdir -p "$T/s$D" "$T/s/.build-id/${HEX:0:2}"
	objcopy --only-keep-debug --redefine-sym work=dbg_work --redefine-sym main=dbg_main \
		"$D/prog.orig" "$T/s/.build-id/${HEX:0:2}/${HEX:2}.debug"
	strip -o "$T/s$D/prog" "$D/prog.orig"
	stages --images "$T/s"
	agree dbg_
}

@test "images: a stripped file, llvm-symbolizer reads the same debug file" {
	command -v llvm-symbolizer >/dev/null || skip "no llvm-symbolizer"
	# before: llvm-symbolizer got the stripped file and found no debug info
	mkdir -p "$T/s$D" "$T/s/usr/lib/debug/.build-id/${HEX:0:2}"
	objcopy --only-keep-debug "$D/prog.orig" "$T/s/usr/lib/debug/.build-id/${HEX:0:2}/${HEX:2}.debug"
	strip -o "$T/s$D/prog" "$D/prog.orig"
	stages --images "$T/s"
	"$BIN/mt-symbolize" --no-cache --images "$T/s" -o "$T/sym.mt" "$T/st.mt" 2> "$T/sym.err" ||
		echo "exit $?" >> "$T/sym.err"
	cat "$T/sym.err"
	agree
	"$BIN/mt-dump" -k symbol "$T/sym.mt" | grep 'frame="work"' | grep -q 'fallthrough.c'
}

@test "images: the file at its own path when DIR does not have it" {
	# before: mt-decode given --symfs never looked at the path itself
	mkdir "$T/empty"
	cp "$D/prog.orig" "$D/prog"
	stages --symfs "$T/empty"
	rm "$D/prog"
	agree
}

@test "images: a stripped file with a .gnu_debuglink: every stage reads the linked file" {
	# before: mt-segment's and mt-symbolize's ELF symbols (libcommon/elfinfo.c)
	# did not follow .gnu_debuglink (llvm-symbolizer and dwcov did): the
	# names were .eh_frame ranges (prog+0x...) where llvm-symbolizer had the
	# debug file's
	mkdir -p "$T/l$D"
	objcopy --only-keep-debug --redefine-sym work=dbg_work --redefine-sym main=dbg_main \
		"$D/prog.orig" "$T/l$D/prog.dbg"
	strip -o "$T/l$D/prog" "$D/prog.orig"
	(cd "$T/l$D" && objcopy --add-gnu-debuglink=prog.dbg prog)
	# the link changes no code, and the build-id note is kept
	readelf -n "$T/l$D/prog" | grep -q "$HEX"
	stages --images "$T/l"
	agree dbg_
}

@test "images: a debug file is never taken for the code" {
	# before: mt-decode took perf's cache .../BUILD-ID/debug as the image
	# (a debug file's .text has no bytes) and decoded garbage from it
	mkdir -p "$T/d$D/prog/$HEX" "$T/d/.build-id/${HEX:0:2}"
	objcopy --only-keep-debug "$D/prog.orig" "$T/d$D/prog/$HEX/debug"
	ln -s "../..$D/prog/$HEX" "$T/d/.build-id/${HEX:0:2}/${HEX:2}"
	stages --images "$T/d"
	grep -q "image $D/prog (build-id $HEX): not found" "$T/dec.err"
	grep -q "^exit 1" "$T/dec.err"
}
