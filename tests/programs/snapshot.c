/* A program that asks for a snapshot: the trace ends where it calls
 * magic_trace_take_snapshot() (the stop indicator). */
#include "magic_trace.h"

__attribute__((noinline)) static long busy(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i % 3;
	return s;
}

__attribute__((noinline)) static void interesting(void)
{
	if (busy(500) > 0)
		magic_trace_take_snapshot();
}

int main(void)
{
	long s = busy(200);
	interesting();
	return s > 0 ? 0 : 1;
}
