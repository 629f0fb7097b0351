/*
 * store_sqlite_vfs.c: the loop connection's VFS: SQLite's default VFS, except that a transaction's
 * WAL frames reach the WAL file in one write instead of two per frame (issue 16).
 *
 * SQLite writes a WAL frame as two writes, its 24-byte header and then its page (wal.c
 * walWriteOneFrame), and a commit of k pages as 2k pwrite64 system calls back to back.  On a
 * virtual machine where a system call costs microseconds that was ~0.5 system calls per request
 * on egsd's loop.  Here a WAL file gathers the frames it is given at its append point (the
 * offset where its last write ended) and writes them as one buffer when the transaction's commit
 * frame is complete: the one whose header holds the database's size in pages (bytes 4-7,
 * nonzero only on a commit frame; the WAL format, https://sqlite.org/fileformat2.html#walformat).
 *
 * Invariants, which are what make it safe:
 *   - Nothing is pending once a commit frame's page was written: the write of that page is the
 *     one that writes the gathered frames, and its result is SQLite's result for it, so a full
 *     disk fails the commit inside sqlite3_step as before.  Other connections (the checkpoint
 *     thread's) learn of new frames only from the wal-index that SQLite updates after that,
 *     and the durability thread's fdatasync comes after the commit returned.
 *   - Only a header at the append point (a new frame) starts or extends the gathered bytes, and
 *     only the page right after a gathered header joins it.  Any other write (the WAL's own
 *     header, a page rewritten in place, checksums rewritten after a cache spill) and every other
 *     method (read, sync, size, truncate, close, file controls) first writes what is pending,
 *     in order, then does what it was asked: the file never reads differently from SQLite's own.
 *   - Frames of a transaction that spilled pages and then rolled back may stay pending until the
 *     next call on the file; they lie past the last commit, which no reader looks at.
 * Every other file (the database, its -shm, journals) is the default VFS's own file object: the
 * wrapper never sees its calls.
 */
#include "store/store_sqlite.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VFS_NAME "egs-wal"
#define FRAME_HDR 24               /* a WAL frame's header (the WAL's own header is 32 bytes) */
/* The most one write may carry: the default VFS writes at most 128 KiB - 1 bytes a call (os_unix.c
 * seekAndWriteFd masks the length to 17 bits; SQLite itself never writes more than a 64 KiB page). */
#define WRITE_MAX 0x1ffff

struct wal_file {
	sqlite3_file base;  /* first: what SQLite holds; pMethods is wal_methods */
	sqlite3_file *real; /* the default VFS's file, in the memory right after this struct */
	unsigned char *buf; /* gathered frames, owned */
	size_t len, cap;
	sqlite3_int64 off; /* the file offset of buf[0] */
	sqlite3_int64 end; /* where the last write (gathered or not) ended: the append point */
	int hdr;           /* buf ends with a header whose page has not come: 1, or 2 for a commit frame */
};

static sqlite3_vfs *real_vfs;
static sqlite3_vfs wal_vfs;
static const char *vfs_name; /* NULL until registered */
static _Atomic unsigned long long writes_asked, writes_made;

/* Writes what is gathered, at its offset; SQLite's result code. */
static int flush(struct wal_file *w)
{
	if (!w->len)
		return SQLITE_OK;
	int rc = w->real->pMethods->xWrite(w->real, w->buf, (int)w->len, w->off);
	atomic_fetch_add_explicit(&writes_made, 1, memory_order_relaxed);
	w->len = 0;
	w->hdr = 0;
	return rc;
}

static void gather(struct wal_file *w, const void *p, int n, sqlite3_int64 off)
{
	if (!w->len)
		w->off = off;
	if (w->len + (size_t)n > w->cap) {
		w->cap = w->len + (size_t)n > 2 * w->cap ? w->len + (size_t)n : 2 * w->cap;
		w->buf = egs_realloc(w->buf, w->cap);
	}
	memcpy(w->buf + w->len, p, (size_t)n);
	w->len += (size_t)n;
	w->end = off + n;
}

/* A database page's size: a power of two from 512 to 65536 (a page split by a sync point is not). */
static bool page_sized(int n)
{
	return n >= 512 && n <= 65536 && (n & (n - 1)) == 0;
}

static int wal_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off)
{
	struct wal_file *w = (struct wal_file *)f;
	const unsigned char *b = p;
	atomic_fetch_add_explicit(&writes_asked, 1, memory_order_relaxed);
	if (n == FRAME_HDR && off == w->end && w->end > 0 && !w->hdr) { /* a new frame's header */
		gather(w, p, n, off);
		w->hdr = (b[4] | b[5] | b[6] | b[7]) ? 2 : 1;
		return SQLITE_OK;
	}
	if (w->hdr && off == w->end && page_sized(n)) { /* that frame's page */
		bool commit = w->hdr == 2;
		gather(w, p, n, off);
		w->hdr = 0;
		/* written at the commit, or when the next frame (its page as large) would not fit */
		return commit || w->len + FRAME_HDR + (size_t)n > WRITE_MAX ? flush(w) : SQLITE_OK;
	}
	int rc = flush(w);
	if (rc != SQLITE_OK)
		return rc;
	rc = w->real->pMethods->xWrite(w->real, p, n, off);
	atomic_fetch_add_explicit(&writes_made, 1, memory_order_relaxed);
	w->end = rc == SQLITE_OK ? off + n : 0; /* after a failure, gather nothing until a write succeeds */
	return rc;
}

static int wal_close(sqlite3_file *f)
{
	struct wal_file *w = (struct wal_file *)f;
	int rc = flush(w), rc2 = w->real->pMethods->xClose(w->real);
	free(w->buf);
	w->buf = NULL;
	return rc != SQLITE_OK ? rc : rc2;
}

/* The methods below write what is pending first, then forward. */
static int wal_read(sqlite3_file *f, void *p, int n, sqlite3_int64 off)
{
	struct wal_file *w = (struct wal_file *)f;
	int rc = flush(w);
	return rc != SQLITE_OK ? rc : w->real->pMethods->xRead(w->real, p, n, off);
}

static int wal_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	struct wal_file *w = (struct wal_file *)f;
	int rc = flush(w);
	w->end = 0;
	return rc != SQLITE_OK ? rc : w->real->pMethods->xTruncate(w->real, size);
}

static int wal_sync(sqlite3_file *f, int flags)
{
	struct wal_file *w = (struct wal_file *)f;
	int rc = flush(w);
	return rc != SQLITE_OK ? rc : w->real->pMethods->xSync(w->real, flags);
}

static int wal_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
	struct wal_file *w = (struct wal_file *)f;
	int rc = flush(w);
	return rc != SQLITE_OK ? rc : w->real->pMethods->xFileSize(w->real, size);
}

static int wal_lock(sqlite3_file *f, int level)
{
	struct wal_file *w = (struct wal_file *)f;
	int rc = flush(w);
	return rc != SQLITE_OK ? rc : w->real->pMethods->xLock(w->real, level);
}

static int wal_unlock(sqlite3_file *f, int level)
{
	struct wal_file *w = (struct wal_file *)f;
	int rc = flush(w);
	return rc != SQLITE_OK ? rc : w->real->pMethods->xUnlock(w->real, level);
}

static int wal_check_reserved(sqlite3_file *f, int *out)
{
	struct wal_file *w = (struct wal_file *)f;
	int rc = flush(w);
	return rc != SQLITE_OK ? rc : w->real->pMethods->xCheckReservedLock(w->real, out);
}

static int wal_file_control(sqlite3_file *f, int op, void *arg)
{
	struct wal_file *w = (struct wal_file *)f;
	int rc = flush(w);
	return rc != SQLITE_OK ? rc : w->real->pMethods->xFileControl(w->real, op, arg);
}

static int wal_sector_size(sqlite3_file *f)
{
	struct wal_file *w = (struct wal_file *)f;
	return w->real->pMethods->xSectorSize(w->real);
}

static int wal_device_characteristics(sqlite3_file *f)
{
	struct wal_file *w = (struct wal_file *)f;
	return w->real->pMethods->xDeviceCharacteristics(w->real);
}

/* Version 1: SQLite asks a WAL file for no shared memory and no memory map. */
static const sqlite3_io_methods wal_methods = {
	.iVersion = 1,
	.xClose = wal_close,
	.xRead = wal_read,
	.xWrite = wal_write,
	.xTruncate = wal_truncate,
	.xSync = wal_sync,
	.xFileSize = wal_file_size,
	.xLock = wal_lock,
	.xUnlock = wal_unlock,
	.xCheckReservedLock = wal_check_reserved,
	.xFileControl = wal_file_control,
	.xSectorSize = wal_sector_size,
	.xDeviceCharacteristics = wal_device_characteristics,
};

/* A WAL file gets the wrapper; any other file is opened by the default VFS into the same memory
 * (szOsFile is the wrapper's plus the default's), so SQLite calls it directly. */
static int vfs_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out_flags)
{
	(void)vfs;
	if (!(flags & SQLITE_OPEN_WAL))
		return real_vfs->xOpen(real_vfs, name, f, flags, out_flags);
	struct wal_file *w = (struct wal_file *)f;
	memset(w, 0, sizeof(*w));
	w->real = (sqlite3_file *)(w + 1);
	int rc = real_vfs->xOpen(real_vfs, name, w->real, flags, out_flags);
	if (rc == SQLITE_OK)
		w->base.pMethods = &wal_methods;
	else
		w->base.pMethods = NULL; /* SQLite closes nothing it could not open */
	return rc;
}

static void vfs_register(void)
{
	real_vfs = sqlite3_vfs_find(NULL);
	if (!real_vfs)
		return;
	wal_vfs = *real_vfs;
	wal_vfs.szOsFile = (int)sizeof(struct wal_file) + real_vfs->szOsFile;
	wal_vfs.zName = VFS_NAME;
	wal_vfs.pNext = NULL;
	wal_vfs.xOpen = vfs_open;
	/* The other methods (delete, access, full pathname, randomness, sleep, time, system calls)
	 * are the default VFS's, called with this copy of it: pAppData and mxPathname are its own. */
	if (sqlite3_vfs_register(&wal_vfs, 0) != SQLITE_OK) {
		fprintf(stderr, "store: cannot register the %s VFS\n", VFS_NAME);
		return;
	}
	vfs_name = VFS_NAME;
}

const char *egs__sqlite_vfs(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, vfs_register);
	return vfs_name;
}

void egs__sqlite_vfs_counts(unsigned long long *asked, unsigned long long *made)
{
	*asked = atomic_load_explicit(&writes_asked, memory_order_relaxed);
	*made = atomic_load_explicit(&writes_made, memory_order_relaxed);
}
