/*
 * store_sqlite_sync.c: the SQLite store's durability thread (docs/internals/store.md, "Durability
 * apart from the commit").
 *
 * The connection commits with synchronous=NORMAL: in WAL mode COMMIT then writes the WAL frames
 * (to the page cache) and returns without an fsync.  This thread makes them durable: the loop asks
 * for "every write numbered <= upto" (egs__sqlite_sync_request) and goes on with its next turn; the
 * thread fdatasyncs the WAL file and publishes the number it covered.  Writes numbered <= upto
 * were all in the WAL (their write() returned) before the request, so an fdatasync begun after the
 * request covers them; requests that arrive during one fdatasync are coalesced into the next, which
 * covers all of them.  One fdatasync is in flight at a time.
 *
 * The thread touches no SQLite structure: it has its own descriptor on the WAL file (fsync flushes
 * the file, whichever descriptor wrote it), opened at start so that a write-back error after that
 * is reported to it.  A checkpoint (SQLite's, on the loop thread, inside a COMMIT) fsyncs the WAL
 * itself before it copies frames into the database file, so frames are never backfilled from an
 * unsynced WAL; a WAL restarted after a checkpoint is the same file, written from its start.
 *
 * Shared state, all under mu: requested, durable, failed, stop.  The loop learns of progress from
 * an eventfd the thread writes after each fdatasync (egs__sqlite_sync_fd).
 */
#include "store/store_sqlite.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct egs_sqlite_sync {
	pthread_mutex_t mu;
	pthread_cond_t wake; /* the thread waits here for a request or stop */
	pthread_cond_t done; /* waiters (egs__sqlite_sync_wait) wait here for progress */
	uint64_t requested;  /* the highest write number asked to be made durable */
	uint64_t durable;    /* every write numbered <= durable is on disk */
	int failed;          /* errno of a failed fdatasync; 0 while none failed.  Sticky. */
	bool stop;
	pthread_t thread;
	int wal_fd;          /* our own descriptor on <db>-wal; -1 until it could be opened */
	int efd;             /* eventfd: written after each fdatasync (or its failure) */
	char *wal_path;
	long delay_ms;       /* EGS_TEST_FSYNC_DELAY_MS: sleep before each fdatasync (tests only) */
	char *fail_path;     /* EGS_TEST_FSYNC_FAIL_IF_EXISTS: an fdatasync fails (EIO) while this file exists */
};

/* One fdatasync of the WAL, on the thread.  Returns 0 or an errno. */
static int sync_wal(struct egs_sqlite_sync *y)
{
	if (y->delay_ms > 0) {
		struct timespec ts = { y->delay_ms / 1000, (y->delay_ms % 1000) * 1000000L };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	if (y->fail_path && access(y->fail_path, F_OK) == 0)
		return EIO;
	if (y->wal_fd < 0)
		y->wal_fd = open(y->wal_path, O_RDWR | O_CLOEXEC); /* a write happened: the WAL exists */
	if (y->wal_fd < 0)
		return errno ? errno : EIO;
	return fdatasync(y->wal_fd) == 0 ? 0 : errno;
}

static void *sync_main(void *arg)
{
	struct egs_sqlite_sync *y = arg;
	uint64_t one = 1;
	pthread_mutex_lock(&y->mu);
	for (;;) {
		while (!y->stop && y->requested <= y->durable)
			pthread_cond_wait(&y->wake, &y->mu);
		if (y->failed || y->requested <= y->durable)
			break; /* stopping with nothing left to sync, or a failure already told */
		uint64_t upto = y->requested;
		pthread_mutex_unlock(&y->mu);
		int rc = sync_wal(y);
		pthread_mutex_lock(&y->mu);
		if (rc)
			y->failed = rc;
		else
			y->durable = upto;
		pthread_cond_broadcast(&y->done);
		pthread_mutex_unlock(&y->mu);
		if (write(y->efd, &one, sizeof(one)) < 0) {
			/* the counter cannot overflow at one per fdatasync: nothing to do */
		}
		pthread_mutex_lock(&y->mu);
		if (rc)
			break; /* nothing durable can be claimed after a failed fdatasync */
	}
	pthread_mutex_unlock(&y->mu);
	return NULL;
}

struct egs_sqlite_sync *egs__sqlite_sync_new(const char *db_path)
{
	struct egs_sqlite_sync *y = egs_calloc(1, sizeof(*y));
	size_t n = strlen(db_path) + 5;
	y->wal_path = egs_malloc(n);
	snprintf(y->wal_path, n, "%s-wal", db_path);
	y->wal_fd = open(y->wal_path, O_RDWR | O_CLOEXEC); /* may not exist before the first write */
	y->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	const char *d = getenv("EGS_TEST_FSYNC_DELAY_MS");
	y->delay_ms = d && *d ? strtol(d, NULL, 10) : 0;
	const char *f = getenv("EGS_TEST_FSYNC_FAIL_IF_EXISTS");
	y->fail_path = f && *f ? egs_strdup(f) : NULL;
	if (y->efd < 0 || pthread_mutex_init(&y->mu, NULL) || pthread_cond_init(&y->wake, NULL) ||
	    pthread_cond_init(&y->done, NULL) || pthread_create(&y->thread, NULL, sync_main, y)) {
		fprintf(stderr, "store: cannot start the WAL sync thread: %s\n", strerror(errno));
		if (y->efd >= 0)
			close(y->efd);
		if (y->wal_fd >= 0)
			close(y->wal_fd);
		free(y->wal_path);
		free(y->fail_path);
		free(y);
		return NULL;
	}
	return y;
}

void egs__sqlite_sync_free(struct egs_sqlite_sync *y)
{
	if (!y)
		return;
	pthread_mutex_lock(&y->mu);
	y->stop = true; /* the thread syncs what was requested, then ends */
	pthread_cond_signal(&y->wake);
	pthread_mutex_unlock(&y->mu);
	pthread_join(y->thread, NULL);
	pthread_cond_destroy(&y->wake);
	pthread_cond_destroy(&y->done);
	pthread_mutex_destroy(&y->mu);
	if (y->wal_fd >= 0)
		close(y->wal_fd);
	close(y->efd);
	free(y->wal_path);
	free(y->fail_path);
	free(y);
}

void egs__sqlite_sync_request(struct egs_sqlite_sync *y, uint64_t upto)
{
	pthread_mutex_lock(&y->mu);
	if (upto > y->requested) {
		y->requested = upto;
		pthread_cond_signal(&y->wake);
	}
	pthread_mutex_unlock(&y->mu);
}

int egs__sqlite_sync_fd(const struct egs_sqlite_sync *y)
{
	return y->efd;
}

enum egs_err egs__sqlite_sync_poll(struct egs_sqlite_sync *y, uint64_t *durable)
{
	uint64_t n;
	while (read(y->efd, &n, sizeof(n)) > 0)
		;
	pthread_mutex_lock(&y->mu);
	*durable = y->durable;
	int failed = y->failed;
	pthread_mutex_unlock(&y->mu);
	if (failed)
		fprintf(stderr, "store: fdatasync of the WAL failed: %s\n", strerror(failed));
	return failed ? EGS_ERR_IO : EGS_OK;
}

enum egs_err egs__sqlite_sync_wait(struct egs_sqlite_sync *y, uint64_t upto, uint64_t *durable)
{
	egs__sqlite_sync_request(y, upto);
	pthread_mutex_lock(&y->mu);
	while (!y->failed && y->durable < upto)
		pthread_cond_wait(&y->done, &y->mu);
	pthread_mutex_unlock(&y->mu);
	return egs__sqlite_sync_poll(y, durable);
}
