/*
 * map.c: open-addressing hash map; see map.h.  The load factor (live + tombstones) stays under 3/4;
 * growing rehashes and drops tombstones.
 */
#include "core/map.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

static const char tombstone_mark;
#define TOMBSTONE (&tombstone_mark)

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
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

static struct egs_map_entry *find(const struct egs_map *m, const char *key, uint64_t h)
{
	if (!m->cap)
		return NULL;
	size_t mask = m->cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct egs_map_entry *e = &m->slots[i];
		if (!e->key)
			return NULL;
		if (e->key != TOMBSTONE && e->hash == h && strcmp(e->key, key) == 0)
			return e;
	}
}

static void grow(struct egs_map *m)
{
	struct egs_map_entry *old = m->slots;
	size_t oldcap = m->cap;
	size_t cap = oldcap ? oldcap : 16;
	while (m->len * 2 >= cap)
		cap *= 2;
	m->slots = egs_calloc(cap, sizeof(*m->slots));
	m->cap = cap;
	m->used = m->len;
	for (size_t i = 0; i < oldcap; i++) {
		if (!old[i].key || old[i].key == TOMBSTONE)
			continue;
		size_t j = old[i].hash & (cap - 1);
		while (m->slots[j].key)
			j = (j + 1) & (cap - 1);
		m->slots[j] = old[i];
	}
	free(old);
}

void *egs_map_get(const struct egs_map *m, const char *key)
{
	struct egs_map_entry *e = find(m, key, hash_str(key));
	return e ? e->value : NULL;
}

/* Inserts key (absent, hashing to h). */
static void insert(struct egs_map *m, const char *key, void *value, uint64_t h)
{
	if ((m->used + 1) * 4 >= m->cap * 3)
		grow(m);
	size_t mask = m->cap - 1;
	size_t i = h & mask;
	while (m->slots[i].key && m->slots[i].key != TOMBSTONE)
		i = (i + 1) & mask;
	if (!m->slots[i].key)
		m->used++;
	m->slots[i] = (struct egs_map_entry){ key, value, h };
	m->len++;
}

void egs_map_put(struct egs_map *m, const char *key, void *value)
{
	uint64_t h = hash_str(key);
	struct egs_map_entry *e = find(m, key, h);
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
	if (find(m, key, h))
		return false;
	insert(m, key, value, h);
	return true;
}

void *egs_map_del(struct egs_map *m, const char *key)
{
	struct egs_map_entry *e = find(m, key, hash_str(key));
	if (!e)
		return NULL;
	void *v = e->value;
	e->key = TOMBSTONE;
	e->value = NULL;
	m->len--;
	return v;
}

bool egs_map_next(const struct egs_map *m, size_t *iter, const char **key, void **value)
{
	while (*iter < m->cap) {
		struct egs_map_entry *e = &m->slots[(*iter)++];
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
