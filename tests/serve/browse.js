#!/usr/bin/env node
// browse.js perfetto URL SCREENSHOT [SQL...] — load a page served by mt-serve in
// headless chromium (puppeteer-core, /usr/bin/chromium or $CHROMIUM) and print
// what the rendered page shows, as JSON on stdout:
//   {"tracks": [the UI's tracks, by name], "threads": [its thread names],
//    "labels": [the track titles drawn in the page], "text": page text,
//    "queries": [rows of each SQL, run by the UI's own engine through its
//    executeQuery action], "errors": [page errors], "requests": [URLs]}
// Saves a PNG screenshot.  Exit 0 ok, 1 the page did not load the trace,
// 2 usage, 111 no browser.
'use strict';
const path = require('path');
const fs = require('fs');
const os = require('os');
const VIEWER_DIR = process.env.MT_VIEWER_NODE_MODULES ||
	path.join(__dirname, '..', '..', 'tools', 'viewer', 'node_modules');
const puppeteer = require(path.join(VIEWER_DIR, 'puppeteer-core'));

const [viewer, url, shot, ...sql] = process.argv.slice(2);
if (!viewer || !url || !shot) {
	process.stderr.write('usage: browse.js perfetto URL SCREENSHOT [SQL...]\n');
	process.exit(2);
}
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
if (!fs.existsSync(chromium)) {
	process.stderr.write(`browse.js: fatal: no browser at ${chromium}\n`);
	process.exit(111);
}

function fail(msg) {
	process.stderr.write(`browse.js: ${msg}\n`);
	process.exitCode = 1;
}

(async () => {
	const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'mt-browse-'));
	const browser = await puppeteer.launch({
		executablePath: chromium,
		headless: true,
		// as root chromium needs --no-sandbox; the others keep it off the
		// (closed) network: no component updates, no sync, no QUIC probes
		args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
			'--disable-background-networking', '--disable-component-update',
			'--disable-sync', '--disable-default-apps', '--disable-extensions',
			'--disable-dev-shm-usage', `--user-data-dir=${profile}`,
			'--window-size=1400,900'],
		defaultViewport: {width: 1400, height: 900},
		timeout: 60000,
	});
	const out = {errors: [], requests: []};
	try {
		const page = await browser.newPage();
		page.on('pageerror', e => out.errors.push(String(e)));
		page.on('request', r => out.requests.push(r.url()));
		await page.goto(url, {waitUntil: 'load', timeout: 60000});
		if (viewer === 'perfetto') {
			// loaded: the UI's model has the trace's threads and a track per thread
			// (this embedded build draws no track titles: the names are
			// read from its model, the tracks it made and its thread list)
			await page.waitForFunction(() => window.globals && globals.state &&
				globals.state.engines && globals.state.engines['0'] &&
				globals.state.engines['0'].ready &&
				Object.keys(globals.state.tracks || {}).length > 0,
				{timeout: 120000, polling: 200});
			out.tracks = await page.evaluate(() =>
				Object.values(globals.state.tracks).map(t => t.name));
			out.threads = await page.evaluate(() =>
				[...globals.threads.values()].map(t => t.threadName || ''));
			// the titles our page writes into the track shells (DOM)
			await page.waitForFunction(() =>
				document.querySelectorAll('.track-shell[data-mt-name]').length > 0,
				{timeout: 30000, polling: 100});
			out.labels = await page.$$eval('.track-shell[data-mt-name]',
				es => es.map(e => e.dataset.mtName));
			out.queries = [];
			for (let i = 0; i < sql.length; i++) {
				const id = `mt-test-${i}`;
				await page.evaluate((qid, q) => globals.dispatch(Actions.executeQuery(
					{engineId: '0', queryId: qid, query: q})), id, sql[i]);
				await page.waitForFunction(qid => globals.queryResults.get(qid) !== undefined,
					{timeout: 30000, polling: 100}, id);
				const res = await page.evaluate(qid => {
					const r = globals.queryResults.get(qid);
					return {error: r.error || null, columns: r.columns,
						rows: r.rows.map(row => r.columns.map(c => row[c]))};
				}, id);
				out.queries.push(res);
			}
		} else {
			throw new Error(`unknown viewer ${viewer}`);
		}
		out.text = await page.evaluate(() => document.body.innerText);
		await page.screenshot({path: shot});
	} catch (e) {
		fail(String(e));
	} finally {
		await browser.close();
		fs.rmSync(profile, {recursive: true, force: true});
	}
	process.stdout.write(JSON.stringify(out) + '\n');
})();
