/*
 * clock.h: the agent's monotonic time, for its threads' timeouts and waits: now in milliseconds, a
 * condition variable whose timed waits run on CLOCK_MONOTONIC (a wall clock set back would stretch
 * them), and the deadline such a wait takes.  Never the wall clock: that is only for the times the
 * agent reports.
 */
#ifndef EGS_AGENT_CLOCK_H
#define EGS_AGENT_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in milliseconds. */
int64_t egs_clock_ms(void);
/* Initialises cv (caller-owned; pthread_cond_destroy when done) so that pthread_cond_timedwait on
 * it takes CLOCK_MONOTONIC deadlines. */
void egs_clock_cond_init(pthread_cond_t *cv);
/* The CLOCK_MONOTONIC time ms milliseconds from now (ms >= 0), for pthread_cond_timedwait on a cv
 * of egs_clock_cond_init. */
struct timespec egs_clock_after_ms(int64_t ms);

#endif
