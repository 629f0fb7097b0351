/*
 * map.h: a string-keyed hash map of borrowed pointers (open addressing, linear probing, tombstones).
 *
 * Keys are hashed with SipHash-1-3 under a per-process random key, so names chosen by API callers
 * cannot be crafted to collide.  The map borrows both keys and values: a key must stay valid while
 * its entry exists (callers key an object by a string stored inside the object).
 * Why not a library: glib's GHashTable would pull glib into every binary for ~150 lines.
 */
#ifndef EGS_MAP_H
#define EGS_MAP_H

#include "core/common.h"

struct egs_map_entry {
	const char *key; /* NULL: empty; EGS_MAP_TOMBSTONE: deleted */
	void *value;
	uint64_t hash;
};

struct egs_map {
	struct egs_map_entry *slots;
	size_t cap;  /* power of two */
	size_t len;  /* live entries, in both tables */
	size_t used; /* live + tombstones in slots */
	/* A growth in progress (map.c): the previous table, whose entries move into slots a few per
	 * insert; slots [0, moved) of it are moved.  NULL when none. */
	struct egs_map_entry *old;
	size_t oldcap, oldlen, moved;
};

void egs_map_init(struct egs_map *m);
void egs_map_cleanup(struct egs_map *m);
/* Returns the value stored under key, or NULL. */
void *egs_map_get(const struct egs_map *m, const char *key);
/* Stores value under key (borrowed), replacing any previous value. */
void egs_map_put(struct egs_map *m, const char *key, void *value);
/* Stores value under key (borrowed) unless key is present: then returns false and changes nothing.
 * One hash of the key, where egs_map_get then egs_map_put take two. */
bool egs_map_add(struct egs_map *m, const char *key, void *value);
/* Removes key; returns the value it held or NULL. */
void *egs_map_del(struct egs_map *m, const char *key);

/* SipHash-c-d (c rounds a word, d at the end) of in[0..n) under key, as the reference computes it:
 * for the unit test, which holds -2-4 to libsodium's.  The map hashes with c = 1, d = 3. */
uint64_t egs__map_siphash(const void *in, size_t n, const unsigned char key[16], int c, int d);

/* Iteration: for (size_t i = 0; egs_map_next(m, &i, &k, &v);) { ... }  Do not mutate while iterating.
 * A pass spread over several loop turns (metrics.c) starts again when m->slots or m->moved changed:
 * a growth's moves carry entries across the cursor. */
bool egs_map_next(const struct egs_map *m, size_t *iter, const char **key, void **value);
/* The end of the iteration's index space: *iter >= egs_map_span(m) when a pass is done. */
size_t egs_map_span(const struct egs_map *m);

#endif
