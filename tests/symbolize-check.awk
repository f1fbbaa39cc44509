# symbolize-check.awk -v CHAINS=FILE -v WPS=FILE  DUMP
# Checks mt-symbolize's spans (DUMP: `mt-dump -k span` of its output) against
# what llvm-symbolizer says about the addresses (CHAINS: "0xADDR f0|f1|...",
# physical function first, innermost inlined frame last), for the waypoints
# of its input (WPS: "TID DEPTH TIME 0xADDR" lines):
#  - every span is nested in time inside its parent (pre-order, depth + 1);
#  - at each waypoint's time, the physical span at the waypoint's depth is
#    named after the address's function, and the inline spans under it that
#    contain that time ([begin, end), closed at the physical span's end) are
#    exactly the address's inlined frames, outermost first, one level each;
#  - a physical span with a call site hangs under exactly the inlined frames
#    of its call site.
# Prints one line per failure (at most 20) and a summary; exits 1 on failure.
function fail(msg) { nfail++; if (nfail <= 20) print "FAIL: " msg }
function kv(line, key,   s) {
	if (!match(line, " " key "=[^ ]*")) return ""
	return substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2)
}
function rest(chain,   i) { i = index(chain, "|"); return i ? substr(chain, i + 1) : "" }
function first(chain,   i) { i = index(chain, "|"); return i ? substr(chain, 1, i - 1) : chain }
BEGIN {
	while ((getline l < CHAINS) > 0) { i = index(l, " "); ch[substr(l, 1, i - 1)] = substr(l, i + 1) }
	while ((getline l < WPS) > 0) { nw++; split(l, a, " "); wtid[nw] = a[1]; wdep[nw] = a[2]; wt[nw] = a[3] + 0; wad[nw] = a[4] }
}
/^span / {
	n++
	tid = kv($0, "tid"); d = kv($0, "depth") + 0; b = kv($0, "begin") + 0; e = kv($0, "end") + 0
	fl = kv($0, "flags"); cs = kv($0, "callsite")
	nm = $0; sub(/.* name="/, "", nm); sub(/"$/, "", nm)
	p = d > 0 ? stk[tid, d - 1] : 0
	if (d > 0 && !p) fail("span " n " (" nm ") at depth " d " has no parent")
	if (p && (b < B[p] || e > E[p])) fail("span " n " (" nm ") [" b "," e "] is not inside its parent " N[p] " [" B[p] "," E[p] "]")
	stk[tid, d] = n; T[n] = tid; D[n] = d; B[n] = b; E[n] = e; N[n] = nm; P[n] = p
	INL[n] = fl ~ /(^|,)inline(,|$)/
	if (INL[n]) {
		if (!p) { fail("inline span " n " (" nm ") is a root"); PH[n] = n; RK[n] = 0 }
		else { PH[n] = PH[p]; RK[n] = RK[p] }
		ninl++
	} else {
		PH[n] = n; RK[n] = p ? RK[p] + 1 : 0; nphys++
		if (p && cs != "0x0" && (cs in ch)) {
			got = ""
			for (q = p; INL[q]; q = P[q]) got = N[q] (got == "" ? "" : "|" got)
			if (N[PH[p]] != first(ch[cs]) || got != rest(ch[cs])) {
				fail("span " n " (" nm ") called from " cs " hangs under " N[PH[p]] (got == "" ? "" : "|" got) ", llvm-symbolizer says " ch[cs])
			}
			ncs++
		}
	}
}
END {
	for (i = 1; i <= nw; i++) {
		if (!(wad[i] in ch)) { fail("no llvm-symbolizer answer for " wad[i]); continue }
		c = ch[wad[i]]; t = wt[i]; s = 0
		for (j = 1; j <= n; j++)
			if (!INL[j] && T[j] == wtid[i] && RK[j] == wdep[i] && B[j] <= t && t <= E[j] && N[j] == first(c)) { s = j; break }
		if (!s) { fail("waypoint " wad[i] " at " t ": no span of " first(c) " at depth " wdep[i]); continue }
		got = ""; lvl = D[s]
		for (j = s + 1; j <= n && (PH[j] == s || D[j] > D[s]); j++) {
			if (PH[j] != s || !INL[j]) continue
			if (B[j] <= t && (t < E[j] || (t == E[j] && E[j] == E[s]))) {
				if (D[j] != lvl + 1) { fail("waypoint " wad[i] " at " t ": inline span " N[j] " at depth " D[j] ", expected " lvl + 1); break }
				lvl = D[j]; got = got == "" ? N[j] : got "|" N[j]
			}
		}
		if (got != rest(c)) fail("waypoint " wad[i] " at " t " in " N[s] ": inline spans [" got "], llvm-symbolizer says [" rest(c) "]")
		nchk++
	}
	printf "checked %d waypoints and %d call sites against llvm-symbolizer: %d spans (%d inline), %d failures\n", nchk, ncs, n, ninl, nfail
	exit nfail > 0
}
