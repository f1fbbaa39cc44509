# stackcheck.awk: how many sampled stacks are paths of the true call tree.
#   mt-dump truth-spans.mt > truth.txt; mt-dump -k sample decode.mt > samples.txt
#   mt-dump -k span segment-or-stitch.mt > spans.txt
#   awk -v main=0xADDR -f stackcheck.awk truth.txt samples.txt spans.txt
# A sample's stack is the chain of spans live at its time (begin <= t < end,
# or end == t for a span open at the end), root first, as function entries.
# It is "full" when that chain, from the thread's root, is the chain of some
# span of the truth (mt-ptsim, same program, same binary: same addresses),
# and "from main" when the parts from function @main down agree (the frames
# under main are libc's startup code, which a frame-pointer walk never shows
# when libc has no frame pointers; a stack without main counts when full).
# Prints: samples full from_main with_main with_main_ok (the last two: the
# samples whose stack has main in it, and how many of those agree from main).
function val(k,   i, s) {
	for (i = 1; i <= NF; i++)
		if (index($i, k "=") == 1)
			return substr($i, length(k) + 2)
	return ""
}
function from_main(p,   i) {
	i = index(p, "/" main "/")
	if (substr(p, 1, length(main) + 1) == main "/")
		return p
	return i ? substr(p, i + 1) : ""
}
FILENAME == ARGV[1] && /^span / {
	f = val("func")
	d = val("depth") + 0
	if (f == "0x0") { skip[d] = 1; next }
	st[d] = f
	p = st[0]
	for (i = 1; i <= d; i++)
		p = p "/" st[i]
	truth[p "/"] = 1
	m = from_main(p "/")
	if (m != "")
		tmain[m] = 1
	next
}
FILENAME == ARGV[2] && /^sample / {
	tid = val("tid")
	ns[tid]++
	stime[tid, ns[tid]] = val("time") + 0
	next
}
FILENAME == ARGV[3] && /^span / {
	tid = val("tid")
	n = ++nsp[tid]
	sb[tid, n] = val("begin") + 0
	se[tid, n] = val("end") + 0
	sd[tid, n] = val("depth") + 0
	sf[tid, n] = val("func")
	so[tid, n] = val("flags") ~ /open-at-end/
	next
}
END {
	for (tid in ns) {
		k = 1
		delete act
		for (j = 1; j <= ns[tid]; j++) {
			t = stime[tid, j]
			while (k <= nsp[tid] && sb[tid, k] <= t) {
				d = sd[tid, k]
				act[d] = k
				for (x = d + 1; (x in act); x++)
					delete act[x]
				k++
			}
			p = ""
			for (x = 0; (x in act); x++) {
				s = act[x]
				if (!(se[tid, s] > t || (se[tid, s] == t && so[tid, s])))
					break
				p = p sf[tid, s] "/"
			}
			total++
			if (p in truth)
				full++
			m = from_main(p)
			if (m != "") {
				wm++
				wmok += m in tmain
			}
			if (m != "" ? (m in tmain) : (p in truth))
				fm++
			else if (bad < 40 && verbose) {
				print "bad: " p > "/dev/stderr"
				bad++
			}
		}
	}
	printf "%d %d %d %d %d\n", total, full, fm, wm, wmok
}
