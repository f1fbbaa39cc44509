# symbolize-check.awk -v CHAINS=FILE -v WPS=FILE  DUMP
# Checks mt-symbolize's spans (DUMP: `mt-dump -k span` of its output) against
# what llvm-symbolizer says about the addresses.
#   CHAINS: "0xADDR<TAB>f0|f1|...<TAB>id1|id2|..." from llvm-symbolizer's JSON
#           (physical function first, innermost inlined frame last; idJ is
#           frame J's name @ the file:line:column it is inlined at)
#   WPS:    the input's waypoints, "TID DEPTH TIME 0xADDR", in stream order
# Checks, independently of mt-symbolize's code:
#  - every span lies inside its parent in time, one level deeper (pre-order);
#  - each physical span is named after its entry's function (via waypoints);
#  - per physical span, the inline spans under it are exactly (as a multiset
#    of level, name, begin, end) the runs of its waypoints that share inlined
#    frames: frame J opens at the first waypoint whose chain has it at level J
#    (same function, same call site) and closes at the first later waypoint
#    whose chain does not (or at the span's end).  A waypoint belongs to the
#    span live at its thread, depth and time; among several (equal times),
#    the one of the address's function;
#  - a physical span with a call site hangs under exactly the inlined frames
#    of its call site (names).
# Prints failures (at most 20) and a summary; exits 1 on any failure.
function fail(msg) { nfail++; if (nfail <= 20) print "FAIL: " msg }
function kv(line, key) {
	if (!match(line, " " key "=[^ ]*")) return ""
	return substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2)
}
function rest(chain,   i) { i = index(chain, "|"); return i ? substr(chain, i + 1) : "" }
function first(chain,   i) { i = index(chain, "|"); return i ? substr(chain, 1, i - 1) : chain }
# one function, several symbols (malloc, __libc_malloc): mt-symbolize names it
# by one of them (the exported one), llvm-symbolizer maybe by another
function same(a, b) { return a == b || ((a in AD) && (b in AD) && AD[a] == AD[b]) }
function emit(s, lvl, name, b, e,   k) { k = s SUBSEP lvl "|" name "|" b "|" e; xp[k]++; nexp++ }
BEGIN {
	while ((getline l < CHAINS) > 0) {
		split(l, a, "\t"); ch[a[1]] = a[2]; cid[a[1]] = a[3]
	}
	while (ALIASES != "" && (getline l < ALIASES) > 0) { split(l, a, " "); AD[a[2]] = a[1] }
	while ((getline l < WPS) > 0) { nw++; split(l, a, " "); wtid[nw] = a[1]; wdep[nw] = a[2]; wt[nw] = a[3] + 0; wad[nw] = a[4] }
}
/^span / {
	n++
	tid = kv($0, "tid"); d = kv($0, "depth") + 0; b = kv($0, "begin") + 0; e = kv($0, "end") + 0
	fl = kv($0, "flags"); cs = kv($0, "callsite")
	nm = $0; sub(/ name_id=[0-9]+$/, "", nm); sub(/.* name="/, "", nm); sub(/"$/, "", nm)
	p = d > 0 ? stk[tid, d - 1] : 0
	if (d > 0 && !p) fail("span " n " (" nm ") at depth " d " has no parent")
	if (p && (b < B[p] || e > E[p])) fail("span " n " (" nm ") [" b "," e "] is not inside its parent " N[p] " [" B[p] "," E[p] "]")
	stk[tid, d] = n; T[n] = tid; D[n] = d; B[n] = b; E[n] = e; N[n] = nm; P[n] = p
	INL[n] = fl ~ /(^|,)inline(,|$)/
	if (INL[n]) {
		if (!p) { fail("inline span " n " (" nm ") is a root"); PH[n] = n; next }
		PH[n] = PH[p]
		got[PH[n] SUBSEP (d - D[PH[n]]) "|" nm "|" b "|" e]++; ngot++
	} else {
		PH[n] = n; RK[n] = p ? RK[PH[p]] + 1 : 0; nphys++
		K = tid SUBSEP RK[n]; cnt[K]++; L[K, cnt[K]] = n
		if (p && cs != "0x0" && (cs in ch)) {
			g = ""
			for (q = p; INL[q]; q = P[q]) g = N[q] (g == "" ? "" : "|" g)
			if (!same(N[PH[p]], first(ch[cs])) || g != rest(ch[cs]))
				fail("span " n " (" nm ") called from " cs " hangs under " N[PH[p]] (g == "" ? "" : "|" g) ", llvm-symbolizer says " ch[cs])
			ncs++
		}
	}
}
END {
	for (i = 1; i <= nw; i++) {
		ad = wad[i]; t = wt[i]
		if (!(ad in ch)) { fail("no llvm-symbolizer answer for " ad); continue }
		c0 = first(ch[ad]); K = wtid[i] SUBSEP wdep[i]
		if (!((K) in ptr)) ptr[K] = 1
		q = ptr[K]
		while (q <= cnt[K] && E[L[K, q]] < t) q++
		ptr[K] = q
		if (q > cnt[K] || B[L[K, q]] > t) { unmatched++; continue }
		s = L[K, q]
		if (!same(N[s], c0))
			for (r = q + 1; r <= cnt[K] && r < q + 8 && B[L[K, r]] <= t; r++)
				if (same(N[L[K, r]], c0)) { s = L[K, r]; ptr[K] = r; break }
		if (!same(N[s], c0)) { outside++; continue }
		nchk++
		m = split(rest(ch[ad]), M, "|"); split(cid[ad], I, "|")
		if (rest(ch[ad]) == "") m = 0
		k = 0
		while (k < nopen[s] && k < m && oid[s, k + 1] == I[k + 1]) k++
		for (j = nopen[s]; j > k; j--) emit(s, j, onm[s, j], ob[s, j], t)
		for (j = k + 1; j <= m; j++) { oid[s, j] = I[j]; onm[s, j] = M[j]; ob[s, j] = t }
		nopen[s] = m
		opened[s] = 1
	}
	for (s in opened) for (j = nopen[s]; j > 0; j--) emit(s, j, onm[s, j], ob[s, j], E[s])
	for (k in xp) if (got[k] != xp[k]) { split(k, z, SUBSEP); fail("under " N[z[1]] " [" B[z[1]] "," E[z[1]] "]: expected " xp[k] " x inline (level|name|begin|end) " z[2] ", got " (got[k] + 0)) }
	for (k in got) if (!(k in xp)) { split(k, z, SUBSEP); fail("under " N[z[1]] " [" B[z[1]] "," E[z[1]] "]: unexpected inline span (level|name|begin|end) " z[2]) }
	printf "checked %d waypoints (%d outside their span's function, %d unmatched) and %d call sites against llvm-symbolizer: %d spans, %d inline (%d expected), %d failures\n", nchk, outside, unmatched, ncs, n, ngot, nexp, nfail
	exit nfail > 0
}
