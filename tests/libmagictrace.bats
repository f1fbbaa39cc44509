#!/usr/bin/env bats
# libmagictrace installed: headers, static and shared library, pkg-config
# file; a program built with `pkg-config --cflags --libs magictrace` against
# the shared library is watched by the trigger (tests/unit/test_trigger.c:
# it sees exactly the calls the program documents, with their arguments).
. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"

setup() {
	ROOT="$(cd "$BATS_TEST_DIRNAME/.." && pwd)"
	T="$BATS_TEST_TMPDIR"
}

@test "make install PREFIX=...; pkg-config builds a program on the shared library; the trigger sees its calls" {
	make -s -C "$ROOT" install PREFIX="$T/inst" > "$T/log" 2>&1 || { cat "$T/log"; return 1; }
	for f in include/magic_trace.h lib/libmagictrace.a lib/libmagictrace.so.1 lib/libmagictrace.so \
		lib/pkgconfig/magictrace.pc bin/mt bin/mt-capture; do
		[ -e "$T/inst/$f" ] || { echo "not installed: $f"; return 1; }
	done
	export PKG_CONFIG_PATH="$T/inst/lib/pkgconfig"
	[ "$(echo $(pkg-config --cflags magictrace))" = "-I$T/inst/include" ]
	cc -O2 -o "$T/calls" "$ROOT/tests/programs/capture/mt_calls.c" $(pkg-config --cflags --libs magictrace) -lpthread
	# really the shared library, and not a copy of the function in the program
	LD_LIBRARY_PATH="$T/inst/lib" ldd "$T/calls" | grep -q "libmagictrace.so.1 => $T/inst/lib/libmagictrace.so.1"
	! nm "$T/calls" | grep -q " T magic_trace_stop_indicator"
	LD_LIBRARY_PATH="$T/inst/lib" "$MT_BUILD/tests/test_trigger" "$T/calls" > "$T/tap"
	cat "$T/tap"
	! grep -q "^not ok" "$T/tap"
	# where the stop indicator was found: in the installed shared library
	grep -q "magic_trace_stop_indicator resolved at .* in $T/inst/lib/libmagictrace.so.1+" "$T/tap" ||
		grep -q "# SKIP uprobes need root" "$T/tap"
	# the installed front end runs
	"$T/inst/bin/mt" help | grep -q "mt run"
}
