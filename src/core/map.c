/*
 * map.c: open-addressing hash map; see map.h.  The load factor (live + tombstones) stays under 3/4;
 * growing rehashes and drops tombstones.
 *
 * Growing moves the entries a few at a time (Redis's dict does the same): a map of 200,000 GPRs
 * moved in one go was 168 ms of egsd's loop on this VM (a fresh 12 MiB table touched at random: one
 * page fault per 170 entries), the deep queue's longest wait (issue 16).  grow() keeps the old table
 * in m->old and every insert moves MOVE_STEP of its slots into the new one, each moved slot made a
 * tombstone so that the old table's probe chains stay whole; an entry is in exactly one table, and
 * lookups try the new table, then the old.  The new table is at most half full when the growth
 * begins and an insert moves MOVE_STEP >= 4 old slots, so the old table is empty before the new one
 * reaches 3/4; a growth that finds one still moving finishes it first.  Small maps move at once.
 */
#include "core/map.h"

#include <endian.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static const char tombstone_mark;
#define TOMBSTONE (&tombstone_mark)
#define MOVE_STEP 64      /* old slots moved by each insert while a growth goes on */
#define MOVE_AT_ONCE 4096 /* tables up to this many slots move in one go */
#define PAGED_SLOTS 16384 /* tables from this many slots (384 KiB) are pages of their own */

/* A zeroed table of cap slots.  A large one is mapped (egs_pages_zeroed): calloc zeroed the whole
 * 12 MiB of a 200,000-entry map's new table in one go (22 ms), where its pages now fault in as
 * the moves and inserts reach them. */
static struct egs_map_entry *table_new(size_t cap)
{
	if (cap >= PAGED_SLOTS)
		return egs_pages_zeroed(cap * sizeof(struct egs_map_entry));
	return egs_calloc(cap, sizeof(struct egs_map_entry));
}

static void table_free(struct egs_map_entry *t, size_t cap)
{
	if (cap >= PAGED_SLOTS)
		egs_pages_free(t, cap * sizeof(*t));
	else
		free(t);
}

static uint64_t hash_key[2];
static atomic_int hash_key_ready;
static pthread_once_t hash_key_once = PTHREAD_ONCE_INIT;

static inline uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

#define SIPROUND                                                                                   \
	do {                                                                                       \
		v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);                          \
		v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;                                             \
		v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;                                             \
		v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);                          \
	} while (0)

/* SipHash-c-d of in[0..n) under the key (k0, k1), as its reference (little-endian words).  Inline
 * with constant rounds, so that the compiler unrolls them. */
static inline uint64_t siphash(const unsigned char *in, size_t n, uint64_t k0, uint64_t k1, int c, int d)
{
	uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
	uint64_t m, b = (uint64_t)n << 56;
	const unsigned char *end = in + (n & ~(size_t)7);
	for (; in != end; in += 8) {
		memcpy(&m, in, 8);
		m = le64toh(m);
		v3 ^= m;
		for (int r = 0; r < c; r++)
			SIPROUND;
		v0 ^= m;
	}
	switch (n & 7) { /* the tail's bytes, as the reference takes them */
	case 7: b |= (uint64_t)in[6] << 48; /* fall through */
	case 6: b |= (uint64_t)in[5] << 40; /* fall through */
	case 5: b |= (uint64_t)in[4] << 32; /* fall through */
	case 4: b |= (uint64_t)in[3] << 24; /* fall through */
	case 3: b |= (uint64_t)in[2] << 16; /* fall through */
	case 2: b |= (uint64_t)in[1] << 8;  /* fall through */
	case 1: b |= (uint64_t)in[0]; break;
	default: break;
	}
	v3 ^= b;
	for (int r = 0; r < c; r++)
		SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	for (int r = 0; r < d; r++)
		SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t egs__map_siphash(const void *in, size_t n, const unsigned char key[16], int c, int d)
{
	uint64_t k[2];
	memcpy(k, key, sizeof(k));
	return siphash(in, n, le64toh(k[0]), le64toh(k[1]), c, d);
}

/* Draws the process's key, once: the first maps may be used on several threads at once (the agent's
 * reflectors each fill their cache on a thread of its own as their first lists arrive).  Two threads
 * that both saw no key drew one each, and entries hashed under the first key were lost to lookups
 * under the second (test_gpr_cr's "node gpu-1 left the cluster").  Later calls pay one acquire load. */
static void hash_key_init(void)
{
	EGS_ASSERT(sodium_init() >= 0); /* idempotent and thread-safe */
	randombytes_buf(hash_key, sizeof(hash_key));
	atomic_store_explicit(&hash_key_ready, 1, memory_order_release);
}

/* SipHash-1-3, the variant Rust's and CPython's (3.11+) hash tables use: the same keyed hash against
 * flooding as SipHash-2-4 with fewer rounds, which an index of names needs no more than they do
 * (-2-4 by libsodium was ~160 instructions a key, ~17 keys hashed a create: issue 16). */
static uint64_t hash_str(const char *s)
{
	if (!atomic_load_explicit(&hash_key_ready, memory_order_acquire))
		pthread_once(&hash_key_once, hash_key_init);
	return siphash((const unsigned char *)s, strlen(s), hash_key[0], hash_key[1], 1, 3);
}

void egs_map_init(struct egs_map *m)
{
	memset(m, 0, sizeof(*m));
}

void egs_map_cleanup(struct egs_map *m)
{
	table_free(m->slots, m->cap);
	table_free(m->old, m->oldcap);
	memset(m, 0, sizeof(*m));
}

/* The live entry of key (hashing to h) in the table slots of cap slots, or NULL. */
static struct egs_map_entry *find_in(struct egs_map_entry *slots, size_t cap, const char *key, uint64_t h)
{
	if (!cap)
		return NULL;
	size_t mask = cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct egs_map_entry *e = &slots[i];
		if (!e->key)
			return NULL;
		if (e->key != TOMBSTONE && e->hash == h && strcmp(e->key, key) == 0)
			return e;
	}
}

/* key's entry in either table; *in_old says which. */
static struct egs_map_entry *find(const struct egs_map *m, const char *key, uint64_t h, bool *in_old)
{
	struct egs_map_entry *e = find_in(m->slots, m->cap, key, h);
	*in_old = !e && m->old;
	return e ? e : m->old ? find_in(m->old, m->oldcap, key, h) : NULL;
}

/* Places e (a key in neither table) into the new table, whose load the caller checked. */
static void place(struct egs_map *m, struct egs_map_entry e)
{
	size_t mask = m->cap - 1, i = e.hash & mask;
	while (m->slots[i].key && m->slots[i].key != TOMBSTONE)
		i = (i + 1) & mask;
	if (!m->slots[i].key)
		m->used++;
	m->slots[i] = e;
}

/* Moves up to n slots of the old table into the new one; frees the old table once all are moved. */
static void move_some(struct egs_map *m, size_t n)
{
	for (; n && m->old; n--) {
		struct egs_map_entry *e = &m->old[m->moved++];
		if (e->key && e->key != TOMBSTONE) {
			place(m, *e);
			m->oldlen--;
			e->key = TOMBSTONE; /* gone from the old table; its probe chains stay whole */
			e->value = NULL;
		}
		if (m->moved == m->oldcap) {
			table_free(m->old, m->oldcap);
			m->old = NULL;
			m->oldcap = m->moved = 0;
		}
	}
}

/* A new table for the live entries (at most half full); the old one's entries move into it a few
 * per insert (above), or at once for a small table. */
static void grow(struct egs_map *m)
{
	move_some(m, SIZE_MAX); /* a growth still moving (never with MOVE_STEP >= 4) ends first */
	size_t cap = m->cap ? m->cap : 16;
	while (m->len * 2 >= cap)
		cap *= 2;
	m->old = m->slots;
	m->oldcap = m->cap;
	m->oldlen = m->len;
	m->moved = 0;
	m->slots = table_new(cap);
	m->cap = cap;
	m->used = 0;
	if (!m->old || m->oldcap <= MOVE_AT_ONCE)
		move_some(m, SIZE_MAX);
}

void *egs_map_get(const struct egs_map *m, const char *key)
{
	bool in_old;
	struct egs_map_entry *e = find(m, key, hash_str(key), &in_old);
	return e ? e->value : NULL;
}

/* Inserts key (in neither table, hashing to h). */
static void insert(struct egs_map *m, const char *key, void *value, uint64_t h)
{
	move_some(m, MOVE_STEP);
	if ((m->used + 1) * 4 >= m->cap * 3)
		grow(m);
	place(m, (struct egs_map_entry){ key, value, h });
	m->len++;
}

void egs_map_put(struct egs_map *m, const char *key, void *value)
{
	uint64_t h = hash_str(key);
	bool in_old;
	struct egs_map_entry *e = find(m, key, h, &in_old);
	if (e) {
		e->key = key;
		e->value = value;
		return;
	}
	insert(m, key, value, h);
}

bool egs_map_add(struct egs_map *m, const char *key, void *value)
{
	uint64_t h = hash_str(key);
	bool in_old;
	if (find(m, key, h, &in_old))
		return false;
	insert(m, key, value, h);
	return true;
}

void *egs_map_del(struct egs_map *m, const char *key)
{
	bool in_old;
	struct egs_map_entry *e = find(m, key, hash_str(key), &in_old);
	if (!e)
		return NULL;
	void *v = e->value;
	e->key = TOMBSTONE;
	e->value = NULL;
	m->len--;
	if (in_old)
		m->oldlen--;
	return v;
}

size_t egs_map_span(const struct egs_map *m)
{
	return m->cap + m->oldcap;
}

bool egs_map_next(const struct egs_map *m, size_t *iter, const char **key, void **value)
{
	while (*iter < m->cap + m->oldcap) { /* the new table's slots, then the old one's */
		size_t i = (*iter)++;
		struct egs_map_entry *e = i < m->cap ? &m->slots[i] : &m->old[i - m->cap];
		if (e->key && e->key != TOMBSTONE) {
			if (key)
				*key = e->key;
			if (value)
				*value = e->value;
			return true;
		}
	}
	return false;
}
