# gen-chaos.awk — spans that mostly break the span contract: random depths,
# random times drifting forward with jumps back, on a few threads; every span
# has a unique name ("r_N").  Variables: seed, n (spans), threads.
function rnd(k) { return int(rand() * k) }
BEGIN {
	if (seed == "") seed = 1
	if (n == "") n = 2000
	if (threads == "") threads = 3
	srand(seed)
	print "mtev version=1 producer=\"gen-chaos\" flags=0x7"
	print "process pid=1 name=\"chaos\""
	for (t = 1; t <= threads; t++) {
		printf "thread pid=1 tid=%d time=0 name=\"c%d\"\n", t, t
		now[t] = 1000000
		d[t] = 0
	}
	for (i = 1; i <= n; i++) {
		t = 1 + rnd(threads)
		x = rnd(10)
		if (x < 4) d[t]++
		else if (x < 9) d[t] = d[t] > 1 ? d[t] - 2 : 0
		else d[t] = rnd(3)
		if (rnd(40) == 0) now[t] -= rnd(30)
		else if (rnd(2)) now[t] = last[t]
		else now[t] += rnd(3) ? rnd(50) : 0
		len = rnd(4) ? rnd(400) : 0
		last[t] = now[t] + len
		printf "span tid=%d depth=%d begin=%d end=%d func=0x%x callsite=0x0 flags=0 name=\"r_%d\"\n", t, d[t], now[t], now[t] + len, 4096 + rnd(64) * 16, i
	}
	print "end"
}
