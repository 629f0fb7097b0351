/*
 * rng.h: the one deterministic generator of the unit tests and the benchmarks (xorshift64*), so
 * that a seed means the same run on every libc and machine and a failure reproduces exactly.
 * Header-only: each file that includes it has its own state, set by rng_seed (without it, the run
 * is that of a fixed default seed).  Not for anything that needs unpredictable numbers.
 */
#ifndef EGS_TESTS_RNG_H
#define EGS_TESTS_RNG_H

#include <stddef.h>
#include <stdint.h>

static uint64_t rng_state = 0x9E3779B97F4A7C16ULL; /* rng_seed(1) */

/* Starts the sequence of seed s (any value, 0 included). */
static inline void rng_seed(uint64_t s)
{
	rng_state = s * 0x9E3779B97F4A7C15ULL + 1;
}

static inline uint64_t rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

/* Uniform enough in [0, n) for tests (n > 0; the modulo bias is below 2^-40 for test-sized n). */
static inline size_t rng_below(size_t n)
{
	return (size_t)(rng_next() % n);
}

/* In [lo, hi], both inclusive (lo <= hi). */
static inline int64_t rng_range(int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

#endif
