/*
 * cpu_clock.c: how far the loop thread's CPU clock can be trusted on this machine.  egsd measures
 * its scheduler's slices and steps in CPU time (CLOCK_THREAD_CPUTIME_ID, server.c), so that other
 * processes' turns do not count.  This reads that clock back to back in a busy loop for two seconds
 * of wall time: two reads are a microsecond or two apart, so a jump of milliseconds between two is
 * time charged to the thread while it did nothing but read the clock.  On a virtual machine whose
 * host takes the virtual CPU away (steal time not subtracted) such jumps are 1-4 ms, and a step of
 * the scheduler measured over 5 ms of "CPU" may be one of them.
 *
 *   make build/bench/cpu_clock && build/bench/cpu_clock [seconds]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double usec(clockid_t c)
{
	struct timespec s;
	clock_gettime(c, &s);
	return (double)s.tv_sec * 1e6 + (double)s.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? strtod(argv[1], NULL) : 2;
	double last = usec(CLOCK_THREAD_CPUTIME_ID), w0 = usec(CLOCK_MONOTONIC), largest = 0, sum = 0;
	long reads = 0, jumps = 0;
	while (usec(CLOCK_MONOTONIC) - w0 < secs * 1e6) {
		double x = usec(CLOCK_THREAD_CPUTIME_ID), d = x - last;
		reads++;
		if (d > 1000) {
			jumps++;
			sum += d;
		}
		if (d > largest)
			largest = d;
		last = x;
	}
	printf("%ld reads of the thread's CPU clock in %.1f s; jumps over 1 ms between two reads: %ld, "
	       "largest %.2f ms, together %.1f ms\n", reads, secs, jumps, largest / 1e3, sum / 1e3);
	return 0;
}
