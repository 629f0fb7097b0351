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

#include <sodium.h>
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

static unsigned char hash_key[crypto_shorthash_KEYBYTES];
static int hash_key_ready;

static uint64_t hash_str(const char *s)
{
	if (!hash_key_ready) {
		/* sodium_init is idempotent and thread-safe.  The key is set at the first use, on the
		 * thread that starts egsd before any other: later threads (a follower's load, a model
		 * freed apart: server/replica_load.c) only read it. */
		EGS_ASSERT(sodium_init() >= 0);
		randombytes_buf(hash_key, sizeof(hash_key));
		hash_key_ready = 1;
	}
	unsigned char out[crypto_shorthash_BYTES];
	crypto_shorthash(out, (const unsigned char *)s, strlen(s), hash_key);
	uint64_t h;
	memcpy(&h, out, sizeof(h));
	return h;
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
