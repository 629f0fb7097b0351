/*
 * bench_map.c: how long one insert into core/map.h's hash map can take (issue 16: the deep queue's
 * max latency was one insert that grew the GPR map).  Inserts N keys shaped like GPR ids, timing
 * each egs_map_put by the thread's CPU clock, and prints every insert over 1 ms (the growths, and
 * on a shared VM the clock's own jumps: build/bench/cpu_clock), the longest, and the total.
 *
 *   build/bench/bench_map [N]    (or `make bench-map`; N defaults to 400,000)
 */
#include "core/map.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long cpu_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 400000;
	if (n <= 0 || n > 100000000) {
		fprintf(stderr, "usage: bench_map [N]\n");
		return 2;
	}
	char (*keys)[40] = egs_calloc((size_t)n, sizeof(*keys)); /* the map borrows its keys */
	for (long i = 0; i < n; i++)
		snprintf(keys[i], sizeof(keys[i]), "gpr-%08lx-%ld", (unsigned long)(i * 2654435761u), i);
	struct egs_map m;
	egs_map_init(&m);
	long long worst = 0, total = 0;
	long worst_at = 0;
	for (long i = 0; i < n; i++) {
		long long t = cpu_us();
		egs_map_put(&m, keys[i], keys[i]);
		long long d = cpu_us() - t;
		total += d;
		if (d > 1000)
			printf("insert %ld (the map held %ld): %.1f ms of CPU\n", i + 1, i, d / 1000.0);
		if (d > worst) {
			worst = d;
			worst_at = i + 1;
		}
	}
	printf("BENCH map inserts=%ld longest_ms=%.2f at=%ld total_ms=%.1f\n", n, worst / 1000.0, worst_at, total / 1000.0);
	egs_map_cleanup(&m);
	free(keys);
	return 0;
}
