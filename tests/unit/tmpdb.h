/*
 * tmpdb.h: a temporary directory holding one SQLite store file (egs.db), for the store's unit
 * tests: made under $TMPDIR (else /tmp) with a name starting with prefix, and removed with the
 * file's -wal and -shm companions.  Header-only, like rng.h.
 */
#ifndef EGS_TESTS_TMPDB_H
#define EGS_TESTS_TMPDB_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct tmpdb {
	char dir[256];
	char path[320];
};

/* Makes t's directory (prefix: the directory name's start) and names its egs.db. */
static inline void tmpdb_make(struct tmpdb *t, const char *prefix)
{
	const char *base = getenv("TMPDIR");
	snprintf(t->dir, sizeof(t->dir), "%.200s/%.40s-XXXXXX", base && *base ? base : "/tmp", prefix);
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->path, sizeof(t->path), "%s/egs.db", t->dir);
}

static inline void tmpdb_cleanup(struct tmpdb *t)
{
	char p[400];
	unlink(t->path);
	snprintf(p, sizeof(p), "%s-wal", t->path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", t->path);
	unlink(p);
	rmdir(t->dir);
}

#endif
