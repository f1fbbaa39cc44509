# gapcheck.awk TRUTH DECODED: both `mt-dump -k branch[,gap]` text.
# Checks that DECODED equals TRUTH outside its gaps, record for record,
# times included: per thread, the decoded branches between two gaps are a
# contiguous run of truth records in the same order; after a gap (and its
# trace-start) decoding resumes at a later truth record, and every truth
# record it skipped lies inside the gap's [begin, end] (consecutive gaps with
# only a trace-start between: the first's begin, the last's end).  Prints
# "ok: N gaps, M branches matched, K in gaps" or the first difference
# (exit 1).
function field(line, key,    i, n, a) {
	n = split(line, a, " ")
	for (i = 1; i <= n; i++)
		if (index(a[i], key "=") == 1)
			return substr(a[i], length(key) + 2)
	return ""
}
function fail(msg) { print "FAIL: " msg; bad = 1; exit 1 }
FNR == NR {
	if ($1 != "branch") next
	t = field($0, "tid"); nt[t]++; T[t, nt[t]] = $0; TT[t, nt[t]] = field($0, "time") + 0
	next
}
$1 == "branch" || $1 == "gap" {
	t = field($0, "tid"); nd[t]++; D[t, nd[t]] = $0
}
END {
	if (bad) exit 1
	for (t in nd) {
		ti = 1; i = 1; ag = 0
		while (i <= nd[t]) {
			d = D[t, i]
			if (d ~ /^gap /) {
				# gaps with nothing but a trace-start between (a
				# resync that failed at once): one gap, their union
				gaps++; nb = field(d, "begin") + 0
				if (!ag || nb < gb) gb = nb
				ag = 1; ge = field(d, "end") + 0; i++
				continue
			}
			if (ag && field(d, "type") == "trace-start") {
				if (field(d, "time") + 0 < gb) fail("trace-start before its gap: " d)
				i++; continue
			}
			# the run of branches up to the next gap
			for (e = i; e + 1 <= nd[t] && D[t, e + 1] !~ /^gap /; e++)
				;
			if (ag) {
				# resume where the longest stretch of this run matches
				found = 0; best = -1
				for (j = ti; j <= nt[t]; j++) {
					if (T[t, j] != d) continue
					for (k = 0; i + k <= e && j + k <= nt[t] && T[t, j + k] == D[t, i + k]; k++)
						;
					if (k > best) { best = k; found = j }
					if (i + k > e) break
				}
				if (!found) fail("after a gap, this record is not in the truth: " d)
				for (k = ti; k < found; k++)
					if (TT[t, k] < gb || TT[t, k] > ge)
						fail("truth record outside the gap [" gb ", " ge "] is missing: " T[t, k])
				skipped += found - ti; ti = found; ag = 0
			}
			for (; i <= e; i++) {
				if (T[t, ti] != D[t, i])
					fail("record " ti " of tid " t " differs\n  truth:   " T[t, ti] "\n  decoded: " D[t, i])
				ti++; matched++
			}
		}
		for (k = ti; k <= nt[t]; k++)
			if (!ag || TT[t, k] < gb || TT[t, k] > ge)
				fail("truth record never decoded: " T[t, k])
	}
	for (t in nt)
		if (!(t in nd)) fail("thread " t " missing from the decode")
	print "ok: " gaps + 0 " gaps, " matched + 0 " branches matched, " skipped + 0 " in gaps"
}
