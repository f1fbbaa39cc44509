/* A tiny TAP unit-test harness: T_CHECK(cond, fmt, ...) prints "ok N - ..."
 * or "not ok N - ..."; T_DONE() returns the exit status. */
#ifndef MT_T_H
#define MT_T_H
#include <stdio.h>
static int t_n, t_fail;
#define T_CHECK(cond, ...)                                                                         \
	do {                                                                                       \
		int t_ok_ = !!(cond);                                                              \
		printf("%s %d - ", t_ok_ ? "ok" : "not ok", ++t_n);                                \
		printf(__VA_ARGS__);                                                               \
		printf("%s\n", t_ok_ ? "" : " (" #cond ")");                                       \
		if (!t_ok_)                                                                        \
			t_fail++;                                                                  \
	} while (0)
#define T_DONE() (printf("1..%d\n", t_n), t_fail ? 1 : 0)
#endif
