/*
 * test_map.c: the string-keyed hash map of core/map.h: put, get, del and overwrite; iteration
 * visits every live entry exactly once; 100k random operations against a reference (a plain array
 * indexed by key number); deletes followed by re-inserts (tombstones must neither hide entries nor
 * pile up); growth from empty to 100k keys; a large table's growth moved a few slots per insert,
 * with gets, overwrites, adds, deletes and iteration right while it moves; keys compared by
 * content, not by pointer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/map.h"

#include <sodium.h>
#include "rng.h"

/* A table of nkeys distinct key strings (the map borrows keys, so they live here). */
struct keys {
	char (*k)[64];
	size_t n;
};

static void keys_init(struct keys *ks, size_t n, uint64_t seed)
{
	ks->k = calloc(n, sizeof(*ks->k));
	assert_non_null(ks->k);
	ks->n = n;
	rng_seed(seed);
	for (size_t i = 0; i < n; i++) {
		/* Varied shapes: short, long, shared prefixes and suffixes; the index keeps them distinct. */
		switch (rng_next() % 4) {
		case 0: snprintf(ks->k[i], sizeof(ks->k[i]), "%zu", i); break;
		case 1: snprintf(ks->k[i], sizeof(ks->k[i]), "worker-1/node-%zu", i); break;
		case 2: snprintf(ks->k[i], sizeof(ks->k[i]), "gpr-%08llx-%zu", (unsigned long long)(rng_next() >> 32), i); break;
		default: snprintf(ks->k[i], sizeof(ks->k[i]), "%zu-%.20s", i, "...................."); break;
		}
	}
}

static void keys_cleanup(struct keys *ks)
{
	free(ks->k);
}

/* Values: distinct non-NULL pointers that encode (key index, version). */
static void *val(size_t idx, unsigned version)
{
	return (void *)(uintptr_t)(((uint64_t)idx << 16) | (version & 0xffff) | (1ULL << 62));
}

/* Checks the map against ref[] in full: every key's value, len, the load factor, and iteration. */
static void check_full(const struct egs_map *m, const struct keys *ks, void *const *ref)
{
	size_t live = 0;
	for (size_t i = 0; i < ks->n; i++) {
		assert_ptr_equal(egs_map_get(m, ks->k[i]), ref[i]);
		if (ref[i])
			live++;
	}
	assert_int_equal(m->len, live);
	/* The documented invariants: capacity a power of two, live + tombstones under 3/4. */
	if (m->cap) {
		assert_int_equal(m->cap & (m->cap - 1), 0);
		assert_true(m->used * 4 < m->cap * 3);
		assert_true(m->len <= m->used + m->oldlen); /* the rest still in a growth's old table */
	}
	if (!m->old)
		assert_int_equal(m->oldlen, 0);
	unsigned char *seen = calloc(ks->n + 1, 1);
	assert_non_null(seen);
	size_t visited = 0;
	const char *k;
	void *v;
	for (size_t it = 0; egs_map_next(m, &it, &k, &v);) {
		visited++;
		/* The key handed out is the borrowed pointer itself; its value decodes to its index. */
		size_t idx = (size_t)(((uintptr_t)v & ~(1ULL << 62)) >> 16);
		assert_true(idx < ks->n);
		assert_ptr_equal(k, ks->k[idx]);
		assert_ptr_equal(v, ref[idx]);
		assert_int_equal(seen[idx], 0);
		seen[idx] = 1;
	}
	assert_int_equal(visited, live);
	free(seen);
}

/* The set-up the table-wide tests share: n keys from seed, the map under test, and ref[], the value
 * each key should map to (NULL: absent). */
struct fixture {
	struct keys ks;
	void **ref;
	struct egs_map m;
};

static void fx_init(struct fixture *f, size_t n, uint64_t seed)
{
	keys_init(&f->ks, n, seed);
	f->ref = calloc(n, sizeof(void *));
	assert_non_null(f->ref);
	egs_map_init(&f->m);
}

/* Puts key i with version's value, in the map and in ref. */
static void fx_put(struct fixture *f, size_t i, unsigned version)
{
	f->ref[i] = val(i, version);
	egs_map_put(&f->m, f->ks.k[i], f->ref[i]);
}

/* Deletes key i, which must return the value ref holds for it. */
static void fx_del(struct fixture *f, size_t i)
{
	assert_ptr_equal(egs_map_del(&f->m, f->ks.k[i]), f->ref[i]);
	f->ref[i] = NULL;
}

static void fx_cleanup(struct fixture *f)
{
	egs_map_cleanup(&f->m);
	free(f->ref);
	keys_cleanup(&f->ks);
}

static void test_basic(void **state)
{
	(void)state;
	struct egs_map m;
	egs_map_init(&m);
	/* An empty map answers without allocating. */
	assert_null(egs_map_get(&m, "a"));
	assert_null(egs_map_del(&m, "a"));
	size_t it = 0;
	assert_false(egs_map_next(&m, &it, NULL, NULL));
	assert_int_equal(m.len, 0);

	int a = 1, b = 2, c = 3;
	egs_map_put(&m, "alpha", &a);
	egs_map_put(&m, "beta", &b);
	assert_int_equal(m.len, 2);
	assert_ptr_equal(egs_map_get(&m, "alpha"), &a);
	assert_ptr_equal(egs_map_get(&m, "beta"), &b);
	assert_null(egs_map_get(&m, "gamma"));
	assert_null(egs_map_get(&m, "alph"));
	assert_null(egs_map_get(&m, "alphaa"));
	assert_null(egs_map_get(&m, ""));

	/* Overwrite replaces the value and keeps the count. */
	egs_map_put(&m, "alpha", &c);
	assert_int_equal(m.len, 2);
	assert_ptr_equal(egs_map_get(&m, "alpha"), &c);

	/* Delete returns what was stored; a second delete finds nothing. */
	assert_ptr_equal(egs_map_del(&m, "alpha"), &c);
	assert_int_equal(m.len, 1);
	assert_null(egs_map_get(&m, "alpha"));
	assert_null(egs_map_del(&m, "alpha"));
	assert_ptr_equal(egs_map_get(&m, "beta"), &b);

	/* The empty string is a key like any other. */
	egs_map_put(&m, "", &a);
	assert_ptr_equal(egs_map_get(&m, ""), &a);
	assert_int_equal(m.len, 2);

	/* NULL values may be stored; get cannot tell them from absence, del removes them. */
	egs_map_put(&m, "nothing", NULL);
	assert_int_equal(m.len, 3);
	assert_null(egs_map_del(&m, "nothing"));
	assert_int_equal(m.len, 2);

	/* add stores only an absent key: present, it changes nothing and says so; after a delete (a
	 * tombstone in the key's probe path) the key is absent again. */
	assert_true(egs_map_add(&m, "delta", &a));
	assert_int_equal(m.len, 3);
	assert_false(egs_map_add(&m, "delta", &b));
	assert_ptr_equal(egs_map_get(&m, "delta"), &a);
	assert_int_equal(m.len, 3);
	assert_ptr_equal(egs_map_del(&m, "delta"), &a);
	assert_true(egs_map_add(&m, "delta", &c));
	assert_ptr_equal(egs_map_get(&m, "delta"), &c);
	assert_false(egs_map_add(&m, "beta", &c));
	assert_ptr_equal(egs_map_get(&m, "beta"), &b);

	egs_map_cleanup(&m);
	assert_int_equal(m.len, 0);
	assert_null(egs_map_get(&m, "beta"));
	egs_map_cleanup(&m); /* cleanup twice is harmless */
}

static void test_keys_by_content(void **state)
{
	(void)state;
	struct egs_map m;
	egs_map_init(&m);
	int v1 = 1, v2 = 2;
	char k1[16], k2[16], probe[16];
	snprintf(k1, sizeof(k1), "node-%d", 7);
	snprintf(probe, sizeof(probe), "node-%d", 7);
	egs_map_put(&m, k1, &v1);
	assert_ptr_equal(egs_map_get(&m, probe), &v1); /* another buffer with the same text */

	/* Overwriting through a second buffer adopts that buffer as the borrowed key, so the first
	 * one may go away (callers replace an object together with the string inside it). */
	snprintf(k2, sizeof(k2), "node-%d", 7);
	egs_map_put(&m, k2, &v2);
	memset(k1, 'X', sizeof(k1) - 1);
	assert_ptr_equal(egs_map_get(&m, probe), &v2);
	const char *k = NULL;
	void *v = NULL;
	size_t it = 0;
	assert_true(egs_map_next(&m, &it, &k, &v));
	assert_ptr_equal(k, k2);
	assert_ptr_equal(v, &v2);
	assert_false(egs_map_next(&m, &it, &k, &v));
	assert_ptr_equal(egs_map_del(&m, probe), &v2);
	egs_map_cleanup(&m);
}

static void test_iteration(void **state)
{
	(void)state;
	enum { N = 1000 };
	struct fixture f;
	fx_init(&f, N, 1);
	for (size_t i = 0; i < N; i++)
		fx_put(&f, i, 1);
	check_full(&f.m, &f.ks, f.ref);
	/* Delete every third: iteration skips the tombstones and still sees the rest once. */
	for (size_t i = 0; i < N; i += 3)
		fx_del(&f, i);
	check_full(&f.m, &f.ks, f.ref);
	/* NULL out-parameters are allowed. */
	size_t count = 0;
	for (size_t it = 0; egs_map_next(&f.m, &it, NULL, NULL);)
		count++;
	assert_int_equal(count, f.m.len);
	/* An exhausted iterator stays exhausted. */
	size_t it = 0;
	while (egs_map_next(&f.m, &it, NULL, NULL))
		;
	assert_false(egs_map_next(&f.m, &it, NULL, NULL));
	fx_cleanup(&f);
}

static void test_random_against_reference(void **state)
{
	(void)state;
	/* Key counts small and large relative to the op count: dense churn and sparse growth. */
	static const size_t nkeys[] = { 50, 5000, 60000 };
	for (size_t round = 0; round < EGS_ARRAY_LEN(nkeys); round++) {
		struct fixture f;
		fx_init(&f, nkeys[round], 100 + round);
		unsigned *ver = calloc(f.ks.n, sizeof(unsigned));
		assert_non_null(ver);
		size_t live = 0;
		rng_seed(1000 + round);
		for (size_t op = 0; op < 100000; op++) {
			size_t i = (size_t)(rng_next() % f.ks.n);
			unsigned kind = (unsigned)(rng_next() % 10);
			if (kind < 5) { /* put or overwrite */
				if (!f.ref[i])
					live++;
				fx_put(&f, i, ++ver[i]);
			} else if (kind < 8) { /* delete */
				if (f.ref[i])
					live--;
				fx_del(&f, i);
			} else { /* get */
				assert_ptr_equal(egs_map_get(&f.m, f.ks.k[i]), f.ref[i]);
			}
			assert_int_equal(f.m.len, live);
			if (op % 20000 == 19999)
				check_full(&f.m, &f.ks, f.ref);
		}
		check_full(&f.m, &f.ks, f.ref);
		free(ver);
		fx_cleanup(&f);
	}
}

static void test_tombstones(void **state)
{
	(void)state;
	enum { N = 100000 };
	struct fixture f;
	fx_init(&f, N, 7);

	/* A sliding window of 8 live keys over 100k distinct keys: every insert lands on fresh ground
	 * and every delete leaves a tombstone.  The table must recycle them instead of growing. */
	for (size_t i = 0; i < N; i++) {
		fx_put(&f, i, 1);
		if (i >= 8)
			fx_del(&f, i - 8);
		assert_true(f.m.len <= 9);
		assert_true(f.m.used * 4 < f.m.cap * 3);
	}
	assert_true(f.m.cap <= 64);
	check_full(&f.m, &f.ks, f.ref);

	/* Delete and re-insert the same keys: a key behind a tombstone in its probe run is still found,
	 * and a re-insert never makes a duplicate. */
	egs_map_cleanup(&f.m);
	egs_map_init(&f.m);
	memset(f.ref, 0, N * sizeof(void *));
	enum { W = 1000 };
	for (size_t i = 0; i < W; i++)
		fx_put(&f, i, 1);
	for (unsigned pass = 2; pass < 12; pass++) {
		for (size_t i = pass % 2; i < W; i += 2)
			fx_del(&f, i);
		check_full(&f.m, &f.ks, f.ref);
		for (size_t i = pass % 2; i < W; i += 2)
			fx_put(&f, i, pass);
		check_full(&f.m, &f.ks, f.ref);
		/* Overwrites of keys that sit past tombstones replace, not add. */
		for (size_t i = 0; i < W; i += 7)
			fx_put(&f, i, pass + 100);
		assert_int_equal(f.m.len, W);
	}
	check_full(&f.m, &f.ks, f.ref);
	assert_true(f.m.cap <= 4096); /* 1000 live keys: no runaway growth from churn */
	fx_cleanup(&f);
}

static void test_growth(void **state)
{
	(void)state;
	enum { N = 100000 };
	struct fixture f;
	fx_init(&f, N, 3);
	size_t grows = 0, cap = 0;
	for (size_t i = 0; i < N; i++) {
		fx_put(&f, i, 1);
		if (f.m.cap != cap) {
			assert_true(f.m.cap > cap); /* never shrinks while inserting */
			cap = f.m.cap;
			grows++;
			/* Right after a resize every key inserted so far is still there. */
			for (size_t j = 0; j <= i; j++)
				assert_ptr_equal(egs_map_get(&f.m, f.ks.k[j]), f.ref[j]);
		}
		assert_int_equal(f.m.len, i + 1);
	}
	assert_true(grows >= 10); /* 16 .. 256k */
	assert_true(f.m.cap >= N * 4 / 3);
	assert_true(f.m.cap <= N * 4); /* no more than one doubling beyond what is needed */
	check_full(&f.m, &f.ks, f.ref);
	/* Then empty it again: every delete returns its value, nothing is left to iterate. */
	for (size_t i = 0; i < N; i++)
		fx_del(&f, i);
	assert_int_equal(f.m.len, 0);
	size_t it = 0;
	assert_false(egs_map_next(&f.m, &it, NULL, NULL));
	check_full(&f.m, &f.ks, f.ref);
	fx_cleanup(&f);
}

/* A large table grows a few slots per insert (map.c's MOVE_STEP), not in one go: the growth that
 * moved 200,000 GPRs at once held egsd's loop 168 ms (issue 16).  While it moves, every operation
 * sees each key in exactly one of the two tables. */
static void test_growth_moves_a_few_at_a_time(void **state)
{
	(void)state;
	enum { N = 40000 };
	struct fixture f;
	fx_init(&f, N, 7);
	size_t i = 0;
	while (!f.m.old || f.m.oldcap < 8192) /* a growth of 8,192 slots or more: moved in steps */
		fx_put(&f, i++, 1);
	assert_true(i < N);
	assert_true(f.m.moved <= 64); /* the insert that grew it moved one step, not the whole table */
	assert_true(f.m.oldlen > 0);
	check_full(&f.m, &f.ks, f.ref); /* gets and iteration across both tables */
	/* Keys still in the old table (the iteration's indexes from cap on): overwritten, refused by
	 * add, deleted (none of which moves anything); each stays in one table. */
	size_t olds[300], nold = 0;
	const char *key;
	void *v;
	for (size_t it = f.m.cap; nold < 300 && egs_map_next(&f.m, &it, &key, &v);)
		olds[nold++] = (size_t)(((uintptr_t)v & ~(1ULL << 62)) >> 16);
	assert_int_equal(nold, 300);
	for (size_t j = 0; j < nold; j++) {
		size_t k = olds[j], before = f.m.len;
		if (k % 3 == 0) {
			fx_put(&f, k, 2);
			assert_int_equal(f.m.len, before); /* replaced, wherever it was */
		} else if (k % 3 == 1) {
			assert_false(egs_map_add(&f.m, f.ks.k[k], val(k, 9)));
		} else {
			fx_del(&f, k);
			assert_int_equal(f.m.len, before - 1);
		}
	}
	check_full(&f.m, &f.ks, f.ref);
	/* More inserts finish the move well before the new table would need to grow. */
	size_t cap = f.m.cap;
	while (f.m.old)
		fx_put(&f, i++, 1);
	assert_int_equal(f.m.cap, cap);
	assert_int_equal(f.m.oldlen, 0);
	check_full(&f.m, &f.ks, f.ref);
	fx_cleanup(&f);
}

/* The map's SipHash follows the reference: with 2 and 4 rounds it is libsodium's SipHash-2-4 for
 * every length of a word and over (the tail's bytes), and the paper's own example; the map's 1-3 is
 * the same code with fewer rounds, so it differs from it and is a function of the key. */
static void test_siphash_reference(void **state)
{
	(void)state;
	unsigned char key[16], in[64], out[crypto_shorthash_siphash24_BYTES];
	for (int i = 0; i < 16; i++)
		key[i] = (unsigned char)i;
	for (int i = 0; i < 64; i++)
		in[i] = (unsigned char)i;
	assert_true(egs__map_siphash(in, 15, key, 2, 4) == 0xa129ca6149be45e5ULL);
	rng_seed(7);
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 16; i++)
			key[i] = (unsigned char)rng_next();
		for (int i = 0; i < 64; i++)
			in[i] = (unsigned char)rng_next();
		for (size_t n = 0; n <= sizeof(in); n++) {
			crypto_shorthash_siphash24(out, in, n, key);
			uint64_t want;
			memcpy(&want, out, sizeof(want));
			assert_true(egs__map_siphash(in, n, key, 2, 4) == want);
			assert_true(egs__map_siphash(in, n, key, 1, 3) != want);
		}
		uint64_t h = egs__map_siphash(in, 20, key, 1, 3);
		key[0] ^= 1;
		assert_true(egs__map_siphash(in, 20, key, 1, 3) != h);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_keys_by_content),
		cmocka_unit_test(test_iteration),
		cmocka_unit_test(test_random_against_reference),
		cmocka_unit_test(test_tombstones),
		cmocka_unit_test(test_growth),
		cmocka_unit_test(test_growth_moves_a_few_at_a_time),
		cmocka_unit_test(test_siphash_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
