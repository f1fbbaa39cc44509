# tests/perfetto/lib.bash — helpers for bats files that check traces with
# Perfetto's trace processor.  In a bats file:
#     load perfetto/lib            (from tests/NAME.bats)
#     setup_file() { perfetto_install; }
# Every function prints sorted TSV (LC_ALL=C), so two results compare with diff.

PERFETTO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PERFETTO_BIN="$PERFETTO_DIR/../../bin"

# perfetto_install: make sure the trace processor is there (idempotent, fast).
perfetto_install() {
	sh "$PERFETTO_DIR/install.sh"
}

# tp [-H] [-c] [-s] TRACE [SQL...]: tests/perfetto/tp.js (see its --help).
tp() {
	node "$PERFETTO_DIR/tp.js" "$@"
}

# perfetto_slices TRACE: "name tid ts dur depth" of every span slice (category
# "span", as mt-write writes them); fails if the trace is rejected or its
# stats report errors.
perfetto_slices() {
	tp -c "$1" "select s.name, t.tid, s.ts, s.dur, s.depth from slice s join thread_track tt on s.track_id = tt.id join thread t using(utid) where s.category = 'span'" |
		LC_ALL=C sort
}

# perfetto_threads TRACE: "tid thread-name pid process-name" per thread.
perfetto_threads() {
	tp -c "$1" "select t.tid, t.name, p.pid, p.name from thread t join process p using(upid) where t.tid != 0" |
		LC_ALL=C sort
}

# mtev_slices FILE.mt|FILE.txt: the slices mt-write must produce for an MTEV
# stream (binary, or mt-undump text), in perfetto_slices' format.  Names follow
# formats/mtev-semantics.md (span name, else symbol of func, else 0x<func>).
mtev_slices() {
	case $1 in
	*.txt) "$PERFETTO_BIN/mt-undump" "$1" | "$PERFETTO_BIN/mt-dump" ;;
	*) "$PERFETTO_BIN/mt-dump" "$1" ;;
	esac | awk -f "$PERFETTO_DIR/../write/expect-slices.awk" | LC_ALL=C sort
}
