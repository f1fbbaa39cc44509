# gen-spans.awk — a random but valid MTEV span stream, as mt-undump text.
# Variables (-v): seed, threads (per process), procs, spans (per thread, about),
# base (first time, ns), named (1: names in span records; 0: names from symbol
# records of func; 2: alternate by thread), distinct (1: a fresh name for every
# span; 0: names drawn from a pool of `pool` functions).
# Each thread's spans form random trees in pre-order, with zero-length spans,
# children touching their parent's begin and end, and siblings touching each
# other: exactly the ties a viewer can get wrong.
function rnd(n) { return int(rand() * n) }
function fname(   k) {
	if (distinct) { nid++; return sprintf("f_%d", nid) }
	k = rnd(pool); return sprintf("p_%d", k)
}
function faddr(name,   a) {
	if (name in addr_of) return addr_of[name]
	a = sprintf("0x%x", 4194304 + 16 * (++naddr))
	addr_of[name] = a
	return a
}
# a span [b, e] at depth d, then its children, in pre-order
function gen(tid, d, b, e, named_here,   name, k, i, pts, np, j, x, tmp, a) {
	if (budget <= 0) return
	budget--
	name = fname()
	a = faddr(name)
	if (named_here)
		printf "span tid=%d depth=%d begin=%.0f end=%.0f func=%s callsite=0x0 flags=0 name=\"%s\"\n", tid, d, b, e, a, name
	else {
		if (!(a in sym_done)) {
			printf "symbol addr=%s entry=%s frame=\"%s\" file=\"src/%s.c\" line=%d column=1\n", a, a, name, name, 1 + rnd(900)
			sym_done[a] = 1
		}
		printf "span tid=%d depth=%d begin=%.0f end=%.0f func=%s callsite=0x0 flags=0 name=\"\"\n", tid, d, b, e, a
	}
	if (d >= maxdepth || e - b < 0) return
	k = rnd(4)
	if (k == 0) return
	# 2k sorted points in [b, e]: children are (p1,p2), (p3,p4), ...; ends and
	# ties are chosen often
	np = 2 * k
	for (i = 1; i <= np; i++) {
		x = rnd(10)
		if (x == 0) pts[i] = b
		else if (x == 1) pts[i] = e
		else pts[i] = b + rnd(e - b + 1)
	}
	for (i = 2; i <= np; i++) {	# insertion sort
		tmp = pts[i]
		for (j = i - 1; j >= 1 && pts[j] > tmp; j--) pts[j + 1] = pts[j]
		pts[j + 1] = tmp
	}
	for (i = 1; i <= np; i += 2) {
		# copy out: recursion reuses no locals, but keep it explicit
		cb[d, i] = pts[i]; ce[d, i] = pts[i + 1]
	}
	for (i = 1; i <= np; i += 2)
		gen(tid, d + 1, cb[d, i], ce[d, i], named_here)
}
BEGIN {
	if (seed == "") seed = 1
	srand(seed)
	if (threads == "") threads = 3
	if (procs == "") procs = 2
	if (spans == "") spans = 200
	if (base == "") base = 1234567890123456
	if (named == "") named = 2
	if (pool == "") pool = 50
	if (maxdepth == "") maxdepth = 12
	print "mtev version=1 producer=\"gen-spans\" flags=0x7"
	for (p = 1; p <= procs; p++) {
		pid = 1000 * p
		printf "process pid=%d name=\"proc %d\"\n", pid, p
		for (t = 0; t < threads; t++) {
			tid = pid + t
			printf "thread pid=%d tid=%d time=0 name=\"thr %d.%d\"\n", pid, tid, p, t
		}
	}
	for (p = 1; p <= procs; p++)
		for (t = 0; t < threads; t++) {
			tid = 1000 * p + t
			nh = named == 2 ? (t % 2) : named
			budget = spans
			now = base + rnd(1000)
			while (budget > 0) {
				len = rnd(3) == 0 ? 0 : rnd(100000)
				gen(tid, 0, now, now + len, nh)
				now += len + (rnd(2) ? 0 : rnd(1000))
			}
		}
	print "end"
}
